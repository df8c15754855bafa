// Concurrency on loopback ranks (docs/api.md, "Concurrency"): (1) four plans of one communicator in
// agreed order, each driven from its own thread on every rank, requests started, tested and waited
// in orders that differ per rank; (2) several communicators, each driven from its own thread; (3)
// both at once. Every result exact (concurrency.hpp), nothing hangs (every communicator has a timeout).
#include <gtest/gtest.h>

#include <thread>

#include "concurrency.hpp"
#include "zen/comm/loopback.hpp"

using namespace zen;
using namespace zen::conctest;

namespace {
constexpr uint64_t kCalls = 24;

// Rank r of communicator `comm`: one plan per spec, created in the same order on every rank, each
// driven by its own thread; returns the drivers' results (plan order).
std::vector<DriveResult> drive_plans_from_threads(Communicator& comm, const std::vector<PlanSpec>& specs, uint64_t seed) {
  std::vector<std::unique_ptr<SparseAllreduce>> plans;
  for (const auto& s : specs) plans.push_back(make_scheme(s.scheme, comm, s.spec));
  std::vector<DriveResult> out(specs.size());
  std::vector<std::thread> th;
  for (size_t p = 0; p < specs.size(); ++p)
    th.emplace_back([&, p] {
      out[p] = drive(*plans[p], specs[p], p + 1, comm.rank(), comm.size(), kCalls, seed * 131 + static_cast<uint64_t>(comm.rank()));
    });
  for (auto& t : th) t.join();
  return out;
}

void expect_clean(const std::vector<DriveResult>& res, const std::string& where) {
  for (size_t p = 0; p < res.size(); ++p) {
    EXPECT_EQ(res[p].error, "") << where << " plan " << p;
    EXPECT_EQ(res[p].wrong, 0u) << where << " plan " << p;
    EXPECT_EQ(res[p].calls, kCalls) << where << " plan " << p;
  }
}
}  // namespace

class Concurrency : public ::testing::TestWithParam<int> {};

TEST_P(Concurrency, PlansOfOneCommunicatorFromThreadsInAgreedOrder) {
  const int n = GetParam();
  loopback::run(
      n,
      [&](Communicator& c) {
        c.set_call_order(CallOrder::Agreed);
        const auto res = drive_plans_from_threads(c, plan_specs(), 1);
        expect_clean(res, "rank " + std::to_string(c.rank()));
        uint64_t nb = 0;
        for (const auto& r : res) nb += r.nonblocking;
        EXPECT_GT(nb, 0u);
      },
      Communicator::Ms(20000));
}

TEST_P(Concurrency, SeveralCommunicatorsEachFromItsOwnThread) {
  const int n = GetParam();
  constexpr int kComms = 3;
  std::vector<std::vector<std::unique_ptr<Communicator>>> worlds;
  for (int w = 0; w < kComms; ++w) worlds.push_back(loopback::create(n));
  const auto specs = plan_specs();
  std::vector<std::thread> th;
  std::vector<DriveResult> res(static_cast<size_t>(kComms * n));
  for (int w = 0; w < kComms; ++w)
    for (int r = 0; r < n; ++r)
      th.emplace_back([&, w, r] {
        Communicator& c = *worlds[w][r];
        c.set_timeout(Communicator::Ms(20000));
        const PlanSpec& ps = specs[static_cast<size_t>(w) % specs.size()];
        try {
          auto plan = make_scheme(ps.scheme, c, ps.spec);
          res[static_cast<size_t>(w * n + r)] = drive(*plan, ps, 1, r, n, kCalls, 7 + static_cast<uint64_t>(w * 100 + r));
        } catch (const std::exception& e) {
          res[static_cast<size_t>(w * n + r)].error = e.what();
        }
      });
  for (auto& t : th) t.join();
  for (int w = 0; w < kComms; ++w)
    for (int r = 0; r < n; ++r) {
      const auto& x = res[static_cast<size_t>(w * n + r)];
      EXPECT_EQ(x.error, "") << "world " << w << " rank " << r;
      EXPECT_EQ(x.wrong, 0u) << "world " << w << " rank " << r;
      EXPECT_EQ(x.calls, kCalls) << "world " << w << " rank " << r;
    }
}

