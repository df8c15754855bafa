// Scheme "auto" on the loopback backend: results exact and the choice identical on every rank at
// every call (n = 1..8, with rank-dependent delays that make local timings disagree); near-zero
// overlap at tiny density does not pick balanced when the model prefers allgather / sparcml; high
// density falls back to dense; the Brown-corpus embedding trace picks what Zen's criterion says.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <mutex>
#include <thread>
#include <unistd.h>

#include "../schemes/cases.hpp"
#include "../test_inputs.hpp"
#include "zen/comm/loopback.hpp"
#include "zen/model/cost_model.hpp"
#include "zen/trace/generators.hpp"
#include "zen/detail/thread_pool.hpp"
#include "zen/trace/trace.hpp"

using namespace zen;
namespace fs = std::filesystem;

namespace {

uint64_t hash_str(const std::string& s) { return test::fnv(s.data(), s.size()); }

/// The scheme auto runs at the first call on these inputs (model only: explore_within = 1).
struct Choice {
  std::string scheme, decision;
};
/// Every rank's scheme and decision after auto's first call on these inputs (with `opt` as given).
std::vector<Choice> first_calls(const test::Case& c, int n, const SchemeOptions& opt, bool sparse_out = true) {
  std::vector<Choice> got(static_cast<size_t>(n));
  loopback::run(n, [&](Communicator& comm) {
    test::Input in;
    test::make_input(c, comm.rank(), in);
    auto s = make_scheme("auto", comm, c.spec(), opt);
    SparseTensor out;
    std::vector<uint8_t> dense(c.N() * dtype_size(c.dtype));
    if (sparse_out) s->run(in.view, out);
    else s->run_dense(in.view, dense.data());
    got[static_cast<size_t>(comm.rank())] = Choice{s->report().scheme, s->report().decision};
  });
  return got;
}

Choice model_choice(const test::Case& c, int n, SchemeOptions opt, bool sparse_out = true) {
  opt.autotune.explore_within = 1.0;
  if (opt.autotune.cores == 0) opt.autotune.cores = -1;  // as model_argmin: no machine's cores shared
  const std::vector<Choice> got = first_calls(c, n, opt, sparse_out);
  for (const auto& g : got) EXPECT_EQ(g.scheme, got[0].scheme) << "ranks disagree";
  return got[0];
}

/// The cheapest candidate of the model on the exact counts (what auto must pick without measuring).
std::string model_argmin(const test::Case& c, int n, const SchemeOptions& opt, bool sparse_out = true) {
  const model::Problem p = model::Problem::of(c.spec(), n, opt, sparse_out);
  const model::Counts k = model::count_exact(p, c.idx);
  const model::Link link = model::Link::of(opt.autotune);
  std::string best;
  double bt = 0;
  for (const char* s : {"balanced", "allgather", "sparcml", "sparse_ps", "omnireduce", "dense_native"}) {
    const double t = model::predict(s, p, k, link).seconds;
    if (best.empty() || t < bt) best = s, bt = t;
  }
  return best;
}

/// A case of n ranks with no rows yet.
test::Case blank_case(const char* name, int n, uint64_t rows, uint32_t D) {
  test::Case c;
  c.name = name;
  c.rows = rows;
  c.D = D;
  c.idx.resize(static_cast<size_t>(n));
  c.val.resize(static_cast<size_t>(n));
  return c;
}

/// Every rank the same 512 rows (D = 8): balanced moves half allgather's bytes.
test::Case same_rows_case(int n, uint64_t seed) {
  test::Case c = blank_case("same rows", n, uint64_t{1} << 16, 8);
  test::Rng g(seed);
  for (int r = 0; r < n; ++r)
    for (int64_t i = 0; i < 512; ++i) test::add_row(c, r, i * 97 + 5, g);
  return c;
}

/// One call of a plan as a rank saw it.
struct Call {
  std::string scheme, decision;
  std::vector<std::string> phases;
};

/// Every rank's calls of one auto plan (a job) on case c, each result checked exact.
std::vector<std::vector<Call>> job(const test::Case& c, int n, const SchemeOptions& opt, int calls) {
  const test::Reference ref = test::reference(c);
  std::vector<std::vector<Call>> got(static_cast<size_t>(n));
  loopback::run(n, [&](Communicator& comm) {
    test::Input in;
    test::make_input(c, comm.rank(), in);
    auto s = make_scheme("auto", comm, c.spec(), opt);
    for (int call = 0; call < calls; ++call) {
      SparseTensor out;
      s->run(in.view, out);
      EXPECT_EQ(out.indices, ref.rows) << "call " << call;
      EXPECT_TRUE(out.values == ref.vals) << "call " << call;
      Call k{s->report().scheme, s->report().decision, {}};
      for (const auto& ph : s->report().phases) k.phases.push_back(ph.name);
      got[static_cast<size_t>(comm.rank())].push_back(std::move(k));
    }
  });
  for (int r = 1; r < n; ++r)
    for (int call = 0; call < calls; ++call) {
      EXPECT_EQ(got[static_cast<size_t>(r)][static_cast<size_t>(call)].scheme, got[0][static_cast<size_t>(call)].scheme)
          << "rank " << r << " call " << call;
      EXPECT_EQ(got[static_cast<size_t>(r)][static_cast<size_t>(call)].decision, got[0][static_cast<size_t>(call)].decision)
          << "rank " << r << " call " << call;
    }
  return got;
}

bool has_phase(const Call& k, const char* name) { return std::find(k.phases.begin(), k.phases.end(), name) != k.phases.end(); }

test::Case disjoint_case(int n, uint64_t R, size_t k) {
  test::Case c;
  c.name = "disjoint";
  c.rows = R;
  c.idx.resize(static_cast<size_t>(n));
  c.val.resize(static_cast<size_t>(n));
  test::Rng g(7);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < k; ++i) test::add_row(c, r, static_cast<int64_t>((static_cast<uint64_t>(r) * k + i) * (R / (n * k))), g);
  return c;
}

