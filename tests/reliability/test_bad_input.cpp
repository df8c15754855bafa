// Bad input, one test per row of docs/reliability.md "Bad input": each gets a clear error naming the
// rank, the operation and the offending value, or the documented behaviour.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unistd.h>

#include "zen/comm/loopback.hpp"
#include "zen/orbit/scenario.hpp"
#include "zen/schemes/scheme.hpp"
#include "zen/trace/trace.hpp"

using namespace zen;
using namespace std::chrono_literals;

namespace {

struct RankData {
  std::vector<int64_t> idx;
  std::vector<float> val;
  uint64_t N = 100;
  DType dtype = DType::F32;
};

SparseView view_of(const RankData& d) {
  SparseView v;
  v.dense_len = d.N;
  v.nnz = d.idx.size();
  v.indices = d.idx.data();
  v.values = d.val.data();
  v.dtype = d.dtype;
  return v;
}

// Run `scheme` on n loopback ranks with per-rank data; returns every rank's error (or null).
// `call_ms`, when given, receives each rank's time inside run() (entry to return or throw). The
// timeout is 10 s: an error told "at once" arrives within 2 s (docs/reliability.md, "Timing bounds
// in tests").
std::vector<std::exception_ptr> run_scheme(const std::string& scheme, int n, const std::function<RankData(int)>& data,
                                           SchemeOptions opt = {}, std::vector<SparseTensor>* outs = nullptr,
                                           std::vector<double>* call_ms = nullptr) {
  if (outs) outs->assign(static_cast<size_t>(n), SparseTensor{});
  if (call_ms) call_ms->assign(static_cast<size_t>(n), 0.0);
  opt.threads = 1;
  return loopback::run_collect(
      n,
      [&](Communicator& c) {
        RankData d = data(c.rank());
        auto s = make_scheme(scheme, c, TensorSpec{d.N, 1, d.dtype}, opt);
        SparseTensor out;
        const auto t0 = std::chrono::steady_clock::now();
        struct Clock {
          std::vector<double>* ms;
          int r;
          std::chrono::steady_clock::time_point t0;
          ~Clock() {
            if (ms) (*ms)[static_cast<size_t>(r)] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          }
        } clock{call_ms, c.rank(), t0};
        s->run(view_of(d), out);
        if (outs) (*outs)[static_cast<size_t>(c.rank())] = std::move(out);
      },
      10000ms);
}

// The error of `rank`: must be a zen::Error of `code` whose message contains every needle. A
// RemoteError is accepted instead only where `remote_ok` says so: errors every rank detects at once
// (a cross-rank mismatch at setup), where a rank that gets there later may first be told by a peer.
// A rank that raised the original error must report it, never a RemoteError.
void expect_error(const std::vector<std::exception_ptr>& errs, int rank, Result code,
                  const std::vector<std::string>& needles, bool remote_ok = false) {
  ASSERT_TRUE(errs[static_cast<size_t>(rank)]) << "rank " << rank << " did not fail";
  try {
    std::rethrow_exception(errs[static_cast<size_t>(rank)]);
  } catch (const Error& e) {
    const std::string m = e.what();
    // A cross-rank mismatch is detected by every rank; one that gets there first poisons the
    // communicator, and a rank still waiting then reports RemoteError quoting that same error (the
    // needles below must still all be in the message).
    if (!(remote_ok && e.code() == Result::RemoteError)) {
      EXPECT_EQ(e.code(), code) << m;
    }
    for (auto& s : needles) EXPECT_NE(m.find(s), std::string::npos) << "missing '" << s << "' in: " << m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rank " << rank << " threw a non-zen exception: " << e.what();
  }
}

}  // namespace

class PerScheme : public ::testing::TestWithParam<std::string> {};

TEST_P(PerScheme, OutOfRangeIndexNamesRankOpAndValue) {
  auto errs = run_scheme(GetParam(), 3, [](int r) {
    RankData d;
    d.idx = {1, r == 2 ? 100 : 7};
    d.val = {1, 2};
    return d;
  });
  expect_error(errs, 2, Result::InvalidArgument, {"rank 2", GetParam(), "index 100", "position 1", "[0, 100)"});
  for (int r : {0, 1}) expect_error(errs, r, Result::RemoteError, {"rank 2 aborted"});
}

