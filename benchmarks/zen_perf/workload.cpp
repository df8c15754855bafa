// zen_perf's synthetic workload (workload.hpp): the gamma / Zipf row generator of every rank's input
// and the view a plan is called on.
//
// Why not trace::generate_synthetic (zen_trace synthetic): it cannot make these inputs. It samples
// indices, not rows of width D; it rejects density 0 and a union larger than N (-d 1 with gamma > 1),
// which zen_perf runs (filled by the scan below); it writes every rank's files where each zen_perf
// rank draws only its own k rows in memory (O(k) draws, an R-bit map). And a different sampler gives
// different rows and values: every figure recorded from a synthetic zen_perf run (the docs' tables,
// bench_fastpath.sh before / after) would stop being comparable. The two share the definition of
// gamma (f = (n - gamma) / (n - 1) of each rank's rows common to all ranks, the rest private).
#include "workload.hpp"

#include <algorithm>
#include <cmath>

#include "zen/hash/hash.hpp"

namespace zen_perf {

using namespace zen;

namespace {

// ---- workload generator: deterministic from (seed, rank) ----
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(mix64(seed ^ 0x5851f42d4c957f2dULL)) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    return mix64(z);
  }
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
};

/// Row drawn with probability ~ (row+1)^-skew over [0, R) (continuous power-law inverse CDF).
uint64_t zipf_row(Rng& g, uint64_t R, double s) {
  const double u = g.unit();
  double x;
  if (s == 0.0) return std::min<uint64_t>(R - 1, static_cast<uint64_t>(u * static_cast<double>(R)));
  const double top = static_cast<double>(R) + 1.0;
  if (std::fabs(s - 1.0) < 1e-9) x = std::pow(top, u);
  else x = std::pow((std::pow(top, 1.0 - s) - 1.0) * u + 1.0, 1.0 / (1.0 - s));
  uint64_t row = static_cast<uint64_t>(x) - 1;
  return std::min<uint64_t>(row, R - 1);
}

}  // namespace

Workload generate(uint64_t R, uint32_t D, DType dt, double d, double gamma, double skew, int n, int r, uint64_t seed) {
  Workload w;
  const uint64_t k = std::min<uint64_t>(R, static_cast<uint64_t>(std::llround(d * static_cast<double>(R))));
  const double f = n > 1 ? std::clamp((static_cast<double>(n) - gamma) / (n - 1), 0.0, 1.0) : 1.0;
  const double norm = f + n * (1.0 - f);
  const double wp = f / norm, wq = (1.0 - f) / norm;
  auto cls = [&](uint64_t row) -> int {  // -1 = pool, else the private rank
    const double u = static_cast<double>(hash64(row, seed ^ 0xc1a55ULL) >> 11) * (1.0 / 9007199254740992.0);
    if (u < wp || wq <= 0) return -1;
    return std::min(n - 1, static_cast<int>((u - wp) / wq));
  };
  std::vector<uint64_t> taken((R + 63) / 64, 0);
  auto draw = [&](uint64_t need, int want_cls, Rng& g) {
    uint64_t got = 0, tries = 0;
    const uint64_t max_tries = 32 * need + 1024;
    while (got < need && tries < max_tries) {
      ++tries;
      const uint64_t row = zipf_row(g, R, skew);
      if ((taken[row >> 6] >> (row & 63)) & 1) continue;
      if (cls(row) != want_cls) continue;
      taken[row >> 6] |= 1ULL << (row & 63);
      w.idx.push_back(static_cast<int64_t>(row));
      ++got;
    }
    if (got < need && R > 0) {  // saturated: fill uniformly from a random start
      const uint64_t start = g.next() % R;
      for (uint64_t i = 0; i < R && got < need; ++i) {
        const uint64_t row = (start + i) % R;
        if ((taken[row >> 6] >> (row & 63)) & 1) continue;
        if (cls(row) != want_cls) continue;
        taken[row >> 6] |= 1ULL << (row & 63);
        w.idx.push_back(static_cast<int64_t>(row));
        ++got;
      }
    }
  };
  const uint64_t kp = static_cast<uint64_t>(std::llround(f * static_cast<double>(k)));
  Rng pool(seed * 0x100000001b3ULL + 7);
  draw(kp, -1, pool);
  Rng mine(seed * 0x100000001b3ULL + 1000 + static_cast<uint64_t>(r));
  draw(k - kp, r, mine);
  Rng vr(seed * 0x100000001b3ULL + 2000000 + static_cast<uint64_t>(r));
  const size_t m = w.idx.size() * D;
  w.vals.resize(m * dtype_size(dt));
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    T* v = reinterpret_cast<T*>(w.vals.data());
    for (size_t i = 0; i < m; ++i) {
      const uint64_t x = vr.next();
      const int mag = 1 + static_cast<int>(x % 4);
      v[i] = static_cast<T>(static_cast<float>((x >> 8) & 1 ? -mag : mag));
    }
  });
  return w;
}

SparseView make_view(const Workload& w, uint64_t N, uint32_t D, DType dt, IndexType it, std::vector<int32_t>& i32) {
  SparseView v;
  v.dense_len = N;
  v.row_width = D;
  v.nnz = w.idx.size();
  v.dtype = dt;
  v.values = w.vals.data();
  v.index_type = it;
  if (it == IndexType::I32) {
    i32.assign(w.idx.begin(), w.idx.end());
    v.indices = i32.data();
  } else {
    v.indices = w.idx.data();
  }
  return v;
}

}  // namespace zen_perf
