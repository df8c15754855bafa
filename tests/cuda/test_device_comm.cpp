// Device communicators: the host communicator suite (every collective, sizes 0 .. 2^20+3, all
// dtypes) through a host-staging adapter, on the device loopback (n = 1..8) and on a one-rank NCCL
// communicator (NCCL allows one rank per GPU). Skips without a GPU (fails with ZEN_GPU_REQUIRED).
#include <gtest/gtest.h>

#include <random>

#include "../core/comm_suite.hpp"
#include "gpu_test_util.hpp"
#include "zen/comm/loopback.hpp"

using namespace zen;
using zen::test::DevBuf;

class DeviceLoopbackSuite : public ::testing::TestWithParam<int> {};

TEST_P(DeviceLoopbackSuite, AllCollectivesExact) {
  ZEN_REQUIRE_GPU();
  cuda::loopback::run(GetParam(), [](Communicator& c) {
    EXPECT_EQ(c.memory_space(), MemSpace::Device);
    test::StagedComm s(c);
    test::run_comm_suite(s);
  });
}
INSTANTIATE_TEST_SUITE_P(Ranks, DeviceLoopbackSuite, ::testing::Range(1, 9));

// Rank-order allreduce: bitwise equal to the host loopback on inexact fp16 / fp32 sums.
TEST(DeviceLoopback, AllreduceBitwiseEqualsHostLoopback) {
  ZEN_REQUIRE_GPU();
  const int n = 6;
  const size_t count = 100003;
  auto input = [&](int r, DType t) {
    std::mt19937_64 g(r + 1);
    std::uniform_real_distribution<double> u(-2, 2);
    std::vector<uint8_t> b(count * dtype_size(t));
    dispatch_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      T* p = reinterpret_cast<T*>(b.data());
      for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(u(g));
    });
    return b;
  };
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    std::vector<std::vector<uint8_t>> want(n), got(n);
    loopback::run(n, [&](Communicator& c) {
      want[c.rank()] = input(c.rank(), t);
      c.allreduce(want[c.rank()].data(), count, t);
    });
    cuda::loopback::run(n, [&](Communicator& c) {
      auto h = input(c.rank(), t);
      DevBuf d = DevBuf::from(h);
      c.allreduce(d.get(), count, t);
      cuda::stream_wait(c, c.stream());
      got[c.rank()] = d.to_vector<uint8_t>(h.size());
    });
    for (int r = 0; r < n; ++r) ASSERT_EQ(got[r], want[r]) << dtype_name(t) << " rank " << r;
  }
}

TEST(DeviceLoopback, TimeoutNamesMissingRank) {
  ZEN_REQUIRE_GPU();
  auto errs = cuda::loopback::run_collect(
      3,
      [](Communicator& c) {
        if (c.rank() == 1) return;
        DevBuf b(64);
        c.allreduce(b.get(), 16, DType::F32);
      },
      std::chrono::milliseconds(300));
  // The first rank to time out names rank 1; the other one either times out as well or is told
  // (RemoteError) by the first one's abort, whichever comes first.
  int timeouts = 0;
  for (int r : {0, 2}) {
    ASSERT_TRUE(errs[r]);
    try {
      std::rethrow_exception(errs[r]);
    } catch (const Error& e) {
      if (e.code() == Result::Timeout) {
        ++timeouts;
        EXPECT_NE(std::string(e.what()).find("peer(s) 1"), std::string::npos) << e.what();
      } else {
        EXPECT_EQ(e.code(), Result::RemoteError) << e.what();
      }
    }
  }
  EXPECT_GE(timeouts, 1);
  EXPECT_FALSE(errs[1]);
}

TEST(DeviceLoopback, FailureOfOneRankAbortsTheOthers) {
  ZEN_REQUIRE_GPU();
  auto errs = cuda::loopback::run_collect(4, [](Communicator& c) {
    if (c.rank() == 3) ZEN_THROW(Result::InvalidArgument, "rank 3 gives up");
    DevBuf b(64);
    c.barrier();
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(errs[r]);
    try {
      std::rethrow_exception(errs[r]);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Result::RemoteError) << e.what();
    }
  }
}

TEST(Nccl, OneRankCommunicatorSuite) {
  ZEN_REQUIRE_GPU();
  if (!cuda::nccl::available()) ZEN_SKIP_OR_FAIL("built without NCCL");
  auto c = cuda::nccl::create(cuda::nccl::unique_id(), 1, 0);
  cudaStream_t s;
  ZEN_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  c->set_stream(s);
  EXPECT_EQ(c->memory_space(), MemSpace::Device);
  EXPECT_STREQ(c->backend_name(), "nccl");
  {
    test::StagedComm st(*c);
    test::run_comm_suite(st);
  }
  c.reset();
  cudaStreamDestroy(s);
}
