#pragma once
// Seeded, independent random streams for the learning pipeline.
//
// One master seed fans out into named streams (split, init, shuffle per client and round), so that
// changing e.g. the number of rounds never changes the data split or the initial model.
#include <cstdint>
#include <random>

namespace zen::fl {

enum class Stream : uint64_t {
  Split = 1,    ///< assignment of samples to clients
  Init = 2,     ///< initial global model
  Shuffle = 3,  ///< per-client, per-round minibatch order
  Compute = 4,  ///< per-satellite on-board throughput (timing's compute model)
};

/// SplitMix64 finalizer: a bijective 64-bit mixer.
constexpr uint64_t splitmix64(uint64_t z) noexcept {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Seed of stream `s` (with optional sub-indices, e.g. client and round) derived from `master`.
constexpr uint64_t stream_seed(uint64_t master, Stream s, uint64_t a = 0, uint64_t b = 0) noexcept {
  uint64_t h = splitmix64(master ^ splitmix64(static_cast<uint64_t>(s)));
  h = splitmix64(h ^ splitmix64(a + 0x632BE59BD9B4E019ull));
  h = splitmix64(h ^ splitmix64(b + 0x85157AF5ull));
  return h;
}

using Rng = std::mt19937_64;

}  // namespace zen::fl
