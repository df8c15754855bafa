#pragma once
// The owner side of the two-phase schemes (balanced, sparse_ps), private: sum the pushed
// (position, row) segments into a compact accumulator over the owner's set, or merge them when they
// arrive sorted (owner_merge), then write the owner's pull message (COO positions, a presence bitmap
// or Elias-Fano, then the value rows in position order). What those bytes are (codes, sizes, rules,
// checks) is the wire format, src/encode/wire.hpp; the stages around this: owner_exchange.hpp.
//
// Deterministic: positions are split among the pool's tasks in word-aligned ranges, and each task
// walks the sources in rank order, so a position's contributions are always added in rank order
// (first one copied, the rest added in the accumulation type, rounded once when written).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "../encode/wire.hpp"
#include "plan_util.hpp"
#include "zen/detail/popcount.hpp"
#include "zen/encode/elias_fano.hpp"
#include "zen/error.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen::plan {

/// Row operations on value rows that may sit at any byte offset of a message (after 4-byte keys):
/// plain vectorizable loops through a 1-byte-aligned alias of T where T is float/double, memcpy
/// conversions for the 16-bit types (accumulated in fp32).
template <typename T, typename A>
inline void row_load(A* dst, const uint8_t* src, size_t D) {
  if constexpr (std::is_same_v<A, T>) {
    std::memcpy(dst, src, D * sizeof(T));
  } else {
    for (size_t c = 0; c < D; ++c) dst[c] = static_cast<A>(wire::load_as<T>(src + c * sizeof(T)));
  }
}
template <typename T, typename A>
inline void row_add(A* __restrict dst, const uint8_t* __restrict src, size_t D) {
  if constexpr (std::is_same_v<A, T>) {
    typedef T Unaligned __attribute__((aligned(1), may_alias));
    const Unaligned* u = reinterpret_cast<const Unaligned*>(src);
    for (size_t c = 0; c < D; ++c) dst[c] += u[c];
  } else {
    for (size_t c = 0; c < D; ++c) dst[c] += static_cast<A>(wire::load_as<T>(src + c * sizeof(T)));
  }
}
/// Prefetch the cache lines of a row of `bytes` bytes (rows are visited in random order: hide latency).
inline void prefetch_row(const void* p, size_t bytes, bool write = false) {
  const auto* b = static_cast<const char*>(p);
  for (size_t o = 0; o < bytes && o < 512; o += 64) {
    if (write) __builtin_prefetch(b + o, 1);
    else __builtin_prefetch(b + o, 0);
  }
}
constexpr size_t kPrefetchAhead = 8;

/// Copy rows kv[b..e) (key = destination row, val = source byte offset) of `rb` bytes from src into
/// dst + row * rb, prefetching destinations ahead; small rows as single stores.
inline void scatter_rows(uint8_t* dst, const uint8_t* src, const KV* kv, size_t b, size_t e, size_t rb) {
  constexpr size_t ahead = 16;
  auto body = [&](auto width) {
    constexpr size_t W = decltype(width)::value;
    for (size_t k = b; k < e; ++k) {
      if (k + ahead < e) __builtin_prefetch(dst + kv[k + ahead].key * (W ? W : rb), 1);
      if constexpr (W != 0) std::memcpy(dst + kv[k].key * W, src + kv[k].val, W);
      else std::memcpy(dst + kv[k].key * rb, src + kv[k].val, rb);
    }
  };
  switch (rb) {
    case 2: body(std::integral_constant<size_t, 2>{}); break;
    case 4: body(std::integral_constant<size_t, 4>{}); break;
    case 8: body(std::integral_constant<size_t, 8>{}); break;
    default: body(std::integral_constant<size_t, 0>{}); break;
  }
}

/// dst[c] += src[c] for rows of T at any byte offsets (T = float or double).
template <typename T>
inline void row_add_bytes(uint8_t* __restrict dst, const uint8_t* __restrict src, size_t D) {
  typedef T Unaligned __attribute__((aligned(1), may_alias));
  Unaligned* d = reinterpret_cast<Unaligned*>(dst);
  const Unaligned* u = reinterpret_cast<const Unaligned*>(src);
  for (size_t c = 0; c < D; ++c) d[c] += u[c];
}
template <typename T, typename A>
inline void row_store(uint8_t* dst, const A* src, size_t D) {
  if constexpr (std::is_same_v<A, T>) {
    std::memcpy(dst, src, D * sizeof(T));
  } else {
    for (size_t c = 0; c < D; ++c) wire::store_as<T>(dst + c * sizeof(T), static_cast<T>(src[c]));
  }
}


