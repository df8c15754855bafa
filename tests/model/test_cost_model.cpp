// The cost model's estimated mode: counts from a hash sample (what `auto` gathers) predict the
// bytes of the exact counts closely; stride 1 is exact; bad requests are clear errors.
#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>

#include "../schemes/cases.hpp"
#include "zen/model/cost_model.hpp"

using namespace zen;

namespace {

/// n ranks, R rows, k rows each: a shared pool plus private rows (gamma about 1 + (n-1) * priv).
std::vector<std::vector<int64_t>> workload(int n, uint64_t R, size_t k, double priv, uint64_t seed) {
  test::Rng g(seed);
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(n));
  const size_t shared = static_cast<size_t>(static_cast<double>(k) * (1.0 - priv));
  std::vector<int64_t> pool;
  for (size_t i = 0; i < shared; ++i) pool.push_back(static_cast<int64_t>(g.below(R / 2)));
  for (int r = 0; r < n; ++r) {
    rows[static_cast<size_t>(r)] = pool;
    while (rows[static_cast<size_t>(r)].size() < k) rows[static_cast<size_t>(r)].push_back(static_cast<int64_t>(R / 2 + g.below(R / 2)));
  }
  return rows;
}

std::vector<std::vector<int64_t>> sample_of(const std::vector<std::vector<int64_t>>& rows, uint64_t stride, uint64_t salt,
                                            std::vector<uint64_t>& k) {
  std::vector<std::vector<int64_t>> s(rows.size());
  k.assign(rows.size(), 0);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<int64_t> d = rows[r];
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    k[r] = d.size();
    for (int64_t x : d)
      if (model::sample_hash(static_cast<uint64_t>(x), salt) % stride == 0) s[r].push_back(x);
  }
  return s;
}

/// n ranks, R rows of width D, f32, sparse output, default options.
model::Problem problem(int n, uint64_t R, uint32_t D) {
  return model::Problem::of(TensorSpec{R * D, D, DType::F32}, n, SchemeOptions{}, true);
}

TEST(CostModel, SampleEstimatesTheExactBytesClosely) {
  for (int n : {3, 8})
    for (double priv : {0.1, 0.6, 1.0}) {
      const auto rows = workload(n, uint64_t{1} << 22, 60000, priv, static_cast<uint64_t>(n * 10 + priv * 10));
      SchemeOptions opt;
      opt.seed = 99;
      const model::Problem p = model::Problem::of(TensorSpec{uint64_t{1} << 22, 1, DType::F32}, n, opt, true);
      const model::Counts exact = model::count_exact(p, rows);
      std::vector<uint64_t> k;
      const auto smp = sample_of(rows, 16, opt.seed, k);
      const model::Counts est = model::estimate_from_sample(p, smp, k, 16);
      EXPECT_FALSE(est.has_omnireduce());
      EXPECT_NEAR(static_cast<double>(est.K), static_cast<double>(exact.K), 0.05 * static_cast<double>(exact.K));
      for (const char* s : {"balanced", "allgather", "sparcml", "sparse_ps", "dense_native"}) {
        const double a = static_cast<double>(model::traffic(s, p, exact).max_sent());
        const double b = static_cast<double>(model::traffic(s, p, est).max_sent());
        EXPECT_NEAR(b, a, 0.05 * a) << s << " n=" << n << " private share " << priv;
      }
    }
}

TEST(CostModel, StrideOneIsExactIncludingOmniReduce) {
  const int n = 5;
  const auto rows = workload(n, 100003, 3000, 0.5, 3);
  const model::Problem p = model::Problem::of(TensorSpec{100003, 1, DType::F64}, n, SchemeOptions{}, false);
  std::vector<uint64_t> k;
  const auto smp = sample_of(rows, 1, 0, k);
  const model::Counts a = model::count_exact(p, rows);
  model::Counts b = model::estimate_from_sample(p, smp, k, 1);
  for (const auto& r : rows) b.entries.push_back(r.size());  // as auto does: each rank's nnz, gathered
  for (const auto& s : scheme_names()) {
    const auto ta = model::traffic(s, p, a), tb = model::traffic(s, p, b);
    EXPECT_EQ(ta.sent, tb.sent) << s;
    EXPECT_EQ(ta.recv, tb.recv) << s;
  }
}

