#pragma once
// The owner side of the two-phase schemes (balanced, sparse_ps), private: sum the pushed
// (position, row) segments into a compact accumulator over the owner's set, then write the owner's
// pull message (COO positions or a presence bitmap, then the value rows in position order).
//
// Deterministic: positions are split among the pool's tasks in word-aligned ranges, and each task
// walks the sources in rank order, so a position's contributions are always added in rank order
// (first one copied, the rest added in the accumulation type, rounded once when written).
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "plan_util.hpp"
#include "zen/error.hpp"

namespace zen::plan {

template <typename T>
inline T load_as(const uint8_t* p) {
  T x;
  std::memcpy(static_cast<void*>(&x), p, sizeof(T));
  return x;
}
template <typename T>
inline void store_as(uint8_t* p, T x) {
  std::memcpy(p, static_cast<const void*>(&x), sizeof(T));
}
/// Row operations on value rows that may sit at any byte offset of a message (after 4-byte keys):
/// plain vectorizable loops through a 1-byte-aligned alias of T where T is float/double, memcpy
/// conversions for the 16-bit types (accumulated in fp32).
template <typename T, typename A>
inline void row_load(A* dst, const uint8_t* src, size_t D) {
  if constexpr (std::is_same_v<A, T>) {
    std::memcpy(dst, src, D * sizeof(T));
  } else {
    for (size_t c = 0; c < D; ++c) dst[c] = static_cast<A>(load_as<T>(src + c * sizeof(T)));
  }
}
template <typename T, typename A>
inline void row_add(A* __restrict dst, const uint8_t* __restrict src, size_t D) {
  if constexpr (std::is_same_v<A, T>) {
    typedef T Unaligned __attribute__((aligned(1), may_alias));
    const Unaligned* u = reinterpret_cast<const Unaligned*>(src);
    for (size_t c = 0; c < D; ++c) dst[c] += u[c];
  } else {
    for (size_t c = 0; c < D; ++c) dst[c] += static_cast<A>(load_as<T>(src + c * sizeof(T)));
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
    for (size_t c = 0; c < D; ++c) store_as<T>(dst + c * sizeof(T), static_cast<T>(src[c]));
  }
}

inline uint64_t load_key(const uint8_t* keys, size_t k, size_t isz) {
  return isz == 4 ? load_as<uint32_t>(keys + 4 * k) : load_as<uint64_t>(keys + 8 * k);
}
inline void store_key(uint8_t* keys, size_t k, size_t isz, uint64_t q) {
  if (isz == 4) store_as<uint32_t>(keys + 4 * k, static_cast<uint32_t>(q));
  else store_as<uint64_t>(keys + 8 * k, q);
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
};

/// A pushed segment: `count` keys (isz bytes each) followed by `count` value rows.
struct Segment {
  const uint8_t* data = nullptr;
  uint64_t count = 0;
};

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
      const uint64_t q = load_key(segs[src].data, k, isz);
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
        kv[o++] = KV{load_key(segs[src].data, k, isz), (static_cast<uint64_t>(src) << 40) | k};
    st.sorter.sort(st.kv, st.kv_tmp, received, bits_for(m), &tp);
    kv = st.kv.data();
    uint64_t K = 0;
    for (size_t i = 0; i < received; ++i) K += (i == 0 || kv[i].key != kv[i - 1].key);
    uint64_t* spos = grow(st.spos, K);
    uint8_t* svals = grow(st.svals, K * rb);
    auto row = [&](uint64_t v) {
      const int src = static_cast<int>(v >> 40);
      const uint64_t k = v & ((uint64_t{1} << 40) - 1);
      return segs[src].data + segs[src].count * isz + k * rb;
    };
    size_t j = 0;
    for (size_t i = 0; i < received;) {
      size_t e = i + 1;
      while (e < received && kv[e].key == kv[i].key) ++e;
      spos[j] = kv[i].key;
      for (size_t c = 0; c < D; ++c) {
        A a = static_cast<A>(load_as<T>(row(kv[i].val) + c * vs));
        for (size_t x = i + 1; x < e; ++x) a += static_cast<A>(load_as<T>(row(kv[x].val) + c * vs));
        store_as<T>(svals + j * rb + c * vs, static_cast<T>(a));
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
      const uint8_t* keys = segs[src].data;
      const uint64_t cnt = segs[src].count;
      const uint8_t* rows = keys + cnt * isz;
      for (size_t k = 0; k < cnt; ++k) {
        if (k + kPrefetchAhead < cnt) {
          const uint64_t qa = load_key(keys, k + kPrefetchAhead, isz);
          if (qa >= lo && qa < hi) prefetch_row(acc + qa * D, D * sizeof(A), true);
        }
        const uint64_t q = load_key(keys, k, isz);
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

/// Write the owner's pull message into `msg`: the presence bitmap (ceil(m/8) bytes) or K positions
/// of isz bytes, then the K value rows in position order. Clears the presence bits.
template <typename T>
void owner_write(OwnerState& st, size_t isz, size_t D, bool bitmap, uint8_t* msg, detail::ThreadPool& tp) {
  using A = typename accum_of<T>::type;
  const size_t vs = sizeof(T), rb = D * vs;
  const uint64_t m = st.m, K = st.K;
  if (st.sparse) {
    const size_t bb = static_cast<size_t>((m + 7) / 8);
    if (bitmap) {
      if (bb) std::memset(msg, 0, bb);
      for (uint64_t k = 0; k < K; ++k) msg[st.spos[k] >> 3] = static_cast<uint8_t>(msg[st.spos[k] >> 3] | (1u << (st.spos[k] & 7)));
    } else {
      for (uint64_t k = 0; k < K; ++k) store_key(msg, k, isz, st.spos[k]);
    }
    if (K) std::memcpy(msg + (bitmap ? bb : K * isz), st.svals.data(), K * rb);
    return;
  }
  const A* acc = reinterpret_cast<const A*>(st.acc.data());
  uint64_t* present = st.present.data();
  const size_t words = static_cast<size_t>((m + 63) / 64);
  const size_t bitmap_b = static_cast<size_t>((m + 7) / 8);
  uint8_t* vout = msg + (bitmap ? bitmap_b : K * isz);
  if (bitmap && bitmap_b) std::memcpy(msg, present, bitmap_b);  // LSB-first: little-endian words
  // Words are split among tasks; each task's output starts at the popcount before its range.
  const int tasks = tp.tasks_for(K * D, size_t{1} << 16);
  std::vector<uint64_t>& before = st.scratch;
  before.assign(static_cast<size_t>(tasks) + 1, 0);
  if (tasks > 1) {
    tp.run(tasks, [&](int t) {
      const size_t b = detail::ThreadPool::chunk_begin(words, tasks, t), e = detail::ThreadPool::chunk_begin(words, tasks, t + 1);
      uint64_t c = 0;
      for (size_t i = b; i < e; ++i) c += static_cast<uint64_t>(__builtin_popcountll(present[i]));
      before[static_cast<size_t>(t) + 1] = c;
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
        if (!bitmap) store_key(msg, o, isz, q);
        row_store<T>(vout + o * rb, acc + q * D, D);
        ++o;
      }
    }
  });
  st.dirty = false;
}

/// Check an owner's pull message of `K` rows over `m` positions: a bitmap must have exactly K bits
/// set and clear padding; COO positions must be < m. Throws InvalidUsage naming the owner.
inline void check_pull_message(const uint8_t* msg, bool bitmap, uint64_t m, uint64_t K, size_t isz, int me, int owner,
                               const char* scheme) {
  bool ok = true;
  if (bitmap) {
    const size_t nb = static_cast<size_t>((m + 7) / 8);
    uint64_t c = 0;
    size_t i = 0;
    for (; i + 8 <= nb; i += 8) c += static_cast<uint64_t>(__builtin_popcountll(load_as<uint64_t>(msg + i)));
    for (; i < nb; ++i) c += static_cast<uint64_t>(__builtin_popcount(msg[i]));
    ok = c == K && !(m % 8 && (msg[m / 8] >> (m % 8)));
  } else {
    for (uint64_t k = 0; k < K && ok; ++k) ok = load_key(msg, k, isz) < m;
  }
  if (!ok)
    ZEN_THROW(Result::InvalidUsage, "rank " + std::to_string(me) + " " + scheme + " pull: owner " + std::to_string(owner) +
                                        " sent a " + (bitmap ? "bitmap" : "position list") + " that does not match the " +
                                        std::to_string(K) + " rows it announced over a set of " + std::to_string(m));
}

/// f(position, k) for the K positions of an owner's pull message, ascending.
template <typename F>
void for_positions(const uint8_t* msg, bool bitmap, uint64_t m, uint64_t K, size_t isz, F&& f) {
  if (bitmap) {
    const size_t nb = static_cast<size_t>((m + 7) / 8), words = (nb + 7) / 8;
    uint64_t k = 0;
    for (size_t i = 0; i < words; ++i) {
      uint64_t x = 0;
      std::memcpy(&x, msg + i * 8, nb - i * 8 < 8 ? nb - i * 8 : 8);
      while (x) {
        f(i * 64 + static_cast<uint64_t>(__builtin_ctzll(x)), k++);
        x &= x - 1;
      }
    }
  } else {
    for (uint64_t k = 0; k < K; ++k) f(load_key(msg, k, isz), k);
  }
}

}  // namespace zen::plan