/// Owner accumulator and presence bitmap over m positions, reused across calls. `present` is all
/// zero between calls (write() clears what accumulate() set; a call that fails in between marks it
/// dirty and the next call clears it whole).
/// Huge owner sets (m * D accumulators over 512 MiB, or m far above what was received: N up to 2^63
/// held sparsely) use a sparse mode instead: the received keys are radix-sorted (stably, so sources
/// stay in rank order) and equal positions summed, giving positions `spos` and rows `svals`.
struct OwnerState {
  std::vector<uint8_t> acc;
  std::vector<uint64_t> present;
  std::vector<uint64_t> scratch;
  bool dirty = false;
  bool sparse = false;
  uint64_t m = 0, K = 0;
  std::vector<KV> kv, kv_tmp;
  RadixSort sorter;
  std::vector<uint64_t> spos;
  std::vector<uint8_t> svals;
  std::vector<uint64_t> mkeys[2];  // owner_merge: ping-pong keys and rows (accumulation type)
  std::vector<uint8_t> mvals[2];
};

/// A pushed segment: `count` keys (isz bytes each, decoded when the push was not COO) and `count`
/// value rows.
struct Segment {
  const uint8_t* keys = nullptr;
  const uint8_t* rows = nullptr;
  uint64_t count = 0;
};


/// The received push segments of an owner with a set of m positions: segment p starts at seg[p]
/// (the own one included) with count[p] rows, an index part of ib[p] bytes in code enc[p], then the
/// rows. COO keys are used in place; other index parts are validated and decoded into `scratch`.
/// A malformed one throws InvalidUsage naming this rank, the scheme and the peer.
inline void received_segments(int n, int me, const uint8_t* const* seg, const uint64_t* count, const uint8_t* enc,
                              const size_t* ib, uint64_t m, size_t isz, std::vector<uint8_t>& scratch, Segment* segs,
                              const char* scheme) {
  size_t decoded = 0;
  for (int p = 0; p < n; ++p) decoded += enc[p] != wire::kEncCoo ? count[p] : 0;
  uint8_t* rk = grow(scratch, decoded * isz);
  for (int p = 0; p < n; ++p) {
    const uint8_t* keys = seg[p];
    if (enc[p] != wire::kEncCoo) {
      if (!wire::decode_index_part(enc[p], seg[p], m, count[p], isz, rk))
        ZEN_THROW(Result::InvalidUsage, "rank " + std::to_string(me) + " " + scheme + " push: peer " + std::to_string(p) +
                                            " sent a malformed " + wire::encoding_name(enc[p]) + " index part for " +
                                            std::to_string(count[p]) + " rows over a set of " + std::to_string(m));
      keys = rk;
      rk += count[p] * isz;
    }
    segs[p] = Segment{keys, seg[p] + ib[p], count[p]};
  }
}