TEST(CostModel, DenseBytesAndTimeFollowTheFormula) {
  const int n = 4;
  const model::Problem p = model::Problem::of(TensorSpec{1000, 1, DType::F32}, n, SchemeOptions{}, false);
  const model::Counts c = model::count_exact(p, {{1}, {2}, {3}, {}});
  EXPECT_EQ(model::dense_bytes(p), 2u * (4000 - 1000));
  const model::Link link{10e-6, 1e-6, 1e9, 0, {}};
  const auto pr = model::predict("dense_native", p, c, link);
  EXPECT_EQ(pr.max_bytes, 6000u);
  EXPECT_NEAR(pr.seconds, 6 * 10e-6 + 6 * 1e-6 + 6000 / 1e9, 1e-12);
}

// The CPU terms (SchemeOptions::Auto::CpuTerm): per value touched (rows x D), per row touched, and per
// dense value only where the scheme touches the dense tensor (model::dense_values): a dense result,
// or a dense scheme. A sparse scheme with a sparse result is never charged for N, so a huge sparse
// tensor (N = 2^33 + 7, zen_perf_huge_trace) does not make the sparse schemes look slow.
TEST(CostModel, CpuTermsChargeDenseValuesOnlyWhereTheSchemeTouchesThem) {
  const uint64_t R = (uint64_t{1} << 33) + 7;
  for (bool sparse_out : {true, false}) {
    const model::Problem p = model::Problem::of(TensorSpec{R, 1, DType::F32}, 2, SchemeOptions{}, sparse_out);
    const model::Counts c = model::count_exact(p, {{0, 5, static_cast<int64_t>(R - 1)}, {5, 9}});
    EXPECT_EQ(model::dense_values("allgather", p), sparse_out ? 0u : R);
    EXPECT_EQ(model::dense_values("balanced", p), sparse_out ? 0u : R);
    EXPECT_EQ(model::dense_values("dense_native", p), R);
    EXPECT_EQ(model::dense_values("dense", p), R);
    model::Link link{20e-6, 1e-6, 1e9, 0, {{"allgather", 2e-9, 1e-9, 0}, {"balanced", 0, 0, 3e-9}, {"dense_native", 0, 1e-9, 0}}};
    const double ag_rows = model::work_rows("allgather", p, c), bal_rows = model::work_rows("balanced", p, c);
    EXPECT_DOUBLE_EQ(link.cpu_s("allgather", ag_rows, p), 2e-9 * ag_rows + (sparse_out ? 0.0 : 1e-9 * static_cast<double>(R)));
    EXPECT_DOUBLE_EQ(link.cpu_s("balanced", bal_rows, p), 3e-9 * bal_rows);
    EXPECT_DOUBLE_EQ(link.cpu_s("dense_native", 1.0, p), 1e-9 * static_cast<double>(R));
    EXPECT_DOUBLE_EQ(link.cpu_s("sparcml", 10.0, p), 0.0);  // no term: link only
    const auto ag = model::predict("allgather", p, c, link);
    EXPECT_DOUBLE_EQ(ag.compute_s, link.cpu_s("allgather", ag.rows, p));
    EXPECT_DOUBLE_EQ(ag.seconds, ag.comm_s + ag.latency_s + ag.compute_s);
    // With this machine's default terms the sparse result of a huge tensor is a sparse scheme's
    // (a few microseconds), never a dense one's (seconds).
    if (sparse_out) {
      link.cpu = SchemeOptions{}.autotune.cpu;
      ASSERT_FALSE(link.cpu.empty());
      for (const char* s : {"allgather", "balanced", "sparcml", "sparse_ps"})
        EXPECT_LT(model::predict(s, p, c, link).seconds, 1e-3) << s;
      EXPECT_GT(model::predict("dense_native", p, c, link).seconds, 1.0);
    }
  }
}