// Ranks in one process (loopback threads) run on one machine: auto finds that they share its cores
// (same kernel boot id, the union of their affinity masks) when they outnumber them, and its
// decision names the ranks per core; a set number of cores (1) always shares, cores < 0 never.
TEST(Auto, RanksOnOneMachineShareItsCores) {
  const int n = 4;
  const test::Case c = test::make_case("half", n, 0);
  for (int cores : {1, -1, 0}) {
    SchemeOptions opt = c.opt;
    opt.autotune.cores = cores;
    opt.autotune.explore_within = 1.0;
    std::vector<std::string> why;
    for (const Choice& ch : first_calls(c, n, opt)) why.push_back(ch.decision);
    for (const auto& w : why) EXPECT_EQ(w, why[0]) << "ranks disagree";
    const bool shared = cores == 1 || (cores == 0 && detail::affinity_cores() < n);
    const std::string want = cores == 1 ? "shared cores: 4 ranks per core" : "shared cores: ";
    EXPECT_EQ(why[0].find(want) != std::string::npos, shared) << "cores " << cores << ": " << why[0];
  }
}

// hierarchical_sparse is a default candidate only when the ranks form several nodes of several ranks
// (node_size 2 of 4 ranks), not with one node (4 of 4) or one rank per node (1).
TEST(Auto, NodesMakeHierarchicalSparseACandidate) {
  for (int L : {2, 4, 1}) {
    test::Case c = test::make_case("half", 4, 0);
    SchemeOptions opt = c.opt;
    opt.node_size = L;
    const Choice got = model_choice(c, 4, opt);
    EXPECT_EQ(got.decision.find("hierarchical_sparse") != std::string::npos, L == 2) << "L=" << L << ": " << got.decision;
  }
}

TEST(Auto, NearZeroOverlapAtTinyDensityIsNotBalanced) {
  for (int n : {5, 8}) {
    const test::Case c = disjoint_case(n, uint64_t{1} << 20, 64);  // d = 6e-5, gamma = n
    const SchemeOptions opt;
    const std::string want = model_argmin(c, n, opt);
    EXPECT_TRUE(want == "allgather" || want == "sparcml") << "model argmin " << want;
    const Choice ch = model_choice(c, n, opt);
    EXPECT_EQ(ch.scheme, want) << ch.decision;
    EXPECT_NE(ch.scheme, "balanced") << ch.decision;
    EXPECT_NE(ch.decision.find("lowest predicted time"), std::string::npos) << ch.decision;
  }
}

// n = 2: sparcml moves allgather's bytes and touches more rows (model::dominated), so auto, with its
// default exploration limits, does not measure it: the first call decides (no trial calls).
TEST(Auto, DominatedCandidatesAreNotMeasured) {
  test::Case c;
  c.name = "half-shared";
  c.rows = uint64_t{1} << 18;
  c.idx.resize(2);
  c.val.resize(2);
  test::Rng g(11);
  for (int r = 0; r < 2; ++r)
    for (uint64_t i = 0; i < 2600; ++i)  // rows 0..1299 shared, the rest private
      test::add_row(c, r, static_cast<int64_t>(i < 1300 ? i * 97 : (static_cast<uint64_t>(r) + 2) * 60000 + i * 7), g);
  const SchemeOptions opt;  // default limits: explore_within 1.5, budget 1 call
  std::vector<std::string> decision;
  for (const Choice& ch : first_calls(c, 2, opt)) decision.push_back(ch.decision);
  EXPECT_EQ(decision[0], decision[1]);
  EXPECT_EQ(decision[0].rfind("auto chose allgather (first call): lowest predicted time (", 0), 0u) << decision[0];
  EXPECT_NE(decision[0].find("dominated by it"), std::string::npos) << decision[0];
  EXPECT_NE(decision[0].find("sparcml"), std::string::npos) << decision[0];  // it was a candidate
}