// Without validation (SchemeOptions::validate = false) a bad index may cost speed, never memory
// safety or a silent wrong answer: every scheme rejects it before using it (run under ASan by the
// sanitizer suite), the bad rank names it, every other rank is told at once.
TEST_P(PerScheme, ValidateOffStillRejectsBadIndicesSafely) {
  for (int64_t bad : {int64_t{100}, int64_t{101}, int64_t{-1}, int64_t{-4096}, int64_t{1} << 40,
                      std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    SCOPED_TRACE("index " + std::to_string(bad));
    SchemeOptions o;
    o.validate = false;
    std::vector<double> ms;
    auto errs = run_scheme(
        GetParam(), 3,
        [&](int r) {
          RankData d;
          d.idx = {1, r == 1 ? bad : 7, 99};
          d.val = {1, 2, 3};
          return d;
        },
        o, nullptr, &ms);
    for (int r = 0; r < 3; ++r) EXPECT_LT(ms[static_cast<size_t>(r)], 2000.0) << "rank " << r << ": peers were not told at once";
    expect_error(errs, 1, Result::InvalidArgument, {"rank 1", GetParam(), "index " + std::to_string(bad)});
    for (int r : {0, 2}) expect_error(errs, r, Result::RemoteError, {"rank 1 aborted", "index " + std::to_string(bad)});
  }
}

TEST_P(PerScheme, NegativeIndexNamesRankOpAndValue) {
  auto errs = run_scheme(GetParam(), 2, [](int r) {
    RankData d;
    d.idx = {r == 0 ? -3 : 4};
    d.val = {1};
    return d;
  });
  expect_error(errs, 0, Result::InvalidArgument, {"rank 0", GetParam(), "index -3"});
}

TEST_P(PerScheme, DifferentNAcrossRanksIsCaughtAtSetup) {
  auto errs = run_scheme(GetParam(), 3, [](int r) {
    RankData d;
    d.N = r == 1 ? 200 : 100;
    return d;
  });
  for (int r : {0, 2}) expect_error(errs, r, Result::InvalidUsage, {"rank 1 has N=200", "N=100", "setup"}, true);
}

TEST_P(PerScheme, DifferentDtypeAcrossRanksIsCaughtAtSetup) {
  auto errs = run_scheme(GetParam(), 2, [](int r) {
    RankData d;
    d.dtype = r == 1 ? DType::F64 : DType::F32;
    return d;
  });
  expect_error(errs, 0, Result::InvalidUsage, {"rank 1", "dtype=f64", "dtype=f32"}, true);
}

TEST_P(PerScheme, NanAndInfArePropagatedNeverDropped) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<SparseTensor> outs;
  auto errs = run_scheme(
      GetParam(), 3,
      [&](int r) {
        RankData d;
        // 10: NaN + 1 + 1; 20: Inf + 1 + 1; 30: Inf - Inf + 0 = NaN; 40: -Inf only on rank 2; 50: ordinary
        d.idx = {10, 20, 30, 40, 50};
        d.val = {r == 0 ? nan : 1.0f, r == 1 ? inf : 1.0f, r == 0 ? inf : (r == 1 ? -inf : 0.0f), r == 2 ? -inf : 0.0f, 2.0f};
        return d;
      },
      {}, &outs);
  for (int r = 0; r < 3; ++r) ASSERT_FALSE(errs[r]);
  for (int r = 0; r < 3; ++r) {
    const auto& o = outs[r];
    ASSERT_EQ(o.indices, (std::vector<int64_t>{10, 20, 30, 40, 50})) << "rank " << r;
    const float* v = o.vals<float>();
    EXPECT_TRUE(std::isnan(v[0]));
    EXPECT_EQ(v[1], inf);
    EXPECT_TRUE(std::isnan(v[2]));
    EXPECT_EQ(v[3], -inf);
    EXPECT_EQ(v[4], 6.0f);
  }
}