/// Sum the segments (in rank order) into st; returns K, the number of distinct positions.
/// Positions >= m are an error naming the source rank (ranks disagree on N, the seed or ranges).
template <typename T>
uint64_t owner_accumulate(OwnerState& st, const Segment* segs, int n, size_t isz, size_t D, uint64_t m,
                          detail::ThreadPool& tp, int me, const char* scheme) {
  using A = typename accum_of<T>::type;
  const size_t vs = sizeof(T), rb = D * vs;
  st.m = m;
  uint64_t received = 0;
  for (int src = 0; src < n; ++src) {
    received += segs[src].count;
    for (size_t k = 0; k < segs[src].count; ++k) {
      const uint64_t q = wire::load_key(segs[src].keys, k, isz);
      if (q >= m)
        ZEN_THROW(Result::InvalidUsage, "rank " + std::to_string(me) + " " + scheme + " push: peer " + std::to_string(src) +
                                            " sent position " + std::to_string(q) + " outside owner set of size " +
                                            std::to_string(m) + " (ranks disagree on N, the seed or the ranges)");
    }
  }
  st.sparse = !(static_cast<double>(m) * static_cast<double>(D * sizeof(A)) <= static_cast<double>(size_t{512} << 20) &&
                m <= 64 * received + 65536);
  if (st.sparse) {
    // (position, source << 40 | entry), stably sorted by position: sources stay in rank order.
    KV* kv = grow(st.kv, received);
    size_t o = 0;
    for (int src = 0; src < n; ++src)
      for (size_t k = 0; k < segs[src].count; ++k)
        kv[o++] = KV{wire::load_key(segs[src].keys, k, isz), (static_cast<uint64_t>(src) << 40) | k};
    st.sorter.sort(st.kv, st.kv_tmp, received, bits_for(m), &tp);
    kv = st.kv.data();
    uint64_t K = 0;
    for (size_t i = 0; i < received; ++i) K += (i == 0 || kv[i].key != kv[i - 1].key);
    uint64_t* spos = grow(st.spos, K);
    uint8_t* svals = grow(st.svals, K * rb);
    auto row = [&](uint64_t v) {
      const int src = static_cast<int>(v >> 40);
      const uint64_t k = v & ((uint64_t{1} << 40) - 1);
      return segs[src].rows + k * rb;
    };
    size_t j = 0;
    for (size_t i = 0; i < received;) {
      size_t e = i + 1;
      while (e < received && kv[e].key == kv[i].key) ++e;
      spos[j] = kv[i].key;
      for (size_t c = 0; c < D; ++c) {
        A a = static_cast<A>(wire::load_as<T>(row(kv[i].val) + c * vs));
        for (size_t x = i + 1; x < e; ++x) a += static_cast<A>(wire::load_as<T>(row(kv[x].val) + c * vs));
        wire::store_as<T>(svals + j * rb + c * vs, static_cast<T>(a));
      }
      ++j;
      i = e;
    }
    st.K = K;
    return K;
  }
  A* acc = reinterpret_cast<A*>(grow(st.acc, static_cast<size_t>(m) * D * sizeof(A)));
  const size_t words = static_cast<size_t>((m + 63) / 64);
  uint64_t* present = grow(st.present, words);
  if (st.dirty) std::memset(present, 0, words * sizeof(uint64_t));
  st.dirty = true;
  const int tasks = tp.tasks_for(received * D, size_t{1} << 16);
  std::vector<uint64_t>& fresh = st.scratch;
  fresh.assign(static_cast<size_t>(tasks), 0);
  tp.run(tasks, [&](int t) {
    const uint64_t lo = (m * static_cast<uint64_t>(t) / static_cast<uint64_t>(tasks)) & ~uint64_t{63};
    const uint64_t hi = t + 1 == tasks ? m : (m * static_cast<uint64_t>(t + 1) / static_cast<uint64_t>(tasks)) & ~uint64_t{63};
    uint64_t f = 0;
    for (int src = 0; src < n; ++src) {
      const uint8_t* keys = segs[src].keys;
      const uint64_t cnt = segs[src].count;
      const uint8_t* rows = segs[src].rows;
      for (size_t k = 0; k < cnt; ++k) {
        if (k + kPrefetchAhead < cnt) {
          const uint64_t qa = wire::load_key(keys, k + kPrefetchAhead, isz);
          if (qa >= lo && qa < hi) prefetch_row(acc + qa * D, D * sizeof(A), true);
        }
        const uint64_t q = wire::load_key(keys, k, isz);
        if (q < lo || q >= hi) continue;
        A* a = acc + q * D;
        const uint8_t* v = rows + k * rb;
        uint64_t& word = present[q >> 6];
        const uint64_t bit = uint64_t{1} << (q & 63);
        if (!(word & bit)) {
          word |= bit;
          ++f;
          row_load<T>(a, v, D);
        } else {
          row_add<T>(a, v, D);
        }
      }
    }
    fresh[static_cast<size_t>(t)] = f;
  });
  uint64_t K = 0;
  for (int t = 0; t < tasks; ++t) K += fresh[static_cast<size_t>(t)];
  st.K = K;
  return K;
}

/// Largest rank count the merge path takes: the left-deep merge makes n - 1 passes over a growing
/// result, and zen_micro's BM_OwnerStage (D = 1) has it 1.8-2.9x faster than accumulating over the
/// set at n = 2 and 4, even at n = 6 and slower at n = 8.
constexpr int kMaxMerge = 4;