// Ranks that share cores take turns: a machine's ranks are charged their summed CPU time over its
// cores when that is more than the busiest rank's (docs/cost-model.md, "Shared cores"). With one
// core the charge is the sum over the ranks, so the charge at c cores is max(busiest, sum / c),
// exactly, for every scheme; machines are apart (their own sums); and a scheme whose work sits on
// one rank (sparse_ps with every row in the first key range) gains less from the cores it does not use.
TEST(CostModel, RanksSharingCoresAreChargedTheirSumOverTheCores) {
  const int n = 4;
  const uint64_t R = uint64_t{1} << 18;
  model::Problem p = problem(n, R, 1);
  auto rows = workload(n, R, 3000, 0.5, 7);
  for (auto& r : rows)  // a third of each rank's rows in sparse_ps's first key range, on top
    for (int64_t i = 0; i < 1500; ++i) r.push_back(i * 40 + static_cast<int64_t>(&r - rows.data()));
  const model::Counts c = model::count_exact(p, rows);
  const model::Link link{20e-6, 1e-6, 1e9, 0, {{"allgather", 0, 0, 1e-9}, {"balanced", 0, 0, 1e-9}, {"sparse_ps", 0, 0, 1e-9}, {"sparcml", 0, 0, 1e-9}}};
  auto site = [](uint64_t machine, int cpus) {
    model::CpuSite s;
    s.machine = machine;
    for (int cpu = 0; cpu < cpus; ++cpu) s.mask[cpu / 64] |= uint64_t{1} << (cpu % 64);
    return s;
  };
  const std::vector<model::CpuSite> one_machine(n, site(7, 1));
  for (const char* s : {"allgather", "balanced", "sparse_ps", "sparcml"}) {
    const model::Prediction own = model::predict(s, p, c, link);
    EXPECT_EQ(own.cpu_rows, own.rows) << s;  // no groups: the busiest rank's
    EXPECT_DOUBLE_EQ(own.compute_s, 1e-9 * own.rows) << s;
    model::Problem q = p;
    q.share_cores(one_machine, 0);  // four ranks on one core (the mask's)
    ASSERT_EQ(q.cpu_group.size(), static_cast<size_t>(n));
    EXPECT_DOUBLE_EQ(q.ranks_per_core(), 4.0);
    const double sum = model::predict(s, q, c, link).cpu_rows;
    EXPECT_GT(sum, own.rows) << s;
    for (int cores : {2, 3}) {
      q.share_cores(one_machine, cores);
      const model::Prediction pr = model::predict(s, q, c, link);
      EXPECT_DOUBLE_EQ(pr.cpu_rows, std::max(own.rows, sum / cores)) << s << " cores " << cores;
      EXPECT_DOUBLE_EQ(pr.compute_s, 1e-9 * pr.cpu_rows) << s;
      EXPECT_DOUBLE_EQ(pr.seconds, pr.comm_s + pr.latency_s + pr.compute_s) << s;
      EXPECT_EQ(pr.rows, own.rows) << s;
    }
    // Two machines of two ranks, one core each: each machine's sum, the larger charged.
    q.share_cores({site(1, 1), site(1, 1), site(2, 1), site(2, 1)}, 0);
    const double two = model::predict(s, q, c, link).cpu_rows;
    EXPECT_LT(two, sum) << s;
    EXPECT_GE(two, sum / 2) << s;
  }
  // Cores enough for the ranks, or one machine per rank, or cores < 0: no groups.
  model::Problem q = p;
  q.share_cores(std::vector<model::CpuSite>(n, site(7, 4)), 0);
  EXPECT_TRUE(q.cpu_group.empty());
  q.share_cores({site(1, 1), site(2, 1), site(3, 1), site(4, 1)}, 0);
  EXPECT_TRUE(q.cpu_group.empty());
  q.share_cores(one_machine, -1);
  EXPECT_TRUE(q.cpu_group.empty());
  EXPECT_DOUBLE_EQ(q.ranks_per_core(), 1.0);
  // Two ranks per core: allgather's ranks all work alike (charged twice its busiest rank's rows),
  // sparse_ps's first owner carries most of the sums (charged less than twice).
  q.share_cores(one_machine, 2);
  const model::Prediction ag = model::predict("allgather", q, c, link), ps = model::predict("sparse_ps", q, c, link);
  EXPECT_GT(ag.cpu_rows, 1.9 * ag.rows);
  EXPECT_LT(ps.cpu_rows / ps.rows, ag.cpu_rows / ag.rows - 0.2);
  // Where this rank runs: a machine and at least one CPU, the same on every call.
  const model::CpuSite here = model::CpuSite::here(), again = model::CpuSite::here();
  EXPECT_NE(here.machine, 0u);
  EXPECT_EQ(here.machine, again.machine);
  int cpus = 0;
  for (uint64_t w : here.mask) cpus += __builtin_popcountll(w);
  EXPECT_GE(cpus, 1);
}