TEST_P(PerScheme, DuplicatesAreSummedByDefault) {
  std::vector<SparseTensor> outs;
  auto errs = run_scheme(
      GetParam(), 2,
      [](int r) {
        RankData d;
        d.idx = {5, 9, 5, 5};
        d.val = {1, 2, 3, static_cast<float>(r)};
        return d;
      },
      {}, &outs);
  ASSERT_FALSE(errs[0]);
  ASSERT_FALSE(errs[1]);
  EXPECT_EQ(outs[0].indices, (std::vector<int64_t>{5, 9}));
  EXPECT_EQ(outs[0].vals<float>()[0], 9.0f);  // (1+3+0) + (1+3+1)
  EXPECT_EQ(outs[0].vals<float>()[1], 4.0f);
}

TEST_P(PerScheme, DuplicatesRejectedByOptionNameTheIndex) {
  SchemeOptions o;
  o.duplicates = DuplicatePolicy::Reject;
  auto errs = run_scheme(
      GetParam(), 2,
      [](int r) {
        RankData d;
        d.idx = r == 1 ? std::vector<int64_t>{3, 42, 7, 42} : std::vector<int64_t>{3};
        d.val.assign(d.idx.size(), 1.0f);
        return d;
      },
      o);
  expect_error(errs, 1, Result::InvalidArgument, {"rank 1", GetParam(), "duplicate index 42"});
}

TEST_P(PerScheme, EmptyTensorsOnSomeRanks) {
  for (int n : {1, 2, 5}) {
    std::vector<SparseTensor> outs;
    auto errs = run_scheme(
        GetParam(), n,
        [](int r) {
          RankData d;
          if (r % 2 == 1) {
            d.idx = {0, 99};
            d.val = {1, 2};
          }
          return d;
        },
        {}, &outs);
    const int contributors = n / 2;
    for (int r = 0; r < n; ++r) {
      ASSERT_FALSE(errs[r]);
      if (contributors == 0) {
        EXPECT_EQ(outs[r].nnz(), 0u);
      } else {
        ASSERT_EQ(outs[r].indices, (std::vector<int64_t>{0, 99}));
        EXPECT_EQ(outs[r].vals<float>()[1], 2.0f * static_cast<float>(contributors));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllSchemes, PerScheme, ::testing::ValuesIn(scheme_names()));

TEST(BadInput, IndicesValuesLengthMismatch) {
  SparseTensor t(100, DType::F32);
  t.indices = {1, 2, 3};
  t.values.resize(8);  // 2 values for 3 indices
  try {
    (void)t.view();
    FAIL() << "view() accepted 3 indices with 2 values";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Result::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("3 indices"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("but 8 are present"), std::string::npos) << e.what();
  }
}

TEST(BadInput, Int32IndicesForNAtLeast2To31) {
  const uint64_t N = (uint64_t{1} << 31) + 5;
  auto errs = loopback::run_collect(
      2,
      [&](Communicator& c) {
        auto s = make_scheme("balanced", c, TensorSpec{N, 1, DType::F32});
        std::vector<int32_t> idx{1};
        std::vector<float> val{1};
        SparseView v;
        v.dense_len = N;
        v.nnz = 1;
        v.index_type = IndexType::I32;
        v.indices = idx.data();
        v.values = val.data();
        SparseTensor out;
        s->run(v, out);
      },
      5000ms);
  expect_error(errs, 0, Result::InvalidArgument, {"rank 0", "int32 indices cannot address", std::to_string(N)});
  // Exactly 2^31 rows is still addressable with int32.
  SparseView ok;
  ok.dense_len = uint64_t{1} << 31;
  ok.index_type = IndexType::I32;
  EXPECT_NO_THROW(validate(ok, 0, "test"));
}

TEST(BadInput, RowWidthNotDividingN) {
  SparseView v;
  v.dense_len = 10;
  v.row_width = 3;
  try {
    validate(v, 4, "sparse allreduce (balanced)");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 4"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("10 is not divisible by row width 3"), std::string::npos) << e.what();
  }
}

TEST(BadInput, InputNotMatchingTheSchemeSpec) {
  auto errs = loopback::run_collect(1, [](Communicator& c) {
    auto s = make_scheme("balanced", c, TensorSpec{100, 1, DType::F32});
    SparseView v;
    v.dense_len = 101;
    SparseTensor out;
    s->run(v, out);
  });
  expect_error(errs, 0, Result::InvalidArgument, {"rank 0", "input N=101", "N=100"});
}

TEST(BadInput, UnknownSchemeName) {
  auto errs = loopback::run_collect(1, [](Communicator& c) { make_scheme("balancd", c, TensorSpec{10, 1, DType::F32}); });
  expect_error(errs, 0, Result::InvalidArgument, {"unknown scheme 'balancd'", "balanced"});
}

// ---- malformed trace files ----
class TraceFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("zen_rel_trace_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void put(const std::string& name, const std::string& bytes) {
    std::ofstream f(dir_ / name, std::ios::binary);
    f << bytes;
  }
  template <typename F>
  void expect_throw(F&& f, const std::vector<std::string>& needles) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Result::InvalidArgument) << e.what();
      for (auto& s : needles) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << "missing '" << s << "' in: " << e.what();
    }
  }
  std::string d() const { return dir_.string(); }
  std::filesystem::path dir_;
};

