// DeviceHierarchical on the GPU (simulated nodes on the device loopback) vs the host hierarchical
// scheme, bit for bit: the suite of tests/device/hierarchical_suite.hpp, which CI runs on the CPU,
// plus run_nodes and a one-rank ncclCommSplit. Skips without a GPU (fails with ZEN_GPU_REQUIRED).
#include "zen/cuda/kernels.hpp"
namespace zen::test {
using TestBackend = cuda::Gpu;
}  // namespace zen::test

#include "../device/hierarchical_suite.hpp"
#include "gpu_test_util.hpp"

using namespace zen;

TEST(DeviceHierarchical, RunNodesRejectsBadNodeSize) {
  ZEN_REQUIRE_GPU();
  EXPECT_THROW(cuda::loopback::run_nodes(6, 4, [](Communicator&, Communicator&, Communicator&) {}), Error);
}

TEST(Nccl, OneRankSplit) {
  ZEN_REQUIRE_GPU();
  if (!cuda::nccl::available()) ZEN_SKIP_OR_FAIL("built without NCCL");
  auto c = cuda::nccl::create(cuda::nccl::unique_id(), 1, 0);
  auto s = cuda::nccl::split(*c, 0, 0);
  EXPECT_EQ(s->size(), 1);
  EXPECT_EQ(s->rank(), 0);
  EXPECT_EQ(s->memory_space(), MemSpace::Device);
}