// hierarchical_sparse per node size: a stride-1 sample gives the exact counts' bytes (its node split
// included), a 1/16 sample comes close, and the node-aware time sees what it saves: each node's link
// carries the node's union once instead of once per rank (the scheme tests hold the exact bytes
// against the communicator's counts).
TEST(CostModel, HierarchicalSparseByNodeSize) {
  const int n = 8;
  const uint64_t R = uint64_t{1} << 20;
  const auto rows = workload(n, R, 20000, 0.3, 5);
  for (int L : {1, 2, 4}) {
    SchemeOptions opt;
    opt.seed = 7;
    opt.node_size = L;
    const model::Problem p = model::Problem::of(TensorSpec{R * 4, 4, DType::F32}, n, opt, true);
    ASSERT_EQ(p.node_size, L);
    const model::Counts exact = model::count_exact(p, rows);
    ASSERT_EQ(exact.hs_L, L);
    std::vector<uint64_t> k;
    const auto all = sample_of(rows, 1, opt.seed, k);
    const auto t = model::traffic("hierarchical_sparse", p, exact);
    const auto t1 = model::traffic("hierarchical_sparse", p, model::estimate_from_sample(p, all, k, 1));
    EXPECT_EQ(t.sent, t1.sent) << "L=" << L;
    EXPECT_EQ(t.recv, t1.recv) << "L=" << L;
    const auto smp = sample_of(rows, 16, opt.seed, k);
    const auto t16 = model::traffic("hierarchical_sparse", p, model::estimate_from_sample(p, smp, k, 16));
    EXPECT_NEAR(static_cast<double>(t16.max_sent()), static_cast<double>(t.max_sent()), 0.05 * static_cast<double>(t.max_sent()))
        << "L=" << L;
    if (L == 1) continue;
    const model::Link link{20e-6, 1e-6, 125e6, 0, {}};  // 1 Gbit/s between nodes
    const auto hs = model::predict("hierarchical_sparse", p, exact, link);
    const auto flat = model::predict("balanced", p, exact, link);
    // Only the inter phase crosses nodes: the busiest node's bytes are its ranks' inter bytes.
    uint64_t host = 0;
    for (const auto& ph : hs.traffic.phases)
      if (ph.name == "inter")
        for (int g = 0; g < n / L; ++g) {
          uint64_t s = 0, v = 0;
          for (int l = 0; l < L; ++l) s += ph.sent[static_cast<size_t>(g * L + l)], v += ph.recv[static_cast<size_t>(g * L + l)];
          host = std::max({host, s, v});
        }
    EXPECT_EQ(hs.host_bytes, host) << "L=" << L;
    EXPECT_GT(hs.node_bytes, 0u) << "L=" << L;
    EXPECT_LT(static_cast<double>(hs.host_bytes), 0.75 * static_cast<double>(flat.host_bytes)) << "L=" << L;
    EXPECT_LT(hs.seconds, flat.seconds) << "L=" << L;
  }
}

TEST(CostModel, BadRequestsAreClearErrors) {
  const model::Problem p = model::Problem::of(TensorSpec{100, 1, DType::F32}, 2, SchemeOptions{}, true);
  EXPECT_THROW(model::count_exact(p, {{1}}), Error);           // one rank's rows for two ranks
  EXPECT_THROW(model::count_exact(p, {{1}, {100}}), Error);    // row outside [0, R)
  const model::Counts c = model::count_exact(p, {{1}, {2}});
  EXPECT_THROW(model::traffic("ring_magic", p, c), Error);
  std::vector<uint64_t> k{1, 1};
  const model::Counts est = model::estimate_from_sample(p, {{}, {}}, k, 4);
  EXPECT_THROW(model::traffic("omnireduce", p, est), Error);  // needs the exact block sets
}

