// Built in configurations without CUDA: the GPU entry points of the device path report that
// (device_count() is 0 with the reason, the rest throw Unsupported). The device plans still run
// on host communicators there (Kernels<Host>, cuda/schemes/device_plans.cpp).
#include <string>

#include "schemes/balanced_core.hpp"
#include "zen/cuda/comm.hpp"
#include "zen/cuda/runtime.hpp"

namespace zen::cuda {
namespace {
[[noreturn]] void no_cuda(const std::string& what) {
  ZEN_THROW(Result::Unsupported, what + ": zen was built without CUDA (ZEN_WITH_CUDA=OFF or no nvcc); device plans on "
                                        "host communicators run the device kernels on the CPU");
}
}  // namespace

int device_count(std::string* why) {
  if (why) *why = "zen was built without CUDA";
  return 0;
}
void partition_host(const int64_t*, size_t, uint64_t, uint32_t, uint64_t, uint32_t*, uint64_t*) {
  no_cuda("cuda::partition_host");
}
void stream_wait(Communicator& comm, void*) {
  if (comm.memory_space() == MemSpace::Device) no_cuda("cuda::stream_wait");
}

namespace loopback {
std::vector<std::unique_ptr<Communicator>> create(int, int) { no_cuda("cuda::loopback::create"); }
std::vector<std::exception_ptr> run_collect(int, const std::function<void(Communicator&)>&, Communicator::Ms, int) {
  no_cuda("cuda::loopback::run_collect");
}
void run(int, const std::function<void(Communicator&)>&, Communicator::Ms, int) { no_cuda("cuda::loopback::run"); }
void run_nodes(int, int, const NodeFn&, Communicator::Ms, int) { no_cuda("cuda::loopback::run_nodes"); }
}  // namespace loopback

namespace detail {
std::unique_ptr<DeviceBalanced::Core> make_balanced_core(Gpu, Communicator& comm, const TensorSpec&, const SchemeOptions&,
                                                         const DeviceBalancedLimits&, SyncReport&, void*, size_t) {
  no_cuda("rank " + std::to_string(comm.rank()) + " DeviceBalanced on '" + comm.backend_name() + "'");
}
size_t balanced_workspace(Gpu, const TensorSpec&, int, const SchemeOptions&, const DeviceBalancedLimits&) {
  no_cuda("DeviceBalanced::workspace_bytes(MemSpace::Device)");
}
std::unique_ptr<DeviceHierarchical::Core> make_hierarchical_core(Gpu, Communicator& intra, Communicator&,
                                                                 const TensorSpec&, const SchemeOptions&,
                                                                 const DeviceBalancedLimits&, SyncReport&) {
  no_cuda("rank " + std::to_string(intra.rank()) + " DeviceHierarchical on '" + intra.backend_name() + "'");
}
}  // namespace detail

}  // namespace zen::cuda
