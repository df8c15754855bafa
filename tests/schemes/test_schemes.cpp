// Every scheme of zen::scheme_names() x n = 1..8 ranks on the loopback backend: results bitwise equal
// to an independent dense reference and identical on all ranks (sparse and dense output), and the
// bytes each rank sends and receives equal the formulas of docs/algorithms.md exactly.
#include <gtest/gtest.h>

#include <ctime>
#include <mutex>
#include <tuple>

#include "cases.hpp"
#include "zen/comm/loopback.hpp"

using namespace zen;
using test::Case;

namespace {

using Param = std::tuple<std::string, int>;

std::string param_name(const ::testing::TestParamInfo<Param>& i) {
  return std::get<0>(i.param) + "_n" + std::to_string(std::get<1>(i.param));
}

class SchemeSuite : public ::testing::TestWithParam<Param> {};

TEST_P(SchemeSuite, MatchesReferenceOnEveryRank) {
  const auto& [scheme, n] = GetParam();
  std::vector<Case> cases;
  std::vector<test::Reference> refs;
  for (const auto& kind : test::case_kinds())
    for (int v = 0; v < 4; ++v) {
      cases.push_back(test::make_case(kind, n, v));
      refs.push_back(test::reference(cases.back()));
    }
  loopback::run(n, [&](Communicator& c) {
    for (size_t i = 0; i < cases.size(); ++i) test::check_case(c, scheme, cases[i], refs[i]);
  });
}

TEST_P(SchemeSuite, BytesMatchDocumentedFormula) {
  const auto& [scheme, n] = GetParam();
  std::vector<PullEncoding> pulls{PullEncoding::Auto};
  if (scheme == "sparse_ps" || scheme == "balanced")
    pulls = {PullEncoding::Auto, PullEncoding::Coo, PullEncoding::Bitmap, PullEncoding::EliasFano};
  for (const char* kind : {"empty", "single", "sparse1", "half", "full", "skew", "dups", "switch", "one_rank_all"})
    for (int v = 0; v < 2; ++v)
      for (PullEncoding pull : pulls) {
        Case cs = test::make_case(kind, n, v);
        cs.opt.pull = pull;
        cs.opt.push = pull;  // the same forced code both ways (Auto: the push rule)
        const auto ref = test::reference(cs);
        const auto want_sparse = test::expected_traffic(scheme, cs, n, true);
        const auto want_dense = test::expected_traffic(scheme, cs, n, false);
        std::mutex mu;
        loopback::run(n, [&](Communicator& c) {
          SyncReport rs, rd;
          test::check_case(c, scheme, cs, ref, &rs, &rd);
          const int r = c.rank();
          std::lock_guard<std::mutex> lk(mu);
          const std::string where = scheme + " " + cs.name + " pull " + std::to_string(static_cast<int>(pull)) +
                                    " n=" + std::to_string(n) + " rank " + std::to_string(r);
          EXPECT_EQ(rs.sent, want_sparse.sent[r]) << where << " (sparse output)";
          EXPECT_EQ(rs.recv, want_sparse.recv[r]) << where << " (sparse output)";
          EXPECT_EQ(rd.sent, want_dense.sent[r]) << where << " (dense output)";
          EXPECT_EQ(rd.recv, want_dense.recv[r]) << where << " (dense output)";
          test::expect_phases_match(want_sparse, rs, r, where + " (sparse output)");
          test::expect_phases_match(want_dense, rd, r, where + " (dense output)");
          if (n > 1 && scheme != "sparcml") {
            EXPECT_EQ(rs.encoding, want_sparse.encoding) << where;
          }
          uint64_t ps = 0, pr = 0;
          for (const auto& ph : rs.phases) {
            ps += ph.sent;
            pr += ph.recv;
          }
          EXPECT_EQ(ps, rs.sent) << where;
          EXPECT_EQ(pr, rs.recv) << where;
          EXPECT_GE(rs.push_imbalance, 1.0) << where;
          EXPECT_GE(rs.pull_imbalance, 1.0) << where;
          EXPECT_FALSE(rs.encoding.empty()) << where;
        });
      }
}

// All traffic of a call is inside its phases: the communicator's own counters agree with report().
TEST_P(SchemeSuite, ReportCoversAllTraffic) {
  const auto& [scheme, n] = GetParam();
  Case cs = test::make_case("sparse1", n, 2);
  loopback::run(n, [&](Communicator& c) {
    test::Input in;
    test::make_input(cs, c.rank(), in);
    auto s = make_scheme(scheme, c, cs.spec(), cs.opt);
    auto before = c.stats();
    SparseTensor out;
    s->run(in.view, out);
    auto d = c.stats() - before;
    EXPECT_EQ(d.total_sent(), s->report().sent) << scheme << " rank " << c.rank();
    EXPECT_EQ(d.total_recv(), s->report().recv) << scheme << " rank " << c.rank();
    if (n > 1) {
      EXPECT_FALSE(s->report().phases.empty()) << scheme;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(All, SchemeSuite,
                         ::testing::Combine(::testing::ValuesIn(zen::scheme_names()), ::testing::Range(1, 9)), param_name);

// Push imbalance reflects skew for range partitions (sparse_ps, omnireduce) when one range is hot.
TEST(SchemeReports, RangeSchemesSeeSkew) {
  const int n = 4;
  Case cs;
  cs.name = "hot-range";
  cs.rows = 4001;
  cs.idx.assign(n, {});
  cs.val.assign(n, {});
  test::Rng g(5);
  for (int r = 0; r < n; ++r)
    for (int64_t row = 0; row < 400; ++row) test::add_row(cs, r, row, g);  // all in owner 0's range
  const auto ref = test::reference(cs);
  for (const char* scheme : {"sparse_ps", "omnireduce"}) {
    std::vector<double> imb(n);
    loopback::run(n, [&](Communicator& c) {
      SyncReport rs;
      test::check_case(c, scheme, cs, ref, &rs);
      imb[c.rank()] = rs.push_imbalance;
    });
    for (double x : imb) EXPECT_DOUBLE_EQ(x, 4.0) << scheme;  // max/mean with one loaded owner of 4
  }
}

TEST(SchemeReports, SparcmlSwitchesToDense) {
  Case cs = test::make_case("full", 4, 0);
  const auto ref = test::reference(cs);
  loopback::run(4, [&](Communicator& c) {
    SyncReport rs;
    test::check_case(c, "sparcml", cs, ref, &rs);
    EXPECT_EQ(rs.encoding, "dense");
  });
  Case sp = test::make_case("sparse1", 4, 0);
  const auto ref2 = test::reference(sp);
  loopback::run(4, [&](Communicator& c) {
    SyncReport rs;
    test::check_case(c, "sparcml", sp, ref2, &rs);
    EXPECT_EQ(rs.encoding, "coo");
  });
}

// allgather's dense output split over several scatter tasks (row ranges; the suite above runs one
// task): every row of 100 % density on 3 ranks, D = 4, rows 0 and R - 1 repeated and shuffled in,
// f32 and f64, bitwise equal to the reference and the same on every rank.
TEST(SchemeReports, AllgatherDenseScatterInTasks) {
  const int n = 3;
  for (DType dt : {DType::F32, DType::F64}) {
    Case cs;
    cs.name = std::string("allgather-tasks-") + dtype_name(dt);
    cs.dtype = dt;
    cs.D = 4;
    cs.rows = 40001;
    cs.opt.threads = 3;  // entries x D = 3 x 40003 x 4 values: 3 tasks
    cs.idx.assign(n, {});
    cs.val.assign(n, {});
    test::Rng g(11);
    for (int r = 0; r < n; ++r) {
      test::add_row(cs, r, static_cast<int64_t>(cs.rows - 1), g);
      for (int64_t row = static_cast<int64_t>(cs.rows) - 1; row >= 0; --row) test::add_row(cs, r, row, g);
      test::add_row(cs, r, 0, g);
    }
    const auto ref = test::reference(cs);
    loopback::run(n, [&](Communicator& c) { test::check_case(c, "allgather", cs, ref); });
  }
}

TEST(SchemeErrors, DuplicatesRejectedWhenAsked) {
  for (const auto& scheme : zen::scheme_names()) {
    Case cs = test::make_case("dups", 2, 0);
    cs.opt.duplicates = DuplicatePolicy::Reject;
    auto errs = loopback::run_collect(2, [&](Communicator& c) {
      test::Input in;
      test::make_input(cs, c.rank(), in);
      auto s = make_scheme(scheme, c, cs.spec(), cs.opt);
      SparseTensor out;
      s->run(in.view, out);
    });
    ASSERT_TRUE(errs[0]) << scheme;
    try {
      std::rethrow_exception(errs[0]);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Result::InvalidArgument) << scheme << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("duplicate"), std::string::npos) << e.what();
    }
  }
}

TEST(SchemeErrors, UnknownSchemeNamesTheKnownOnes) {
  loopback::run(1, [](Communicator& c) {
    try {
      make_scheme("nope", c, TensorSpec{10, 1, DType::F32});
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("sparcml"), std::string::npos) << e.what();
    }
  });
}

}  // namespace

namespace {
double cpu_clock(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

// SchemeOptions::phase_cpu_time: every phase's CPU time is filled (0 when off), never above its wall
// time times the pool's threads, and all phases together account for the call's CPU time: at most
// the calling thread's CPU time around the call (one thread per rank: nothing else runs for it), and
// most of it (the work outside the phases, validating the input, is small beside hashing and decoding).
TEST(SchemeReports, PhaseCpuTimeFilledAndPlausible) {
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8}) {
    Case cs;
    cs.name = "cpu";
    cs.rows = 200003;
    cs.D = 8;
    cs.idx.assign(n, {});
    cs.val.assign(n, {});
    test::Rng g(7);
    for (int r = 0; r < n; ++r)
      for (int64_t row : test::sample_rows(cs.rows, 0.3, g)) test::add_row(cs, r, row, g);
    for (const char* scheme : {"balanced", "sparse_ps"}) {
      for (bool on : {false, true}) {
        cs.opt.threads = 1;
        cs.opt.phase_cpu_time = on;
        std::mutex m;
        loopback::run(n, [&](Communicator& c) {
          test::Input in;
          test::make_input(cs, c.rank(), in);
          auto s = make_scheme(scheme, c, cs.spec(), cs.opt);
          SparseTensor out;
          s->run(in.view, out);  // first call: buffers grow
          const double t0 = cpu_clock(CLOCK_THREAD_CPUTIME_ID);
          s->run(in.view, out);
          const double call_cpu = cpu_clock(CLOCK_THREAD_CPUTIME_ID) - t0;
          std::lock_guard<std::mutex> lk(m);
          const std::string where = std::string(scheme) + " n " + std::to_string(n) + " rank " + std::to_string(c.rank());
          double sum = 0;
          ASSERT_FALSE(s->report().phases.empty()) << where;
          for (const auto& ph : s->report().phases) {
            if (!on) {
              EXPECT_EQ(ph.cpu_seconds, 0.0) << where << " phase " << ph.name;
              continue;
            }
            EXPECT_GE(ph.cpu_seconds, 0.0) << where << " phase " << ph.name;
            EXPECT_LE(ph.cpu_seconds, ph.seconds + 1e-4) << where << " phase " << ph.name;  // one thread
            sum += ph.cpu_seconds;
          }
          if (on) {
            EXPECT_LE(sum, call_cpu + 1e-5) << where;
            EXPECT_GE(sum, 0.5 * call_cpu) << where << ": the phases miss most of the call's CPU time";
          }
        });
      }
    }
  }
}

// With a pool of two threads the workers' CPU time counts too: on one rank (nothing else of this
// process runs meanwhile) the phases hold most of the process's CPU time around the call, never more.
TEST(SchemeReports, PhaseCpuTimeCountsThePoolWorkers) {
  Case cs;
  cs.name = "cpu-pool";
  cs.rows = 1000003;
  cs.D = 8;
  cs.idx.assign(1, {});
  cs.val.assign(1, {});
  test::Rng g(11);
  for (int64_t row : test::sample_rows(cs.rows, 0.3, g)) test::add_row(cs, 0, row, g);
  cs.opt.threads = 2;
  cs.opt.phase_cpu_time = true;
  loopback::run(1, [&](Communicator& c) {
    test::Input in;
    test::make_input(cs, 0, in);
    auto s = make_scheme("balanced", c, cs.spec(), cs.opt);
    SparseTensor out;
    s->run(in.view, out);
    const double t0 = cpu_clock(CLOCK_PROCESS_CPUTIME_ID), s0 = cpu_clock(CLOCK_THREAD_CPUTIME_ID);
    s->run(in.view, out);
    const double proc = cpu_clock(CLOCK_PROCESS_CPUTIME_ID) - t0, self = cpu_clock(CLOCK_THREAD_CPUTIME_ID) - s0;
    double sum = 0;
    for (const auto& ph : s->report().phases) {
      EXPECT_LE(ph.cpu_seconds, 2 * ph.seconds + 1e-4) << ph.name;  // two threads at most
      sum += ph.cpu_seconds;
    }
    EXPECT_LE(sum, proc + 1e-5);
    EXPECT_GE(sum, 0.75 * proc) << "the phases miss most of the process's CPU time (the workers'?)";
    // Record what the workers added (the caller's own share is `self`): printed for the reader.
    std::printf("phase cpu %.3f ms, process %.3f ms, calling thread %.3f ms\n", sum * 1e3, proc * 1e3, self * 1e3);
  });
}