// Auto's statistics hand estimate_from_sample each rank's rows sorted (merged then, not sorted again):
// the counts are the same as from the same rows in any order, at stride 1 (exact, omnireduce's block
// sets included) and on a sample, for n = 1..8.
TEST(CostModel, SortedAndShuffledSamplesGiveTheSameCounts) {
  test::Rng g(31);
  for (int n = 1; n <= 8; ++n)
    for (uint64_t stride : {uint64_t{1}, uint64_t{3}}) {
      const model::Problem p = problem(n, uint64_t{1} << 16, 1);
      std::vector<uint64_t> k;
      const auto sorted = sample_of(workload(n, uint64_t{1} << 16, 700, 0.4, 5 + static_cast<uint64_t>(n)), stride, p.opt.seed, k);
      auto shuffled = sorted;
      for (auto& s : shuffled)
        for (size_t i = s.size(); i > 1; --i) std::swap(s[i - 1], s[g.below(i)]);
      const model::Counts a = model::estimate_from_sample(p, sorted, k, stride);
      const model::Counts b = model::estimate_from_sample(p, shuffled, k, stride);
      EXPECT_EQ(a.K, b.K) << "n " << n << " stride " << stride;
      EXPECT_EQ(a.bal_K, b.bal_K);
      EXPECT_EQ(a.ps_K, b.ps_K);
      EXPECT_EQ(a.sc_state, b.sc_state) << "n " << n << " stride " << stride;
      EXPECT_EQ(a.om_V_rows, b.om_V_rows);
      EXPECT_EQ(a.om_rows, b.om_rows);
      if (stride == 1) {  // exact: the union is the union
        std::vector<int64_t> u;
        for (const auto& s : sorted) u.insert(u.end(), s.begin(), s.end());
        std::sort(u.begin(), u.end());
        EXPECT_EQ(a.K, static_cast<uint64_t>(std::unique(u.begin(), u.end()) - u.begin()));
      }
    }
}

// ---- auto's exploration (model::explore_count / explore_drops / exploration_mean): decision logic on
// given predictions and per-call times, no timing of real calls.

TEST(AutoExplore, CountFollowsWindowBudgetAndCap) {
  model::ExploreLimits l;  // within 1.5, max 4, trials 3, budget 1 call
  EXPECT_EQ(model::explore_count({1.0}, l), 1u);
  EXPECT_EQ(model::explore_count({}, l), 0u);
  // 1.6 x the best: outside the window, never measured
  EXPECT_EQ(model::explore_count({1.0, 1.6, 1.7}, l), 1u);
  // 3 trials x 0.2 = 0.6 <= 1 call; + 3 x 0.3 = 1.5 > 1: the third is not measured
  EXPECT_EQ(model::explore_count({1.0, 1.2, 1.3}, l), 2u);
  EXPECT_EQ(model::explore_count({1.0, 1.0, 1.0, 1.0, 1.0, 1.0}, l), 4u);  // the cap
  l.within = 1.0;  // model only
  EXPECT_EQ(model::explore_count({1.0, 1.0}, l), 1u);
  EXPECT_TRUE(model::explore_drops(1.51, 1.0, model::ExploreLimits{}));
  EXPECT_FALSE(model::explore_drops(1.5, 1.0, model::ExploreLimits{}));
}

// A candidate not run yet pays its first call (model::first_call_extra: cold_calls x its CPU time)
// in the budget: at the first decision (budget 1 call) a close candidate whose first call costs 8 of
// its calls is not measured; with the budget a re-evaluation has after 100 calls (1 + 0.1 x 100) it
// is; once run (extra 0) the plain trial rule applies again.
TEST(AutoExplore, FirstCallsCountInTheBudget) {
  const model::ExploreLimits l;  // within 1.5, max 4, trials 3, budget 1 call
  model::Prediction close;
  close.seconds = 1.1, close.compute_s = 1.0;
  const double cold = model::first_call_extra(close, 8.0);
  EXPECT_DOUBLE_EQ(cold, 8.0);
  EXPECT_DOUBLE_EQ(model::first_call_extra(close, 0.0), 0.0);
  EXPECT_EQ(model::explore_count({1.0, 1.1}, l), 2u);                // 3 x 0.1 <= 1
  EXPECT_EQ(model::explore_count({1.0, 1.1}, l, {0.0, cold}), 1u);   // + 8 > 1: the model decides
  model::ExploreLimits later = l;
  later.budget = 1.0 + 0.1 * 100;
  EXPECT_EQ(model::explore_count({1.0, 1.1}, later, {0.0, cold}), 2u);
  EXPECT_EQ(model::explore_count({1.0, 1.1, 1.2}, later, {0.0, cold, 9.6}), 2u);  // 8.3 + 10.2 > 11
  EXPECT_EQ(model::explore_count({1.0, 1.1}, l, {0.0, 0.0}), 2u);    // already run: no first call
  EXPECT_THROW(model::explore_count({1.0, 1.1}, l, {0.0}), Error);
}