// Measuring a candidate auto has not run costs its first call (cold_calls x its CPU time) besides
// the trials: two close candidates (CPU terms of 1 us per row make them 1.0-1.5x apart) are not
// measured at the first call, where the budget is 1 call; the budget grows by explore_share (0.1)
// calls per call, and from the call where it covers them (the decision names it) auto measures them.
// With cold_calls 0 the first call measures them (the property is the first-call term). Every rank
// decides alike and every result is exact.
TEST(Auto, FirstCallsOfUnrunCandidatesWaitForTheBudget) {
  for (double cold : {8.0, 0.0}) {
    test::Case c = test::make_case("half", 2, 5);
    SchemeOptions opt;
    opt.autotune.candidates = {"balanced", "sparse_ps"};
    opt.autotune.cpu = {{"balanced", 0, 0, 1e-6}, {"sparse_ps", 0, 0, 1e-6}};
    opt.autotune.cold_calls = cold;
    opt.autotune.sample_rows = 1 << 20;  // exact statistics: neither candidate dominates the other
    const int calls = 140;
    std::vector<std::string> decision;
    const auto got = job(c, 2, opt, calls);
    for (const Call& k : got[0]) decision.push_back(k.decision);
    const std::string& first = decision[0];
    if (cold == 0) {
      EXPECT_EQ(first.rfind("auto exploring 2 candidates (first call)", 0), 0u) << first;
      continue;
    }
    EXPECT_EQ(first.rfind("auto chose ", 0), 0u) << first;
    EXPECT_NE(first.find("(first call): lowest predicted time (1 within 1.5x not measured yet"), std::string::npos) << first;
    const size_t at = first.find("; measured after ");
    ASSERT_NE(at, std::string::npos) << first;
    const int after = std::atoi(first.c_str() + at + std::strlen("; measured after "));
    // 1 + 0.1 x calls >= 8 first-call CPU times + 3 trials x the difference: about 70 calls
    EXPECT_GE(after, 60) << first;
    ASSERT_LT(after, calls - 1) << first;
    for (int call = 1; call < after; ++call) EXPECT_EQ(decision[static_cast<size_t>(call)], first) << "call " << call;
    const std::string& later = decision[static_cast<size_t>(after)];
    EXPECT_EQ(later.rfind("auto exploring 2 candidates (deferred measurement (" + std::to_string(after) + " calls))", 0), 0u)
        << later;
    EXPECT_EQ(decision.back().rfind("auto chose ", 0), 0u) << decision.back();
    EXPECT_NE(decision.back().find("fastest measured of"), std::string::npos) << decision.back();
  }
}

TEST(Auto, HighDensityFallsBackToDense) {
  for (int n : {2, 4, 7})
    for (bool sparse_out : {true, false}) {
      test::Case c;
      c.name = "dense60";
      c.rows = 20011;
      c.idx.resize(static_cast<size_t>(n));
      c.val.resize(static_cast<size_t>(n));
      test::Rng g(static_cast<uint64_t>(n));
      for (int r = 0; r < n; ++r)
        for (int64_t row : test::sample_rows(c.rows, 0.6, g)) test::add_row(c, r, row, g);
      SchemeOptions opt;  // measuring allowed: the byte rule comes first
      // COO pushes: a bitmap push at 60 % density makes balanced / sparse_ps cheaper than dense
      // (then no fallback is due); the rule under test needs every sparse candidate above dense.
      opt.push = IndexEncoding::Coo;
      std::vector<Choice> got(static_cast<size_t>(n));
      const auto ref = test::reference(c);
      loopback::run(n, [&](Communicator& comm) {
        test::Input in;
        test::make_input(c, comm.rank(), in);
        auto s = make_scheme("auto", comm, c.spec(), opt);
        if (sparse_out) {
          SparseTensor out;
          s->run(in.view, out);
          EXPECT_EQ(out.indices, ref.rows);
          EXPECT_TRUE(out.values == ref.vals);
        } else {
          std::vector<uint8_t> dense(c.N() * dtype_size(c.dtype));
          s->run_dense(in.view, dense.data());
          EXPECT_TRUE(dense == ref.dense);
        }
        got[static_cast<size_t>(comm.rank())] = Choice{s->report().scheme, s->report().decision};
      });
      for (const auto& ch : got) {
        EXPECT_EQ(ch.scheme, "dense_native") << "n=" << n << ": " << ch.decision;
        EXPECT_NE(ch.decision.find("dense fallback"), std::string::npos) << ch.decision;
      }
    }
}

// Every rank runs the same scheme at every call, whatever its own timings say (rank-dependent
// sleeps inside the exploration), and every result is exact; re-evaluation (every 4 calls) and
// drift (inputs alternate between two sizes) re-run the statistics and the exploration.
TEST(Auto, RanksNeverDisagreeAndResultsStayExact) {
  for (int n = 1; n <= 8; ++n) {
    std::vector<test::Case> cases{test::make_case("sparse1", n, 1), test::make_case("skew", n, 2), test::make_case("half", n, 3),
                                  test::make_case("dups", n, 0)};
    std::vector<test::Reference> refs;
    for (const auto& c : cases) refs.push_back(test::reference(c));
    SchemeOptions opt;
    opt.autotune.reevaluate_every = 4;
    opt.autotune.drift = 0.1;
    opt.autotune.explore_within = 1e9;  // measure every candidate
    opt.autotune.explore_budget = 1e9;
    opt.autotune.max_explore = 6;
    opt.autotune.trials = 2;
    std::mutex mu;
    std::vector<std::vector<std::string>> ran(static_cast<size_t>(n));
    // One auto object per case, 14 calls, some of them with an empty input (drift both ways).
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const test::Case& c = cases[ci];
      for (auto& v : ran) v.clear();
      loopback::run(n, [&](Communicator& comm) {
        const int r = comm.rank();
        test::Input in;
        test::make_input(c, r, in);
        test::Input empty;
        test::Case e = c;
        for (auto& v : e.idx) v.clear();
        for (auto& v : e.val) v.clear();
        test::make_input(e, r, empty);
        auto s = make_scheme("auto", comm, c.spec(), opt);
        for (int call = 0; call < 14; ++call) {
          const bool use_empty = call % 5 == 4;  // an empty call now and then: drift both ways
          if (r % 3 == 1) std::this_thread::sleep_for(std::chrono::microseconds(200 * (call % 3)));
          SparseTensor out;
          s->run(use_empty ? empty.view : in.view, out);
          if (!use_empty) {
            EXPECT_EQ(out.indices, refs[ci].rows) << c.name << " n=" << n << " call " << call;
            EXPECT_TRUE(out.values == refs[ci].vals) << c.name << " n=" << n << " call " << call;
          } else {
            EXPECT_EQ(out.nnz(), 0u);
          }
          std::lock_guard<std::mutex> lk(mu);
          ran[static_cast<size_t>(r)].push_back(s->report().scheme);
        }
        // Every rank's sequence of schemes is the same: compare hashes of the sequences.
        uint64_t h = 0;
        for (const auto& x : ran[static_cast<size_t>(r)]) h = h * 1000003 + hash_str(x);
        const auto all = comm.allgather_value(h);
        for (size_t p = 0; p < all.size(); ++p) EXPECT_EQ(all[p], all[0]) << c.name << " n=" << n << ": rank " << p << " ran other schemes";
      });
      for (const auto& x : ran[0]) EXPECT_TRUE(model::covers(x)) << x;
    }
  }
}

