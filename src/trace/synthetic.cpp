// Synthetic (controllable density / gamma / skew) and DGC top-k trace generators.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "trace_internal.hpp"
#include "zen/error.hpp"
#include "zen/trace/generators.hpp"

namespace zen::trace {
namespace {

/// Draw u distinct indices from [0, N) without replacement, index i with weight (i+1)^-s.
std::vector<int64_t> weighted_sample(int64_t N, int64_t u, double s, detail::Rng& rng) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(u));
  if (s == 0.0 && u <= N / 4) {  // uniform, sparse: rejection with a membership map
    std::vector<uint8_t> taken(static_cast<size_t>(N));
    while (static_cast<int64_t>(out.size()) < u) {
      const int64_t i = static_cast<int64_t>(rng.below(static_cast<uint64_t>(N)));
      if (!taken[i]) {
        taken[i] = 1;
        out.push_back(i);
      }
    }
    return out;
  }
  // Gumbel top-u: key_i = log w_i + Gumbel noise; the u largest keys are a weighted sample without
  // replacement (Efraimidis-Spirakis).
  std::vector<std::pair<double, int64_t>> keys(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) {
    const double g = -std::log(-std::log(rng.uniform()));
    keys[i] = {-s * std::log(static_cast<double>(i + 1)) + g, i};
  }
  std::nth_element(keys.begin(), keys.begin() + (u > 0 ? u - 1 : 0), keys.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (int64_t i = 0; i < u; ++i) out.push_back(keys[i].second);
  return out;
}

std::string fmt(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

}  // namespace

TraceMeta generate_synthetic(const SyntheticConfig& cfg, const std::string& out_dir) {
  const int n = cfg.ranks;
  ZEN_ENFORCE(cfg.N > 0, "synthetic: N must be positive, got " + std::to_string(cfg.N));
  ZEN_ENFORCE(n > 0, "synthetic: ranks must be positive, got " + std::to_string(n));
  ZEN_ENFORCE(cfg.iterations > 0, "synthetic: iterations must be positive, got " + std::to_string(cfg.iterations));
  ZEN_ENFORCE(cfg.density > 0 && cfg.density <= 1, "synthetic: density must be in (0, 1], got " + fmt(cfg.density));
  ZEN_ENFORCE(cfg.zipf >= 0, "synthetic: zipf exponent must be >= 0, got " + fmt(cfg.zipf));
  ZEN_ENFORCE(cfg.gamma >= 1 && cfg.gamma <= n,
              "synthetic: gamma must be in [1, n = " + std::to_string(n) + "], got " + fmt(cfg.gamma));
  const int64_t k = std::max<int64_t>(1, std::llround(cfg.density * static_cast<double>(cfg.N)));
  const double f = n == 1 ? 1.0 : (n - cfg.gamma) / (n - 1.0);
  const int64_t kshared = std::min<int64_t>(k, std::llround(f * static_cast<double>(k)));
  const int64_t kpriv = k - kshared;
  const int64_t U = kshared + static_cast<int64_t>(n) * kpriv;
  ZEN_ENFORCE(U <= cfg.N, "synthetic: the union needs " + std::to_string(U) + " distinct indices (k = " +
                              std::to_string(k) + ", gamma = " + fmt(cfg.gamma) + ") but N = " + std::to_string(cfg.N) +
                              "; lower density or gamma");

  TraceMeta meta;
  meta.N = cfg.N;
  meta.ranks = n;
  meta.iterations = cfg.iterations;
  meta.dtype = cfg.dtype;
  meta.source = "zen_trace synthetic: N=" + std::to_string(cfg.N) + " n=" + std::to_string(n) +
                " density=" + fmt(cfg.density) + " gamma=" + fmt(cfg.gamma) + " zipf=" + fmt(cfg.zipf) +
                " k=" + std::to_string(k) + " shared=" + std::to_string(kshared) + " seed=" + std::to_string(cfg.seed) +
                " values=int{-8..8}\\0";
  write_meta(out_dir, meta);

  std::vector<int64_t> idx;
  std::vector<double> vals;
  for (int t = 0; t < cfg.iterations; ++t) {
    detail::Rng rng(hash64(static_cast<uint64_t>(t), cfg.seed ^ 0x53594e54ULL));
    std::vector<int64_t> pool = weighted_sample(cfg.N, U, cfg.zipf, rng);
    detail::shuffle(pool, rng);
    for (int r = 0; r < n; ++r) {
      idx.assign(pool.begin(), pool.begin() + kshared);
      const auto pb = pool.begin() + kshared + static_cast<int64_t>(r) * kpriv;
      idx.insert(idx.end(), pb, pb + kpriv);
      detail::shuffle(idx, rng);
      vals.resize(idx.size());
      for (size_t i = 0; i < idx.size(); ++i) vals[i] = value_at(cfg.seed, r, t, idx[i]);
      const auto raw = values_from_double(vals, cfg.dtype);
      write_rank_iter(out_dir, meta, r, t, idx.data(), idx.size(), raw.data());
    }
    if (cfg.on_iteration) cfg.on_iteration(t + 1, cfg.iterations);
  }
  return meta;
}

TraceMeta generate_topk(const TopkConfig& cfg, const std::string& out_dir) {
  const int n = cfg.ranks;
  const int64_t N = cfg.N;
  ZEN_ENFORCE(N > 0, "topk: N must be positive, got " + std::to_string(N));
  ZEN_ENFORCE(n > 0, "topk: ranks must be positive, got " + std::to_string(n));
  ZEN_ENFORCE(cfg.iterations > 0, "topk: iterations must be positive, got " + std::to_string(cfg.iterations));
  ZEN_ENFORCE(cfg.ratio > 0 && cfg.ratio <= 1, "topk: ratio must be in (0, 1], got " + fmt(cfg.ratio));
  ZEN_ENFORCE(cfg.correlation >= 0 && cfg.correlation <= 1,
              "topk: correlation must be in [0, 1], got " + fmt(cfg.correlation));
  ZEN_ENFORCE(cfg.zipf >= 0, "topk: zipf exponent must be >= 0, got " + fmt(cfg.zipf));
  const int64_t k = std::max<int64_t>(1, std::llround(cfg.ratio * static_cast<double>(N)));

  TraceMeta meta;
  meta.N = N;
  meta.ranks = n;
  meta.iterations = cfg.iterations;
  meta.dtype = cfg.dtype;
  meta.source = "zen_trace topk: N=" + std::to_string(N) + " n=" + std::to_string(n) + " ratio=" + fmt(cfg.ratio) +
                " residual=" + (cfg.residual ? "1" : "0") + " seed=" + std::to_string(cfg.seed) +
                (cfg.dense_dir.empty() ? " dense=synthetic rho=" + fmt(cfg.correlation) + " zipf=" + fmt(cfg.zipf)
                                       : " dense=" + cfg.dense_dir);
  write_meta(out_dir, meta);

  std::vector<double> amp(static_cast<size_t>(N), 1.0);
  if (cfg.zipf > 0)
    for (int64_t i = 0; i < N; ++i) amp[i] = std::pow(static_cast<double>(i + 1), -cfg.zipf / 2);
  const double rho = cfg.correlation, rho2 = std::sqrt(std::max(0.0, 1 - rho * rho));

  std::vector<std::vector<double>> acc(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(N), 0.0));
  std::vector<double> common(static_cast<size_t>(N)), g(static_cast<size_t>(N));
  std::vector<float> rawg;
  std::vector<int64_t> order(static_cast<size_t>(N)), idx;
  std::vector<double> vals;
  for (int t = 0; t < cfg.iterations; ++t) {
    if (cfg.dense_dir.empty()) {
      detail::Rng crng(hash64(static_cast<uint64_t>(t), cfg.seed ^ 0xc0ffeeULL));
      for (int64_t i = 0; i < N; ++i) common[i] = crng.normal();
    }
    for (int r = 0; r < n; ++r) {
      if (cfg.dense_dir.empty()) {
        detail::Rng prng(hash64(static_cast<uint64_t>(t) * 1000003ULL + r, cfg.seed ^ 0x70cbULL));
        for (int64_t i = 0; i < N; ++i) {
          const double x = 8.0 * amp[i] * (rho * common[i] + rho2 * prng.normal());
          g[i] = std::clamp(std::round(x), -32.0, 32.0);
        }
      } else {
        const std::string p = cfg.dense_dir + "/r" + std::to_string(r) + "_t" + std::to_string(t) + ".f32";
        std::ifstream in(p, std::ios::binary | std::ios::ate);
        ZEN_CHECK_CODE(in.good(), Result::InvalidArgument, "topk: cannot open dense gradient '" + p + "'");
        const auto size = static_cast<int64_t>(in.tellg());
        ZEN_ENFORCE(size == N * 4, "topk: '" + p + "' holds " + std::to_string(size) + " bytes, expected N*4 = " +
                                       std::to_string(N * 4));
        rawg.resize(static_cast<size_t>(N));
        in.seekg(0);
        in.read(reinterpret_cast<char*>(rawg.data()), size);
        ZEN_CHECK_CODE(in.good(), Result::SystemError, "topk: read error on '" + p + "'");
        for (int64_t i = 0; i < N; ++i) g[i] = rawg[i];
      }
      auto& a = acc[r];
      for (int64_t i = 0; i < N; ++i) a[i] = cfg.residual ? a[i] + g[i] : g[i];
      for (int64_t i = 0; i < N; ++i) order[i] = i;
      const uint64_t tie = hash64(static_cast<uint64_t>(t), cfg.seed);  // same tie order on every rank
      auto before = [&](int64_t x, int64_t y) {
        const double ax = std::fabs(a[x]), ay = std::fabs(a[y]);
        if (ax != ay) return ax > ay;
        return hash64(static_cast<uint64_t>(x), tie) < hash64(static_cast<uint64_t>(y), tie);
      };
      std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), before);
      std::sort(order.begin(), order.begin() + k, before);
      idx.clear();
      vals.clear();
      for (int64_t j = 0; j < k; ++j) {
        const int64_t i = order[j];
        if (a[i] == 0.0) continue;
        idx.push_back(i);
        vals.push_back(a[i]);
        a[i] = 0.0;
      }
      const auto raw = values_from_double(vals, cfg.dtype);
      write_rank_iter(out_dir, meta, r, t, idx.data(), idx.size(), raw.data());
    }
    if (cfg.on_iteration) cfg.on_iteration(t + 1, cfg.iterations);
  }
  return meta;
}

}  // namespace zen::trace