// The deferred measurement: the call from which the budget, growing by explore_share calls per call,
// covers the closest candidate's trials and first call, and which candidates the window admits.
TEST(AutoExplore, DeferralWaitsUntilTheGrowingBudgetCoversTheClosest) {
  const model::ExploreLimits l;  // within 1.5, max 4, trials 3, budget 1 call
  EXPECT_EQ(model::explore_window({1.0, 1.1, 1.4, 1.6}, l), 2u);
  EXPECT_EQ(model::explore_window({1.0, 1.1, 1.2, 1.3, 1.4}, l), 3u);  // at most max_explore - 1
  EXPECT_EQ(model::explore_window({1.0}, l), 0u);
  model::ExploreLimits model_only = l;
  model_only.within = 1.0;
  EXPECT_EQ(model::explore_window({1.0, 1.0}, model_only), 0u);
  // need = 3 x 0.1 + 8 = 8.3 calls of the best; budget 1 + 0.1 per call: ceil((8.3 - 1) / 0.1) = 73.
  EXPECT_EQ(model::calls_until_affordable({1.0, 1.1}, l, {0.0, 8.0}, 0.1), 73u);
  model::ExploreLimits at73 = l;
  at73.budget = 1.0 + 0.1 * 73;
  EXPECT_EQ(model::explore_count({1.0, 1.1}, at73, {0.0, 8.0}), 2u);  // affordable then
  at73.budget = 1.0 + 0.1 * 72;
  EXPECT_EQ(model::explore_count({1.0, 1.1}, at73, {0.0, 8.0}), 1u);  // and not a call before
  EXPECT_EQ(model::calls_until_affordable({1.0, 1.1}, l, {0.0, 0.0}, 0.1), 1u);  // affordable now: the next call
  EXPECT_EQ(model::calls_until_affordable({1.0, 1.1}, l, {0.0, 8.0}, 0.0), 0u);  // no growth: never
  EXPECT_EQ(model::calls_until_affordable({1.0, 1.6}, l, {0.0, 8.0}, 0.1), 0u);  // outside the window
  EXPECT_EQ(model::calls_until_affordable({0.0, 1e-9}, l, {0.0, 8.0}, 0.1), 0u);
  EXPECT_EQ(model::calls_until_affordable({1e-30, 1.4e-30}, l, {0.0, 1.0}, 1e-20), 0u);  // 10^12 calls or more
}

// The 20-call bound (docs/cost-model.md): whenever the calibrated model is within 5 % of every
// candidate's real time, auto's mean over its first 20 calls (the statistics call included at 2 %
// of the best) is at most 1.10 x the best fixed scheme's, whatever the candidates' spread.
TEST(AutoExplore, TwentyCallMeanWithinTenPercentOfTheBest) {
  test::Rng g(2026);
  const model::ExploreLimits l;
  double worst = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const size_t m = 2 + g.below(5);
    std::vector<double> real(m);
    for (auto& x : real) x = 1.0 + (g.below(4) == 0 ? 0.0 : g.unit() * (g.below(2) ? 0.3 : 12.0));
    std::vector<std::pair<double, double>> pr;  // (predicted, real)
    for (double x : real) pr.emplace_back(x * (0.95 + 0.1 * g.unit()), x);
    std::sort(pr.begin(), pr.end());
    std::vector<double> pred, re;
    for (auto& [p, r] : pr) pred.push_back(p), re.push_back(r);
    const double best = *std::min_element(re.begin(), re.end());
    const double mean = model::exploration_mean(pred, re, l, 20, 0.02 * best);
    worst = std::max(worst, mean / best);
    ASSERT_LE(mean, 1.10 * best) << "trial " << trial << ": " << m << " candidates, mean " << mean << " best " << best;
  }
  EXPECT_GT(worst, 1.0);
}