TEST(Auto, UnknownCandidateIsAClearError) {
  SchemeOptions opt;
  opt.autotune.candidates = {"balanced", "nccl_magic"};
  loopback::run(2, [&](Communicator& comm) {
    try {
      make_scheme("auto", comm, TensorSpec{100, 1, DType::F32}, opt);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("unknown candidate scheme 'nccl_magic'"), std::string::npos) << e.what();
    }
  });
}

// The Brown-corpus embedding gradient (zen_trace corpus: B = 256 sentences per rank, D = 64,
// row-level). Zen's criterion (BP beats hierarchical centralization iff sum_i gamma_{2^(i-1)} >
// (n-1)/n (1 + gamma_n)) is close at n = 4 on this trace and clear at n = 8; the model-only choice
// must be the model's argmin and, at n = 8, balanced.
TEST(Auto, BrownCorpusTrace) {
  const char* env = std::getenv("ZEN_BROWN_TEXT");
  const std::string text = env ? env : std::string(ZEN_SOURCE_DIR) + "/data/brown/brown.txt";
  if (!fs::exists(text)) ZEN_SKIP_WITHOUT_INPUT("no Brown corpus at " << text << " (run scripts/fetch_corpus.sh)");
  const trace::Corpus corpus = trace::load_corpus(text);
  const fs::path dir = fs::temp_directory_path() / ("zen_auto_brown_" + std::to_string(::getpid()));
  trace::CorpusConfig cc;
  cc.ranks = 8;
  cc.batch = 256;
  cc.dim = 64;
  cc.iterations = 1;
  cc.row_level = true;
  const trace::TraceMeta meta = trace::generate_corpus(corpus, cc, dir.string(), "brown");
  for (int n : {4, 8}) {
    test::Case c;
    c.name = "brown";
    c.rows = static_cast<uint64_t>(meta.items());
    c.D = 64;
    c.idx.resize(static_cast<size_t>(n));
    c.val.resize(static_cast<size_t>(n));
    test::Rng g(1);
    for (int r = 0; r < n; ++r)
      for (int64_t row : trace::read_rank_indices(dir.string(), meta, r, 0)) test::add_row(c, r, row, g);
    const SchemeOptions opt;
    const std::string want = model_argmin(c, n, opt);
    const Choice ch = model_choice(c, n, opt);
    EXPECT_EQ(ch.scheme, want) << "n=" << n << ": " << ch.decision;
    if (n == 8) {
      EXPECT_EQ(ch.scheme, "balanced") << ch.decision;
    }
    std::printf("Brown n=%d: auto (model only) -> %s\n  %s\n", n, ch.scheme.c_str(), ch.decision.c_str());
  }
  fs::remove_all(dir);
}

}  // namespace

// The link check: with a declared link far faster than loopback (10^15 B/s, latency 1 ns a round, no
// CPU terms) the model picks the scheme of fewest rounds (allgather); its 2nd and 3rd calls take far
// more than predicted, so auto charges the excess to the link and plans again on the same
// statistics: with the learned (slow) link bytes decide, so the scheme of fewest bytes runs from the
// 4th call on. Every rank learns the same rate and makes the same choice; results stay exact. With
// learn_link <= 1, or with every rank on one node (no network to learn), the model's choice stays.
TEST(Auto, LearnsASlowerLinkFromItsCalls) {
  const int n = 4;
  const test::Case c = same_rows_case(n, 3);
  SchemeOptions opt = c.opt;
  opt.autotune.explore_within = 1.0;  // model only: the choices follow the link
  opt.autotune.bytes_per_s = 1e15;
  opt.autotune.alpha_s = 1e-9;
  opt.autotune.message_s = 0;
  opt.autotune.cpu.clear();
  opt.autotune.cores = -1;
  opt.node_size = 1;  // one rank per node: a network between them (loopback is one node)
  const std::string fast = model_argmin(c, n, opt);
  SchemeOptions slow_opt = opt;
  slow_opt.autotune.bytes_per_s = 1.0;  // bytes alone decide
  const std::string slow = model_argmin(c, n, slow_opt);
  ASSERT_NE(fast, slow) << "the case must separate the two links";
  for (double learn : {2.0, 0.0, -1.0}) {  // -1: learn_link 2 on one node (no network)
    opt.autotune.learn_link = learn < 0 ? 2.0 : learn;
    opt.node_size = learn < 0 ? n : 1;
    std::vector<std::string> ran, why;
    const auto got = job(c, n, opt, 6);  // every rank the same decisions, results exact
    for (const Call& k : got[0]) {
      ran.push_back(k.scheme);
      why.push_back(k.decision);
    }
    for (int call = 0; call < 6; ++call) {
      // The check follows the 3rd call (its report names the new choice); the 4th runs it.
      const bool learned = learn > 1 && call >= 2, runs = learn > 1 && call >= 3;
      const std::string& w = why[static_cast<size_t>(call)];
      EXPECT_EQ(ran[static_cast<size_t>(call)], runs ? slow : fast) << "learn " << learn << " call " << call << ": " << w;
      EXPECT_EQ(w.find("link check: " + fast) != std::string::npos, learned) << w;
      EXPECT_EQ(w.find("link learned") != std::string::npos, learned) << w;
      if (learned) {
        EXPECT_EQ(w.find("auto chose " + slow), 0u) << w;
      }
    }
  }
}

