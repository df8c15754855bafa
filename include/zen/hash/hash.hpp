#pragma once
// The hash functions of zen, defined once for the CPU and CUDA paths.
//
// h0 (the owner hash) is `Partitioner::owner`: a seeded bijection pi on [0, N) (a 3-round Feistel
// network whose round functions are seeded multiply-add-shift hashes, a 2-universal family
// (Dietzfelbinger), cycle-walked into [0, N)), owner = pi(idx) mod n and the position of idx
// inside its owner's index set I_owner is pi(idx) div n. So every owner's set I_i is known implicitly
// (|I_i| = number of v < N with v mod n = i), the hash bitmap needs no O(N) table, and
// N not divisible by n is handled by construction. See docs/algorithms.md.
#include <cstdint>

#include "zen/config.hpp"
#include "zen/detail/mix64.hpp"  // mix64

namespace zen {

/// Seed preparation for hash64_mixed (do it once per hash function, not per key).
ZEN_HD uint64_t mix_seed(uint64_t seed) { return mix64(seed + 0x9e3779b97f4a7c15ULL); }
/// Seeded 64-bit hash of a key, seed already prepared by mix_seed.
ZEN_HD uint64_t hash64_mixed(uint64_t key, uint64_t mixed_seed) { return mix64(key ^ mixed_seed); }
/// Seeded 64-bit hash of a key.
ZEN_HD uint64_t hash64(uint64_t key, uint64_t seed) { return hash64_mixed(key, mix_seed(seed)); }

/// Map a 64-bit hash uniformly onto [0, n) by multiply-high (no modulo bias worth speaking of).
ZEN_HD uint64_t reduce_range(uint64_t h, uint64_t n) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(h, n);
#else
  __extension__ typedef unsigned __int128 u128;  // GCC/Clang extension; __extension__ keeps -pedantic quiet
  return static_cast<uint64_t>((static_cast<u128>(h) * n) >> 64);
#endif
}

/// The consistent owner partition of [0, N) over n owners (h0). Trivially copyable, usable on device.
struct Partitioner {
  static constexpr int kRounds = 3;
  uint64_t n_items = 0;   ///< N (number of hashable items: elements, or rows when row width D > 1)
  uint32_t n_owners = 1;  ///< n
  uint32_t half_bits = 1; ///< Feistel half width h; the walk domain is [0, 4^h)
  uint64_t half_mask = 1;
  uint64_t keys[kRounds] = {0, 0, 0};  ///< round multipliers (odd)
  uint64_t adds[kRounds] = {0, 0, 0};  ///< round addends
  uint64_t magic = 0;     ///< Lemire's fast div/mod constant for n_owners (used while N <= 2^32)

  /// Build the partition of [0, n_items) over n_owners owners from a seed agreed by all ranks.
  static Partitioner make(uint64_t n_items, uint32_t n_owners, uint64_t seed) {
    Partitioner p;
    p.n_items = n_items;
    p.n_owners = n_owners == 0 ? 1 : n_owners;
    uint32_t bits = 0;
    for (uint64_t m = n_items > 1 ? n_items - 1 : 0; m != 0; m >>= 1) ++bits;
    uint32_t h = (bits + 1) / 2;
    if (h == 0) h = 1;
    p.half_bits = h;
    p.half_mask = (h >= 64) ? ~0ULL : ((1ULL << h) - 1);
    p.magic = ~0ULL / p.n_owners + 1;
    uint64_t s = seed;
    for (int r = 0; r < kRounds; ++r) {
      s += 0x9e3779b97f4a7c15ULL;
      p.keys[r] = mix64(s) | 1u;
      p.adds[r] = mix64(s ^ 0x5851f42d4c957f2dULL);
    }
    return p;
  }

  /// Round function: the top h bits of r * a_k + b_k (multiply-add-shift; one multiply).
  ZEN_HD uint64_t round_fn(uint64_t r, int k) const { return (r * keys[k] + adds[k]) >> (64 - half_bits); }

  ZEN_HD uint64_t feistel(uint64_t x) const {
    uint64_t l = (x >> half_bits) & half_mask, r = x & half_mask;
    for (int k = 0; k < kRounds; ++k) {
      uint64_t nl = r;
      r = l ^ round_fn(r, k);
      l = nl;
    }
    return (l << half_bits) | r;
  }

  ZEN_HD uint64_t feistel_inv(uint64_t y) const {
    uint64_t l = (y >> half_bits) & half_mask, r = y & half_mask;
    for (int k = kRounds - 1; k >= 0; --k) {
      uint64_t pr = l;
      l = r ^ round_fn(l, k);
      r = pr;
    }
    return (l << half_bits) | r;
  }

  /// pi: a bijection on [0, N) (cycle walking keeps the Feistel permutation inside the range).
  ZEN_HD uint64_t permute(uint64_t x) const {
    do { x = feistel(x); } while (x >= n_items);
    return x;
  }
  ZEN_HD uint64_t unpermute(uint64_t y) const {
    do { y = feistel_inv(y); } while (y >= n_items);
    return y;
  }

  /// v div n and v mod n; exact fast path (multiply-high) for v < 2^32.
  ZEN_HD void divmod(uint64_t v, uint64_t* q, uint32_t* r) const {
    if (n_owners == 1) {
      *q = v;
      *r = 0;
    } else if (v <= 0xFFFFFFFFULL) {
      *q = reduce_range(magic, v);
      *r = static_cast<uint32_t>(reduce_range(magic * v, n_owners));
    } else {
      *q = v / n_owners;
      *r = static_cast<uint32_t>(v % n_owners);
    }
  }
  /// h0(idx): the owner of idx.
  ZEN_HD uint32_t owner(uint64_t idx) const {
    uint64_t q;
    uint32_t r;
    divmod(permute(idx), &q, &r);
    return r;
  }
  /// Owner and position of idx within I_owner in one evaluation of pi.
  ZEN_HD void locate(uint64_t idx, uint32_t* owner_out, uint64_t* pos_out) const {
    divmod(permute(idx), pos_out, owner_out);
  }
  /// Inverse: the global index at position pos of owner i.
  ZEN_HD uint64_t index_at(uint32_t owner_id, uint64_t pos) const {
    return unpermute(static_cast<uint64_t>(owner_id) + static_cast<uint64_t>(n_owners) * pos);
  }
  /// |I_i|: number of items owned by owner i.
  ZEN_HD uint64_t owner_size(uint32_t i) const {
    return i < n_items ? (n_items - 1 - i) / n_owners + 1 : 0;
  }
};

}  // namespace zen