// A candidate the model's best dominates (as many bytes, latency and charged rows or more) is never
// measured: with one cost per row for every scheme nothing the model knows could make it faster
// (n = 2: sparcml moves allgather's bytes and touches more rows). A candidate with fewer bytes, or
// fewer charged rows, or less latency is not dominated.
TEST(AutoExplore, DominatedCandidateIsNotMeasured) {
  model::Prediction a;
  a.max_bytes = 1000, a.cpu_rows = 100, a.latency_s = 2e-5, a.comm_s = 3e-4, a.seconds = 3.2e-4;
  model::Prediction b = a;
  EXPECT_TRUE(model::dominated(b, a));  // equal: measuring cannot tell them apart in the model
  b.cpu_rows = 133;
  EXPECT_TRUE(model::dominated(b, a));
  b.max_bytes = 999;  // fewer bytes: may be faster where bytes cost more than rows
  EXPECT_FALSE(model::dominated(b, a));
  b = a, b.rows = 500;  // more on the busiest rank, but charged the same (ranks share cores)
  EXPECT_TRUE(model::dominated(b, a));
  b = a, b.cpu_rows = 99;
  EXPECT_FALSE(model::dominated(b, a));
  b = a, b.latency_s = 1e-5;
  EXPECT_FALSE(model::dominated(b, a));
  b = a, b.host_bytes = 0, a.host_bytes = 10;
  EXPECT_FALSE(model::dominated(b, a));
  // n = 2, disjoint-ish rows: allgather and sparcml are predicted alike, sparcml touches more rows
  const model::Problem p = problem(2, uint64_t{1} << 18, 1);
  const model::Counts c = model::count_exact(p, workload(2, uint64_t{1} << 18, 2600, 0.5, 3));
  SchemeOptions::Auto link_only = SchemeOptions{}.autotune;
  link_only.cpu.clear();
  const model::Link link = model::Link::of(link_only);
  const model::Prediction ag = model::predict("allgather", p, c, link), sc = model::predict("sparcml", p, c, link);
  EXPECT_DOUBLE_EQ(sc.seconds, ag.seconds);
  EXPECT_GT(sc.rows, ag.rows);
  EXPECT_EQ(sc.cpu_rows, sc.rows);  // no shared cores: the busiest rank's rows are charged
  EXPECT_GT(sc.cpu_rows, ag.cpu_rows);
  EXPECT_TRUE(model::dominated(sc, ag));
  EXPECT_FALSE(model::dominated(ag, sc));
  // With the default CPU terms sparcml's rows cost more than allgather's: still dominated, now slower.
  const model::Link calibrated = model::Link::of(SchemeOptions{}.autotune);
  const model::Prediction ag2 = model::predict("allgather", p, c, calibrated), sc2 = model::predict("sparcml", p, c, calibrated);
  EXPECT_GT(sc2.seconds, ag2.seconds);
  EXPECT_TRUE(model::dominated(sc2, ag2));
}

// Issue 31's case (16M values, d = 60 %, n = 4, shared memory): the link-only model predicted
// balanced 6.47 ms and sparse_ps 6.47 ms for calls of 1016 / 797 ms while dense_native took 243 ms.
// With the old window (4x) and no budget auto measures them all: even with the cold-round drop its
// 20-call mean is more than twice the best's. With predictions
// calibrated to within 10 % the far-off ones are never run: the mean is the best's.
TEST(AutoExplore, FarOffCandidatesAreNeverRun) {
  const std::vector<double> real{0.243, 0.797, 1.016, 2.62};  // dense_native, sparse_ps, balanced, sparcml
  const std::vector<double> link_only{6.47e-3, 6.47e-3, 8.51e-3, 11e-3};
  const std::vector<double> real_in_link_order{1.016, 0.797, 0.243, 2.62};
  const model::ExploreLimits old{4.0, 4, 3, 1e9};
  const double before = model::exploration_mean(link_only, real_in_link_order, old, 20, 0.0);
  EXPECT_GT(before, 2.0 * 0.243);
  const std::vector<double> calibrated{0.243 * 1.1, 0.797 * 0.9, 1.016 * 0.9, 2.62};
  const model::ExploreLimits now;
  EXPECT_EQ(model::explore_count(calibrated, now), 1u);
  size_t chosen = 9;
  const double after = model::exploration_mean(calibrated, real, now, 20, 0.0, &chosen);
  EXPECT_EQ(chosen, 0u);
  EXPECT_DOUBLE_EQ(after, 0.243);
}