// The link check after an exploration: with a declared link far faster than loopback, auto measures
// both candidates (explore_within and the budget wide open), learns from the chosen one's warm time
// that the link is slower, and plans again. The new plan puts the same two within explore_within:
// they were measured warm a moment ago, so their times decide at once, with no second exploration
// (every call after the first exploration runs the choice). Same decisions on every rank, exact.
TEST(Auto, ReusesItsMeasuredTimesAfterLearningTheLink) {
  const int n = 4;
  const test::Case c = same_rows_case(n, 5);
  SchemeOptions opt = c.opt;
  opt.autotune.candidates = {"allgather", "balanced"};
  opt.autotune.explore_within = 1e9;  // both measured, before and after learning
  opt.autotune.explore_budget = 1e9;
  opt.autotune.trials = 2;  // a cold round, then a warm one
  opt.autotune.bytes_per_s = 1e15;
  opt.autotune.alpha_s = 1e-9;
  opt.autotune.message_s = 0;
  opt.autotune.cpu.clear();
  opt.autotune.cores = -1;
  opt.autotune.learn_link = 2.0;
  opt.node_size = 1;  // one rank per node: a network between them (loopback is one node)
  const int calls = 10;
  std::vector<std::string> ran, why;
  const auto got = job(c, n, opt, calls);  // every rank the same decisions, results exact
  for (const Call& k : got[0]) {
    ran.push_back(k.scheme);
    why.push_back(k.decision);
  }
  // Calls 0-3: two rounds of both candidates; the 4th call's report has the choice after learning.
  const std::string& w = why[3];
  EXPECT_NE(w.find("link check: "), std::string::npos) << w;
  EXPECT_NE(w.find("(measured)"), std::string::npos) << w;
  const size_t before = w.find("as measured before: ");
  ASSERT_NE(before, std::string::npos) << w;
  for (const char* name : {" allgather ", " balanced "}) EXPECT_NE(w.find(name, before), std::string::npos) << name << ": " << w;
  const std::string chosen = w.substr(std::strlen("auto chose "), w.find(' ', std::strlen("auto chose ")) - std::strlen("auto chose "));
  ASSERT_TRUE(chosen == "allgather" || chosen == "balanced") << w;
  for (int call = 4; call < calls; ++call) {
    EXPECT_EQ(ran[static_cast<size_t>(call)], chosen) << "call " << call << ": " << why[static_cast<size_t>(call)];
    EXPECT_EQ(why[static_cast<size_t>(call)].find("exploring"), std::string::npos) << why[static_cast<size_t>(call)];
  }
}

// The statistics when the ranks' inputs differ in size: each rank samples at its own rate 1/2^shift
// (at most sample_rows rows), and every rank cuts every sample to the highest shift (samples nest),
// so all agree on one sample of rate 1/2^common. Rank sizes 6000, 300 and 40 distinct rows (input
// order shuffled, not coalesced): with sample_rows 256 the shifts are 5, 1 and 0. The union auto
// reports is estimate_from_sample's on the rows in_sample at shift 5, with each rank's own k
// estimate (its sample x 2^its shift, or exact when it kept every row); on every rank. Both parts
// of the exchange: the allgather of fixed blocks (head and up to 1024 sample rows), and with
// sample_rows 4096 (rank 0 with 60000 rows: shift 4, about 3750 rows) the allgatherv of the rest.
TEST(Auto, StatisticsAgreeOnOneSampleAcrossRankSizes) {
  const int n = 3;
  for (const uint64_t cap : {uint64_t{256}, uint64_t{4096}}) {
    const std::vector<int64_t> sizes = {cap == 256 ? 6000 : 60000, 300, 40};
    test::Case c = blank_case("uneven", n, uint64_t{1} << 20, 2);
    test::Rng g(11);
    for (int r = 0; r < n; ++r) {
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < sizes[static_cast<size_t>(r)]; ++i) rows.push_back((i * 7919 + 13 * r) % static_cast<int64_t>(c.rows));
      std::sort(rows.begin(), rows.end());
      rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
      for (size_t i = rows.size(); i > 1; --i) std::swap(rows[i - 1], rows[g.next() % i]);  // not increasing
      for (int64_t x : rows) test::add_row(c, r, x, g);
    }
    SchemeOptions opt = c.opt;
    opt.autotune.sample_rows = cap;
    opt.autotune.cores = -1;
    // The expected statistics: each rank's shift from its nnz, its k estimate, the common cut.
    const model::SampleHash hash(opt.seed);
    std::vector<unsigned> shift(n, 0);
    std::vector<uint64_t> k(n);
    unsigned common = 0;
    for (int r = 0; r < n; ++r) {
      const auto ur = static_cast<size_t>(r);
      const uint64_t nnz = c.idx[ur].size();
      while ((nnz >> shift[ur]) > cap) ++shift[ur];
      uint64_t kept = 0;
      for (int64_t x : c.idx[ur]) kept += model::in_sample(hash(static_cast<uint64_t>(x)), shift[ur]);
      while (kept > cap) {  // as auto: a sparser sample when the first one is too large
        ++shift[ur];
        kept = 0;
        for (int64_t x : c.idx[ur]) kept += model::in_sample(hash(static_cast<uint64_t>(x)), shift[ur]);
      }
      k[ur] = shift[ur] == 0 ? kept : std::min<uint64_t>(nnz, kept << shift[ur]);
      common = std::max(common, shift[ur]);
    }
    ASSERT_GT(common, shift[1]) << "the case must give the ranks different shifts";
    std::vector<std::vector<int64_t>> sample(n);
    for (int r = 0; r < n; ++r)
      for (int64_t x : c.idx[static_cast<size_t>(r)])
        if (model::in_sample(hash(static_cast<uint64_t>(x)), common)) sample[static_cast<size_t>(r)].push_back(x);
    for (auto& s : sample) std::sort(s.begin(), s.end());
    const model::Problem p = model::Problem::of(c.spec(), n, opt, true);
    const uint64_t K = model::estimate_from_sample(p, sample, k, uint64_t{1} << common).K;
    const std::string want = "k/rank=" + std::to_string(*std::min_element(k.begin(), k.end())) + ".." +
                             std::to_string(*std::max_element(k.begin(), k.end())) + " union~" + std::to_string(K) +
                             " (sample 1/" + std::to_string(uint64_t{1} << common) + ")";
    const std::vector<Choice> got = first_calls(c, n, opt);
    for (int r = 0; r < n; ++r) EXPECT_NE(got[static_cast<size_t>(r)].decision.find(want), std::string::npos)
        << "sample_rows " << cap << " rank " << r << ": want '" << want << "' in " << got[static_cast<size_t>(r)].decision;
  }
}