/// One 2-way merge step of owner_merge for one value per row, T == A (float / double), keys of KS
/// bytes on side b: branch-free (selection by masks, an absent side contributes -0.0). Merges while
/// both sides last; returns the rows written and leaves the read counts in i, j.
template <typename A, size_t KS>
size_t merge2_scalar(const uint64_t* __restrict ck, const A* __restrict cv, size_t cn, const uint8_t* __restrict bk,
                     const uint8_t* __restrict bv, size_t nb, uint64_t* __restrict nk, A* __restrict nv, size_t& i_out,
                     size_t& j_out) {
  using U = std::conditional_t<sizeof(A) == 4, uint32_t, uint64_t>;
  static_assert(sizeof(U) == sizeof(A));
  const A neg_zero = static_cast<A>(-0.0);
  U ident;
  std::memcpy(&ident, &neg_zero, sizeof(U));
  size_t i = 0, j = 0, o = 0;
  while (i < cn && j < nb) {
    const uint64_t a = ck[i];
    const uint64_t b = KS == 4 ? wire::load_as<uint32_t>(bk + 4 * j) : wire::load_as<uint64_t>(bk + 8 * j);
    const U ta = static_cast<U>(a <= b), tb = static_cast<U>(b <= a);
    const U ma = U{0} - ta, mb = U{0} - tb;
    U ua, ub;
    std::memcpy(&ua, cv + i, sizeof(U));
    std::memcpy(&ub, bv + j * sizeof(A), sizeof(U));
    ua = (ua & ma) | (ident & ~ma);
    ub = (ub & mb) | (ident & ~mb);
    A x, y;
    std::memcpy(&x, &ua, sizeof(U));
    std::memcpy(&y, &ub, sizeof(U));
    nk[o] = a < b ? a : b;
    nv[o] = x + y;
    i += static_cast<size_t>(ta);
    j += static_cast<size_t>(tb);
    ++o;
  }
  i_out = i;
  j_out = j;
  return o;
}

/// Keys (isz bytes) and rows (T) j0..nb-1 of a segment's slice, the first at key index kb, into
/// 8-byte keys and rows of A.
template <typename T, typename A>
void load_rows(const uint8_t* keys, size_t isz, const uint8_t* rows, size_t kb, size_t j0, size_t nb, uint64_t* nk,
               A* nv, size_t D, size_t rb) {
  const size_t cnt = nb - j0;
  if (isz == 4) {
    for (size_t j = 0; j < cnt; ++j) nk[j] = wire::load_as<uint32_t>(keys + 4 * (kb + j));
  } else {
    std::memcpy(nk, keys + 8 * kb, cnt * 8);
  }
  const uint8_t* src = rows + j0 * rb;
  if constexpr (std::is_same_v<A, T>) {
    std::memcpy(nv, src, cnt * rb);
  } else {
    for (size_t k = 0; k < cnt * D; ++k) nv[k] = static_cast<A>(wire::load_as<T>(src + k * sizeof(T)));
  }
}

