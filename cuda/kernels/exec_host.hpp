#pragma once
// Exec<Host>: the kernel bodies run on the CPU over host memory (contract in exec.hpp). Large
// launches are split over two threads of a per-thread pool, so that the bodies' atomics (the hash
// table's compare-and-swap, the block counters) run concurrently as on the GPU; warps run their
// 32 lanes in lockstep on one thread; a tile program runs each block's phases over its items in
// order, with the block steps between them. The primitives are the C++ standard library's.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "exec.hpp"
#include "portable.hpp"
#include "zen/detail/thread_pool.hpp"
#include "zen/error.hpp"

namespace zen::cuda::detail {

/// One warp of 32 lanes run in lockstep by one host thread: per-lane variables are arrays.
struct HostWarp {
  template <class T>
  struct Var {
    T v[32];
    T& operator[](unsigned lane) { return v[lane]; }
    const T& operator[](unsigned lane) const { return v[lane]; }
  };
  template <class F>
  void lanes(F&& f) {
    for (unsigned lane = 0; lane < 32; ++lane) f(lane);
  }
  uint32_t ballot(const Var<bool>& p) const {
    uint32_t w = 0;
    for (unsigned lane = 0; lane < 32; ++lane) w |= static_cast<uint32_t>(p[lane]) << lane;
    return w;
  }
};

template <>
struct Exec<Host> {
  /// Two threads (this one and a pool worker of this thread): concurrency without oversubscribing
  /// the CPU when several ranks (threads) launch at once.
  static zen::detail::ThreadPool& pool() {
    thread_local zen::detail::ThreadPool p(2);
    return p;
  }
  static constexpr uint64_t kGrain = 1u << 14;  // items per task below which a launch stays on one thread

  /// f(begin, end) over [0, n) in contiguous chunks, concurrently when n is large.
  template <class F>
  static void split(uint64_t n, uint64_t grain, const F& f) {
    pool().parallel_for(static_cast<size_t>(n), static_cast<size_t>(grain),
                        [&](size_t b, size_t e, int) { f(static_cast<uint64_t>(b), static_cast<uint64_t>(e)); });
  }

  template <class F>
  static void for_each(uint64_t n, const F& body, void*) {
    if (n == 0) return;
    split(n, kGrain, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) body(i);
    });
  }

  template <class K>
  static void for_each_warp(uint64_t words, const K& body, void*) {
    if (words == 0) return;
    split(words, kGrain / 32, [&](uint64_t b, uint64_t e) {
      HostWarp w;
      for (uint64_t i = b; i < e; ++i) body(w, i);
    });
  }

  template <class K>
  static void for_each_tile(uint64_t n, const K& body, void*) {
    if (n == 0) return;
    constexpr uint32_t T = K::kThreads;
    constexpr uint64_t tile = static_cast<uint64_t>(T) * K::kItems;
    const uint64_t tiles = (n + tile - 1) / tile;
    split(tiles, kGrain / tile + 1, [&](uint64_t b0, uint64_t b1) {
      std::vector<typename K::Item> items(tile);
      std::vector<uint64_t> shared((body.shared_bytes() + 7) / 8);
      auto* sh = reinterpret_cast<uint8_t*>(shared.data());
      for (uint64_t b = b0; b < b1; ++b) {
        for (uint32_t t = 0; t < T; ++t) body.block_init(t, T, sh);
        for (int ph = 0; ph < K::kPhases; ++ph) {
          for (int j = 0; j < K::kItems; ++j)
            for (uint32_t t = 0; t < T; ++t) {
              const uint64_t slot = static_cast<uint64_t>(j) * T + t;  // the GPU's coalesced item order
              body.item(ph, b * tile + slot, items[slot], sh);
            }
          for (uint32_t t = 0; t < T; ++t) body.block_step(ph, t, T, sh);
        }
      }
    });
  }

  // ---- primitives ----
  template <class Gen, class Pred, class T>
  static size_t select_if_bytes(uint64_t, const Gen&, const Pred&, T*) {
    return 0;
  }
  template <class Gen, class Pred, class T>
  static void select_if(void*, size_t, const Gen& gen, uint64_t n, const Pred& pred, T* out, uint64_t* d_num, void*) {
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; ++i) {
      const T v = gen(i);
      if (pred(v)) out[k++] = v;
    }
    *d_num = k;
  }

  static size_t select_flagged_bytes(uint64_t) { return 0; }
  static void select_flagged(void*, size_t, const uint8_t* flags, uint64_t n, uint32_t* out, uint64_t* d_num, void*) {
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; ++i)
      if (flags[i]) out[k++] = static_cast<uint32_t>(i);
    *d_num = k;
  }

  template <class K, class V>
  struct Pair {
    K k;
    V v;
  };
  template <class K, class V>
  static size_t sort_pairs_bytes(uint64_t n, int) {
    return static_cast<size_t>(n) * sizeof(Pair<K, V>);
  }
  template <class K, class V>
  static void sort_pairs(void* temp, size_t temp_bytes, const K* kin, K* kout, const V* vin, V* vout, uint64_t n,
                         int end_bit, void*) {
    ZEN_CHECK_CODE((temp_bytes >= sort_pairs_bytes<K, V>(n, end_bit)), Result::InternalError,
                   "host sort_pairs: scratch smaller than its query");
    auto* p = static_cast<Pair<K, V>*>(temp);
    for (uint64_t i = 0; i < n; ++i) p[i] = Pair<K, V>{kin[i], vin[i]};
    std::stable_sort(p, p + n, [](const Pair<K, V>& a, const Pair<K, V>& b) { return a.k < b.k; });
    for (uint64_t i = 0; i < n; ++i) {
      kout[i] = p[i].k;
      vout[i] = p[i].v;
    }
  }

  static size_t exclusive_sum_bytes(uint64_t) { return 0; }
  static void exclusive_sum(void*, size_t, const uint64_t* in, uint64_t* out, uint64_t n, void*) {
    std::exclusive_scan(in, in + n, out, uint64_t{0});
  }

  template <class Gen>
  static size_t sum_bytes(uint64_t, const Gen&) {
    return 0;
  }
  template <class Gen>
  static void sum(void*, size_t, const Gen& gen, uint64_t n, uint64_t* d_out, void*) {
    uint64_t s = 0;
    for (uint64_t i = 0; i < n; ++i) s += gen(i);
    *d_out = s;
  }
};

}  // namespace zen::cuda::detail