namespace {


std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream f(p);
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  return lines;
}

void write_lines(const fs::path& p, const std::vector<std::string>& lines) {
  std::ofstream f(p, std::ios::trunc);
  for (const auto& l : lines) f << l << "\n";
}

/// A cache line with field `field` (0-based: magic format key scheme seconds rows) set to `value`,
/// its check recomputed (FNV-1a of the line before it, 16 hex digits): a valid entry.
std::string with_field(const std::string& line, size_t field, const std::string& value) {
  std::vector<std::string> f;
  std::istringstream in(line);
  for (std::string w; in >> w;) f.push_back(w);
  EXPECT_EQ(f.size(), 7u) << line;
  f[field] = value;
  std::string body = f[0];
  for (size_t i = 1; i + 1 < f.size(); ++i) body += " " + f[i];
  char check[17];
  std::snprintf(check, sizeof check, "%016llx", static_cast<unsigned long long>(test::fnv(body.data(), body.size(), 14695981039346656037ULL)));
  return body + " " + check;
}

/// A fresh path for a cache file (removed at the end of the scope).
struct TempCache {
  fs::path path;
  explicit TempCache(const char* name)
      : path(fs::temp_directory_path() / (std::string("zen-auto-cache-") + name + "-" + std::to_string(getpid()))) {
    fs::remove(path);
  }
  ~TempCache() { fs::remove(path); }
};

SchemeOptions cache_options(const test::Case& c, const fs::path& path) {
  SchemeOptions opt = c.opt;
  opt.autotune.candidates = {"allgather", "balanced"};  // both report an agreed size
  opt.autotune.explore_within = 1.0;                    // the model decides the first job
  opt.autotune.cores = -1;
  opt.autotune.cache = path.string();
  return opt;
}

/// A first job with a cache: n ranks of case c decide, time their choice and remember it (3 calls).
struct RememberedJob {
  TempCache tmp;
  SchemeOptions opt;
  std::string chose;               // the first job's choice
  std::vector<std::string> lines;  // the cache file after it
  RememberedJob(const test::Case& c, int n, const char* name) : tmp(name), opt(cache_options(c, tmp.path)) {
    chose = job(c, n, opt, 3)[0][0].scheme;
    lines = read_lines(tmp.path);
  }
};

}  // namespace

// Remembered decisions: the first job decides (statistics in its first call), times its choice
// (the slowest rank's fastest of calls 2-3) and appends it, one line per rank, in its 3rd call. A
// second job with the same situation takes that choice in its first call from one allgather
// ("auto_cache", no "auto_stats"), on every rank, and writes nothing new. n = 1, 3 (not a power of two) and 4; results exact on every call.
TEST(Auto, RemembersItsChoiceForTheNextJob) {
  for (int n : {1, 3, 4}) {
    const test::Case c = same_rows_case(n, 21);
    TempCache tmp("next-job");
    const SchemeOptions opt = cache_options(c, tmp.path);
    const auto first = job(c, n, opt, 5);
    const std::string chose = first[0][0].scheme;
    EXPECT_TRUE(has_phase(first[0][0], "auto_stats")) << first[0][0].decision;
    EXPECT_NE(first[0][0].decision.find("(first call, none remembered)"), std::string::npos) << first[0][0].decision;
    EXPECT_NE(first[0][2].decision.find("; remembered in " + tmp.path.string()), std::string::npos) << first[0][2].decision;
    ASSERT_EQ(read_lines(tmp.path).size(), static_cast<size_t>(n)) << "one line per rank";
    const auto second = job(c, n, opt, 3);
    const Call& k = second[0][0];
    EXPECT_EQ(k.scheme, chose);
    EXPECT_TRUE(has_phase(k, "auto_cache")) << k.decision;
    EXPECT_FALSE(has_phase(k, "auto_stats")) << "n=" << n << ": a remembered choice needs no statistics: " << k.decision;
    EXPECT_EQ(k.decision.find("auto chose " + chose + " (first call): remembered in " + tmp.path.string()), 0u) << k.decision;
    for (const auto& call : second[0]) {  // its check (after the 9th call) may find this machine busier: no later call
      EXPECT_EQ(call.scheme, chose) << call.decision;
      EXPECT_FALSE(has_phase(call, "auto_stats")) << call.decision;
    }
    EXPECT_EQ(read_lines(tmp.path).size(), static_cast<size_t>(n)) << "n=" << n << ": the same choice is not written again";
  }
}

