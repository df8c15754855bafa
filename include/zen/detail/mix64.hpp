#pragma once
// 64-bit finalizing mixer, a core helper: the hash functions (zen/hash/hash.hpp) build on it, and the
// MPI backend mixes its creation nonce with it (the one use outside hashing, so comm needs no hash).
#include <cstdint>

#include "zen/config.hpp"

namespace zen {

/// 64-bit finalizing mixer (xor-shift-multiply, Murmur3 fmix64 constants).
ZEN_HD uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

}  // namespace zen