TEST_F(TraceFiles, NotJson) {
  put("trace.json", "{\"N\": 10,");
  expect_throw([&] { trace::read_meta(d()); }, {"not valid JSON"});
}
TEST_F(TraceFiles, MissingField) {
  put("trace.json", R"({"N": 10, "ranks": 1, "dtype": "f32"})");
  expect_throw([&] { trace::read_meta(d()); }, {"iterations"});
}
TEST_F(TraceFiles, BadDtype) {
  put("trace.json", R"({"N": 10, "ranks": 1, "iterations": 1, "dtype": "f8"})");
  expect_throw([&] { trace::read_meta(d()); }, {"f8"});
}
TEST_F(TraceFiles, NegativeN) {
  put("trace.json", R"({"N": -4, "ranks": 1, "iterations": 1, "dtype": "f32"})");
  expect_throw([&] { trace::read_meta(d()); }, {"-4"});
}
TEST_F(TraceFiles, IndexFileNotWholeEntries) {
  put("trace.json", R"({"N": 10, "ranks": 1, "iterations": 1, "dtype": "f32"})");
  put("r0_t0.idx", std::string(12, '\0'));
  put("r0_t0.val", std::string(8, '\0'));
  auto m = trace::read_meta(d());
  expect_throw([&] { trace::read_rank_iter(d(), m, 0, 0); }, {"12"});
}
TEST_F(TraceFiles, IndexOutOfRange) {
  put("trace.json", R"({"N": 10, "ranks": 1, "iterations": 1, "dtype": "f32"})");
  int64_t bad = 10;
  put("r0_t0.idx", std::string(reinterpret_cast<const char*>(&bad), 8));
  put("r0_t0.val", std::string(4, '\0'));
  auto m = trace::read_meta(d());
  expect_throw([&] { trace::read_rank_iter(d(), m, 0, 0); }, {"10"});
}
TEST_F(TraceFiles, ValueFileWrongSize) {
  put("trace.json", R"({"N": 10, "ranks": 1, "iterations": 1, "dtype": "f64"})");
  int64_t i = 3;
  put("r0_t0.idx", std::string(reinterpret_cast<const char*>(&i), 8));
  put("r0_t0.val", std::string(4, '\0'));
  auto m = trace::read_meta(d());
  expect_throw([&] { trace::read_rank_iter(d(), m, 0, 0); }, {"val"});
}
TEST_F(TraceFiles, MissingFiles) {
  put("trace.json", R"({"N": 10, "ranks": 2, "iterations": 1, "dtype": "f32"})");
  auto m = trace::read_meta(d());
  try {
    trace::read_rank_iter(d(), m, 1, 0);
    ADD_FAILURE() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("r1_t0"), std::string::npos) << e.what();
  }
}

// ---- malformed orbit configs ----
TEST(OrbitConfig, MalformedJsonAndFields) {
  struct Row {
    const char* json;
    const char* needle;
  };
  const Row rows[] = {
      {"{\"walker\": ", "does not parse"},
      {"[1, 2]", "must be an object"},
      {R"({"walkr": {}})", "walkr"},
      {R"({"walker": {"inclination_deg": 53, "total": 10, "planes": 3, "altitude_km": 550}})", "10"},
      {R"({"propagator": "warp"})", "warp"},
  };
  for (const auto& r : rows) {
    try {
      (void)orbit::Scenario::from_json_text(r.json);
      ADD_FAILURE() << "accepted: " << r.json;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(r.needle), std::string::npos) << r.json << " -> " << e.what();
    }
  }
}