// Both at once: world 0 in agreed order with its plans on their own threads, worlds 1 and 2 each
// driven from one more thread per rank.
TEST_P(Concurrency, AgreedOrderBesideOtherCommunicators) {
  const int n = GetParam();
  auto w0 = loopback::create(n), w1 = loopback::create(n), w2 = loopback::create(n);
  const auto specs = plan_specs();
  std::vector<std::thread> th;
  std::vector<std::vector<DriveResult>> agreed(static_cast<size_t>(n));
  std::vector<DriveResult> other(static_cast<size_t>(2 * n));
  for (int r = 0; r < n; ++r) {
    th.emplace_back([&, r] {
      Communicator& c = *w0[r];
      c.set_timeout(Communicator::Ms(20000));
      c.set_call_order(CallOrder::Agreed);
      agreed[static_cast<size_t>(r)] = drive_plans_from_threads(c, {specs[0], specs[1]}, 3);
    });
    for (int k = 0; k < 2; ++k)
      th.emplace_back([&, r, k] {
        Communicator& c = k == 0 ? *w1[r] : *w2[r];
        c.set_timeout(Communicator::Ms(20000));
        const PlanSpec& ps = specs[2 + static_cast<size_t>(k)];
        try {
          auto plan = make_scheme(ps.scheme, c, ps.spec);
          other[static_cast<size_t>(k * n + r)] = drive(*plan, ps, 9, r, n, kCalls, 11 + static_cast<uint64_t>(k * 50 + r));
        } catch (const std::exception& e) {
          other[static_cast<size_t>(k * n + r)].error = e.what();
        }
      });
  }
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r) expect_clean(agreed[static_cast<size_t>(r)], "world 0 rank " + std::to_string(r));
  expect_clean(other, "worlds 1-2");
}

INSTANTIATE_TEST_SUITE_P(Ranks, Concurrency, ::testing::Values(1, 3, 5),
                         [](const ::testing::TestParamInfo<int>& i) { return "n" + std::to_string(i.param); });

// A plan's call that a peer never starts is reported within the timeout, not a hang: rank 0 starts
// a call of plan b that rank 1 never starts (it starts another call of plan a instead).
TEST(ConcurrencyErrors, AgreedCallThatAPeerNeverStartsFailsWithinTheTimeout) {
  const auto errs = loopback::run_collect(
      2,
      [&](Communicator& c) {
        c.set_call_order(CallOrder::Agreed);
        const TensorSpec spec{100, 1, DType::F32};
        auto a = make_scheme("allgather", c, spec);
        auto b = make_scheme("balanced", c, spec);
        std::vector<int64_t> idx{c.rank()};
        std::vector<float> val{1.0f};
        SparseView v;
        v.dense_len = 100;
        v.nnz = 1;
        v.indices = idx.data();
        v.values = val.data();
        SparseTensor out;
        a->run(v, out);  // both ranks
        if (c.rank() == 0) {
          auto q = b->start(v, out);  // rank 1 never starts it
          q.wait();
        } else {
          a->run(v, out);  // rank 1 starts another call instead
        }
      },
      Communicator::Ms(500));
  ASSERT_EQ(errs.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errs[static_cast<size_t>(r)]) << "rank " << r << " finished although the ranks started different calls";
    try {
      std::rethrow_exception(errs[static_cast<size_t>(r)]);
    } catch (const Error& e) {
      const std::string m = e.what();
      // Rank 1 finds that the agreed call is one it did not start; rank 0, waiting in that call for
      // rank 1, names it (its own timeout, or rank 1's message, whichever comes first).
      if (r == 1) { EXPECT_NE(m.find("did not start"), std::string::npos) << "rank 1: " << m; }
      else EXPECT_TRUE(m.find("did not start") != std::string::npos || m.find("peer 1") != std::string::npos) << "rank 0: " << m;
    }
  }
}