// A remembered choice counts only when every rank remembers the same scheme: a line whose check
// fails (edited without it) is skipped, and a valid line naming another scheme disagrees; either way
// every rank makes the full decision in its first call, alike. Lines that are not entries are skipped.
TEST(Auto, RemembersOnlyWhatEveryRankHolds) {
  const int n = 3;
  const test::Case c = same_rows_case(n, 22);
  const RememberedJob first(c, n, "every-rank");
  const auto& [tmp, opt, chose, lines] = first;
  ASSERT_EQ(lines.size(), static_cast<size_t>(n));
  const std::string other = chose == "allgather" ? "balanced" : "allgather";
  for (int variant = 0; variant < 3; ++variant) {
    std::vector<std::string> edited = lines;
    if (variant == 0) {  // a torn line and noise: no rank loses its entry
      edited.insert(edited.begin(), "zen-auto-cache 1 0123");
      edited.emplace_back("# a comment");
    } else if (variant == 1) {  // the scheme edited, the check not: that rank has no entry
      const size_t at = edited[1].find(" " + chose + " ");
      ASSERT_NE(at, std::string::npos) << edited[1];
      edited[1].replace(at + 1, chose.size(), other);
    } else {  // a valid entry naming another scheme
      edited[1] = with_field(edited[1], 3, other);
    }
    write_lines(tmp.path, edited);
    const Call k = job(c, n, opt, 1)[0][0];
    if (variant == 0) {
      EXPECT_TRUE(has_phase(k, "auto_cache") && !has_phase(k, "auto_stats")) << k.decision;
      EXPECT_EQ(k.decision.find("auto chose " + chose + " (first call): remembered in "), 0u) << k.decision;
    } else {
      EXPECT_TRUE(has_phase(k, "auto_stats")) << "variant " << variant << ": " << k.decision;
      const std::string want = variant == 1 ? "(first call, 2 of 3 ranks remember a choice, not the same)"
                                            : "(first call, 3 of 3 ranks remember a choice, not the same)";
      EXPECT_NE(k.decision.find(want), std::string::npos) << "variant " << variant << ": " << k.decision;
    }
  }
}

// The ranks' entries may come from different decisions (a rank whose input size class changed
// between two decisions kept the older one; the Brown trace did that in bench_first_calls.sh): the
// same scheme with other times and sizes is still every rank's choice, checked against the range of
// the remembered sizes and the slowest remembered time.
TEST(Auto, RemembersTheSameSchemeFromDifferentDecisions) {
  const int n = 3;
  const test::Case c = same_rows_case(n, 24);
  RememberedJob first(c, n, "different-decisions");
  auto& [tmp, opt, chose, lines] = first;
  ASSERT_EQ(lines.size(), static_cast<size_t>(n));
  std::vector<std::string> f;
  std::istringstream in(lines[1]);
  for (std::string w; in >> w;) f.push_back(w);
  ASSERT_EQ(f.size(), 7u);
  const uint64_t rows = std::stoull(f[5]);
  ASSERT_GT(rows, 0u);
  // One rank's entry from another decision: twice the size, 100x the time.
  lines[1] = with_field(with_field(lines[1], 5, std::to_string(2 * rows)), 4, std::to_string(100 * std::stod(f[4])));
  write_lines(tmp.path, lines);
  const auto calls = job(c, n, opt, 5);
  const std::string range = "with agreed size " + std::to_string(rows) + ".." + std::to_string(2 * rows) + ";";
  EXPECT_EQ(calls[0][0].decision.find("auto chose " + chose + " (first call): remembered in "), 0u) << calls[0][0].decision;
  EXPECT_NE(calls[0][0].decision.find(range), std::string::npos) << calls[0][0].decision;
  for (size_t call = 0; call < calls[0].size(); ++call) {
    EXPECT_FALSE(has_phase(calls[0][call], "auto_stats")) << "call " << call << ": " << calls[0][call].decision;
    EXPECT_EQ(calls[0][call].scheme, chose) << "call " << call;
  }
}

// A remembered choice is checked against its calls: when the agreed size of its first call is off
// the remembered one by more than drift, or the slowest rank's fastest of calls 2-3 exceeds 1.5x the
// remembered time, the next call makes the full decision (statistics), naming why; same on every rank.
TEST(Auto, ChecksARememberedChoiceAgainstItsCalls) {
  const int n = 3;
  const test::Case c = same_rows_case(n, 23);
  for (const char* what : {"size", "time"}) {
    TempCache tmp(what);
    const SchemeOptions opt = cache_options(c, tmp.path);
    job(c, n, opt, 3);
    std::vector<std::string> lines = read_lines(tmp.path);
    ASSERT_EQ(lines.size(), static_cast<size_t>(n));
    for (auto& l : lines) {
      std::istringstream in(l);
      std::vector<std::string> f;
      for (std::string w; in >> w;) f.push_back(w);
      ASSERT_EQ(f.size(), 7u);
      if (std::string(what) == "size") l = with_field(l, 5, std::to_string(std::stoull(f[5]) * 2));
      else l = with_field(l, 4, "1e-09");
    }
    write_lines(tmp.path, lines);
    const auto calls = job(c, n, opt, 11);
    // After the 1st call / the check after the 9th (the fastest of calls 2-9: a new process's calls
    // 2-3 are still cold, a remembered time is warm).
    const size_t redo = std::string(what) == "size" ? 1 : 9;
    for (size_t call = 0; call < calls[0].size(); ++call) {
      const Call& k = calls[0][call];
      EXPECT_EQ(has_phase(k, "auto_stats"), call == redo) << what << " call " << call << ": " << k.decision;
      if (call == redo) {
        const std::string want = std::string(what) == "size" ? "(cache check: agreed size " : "(cache check: ";
        EXPECT_NE(k.decision.find(want), std::string::npos) << k.decision;
        if (std::string(what) == "time") {
          EXPECT_NE(k.decision.find(", remembered 0.001 us)"), std::string::npos) << k.decision;
        }
      }
    }
  }
}

