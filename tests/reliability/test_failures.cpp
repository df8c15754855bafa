// Failure tests on the loopback backend: timeouts name the missing rank within 2x the timeout for
// every blocking operation and inside every scheme; a failed communicator refuses further use; a
// rank that throws makes the others fail fast; hash-region overflow and workspace allocation failure
// are handled without loss.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include "differential.hpp"
#include "timeout_trial.hpp"
#include "zen/comm/loopback.hpp"
#include "zen/schemes/scheme.hpp"

using namespace zen;
using namespace std::chrono_literals;

namespace {
constexpr auto kTimeout = std::chrono::milliseconds(300);

struct OpRanks {
  CommOp op;
  int n;
};
std::string op_param_name(const ::testing::TestParamInfo<OpRanks>& i) {
  return std::string(comm_op_name(i.param.op)) + "_n" + std::to_string(i.param.n);
}
}  // namespace

class TimeoutPerOp : public ::testing::TestWithParam<OpRanks> {};

TEST_P(TimeoutPerOp, NamesMissingRankWithinTwiceTheTimeout) {
  const auto [op, n] = GetParam();
  const int missing = n - 1;
  std::vector<reltest::TrialResult> res(static_cast<size_t>(n));
  auto errs = loopback::run_collect(
      n, [&](Communicator& c) { res[static_cast<size_t>(c.rank())] = reltest::timeout_trial(c, op, missing); }, kTimeout);
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(errs[r]);
    if (r == missing) {
      EXPECT_FALSE(res[r].participated);
      continue;
    }
    EXPECT_TRUE(res[r].named(r, missing, op)) << "rank " << r << ": " << res[r].what;
    EXPECT_GE(res[r].ms, 0.9 * static_cast<double>(kTimeout.count())) << res[r].what;
    EXPECT_LT(res[r].ms, 2.0 * static_cast<double>(kTimeout.count())) << res[r].what;
  }
}

static std::vector<OpRanks> op_params() {
  std::vector<OpRanks> v;
  for (CommOp op : reltest::blocking_ops())
    for (int n : {2, 5}) v.push_back({op, n});
  return v;
}
INSTANTIATE_TEST_SUITE_P(Loopback, TimeoutPerOp, ::testing::ValuesIn(op_params()), op_param_name);

TEST(Failures, FailedCommunicatorRefusesEveryOperation) {
  for (CommOp op : reltest::blocking_ops()) {
    auto comms = loopback::create(2);
    comms[0]->set_timeout(50ms);
    auto first = reltest::timeout_trial(*comms[0], op, 1);
    ASSERT_TRUE(first.threw) << comm_op_name(op);
    ASSERT_TRUE(comms[0]->failed());
    // Any further call is refused, whatever the operation, with the first error quoted.
    for (CommOp again : reltest::blocking_ops()) {
      auto r = reltest::timeout_trial(*comms[0], again, 1);
      EXPECT_EQ(r.code, Result::InvalidUsage) << r.what;
      EXPECT_NE(r.what.find("refuses further use"), std::string::npos) << r.what;
      EXPECT_NE(r.what.find("timed out"), std::string::npos) << r.what;
      EXPECT_LT(r.ms, 50.0);  // refused at once, no new wait
    }
    float x = 1;
    try {
      comms[0]->send(&x, 4, 1);
      ADD_FAILURE() << "send on a failed communicator";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Result::InvalidUsage);
    }
  }
}

// A rank that constructs the scheme but never calls run(): everyone else reports a timeout naming it.
class SchemeTimeout : public ::testing::TestWithParam<std::string> {};

TEST_P(SchemeTimeout, RankThatStopsParticipatingIsNamed) {
  const int n = 4, missing = 2;
  TensorSpec spec{1000, 1, DType::F32};
  std::vector<double> ms(n, 0);
  auto errs = loopback::run_collect(
      n,
      [&](Communicator& c) {
        SchemeOptions o;
        o.threads = 1;
        auto s = make_scheme(GetParam(), c, spec, o);
        if (c.rank() == missing) return;
        std::vector<int64_t> idx{c.rank(), 999};
        std::vector<float> val{1.0f, 2.0f};
        SparseView v;
        v.dense_len = 1000;
        v.nnz = 2;
        v.indices = idx.data();
        v.values = val.data();
        SparseTensor out;
        const auto t0 = std::chrono::steady_clock::now();
        try {
          s->run(v, out);
        } catch (...) {
          ms[c.rank()] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          throw;
        }
      },
      kTimeout);
  for (int r = 0; r < n; ++r) {
    if (r == missing) {
      EXPECT_FALSE(errs[r]);
      continue;
    }
    ASSERT_TRUE(errs[r]) << "rank " << r << " did not notice rank " << missing << " missing";
    try {
      std::rethrow_exception(errs[r]);
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(e.code(), Result::Timeout) << m;
      EXPECT_NE(m.find("peer " + std::to_string(missing)), std::string::npos) << m;
      EXPECT_NE(m.find("rank " + std::to_string(r) + "/"), std::string::npos) << m;
    }
    EXPECT_LT(ms[r], 2.0 * static_cast<double>(kTimeout.count()));
  }
}
INSTANTIATE_TEST_SUITE_P(AllSchemes, SchemeTimeout, ::testing::ValuesIn(scheme_names()));