/// Owner sums when every segment's keys ascend (pushes sent sorted, the own segment sorted
/// locally): the segments are merged in rank order, left-deep (segment 0 with 1, the result with
/// 2, ...), so every position's sum is taken in rank order in the accumulation type and rounded once
/// at the end: the bits of owner_accumulate. The distinct positions and rows go to st.spos /
/// st.svals (the sparse mode's layout, which owner_write sends), touching nothing of size m: no
/// accumulator, no presence bitmap, no scan over the owner set. With one value per row the 2-way
/// merge is branch-free (an absent side adds -0.0, which leaves every value's bits as they are).
/// Tasks take ranges of positions (segment bounds by binary search) and work in their share of
/// two ping-pong buffers; the pieces are then moved together in order. Keys >= m or not strictly
/// ascending throw InvalidUsage naming the source.
template <typename T>
uint64_t owner_merge(OwnerState& st, const Segment* segs, int n, size_t isz, size_t D, uint64_t m,
                     detail::ThreadPool& tp, int me, const char* scheme) {
  using A = typename accum_of<T>::type;
  const size_t vs = sizeof(T), rb = D * vs;
  const size_t un = static_cast<size_t>(n);
  st.m = m;
  st.sparse = true;
  uint64_t received = 0;
  for (int s = 0; s < n; ++s) received += segs[s].count;
  uint64_t* spos = grow(st.spos, received);
  uint8_t* svals = grow(st.svals, received * rb);
  uint64_t* mk[2] = {grow(st.mkeys[0], received), grow(st.mkeys[1], received)};
  A* mv[2] = {reinterpret_cast<A*>(grow(st.mvals[0], received * D * sizeof(A))),
              reinterpret_cast<A*>(grow(st.mvals[1], received * D * sizeof(A)))};
  const int tasks = tp.tasks_for(received * D, size_t{1} << 15);
  const size_t ut = static_cast<size_t>(tasks);
  // scratch: (tasks + 1) x n segment bounds, then per task its output count and its bad source.
  std::vector<uint64_t>& sc = st.scratch;
  sc.assign((ut + 1) * un + 2 * ut, 0);
  uint64_t* bound = sc.data();
  uint64_t* produced = bound + (ut + 1) * un;
  uint64_t* bad = produced + ut;
  const uint64_t kNone = ~uint64_t{0};
  auto lo_of = [&](size_t t) { return t >= ut ? m : m / ut * t + m % ut * t / ut; };
  for (size_t t = 0; t <= ut; ++t) {
    const uint64_t lo = lo_of(t);
    for (size_t s = 0; s < un; ++s) {
      uint64_t a = 0, b = segs[s].count;  // first key >= lo (only meaningful for ascending keys)
      if (t == ut) a = b;
      while (a < b) {
        const uint64_t mid = a + (b - a) / 2;
        if (wire::load_key(segs[s].keys, mid, isz) < lo) a = mid + 1;
        else b = mid;
      }
      bound[t * un + s] = t ? std::max(a, bound[(t - 1) * un + s]) : 0;  // monotone whatever the keys
    }
  }
  tp.run(tasks, [&](int ti) {
    const size_t t = static_cast<size_t>(ti);
    const uint64_t lo = lo_of(t), hi = lo_of(t + 1);
    bad[t] = kNone;
    produced[t] = 0;
    uint64_t o0 = 0;
    for (size_t s = 0; s < un; ++s) o0 += bound[t * un + s];
    // Every slice strictly ascending within [lo, hi).
    for (size_t s = 0; s < un && bad[t] == kNone; ++s) {
      const size_t b = bound[t * un + s], e = bound[(t + 1) * un + s];
      if (b == e) continue;
      uint64_t prev = wire::load_key(segs[s].keys, b, isz);
      bool ok = prev >= lo;
      for (size_t j = b + 1; j < e; ++j) {
        const uint64_t q = wire::load_key(segs[s].keys, j, isz);
        ok &= q > prev;
        prev = q;
      }
      if (!ok || prev >= hi) bad[t] = s;
    }
    if (bad[t] != kNone) return;
    uint64_t* ck = mk[0] + o0;
    A* cv = mv[0] + o0 * D;
    uint64_t* nk = mk[1] + o0;
    A* nv = mv[1] + o0 * D;
    size_t cn = 0;
    for (size_t s = 0; s < un; ++s) {
      const size_t b0 = bound[t * un + s], nb = bound[(t + 1) * un + s] - b0;
      const uint8_t* keys = segs[s].keys;
      const uint8_t* rows = segs[s].rows + b0 * rb;
      auto bkey = [&](size_t j) { return wire::load_key(keys, b0 + j, isz); };
      auto bval = [&](size_t j, size_t c) { return static_cast<A>(wire::load_as<T>(rows + j * rb + c * vs)); };
      size_t i = 0, j = 0, o = 0;
      if constexpr (std::is_same_v<A, T>) {
        if (D == 1 && isz == 4) o = merge2_scalar<A, 4>(ck, cv, cn, keys + b0 * 4, rows, nb, nk, nv, i, j);
        else if (D == 1) o = merge2_scalar<A, 8>(ck, cv, cn, keys + b0 * 8, rows, nb, nk, nv, i, j);
      }
      if (i == 0 && j == 0) {
        while (i < cn && j < nb) {
          const uint64_t a = ck[i], b = bkey(j);
          A* dst = nv + o * D;
          if (a < b) {
            nk[o] = a;
            std::memcpy(dst, cv + i * D, D * sizeof(A));
            ++i;
          } else if (b < a) {
            nk[o] = b;
            for (size_t c = 0; c < D; ++c) dst[c] = bval(j, c);
            ++j;
          } else {
            nk[o] = a;
            for (size_t c = 0; c < D; ++c) dst[c] = cv[i * D + c] + bval(j, c);
            ++i;
            ++j;
          }
          ++o;
        }
      }
      if (i < cn) {
        std::memcpy(nk + o, ck + i, (cn - i) * sizeof(uint64_t));
        std::memcpy(nv + o * D, cv + i * D, (cn - i) * D * sizeof(A));
        o += cn - i;
      }
      if (j < nb) {
        load_rows<T, A>(keys, isz, rows, b0 + j, j, nb, nk + o, nv + o * D, D, rb);
        o += nb - j;
      }
      cn = o;
      std::swap(ck, nk);
      std::swap(cv, nv);
    }
    if (cn == 0) return;  // (nothing received: the buffers may be null)
    produced[t] = cn;
    std::memcpy(spos + o0, ck, cn * sizeof(uint64_t));
    if constexpr (std::is_same_v<A, T>) {
      std::memcpy(svals + o0 * rb, cv, cn * rb);
    } else {
      for (size_t k = 0; k < cn; ++k) row_store<T>(svals + (o0 + k) * rb, cv + k * D, D);
    }
  });
  for (size_t t = 0; t < ut; ++t)
    if (bad[t] != kNone)
      ZEN_THROW(Result::InvalidUsage, "rank " + std::to_string(me) + " " + scheme + " push: peer " + std::to_string(bad[t]) +
                                          " sent positions that are not strictly increasing within [0, " + std::to_string(m) +
                                          ") (ranks disagree on N, the seed or the ranges)");
  uint64_t K = 0;
  for (size_t t = 0; t < ut; ++t) {
    uint64_t from_at = 0;
    for (size_t s = 0; s < un; ++s) from_at += bound[t * un + s];
    if (from_at != K && produced[t]) {
      std::memmove(spos + K, spos + from_at, produced[t] * sizeof(uint64_t));
      std::memmove(svals + K * rb, svals + from_at * rb, produced[t] * rb);
    }
    K += produced[t];
  }
  st.K = K;
  return K;
}

