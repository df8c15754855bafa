// The NCCL communicator's logic (cuda/comm/grouped_comm.hpp: sends to self, held-back sends, the
// alltoallv / allgatherv groups) on a host model of NCCL's group semantics (nccl_model.hpp), in every
// build: the communicator suite at n = 1..8 (sends to self before receiving, rings of large sends
// before receives), and the schedules around collectives the design serves and the one it cannot.
// The same logic runs on NCCL itself only on a GPU (test_cuda: Nccl.OneRankCommunicatorSuite).
#include <gtest/gtest.h>

#include <numeric>

#include "../core/comm_suite.hpp"
#include "nccl_model.hpp"

using namespace zen;
using zen::test::ncclm::ModelComm;
using zen::test::ncclm::SyncComm;

namespace {

void expect_ok(const std::vector<std::exception_ptr>& errs) {
  for (size_t r = 0; r < errs.size(); ++r)
    if (errs[r]) {
      try {
        std::rethrow_exception(errs[r]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    }
}

constexpr size_t kBig = (1u << 20) + 3;  // a rendezvous-sized message (the model treats every send so)

}  // namespace

class NcclModelSuite : public ::testing::TestWithParam<int> {};

TEST_P(NcclModelSuite, CommunicatorSuite) {
  expect_ok(test::ncclm::run(GetParam(), [](SyncComm& c, ModelComm&) { test::run_comm_suite(c); }));
}
INSTANTIATE_TEST_SUITE_P(Ranks, NcclModelSuite, ::testing::Range(1, 9));

// A send to self is matched by the rank's own receive, in order per tag, and never reaches the
// transport (NCCL refuses a group with a send to self but not its receive: the model does too).
TEST(NcclModel, SendsToSelfAreLocal) {
  expect_ok(test::ncclm::run(2, [](SyncComm& c, ModelComm& m) {
    std::vector<int> a(kBig, 1 + c.rank()), b(kBig, 7), x(3, -1), got(kBig), gx(3);
    c.send(a.data(), a.size() * 4, c.rank(), 4);
    c.send(b.data(), b.size() * 4, c.rank(), 9);
    c.send(x.data(), x.size() * 4, c.rank(), 4);
    EXPECT_EQ(m.pending_sends(), 0u);
    c.recv(got.data(), got.size() * 4, c.rank(), 4);  // the first tag-4 message
    EXPECT_EQ(got, a);
    c.recv(gx.data(), gx.size() * 4, c.rank(), 4);
    EXPECT_EQ(gx, x);
    c.recv(got.data(), got.size() * 4, c.rank(), 9);
    EXPECT_EQ(got, b);
    // A collective between a send to self and its receive (through NCCL, the held-back send would
    // travel in the collective's group without its receive).
    c.send(a.data(), a.size() * 4, c.rank(), 5);
    float s = 1.0f;
    c.allreduce(&s, 1, DType::F32);
    c.recv(got.data(), got.size() * 4, c.rank(), 5);
    EXPECT_EQ(got, a);
    EXPECT_EQ(s, 2.0f);
  }));
  // A receive from self with nothing sent could never complete: refused, naming it.
  auto errs = test::ncclm::run(1, [](SyncComm& c, ModelComm&) {
    int v = 0;
    c.recv(&v, 4, 0, 1);
  });
  ASSERT_TRUE(errs[0]);
  try {
    std::rethrow_exception(errs[0]);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Result::InvalidUsage) << e.what();
    EXPECT_NE(std::string(e.what()).find("without an earlier send to self"), std::string::npos) << e.what();
  }
}

// Held-back sends travel in the group of the rank's next operation, collectives included, so a send
// progresses together with what its peer waits on first. Even ranks send to the next odd rank and
// then enter an allreduce; the odd ranks receive either before (A) or after (B) the allreduce.
// Issued alone before the allreduce, (B) deadlocks: the send waits for a receive that sits behind
// the peer's allreduce, which waits for the sender's.
TEST(NcclModel, SendsAroundCollectives) {
  for (bool recv_first : {true, false})
    for (int n : {2, 4, 6}) {
      SCOPED_TRACE(std::string(recv_first ? "receiver receives before" : "receiver receives after") +
                   " the allreduce, n=" + std::to_string(n));
      expect_ok(test::ncclm::run(n, [&](SyncComm& c, ModelComm&) {
        const int r = c.rank();
        std::vector<int> msg(kBig, r), got(kBig, -1);
        float s = 1.0f;
        if (r % 2 == 0) {
          c.send(msg.data(), msg.size() * 4, r + 1, 2);
          c.allreduce(&s, 1, DType::F32);
        } else {
          if (recv_first) c.recv(got.data(), got.size() * 4, r - 1, 2);
          c.allreduce(&s, 1, DType::F32);
          if (!recv_first) c.recv(got.data(), got.size() * 4, r - 1, 2);
          EXPECT_EQ(got[0], r - 1);
          EXPECT_EQ(got[kBig - 1], r - 1);
        }
        EXPECT_EQ(s, static_cast<float>(n));
      }));
    }
}

// What no schedule within NCCL's stream order serves, documented: every rank sends before a
// collective and receives after it. The model reports the deadlock (so the tests above would see
// one), naming the waiting operations.
TEST(NcclModel, RingAcrossACollectiveDeadlocks) {
  auto errs = test::ncclm::run(3, [](SyncComm& c, ModelComm&) {
    const int r = c.rank(), n = c.size();
    std::vector<int> msg(kBig, r), got(kBig);
    float s = 1.0f;
    c.send(msg.data(), msg.size() * 4, (r + 1) % n, 2);
    c.allreduce(&s, 1, DType::F32);
    c.recv(got.data(), got.size() * 4, (r + n - 1) % n, 2);
  });
  int deadlocks = 0;
  for (auto& e : errs) {
    ASSERT_TRUE(e);
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      if (std::string(err.what()).find("deadlock") != std::string::npos) ++deadlocks;
    }
  }
  EXPECT_GE(deadlocks, 1);
}