TEST(Failures, RankThatThrowsMakesOthersFailFast) {
  TensorSpec spec{100, 1, DType::F32};
  const auto t0 = std::chrono::steady_clock::now();
  auto errs = loopback::run_collect(
      3,
      [&](Communicator& c) {
        auto s = make_scheme("balanced", c, spec);
        std::vector<int64_t> idx{c.rank() == 1 ? 100 : 5};  // rank 1: out of range
        std::vector<float> val{1.0f};
        SparseView v;
        v.dense_len = 100;
        v.nnz = 1;
        v.indices = idx.data();
        v.values = val.data();
        SparseTensor out;
        s->run(v, out);
      },
      20000ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  ASSERT_TRUE(errs[1]);
  for (int r : {0, 2}) {
    ASSERT_TRUE(errs[r]);
    try {
      std::rethrow_exception(errs[r]);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Result::RemoteError) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1 aborted"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("index 100"), std::string::npos) << e.what();
    }
  }
}

// Tiny hash regions: the serial region overflows on every owner, entries spill, nothing is lost.
TEST(Failures, HashRegionOverflowIsLossless) {
  for (int n : {1, 3, 7}) {
    difftest::Case c;
    c.n = n;
    c.scheme = "balanced";
    c.spec = {5000, 1, DType::F32};
    c.opt.parallel_factor = 0.01;
    c.opt.serial_fraction = 0.0;
    c.opt.hash_functions = 1;
    c.opt.threads = 2;
    c.opt.push = IndexEncoding::Coo;  // COO pushes: the hash table partitions (no sort partition)
    c.in.resize(1);
    c.in[0].resize(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      auto& x = c.in[0][r];
      for (int64_t i = 0; i < 5000; i += 1 + r) x.idx.push_back(i);
      x.vals.resize(x.idx.size() * 4);
      for (size_t j = 0; j < x.idx.size(); ++j) difftest::put_value<float>(x.vals.data() + 4 * j, static_cast<double>(r + 1));
    }
    const auto ref = difftest::reference(c, 0);
    std::vector<difftest::Output> outs(static_cast<size_t>(n));
    loopback::run(n, [&](Communicator& comm) { outs[comm.rank()] = difftest::run_rank(c, comm)[0]; });
    for (int r = 0; r < n; ++r) {
      EXPECT_GT(outs[r].serial_overflows, 0u) << "n=" << n << ": the tiny regions did not overflow";
      EXPECT_EQ(difftest::check_output(c, 0, outs[r], ref), "") << "n=" << n << " rank " << r;
    }
  }
}

// A workspace too large to allocate fails with a SystemError naming the rank and the scheme, and the
// other ranks are told (RemoteError) instead of hanging.
TEST(Failures, WorkspaceAllocationFailureIsAClearError) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan's operator new reports out-of-memory and dies instead of throwing std::bad_alloc";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "ASan's operator new reports out-of-memory and dies instead of throwing std::bad_alloc";
#endif
#endif
  const uint64_t N = uint64_t{1} << 45;  // the dense ring needs an N-value buffer: 128 TiB
  auto errs = loopback::run_collect(
      2,
      [&](Communicator& c) {
        auto s = make_scheme("dense", c, TensorSpec{N, 1, DType::F32});
        std::vector<int64_t> idx{1};
        std::vector<float> val{1.0f};
        SparseView v;
        v.dense_len = N;
        v.nnz = 1;
        v.indices = idx.data();
        v.values = val.data();
        SparseTensor out;
        s->run(v, out);
      },
      10000ms);
  int system_errors = 0;
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errs[r]);
    try {
      std::rethrow_exception(errs[r]);
    } catch (const Error& e) {
      const std::string m = e.what();
      if (e.code() == Result::SystemError) {
        ++system_errors;
        EXPECT_NE(m.find("rank " + std::to_string(r)), std::string::npos) << m;
        EXPECT_NE(m.find("dense"), std::string::npos) << m;
        EXPECT_NE(m.find("allocat"), std::string::npos) << m;
      } else {
        EXPECT_EQ(e.code(), Result::RemoteError) << m;
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << " threw a non-zen exception: " << e.what();
    }
  }
  EXPECT_GE(system_errors, 1);
}
