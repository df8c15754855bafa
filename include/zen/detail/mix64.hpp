#pragma once
// 64-bit finalizing mixer, a core helper: the hash functions (zen/hash/hash.hpp) build on it, and the
// MPI backend mixes its creation nonce with it (the one use outside hashing, so comm needs no hash).
// Beside it, FNV-1a of a byte string (machine and host names).
#include <cstddef>
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

/// FNV-1a (64-bit) of the bytes [p, p + n).
inline uint64_t fnv1a(const void* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

}  // namespace zen
