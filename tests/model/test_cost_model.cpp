// The cost model's estimated mode: counts from a hash sample (what `auto` gathers) predict the
// bytes of the exact counts closely; stride 1 is exact; bad requests are clear errors.
#include <gtest/gtest.h>

#include <cmath>

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
  const model::Counts a = model::count_exact(p, rows), b = model::estimate_from_sample(p, smp, k, 1);
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
  const model::Link link{10e-6, 1e-6, 1e9, 0};
  const auto pr = model::predict("dense_native", p, c, link);
  EXPECT_EQ(pr.max_bytes, 6000u);
  EXPECT_NEAR(pr.seconds, 6 * 10e-6 + 6 * 1e-6 + 6000 / 1e9, 1e-12);
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
    const model::Link link{20e-6, 1e-6, 125e6, 0};  // 1 Gbit/s between nodes
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

}  // namespace
