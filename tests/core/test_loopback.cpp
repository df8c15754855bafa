#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "comm_suite.hpp"
#include "zen/comm/loopback.hpp"

using namespace zen;

class LoopbackSuite : public ::testing::TestWithParam<int> {};

TEST_P(LoopbackSuite, AllCollectivesExact) {
  loopback::run(GetParam(), [](Communicator& c) { test::run_comm_suite(c); });
}

INSTANTIATE_TEST_SUITE_P(Ranks, LoopbackSuite, ::testing::Range(1, 9));

TEST(Loopback, TimeoutNamesMissingRank) {
  auto errs = loopback::run_collect(
      4,
      [](Communicator& c) {
        if (c.rank() == 2) return;  // rank 2 never takes part
        std::vector<float> b(10, 1.0f);
        c.allreduce(b.data(), b.size(), DType::F32);
      },
      std::chrono::milliseconds(200));
  for (int r : {0, 1, 3}) {
    ASSERT_TRUE(errs[r]);
    try {
      std::rethrow_exception(errs[r]);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Result::Timeout) << e.what();
      std::string m = e.what();
      EXPECT_NE(m.find("peer 2"), std::string::npos) << m;
      EXPECT_NE(m.find("allreduce"), std::string::npos) << m;
      EXPECT_NE(m.find("rank " + std::to_string(r)), std::string::npos) << m;
    }
  }
  EXPECT_FALSE(errs[2]);
}

TEST(Loopback, FailedCommunicatorRefusesFurtherUse) {
  auto comms = loopback::create(2);
  comms[0]->set_timeout(std::chrono::milliseconds(50));
  float x = 1;
  EXPECT_THROW(comms[0]->recv(&x, 4, 1), Error);
  try {
    comms[0]->barrier();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Result::InvalidUsage);
    EXPECT_NE(std::string(e.what()).find("refuses further use"), std::string::npos);
  }
}

TEST(Loopback, CollectiveMismatchAndSizeMismatchAreErrors) {
  auto errs = loopback::run_collect(2, [](Communicator& c) {
    float b = 1;
    if (c.rank() == 0) c.allreduce(&b, 1, DType::F32);
    else c.barrier();
  });
  // Both ranks see the mismatch at the same sequence number: InvalidUsage naming both operations
  // (or, on the rank that is told first by its peer, RemoteError quoting the peer's same error).
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errs[r]) << "rank " << r;
    try {
      std::rethrow_exception(errs[r]);
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_TRUE(e.code() == Result::InvalidUsage || e.code() == Result::RemoteError) << m;
      EXPECT_NE(m.find("collective mismatch: peer called"), std::string::npos) << m;
      if (e.code() == Result::InvalidUsage) {
        EXPECT_NE(m.find(r == 0 ? "peer called barrier where this rank called allreduce"
                                : "peer called allreduce where this rank called barrier"),
                  std::string::npos)
            << m;
      }
    }
  }
  errs = loopback::run_collect(2, [](Communicator& c) {
    std::vector<uint8_t> b(16);
    if (c.rank() == 0) c.send(b.data(), 16, 1);
    else c.recv(b.data(), 8, 0);
  });
  ASSERT_TRUE(errs[1]);
  try {
    std::rethrow_exception(errs[1]);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sent 16 bytes"), std::string::npos) << e.what();
  }
}

TEST(Loopback, AbortWakesPeersFast) {
  auto t0 = std::chrono::steady_clock::now();
  auto errs = loopback::run_collect(
      3,
      [](Communicator& c) {
        if (c.rank() == 1) throw std::runtime_error("boom on rank 1");
        c.barrier();
      },
      std::chrono::milliseconds(20000));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ASSERT_TRUE(errs[0]);
  try {
    std::rethrow_exception(errs[0]);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Result::RemoteError);
    EXPECT_NE(std::string(e.what()).find("boom on rank 1"), std::string::npos) << e.what();
  }
}