// A cache that cannot be written does not fail the call: the decision says why the choice was not
// remembered (the path and the system's reason), and the results stay exact.
TEST(Auto, ACacheThatCannotBeWrittenIsNamedNotFatal) {
  const int n = 2;
  const test::Case c = same_rows_case(n, 24);
  const fs::path bad = fs::temp_directory_path() / ("zen-no-such-dir-" + std::to_string(getpid())) / "cache";
  const auto calls = job(c, n, cache_options(c, bad), 4);
  EXPECT_NE(calls[0][2].decision.find("; not remembered: " + bad.string() + ": No such file or directory"), std::string::npos)
      << calls[0][2].decision;
  EXPECT_FALSE(fs::exists(bad));
}

// A decision that finds what the cache already says (the same scheme, its time within 1.5x, its size
// within drift) writes no line: a job re-deciding every 4 calls (decisions in calls 1, 5, 9 and 13,
// each timed and remembered after its 3rd call) adds one line per rank, not four (more only if a
// timing moves by more than 1.5x between decisions).
TEST(Auto, WritesOnlyWhatItDidNotRememberAlready) {
  const int n = 2;
  const test::Case c = same_rows_case(n, 25);
  TempCache tmp("once");
  SchemeOptions opt = cache_options(c, tmp.path);
  opt.autotune.reevaluate_every = 4;
  const auto calls = job(c, n, opt, 16);
  int decisions = 0;
  for (const Call& k : calls[0]) decisions += has_phase(k, "auto_stats");
  ASSERT_EQ(decisions, 4);
  const size_t lines = read_lines(tmp.path).size();
  EXPECT_GE(lines, static_cast<size_t>(n));
  EXPECT_LT(lines, static_cast<size_t>(n * decisions)) << "every decision wrote its line";
}

// The plans auto makes inside its calls share its communicator, spec and seed, which its own setup
// agreed on: they skip the setup exchange (detail::AgreedSetup), so every byte of auto's first call
// is in its report's phases (the statistics and the chosen scheme's), none outside them. Also after
// a remembered choice. n = 2, 3, 5.
TEST(Auto, PlansItMakesInItsCallsExchangeNothingAtSetup) {
  for (int n : {2, 3, 5}) {
    const test::Case c = same_rows_case(n, 26);
    TempCache tmp("setup");
    const SchemeOptions opt = cache_options(c, tmp.path);
    for (int jobs = 0; jobs < 2; ++jobs) {  // the second one takes the first one's remembered choice
      loopback::run(n, [&](Communicator& comm) {
        test::Input in;
        test::make_input(c, comm.rank(), in);
        auto s = make_scheme("auto", comm, c.spec(), opt);
        for (int call = 0; call < 3; ++call) {
          SparseTensor out;
          const TrafficStats before = comm.stats();
          s->run(in.view, out);
          EXPECT_EQ((comm.stats() - before).total_sent(), s->report().sent)
              << "n=" << n << " job " << jobs << " call " << call << ": bytes outside the phases; " << s->report().decision;
        }
      });
    }
  }
}

// An exploration's choice whose measured time the link check accepts (a declared link far slower
// than loopback: every time is below its prediction, nothing is learned), without a cache: the
// choice stays, nothing is remembered, every later call runs it (the check once wrote the time to a
// cache that was not there and crashed on the cluster). Ranks agree, results exact.
TEST(Auto, ExploredChoiceTheLinkCheckAcceptsStaysWithoutACache) {
  const int n = 3;
  const test::Case c = same_rows_case(n, 27);
  SchemeOptions opt = c.opt;
  opt.autotune.candidates = {"allgather", "balanced"};
  opt.autotune.explore_within = 1e9;  // both measured
  opt.autotune.explore_budget = 1e9;
  opt.autotune.trials = 2;  // a cold round, then a warm one: the check reads the warm time
  opt.autotune.bytes_per_s = 1e3;  // predictions far above any loopback call: nothing to learn
  opt.autotune.cores = -1;
  opt.autotune.learn_link = 2.0;
  opt.node_size = 1;  // one rank per node: the link check is due
  const auto got = job(c, n, opt, 8);
  const std::string& w = got[0][4].decision;
  ASSERT_EQ(w.find("auto chose "), 0u) << w;
  EXPECT_NE(w.find("fastest measured of"), std::string::npos) << w;
  EXPECT_EQ(w.find("link learned"), std::string::npos) << w;
  EXPECT_EQ(w.find("remembered"), std::string::npos) << w;
  for (size_t call = 4; call < got[0].size(); ++call) EXPECT_EQ(got[0][call].scheme, got[0][4].scheme) << got[0][call].decision;
}