// A candidate the model puts close but which is really far off costs two calls (the cold one and the
// first warm one), then is dropped.
TEST(AutoExplore, FirstWarmRoundDropsTheFarOff) {
  const model::ExploreLimits l;
  size_t chosen = 9;
  // predicted 1.0 and 1.1; really 1.0 and 10: two calls of the slow one, never again
  const double mean = model::exploration_mean({1.0, 1.1}, {1.0, 10.0}, l, 20, 0.0, &chosen);
  EXPECT_EQ(chosen, 0u);
  EXPECT_DOUBLE_EQ(mean, (18 * 1.0 + 2 * 10.0) / 20);
  // the model's best is really the slower one: measuring finds the other
  const double m2 = model::exploration_mean({1.0, 1.1}, {1.3, 1.0}, l, 20, 0.0, &chosen);
  EXPECT_EQ(chosen, 1u);
  EXPECT_LE(m2, 1.10 * 1.0);
}

}  // namespace

// Auto's link check: a measured time above `ratio` x the prediction is charged to the link. The
// learned rate is the one with which the prediction equals the measurement, flat and node-aware
// (there only the bytes across nodes take it); no slower link within the ratio, with ratio <= 1 or
// without bytes on the link.
TEST(CostModel, LearnedLinkExplainsTheMeasuredTime) {
  const uint64_t R = uint64_t{1} << 18;
  for (int L : {1, 2}) {
    const int n = 4;
    model::Problem p = problem(n, R, 8);
    p.node_size = L;
    const model::Counts c = model::count_exact(p, workload(n, R, 3000, 0.5, 11));
    const model::Link link{20e-6, 1e-6, 1e9, 1e-9, {{"balanced", 1e-10, 0, 1e-9}}};
    for (const char* s : {"balanced", "allgather", "hierarchical_sparse"}) {
      if (L == 1 && std::string(s) == "hierarchical_sparse") continue;
      const model::Prediction pr = model::predict(s, p, c, link);
      ASSERT_GT(pr.seconds, 0) << s;
      EXPECT_EQ(L > 1, pr.host_bytes + pr.node_bytes > 0) << s;
      for (double x : {2.5, 10.0}) {
        const double bps = model::learned_bytes_per_s(pr, x * pr.seconds, link, 2.0);
        ASSERT_GT(bps, 0) << s << " x" << x;
        EXPECT_LT(bps, link.bytes_per_s) << s;
        model::Link slower = link;
        slower.bytes_per_s = bps;
        const model::Prediction again = model::predict(s, p, c, slower);
        EXPECT_NEAR(again.seconds, x * pr.seconds, 1e-9 * x * pr.seconds) << s << " L=" << L << " x" << x;
        EXPECT_DOUBLE_EQ(again.compute_s, pr.compute_s) << s;
        EXPECT_DOUBLE_EQ(again.latency_s, pr.latency_s) << s;
      }
      EXPECT_EQ(model::learned_bytes_per_s(pr, 1.9 * pr.seconds, link, 2.0), 0) << s;  // within the ratio
      EXPECT_EQ(model::learned_bytes_per_s(pr, 0.5 * pr.seconds, link, 2.0), 0) << s;  // faster: never learned
      EXPECT_EQ(model::learned_bytes_per_s(pr, 10 * pr.seconds, link, 1.0), 0) << s;   // off
    }
  }
  // One rank moves no bytes: nothing to charge.
  const model::Problem one = problem(1, R, 8);
  const model::Prediction solo = model::predict("balanced", one, model::count_exact(one, workload(1, R, 3000, 0.5, 11)),
                                                model::Link{20e-6, 1e-6, 1e9, 1e-9, {}});
  EXPECT_EQ(solo.max_bytes, 0u);
  EXPECT_EQ(model::learned_bytes_per_s(solo, 1.0, model::Link{20e-6, 1e-6, 1e9, 1e-9, {}}, 2.0), 0);
}
