// DeviceBalanced on the GPU vs the CPU scheme, bit for bit: the suite of
// tests/device/balanced_suite.hpp over the device loopback (n virtual ranks on one GPU), which CI
// runs on the CPU, plus a one-rank NCCL communicator. Skips without a GPU (fails with ZEN_GPU_REQUIRED).
#include "zen/cuda/kernels.hpp"
namespace zen::test {
using TestBackend = cuda::Gpu;
}  // namespace zen::test

#include <cuda_runtime.h>

#include "../device/balanced_suite.hpp"
#include "gpu_test_util.hpp"

namespace zen::test::balanced {

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceBalancedMatrix, ::testing::Values(1, 2, 3, 5, 8));

TEST(DeviceBalanced, OneRankNccl) {
  ZEN_REQUIRE_GPU();
  if (!cuda::nccl::available()) ZEN_SKIP_OR_FAIL("built without NCCL");
  Case c{100003, 1, 0.02, false};
  RunCfg rc;
  auto want = cpu_expect(1, c, DType::F32, rc, 3);
  auto comm = cuda::nccl::create(cuda::nccl::unique_id(), 1, 0);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  comm->set_stream(s);
  {
    SparseTensor in = make_input(c, DType::F32, 0, 3);
    cuda::DeviceBalancedLimits lim;
    lim.max_nnz = in.nnz();
    DevBuf d_idx = DevBuf::from(in.indices), d_val = DevBuf::from(in.values), d_out(c.rows * 4);
    SparseView v = in.view();
    v.indices = d_idx.get();
    v.values = d_val.get();
    v.space = MemSpace::Device;
    SchemeOptions o;
    o.seed = 3;
    cuda::DeviceBalanced db3(*comm, TensorSpec{c.rows, 1, DType::F32}, o, lim);
    db3.run_dense(v, d_out.get());
    db3.synchronize();
    EXPECT_EQ(d_out.to_vector<uint8_t>(c.rows * 4), want[0]);
  }
  comm.reset();
  cudaStreamDestroy(s);
}

}  // namespace zen::test::balanced
