// The device plans' Gpu cores (CUDA builds): BalancedImpl<Gpu> and HierarchicalImpl<Gpu>, the same
// code as the Host cores (device_plans.cpp) over Kernels<Gpu>, Memory<Gpu> and stream waits.
#include "balanced_impl.hpp"
#include "hierarchical_impl.hpp"

namespace zen::cuda::detail {

std::unique_ptr<DeviceBalanced::Core> make_balanced_core(Gpu, Communicator& comm, const TensorSpec& spec,
                                                         const SchemeOptions& opt, const DeviceBalancedLimits& lim,
                                                         SyncReport& report, void* ws, size_t ws_bytes) {
  return std::make_unique<BalancedImpl<Gpu>>(comm, spec, opt, lim, report, ws, ws_bytes);
}
size_t balanced_workspace(Gpu, const TensorSpec& spec, int n, const SchemeOptions& opt, const DeviceBalancedLimits& lim) {
  return workspace_for<Gpu>(spec, n, opt, lim);
}
std::unique_ptr<DeviceHierarchical::Core> make_hierarchical_core(Gpu, Communicator& intra, Communicator& inter,
                                                                 const TensorSpec& spec, const SchemeOptions& opt,
                                                                 const DeviceBalancedLimits& lim, SyncReport& report) {
  return std::make_unique<HierarchicalImpl<Gpu>>(intra, inter, spec, opt, lim, report);
}

}  // namespace zen::cuda::detail