/// Write the owner's pull message into `msg`: the index part in encoding `enc` (the presence
/// bitmap, K positions of isz bytes or Elias-Fano), then the K value rows in position order. Clears
/// the presence bits.
template <typename T>
void owner_write(OwnerState& st, size_t isz, size_t D, uint8_t enc, uint8_t* msg, detail::ThreadPool& tp) {
  const bool bitmap = enc == wire::kEncBitmap;
  using A = typename accum_of<T>::type;
  const size_t vs = sizeof(T), rb = D * vs;
  const uint64_t m = st.m, K = st.K;
  const size_t ib = wire::index_part_bytes(enc, m, K, isz);
  if (st.sparse) {
    const uint64_t* sp = st.spos.data();
    wire::write_index_part(enc, msg, m, K, isz, [&](uint64_t k) { return sp[k]; });
    if (K) std::memcpy(msg + ib, st.svals.data(), K * rb);
    return;
  }
  const A* acc = reinterpret_cast<const A*>(st.acc.data());
  uint64_t* present = st.present.data();
  const size_t words = static_cast<size_t>((m + 63) / 64);
  const size_t bitmap_b = static_cast<size_t>((m + 7) / 8);
  uint8_t* vout = msg + ib;
  if (bitmap && bitmap_b) std::memcpy(msg, present, bitmap_b);  // LSB-first: little-endian words
  if (enc == wire::kEncEf) {  // one pass over the presence words (read only: the value pass clears them)
    encode::EliasFanoWriter w(msg, m, K);
    for (size_t i = 0; i < words; ++i)
      for (uint64_t x = present[i]; x; x &= x - 1) w.push(i * 64 + static_cast<uint64_t>(__builtin_ctzll(x)));
    w.finish();
  }
  // Words are split among tasks; each task's output starts at the popcount before its range.
  const int tasks = tp.tasks_for(K * D, size_t{1} << 16);
  std::vector<uint64_t>& before = st.scratch;
  before.assign(static_cast<size_t>(tasks) + 1, 0);
  if (tasks > 1) {
    tp.run(tasks, [&](int t) {
      const size_t b = detail::ThreadPool::chunk_begin(words, tasks, t), e = detail::ThreadPool::chunk_begin(words, tasks, t + 1);
      before[static_cast<size_t>(t) + 1] = detail::popcount_bytes(present + b, (e - b) * sizeof(uint64_t));
    });
    for (int t = 0; t < tasks; ++t) before[static_cast<size_t>(t) + 1] += before[static_cast<size_t>(t)];
  }
  tp.run(tasks, [&](int t) {
    const size_t b = detail::ThreadPool::chunk_begin(words, tasks, t), e = detail::ThreadPool::chunk_begin(words, tasks, t + 1);
    uint64_t o = before[static_cast<size_t>(t)];
    for (size_t i = b; i < e; ++i) {
      uint64_t x = present[i];
      present[i] = 0;
      while (x) {
        const uint64_t q = i * 64 + static_cast<uint64_t>(__builtin_ctzll(x));
        x &= x - 1;
        if (enc == wire::kEncCoo) wire::store_key(msg, o, isz, q);
        row_store<T>(vout + o * rb, acc + q * D, D);
        ++o;
      }
    }
  });
  st.dirty = false;
}

}  // namespace zen::plan
