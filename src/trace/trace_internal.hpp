#pragma once
// Deterministic random numbers for the generators (platform-independent: no std:: distributions).
#include <cmath>
#include <cstdint>
#include <vector>

#include "zen/hash/hash.hpp"

namespace zen::trace::detail {

/// SplitMix64 stream.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    s_ += 0x9e3779b97f4a7c15ULL;
    return mix64(s_);
  }
  /// Uniform in [0, n).
  uint64_t below(uint64_t n) { return reduce_range(next(), n); }
  /// Uniform in (0, 1).
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  /// Standard normal (Box-Muller).
  double normal() {
    const double u = uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }

 private:
  uint64_t s_;
};

/// Fisher-Yates permutation of [0, n) from a seed.
inline std::vector<uint64_t> seeded_permutation(uint64_t n, uint64_t seed) {
  std::vector<uint64_t> p(n);
  for (uint64_t i = 0; i < n; ++i) p[i] = i;
  Rng rng(seed);
  for (uint64_t i = n; i > 1; --i) {
    const uint64_t j = rng.below(i);
    std::swap(p[i - 1], p[j]);
  }
  return p;
}

template <typename T>
void shuffle(std::vector<T>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

}  // namespace zen::trace::detail
