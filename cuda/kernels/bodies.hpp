#pragma once
// The kernel bodies of the device Balanced-Parallelism path, each a __host__ __device__ functor run
// by one launch helper (exec_gpu.cuh on the GPU, exec_host.hpp on the CPU; see exec.hpp):
//  - elementwise bodies: operator()(i) for i in [0, n) (grid-stride on the GPU, loops on the CPU);
//  - warp bodies: operator()(warp, w) for whole warps of 32 lanes (ballot: __ballot_sync on the GPU,
//    32 lanes in lockstep on one host thread);
//  - tile programs (HashInsert): blocks of kThreads threads x kItems items with shared memory,
//    phases over the items separated by barriers and cooperative block steps.
// Generators and predicates feed the primitives (select-if, sum).
#include <cstdint>

#include "portable.hpp"
#include "zen/hash/hash.hpp"

namespace zen::cuda::detail {

// ============================================================================================
// Region hashing: one tile program per block. Shared memory: per-owner entry counts and
// serial-region requests of the block (2 x n counters), the block's spill count and spill base.
// Phase 0: locate, count the owner, try the k parallel slots, else ask for a serial slot of the
//          owner (block-local index);
// step 0:  one atomic per (block, owner) adds the block's counts to the owner's total and reserves
//          the block's serial slots (the block-local counter becomes the reserved base);
// phase 1: take the serial slot, or, past cap2, ask for a spill slot (block-local index);
// step 1:  one atomic reserves the block's spill range;
// phase 2: write the spilled entries.
struct HashArgs {
  Partitioner part;
  uint64_t hseed[16];
  int k;
  uint64_t cap1, cap2;
  uint32_t* par;
  uint32_t* ser;
  uint32_t* serial_cnt;
  uint32_t* spill;
  uint64_t* spill_cnt;
  uint64_t* owner_counts;
  uint32_t* owner_of;
  uint64_t* pos_of;
  DeviceError* err;
};

template <typename I>
struct HashInsert {
  static constexpr uint32_t kThreads = 256;
  static constexpr int kItems = 4;
  static constexpr int kPhases = 3;
  struct Item {
    uint32_t owner;
    uint32_t local;  // block-local serial (phase 0) or spill (phase 1) index
    uint8_t state;   // 0: nothing to do, 1: wants a serial slot, 2: wants a spill slot
  };
  struct Shared {
    uint32_t* hist;
    uint32_t* sreq;
    uint64_t* spill;  // [0] block-local spill count, [1] reserved base
  };
  const I* idx;
  uint64_t nnz;
  HashArgs a;

  size_t shared_bytes() const { return 2 * sizeof(uint32_t) * a.part.n_owners + 2 * sizeof(uint64_t); }
  ZEN_HD Shared view(uint8_t* sh) const {
    const uint32_t n = a.part.n_owners;
    return Shared{reinterpret_cast<uint32_t*>(sh), reinterpret_cast<uint32_t*>(sh) + n,
                  reinterpret_cast<uint64_t*>(sh + 2 * sizeof(uint32_t) * n)};
  }
  ZEN_HD void block_init(uint32_t tid, uint32_t nthreads, uint8_t* sh) const {
    const Shared s = view(sh);
    for (uint32_t o = tid; o < a.part.n_owners; o += nthreads) s.hist[o] = s.sreq[o] = 0;
    if (tid == 0) s.spill[0] = s.spill[1] = 0;
  }
  ZEN_HD void item(int phase, uint64_t i, Item& it, uint8_t* sh) const {
    const Shared s = view(sh);
    if (phase == 0) {
      it.state = 0;
      if (i >= nnz) return;
      uint64_t x = static_cast<uint64_t>(idx[i]);  // int32 -1 becomes 2^64-1: caught below
      if (x >= a.part.n_items) {
        if (a.err) report_error(a.err, kErrIndexRange, static_cast<uint32_t>(i), x, a.part.n_items);
        x = 0;
      }
      uint32_t p;
      uint64_t pos;
      a.part.locate(x, &p, &pos);
      a.owner_of[i] = p;
      a.pos_of[i] = pos;
      atomic_add(&s.hist[p], 1u);
      uint32_t* region = a.par + static_cast<uint64_t>(p) * a.cap1;
      for (int j = 0; j < a.k; ++j) {
        const uint64_t slot = reduce_range(hash64_mixed(x, a.hseed[j]), a.cap1);
        // compare-and-swap claims a slot for exactly one entry (no check-then-store race)
        if (atomic_cas(region + slot, kEmpty, static_cast<uint32_t>(i)) == kEmpty) return;
      }
      it.owner = p;
      it.local = atomic_add(&s.sreq[p], 1u);
      it.state = 1;
    } else if (phase == 1) {
      if (it.state != 1) return;
      const uint64_t j = static_cast<uint64_t>(s.sreq[it.owner]) + it.local;  // sreq now holds the base
      if (j < a.cap2) {
        a.ser[static_cast<uint64_t>(it.owner) * a.cap2 + j] = static_cast<uint32_t>(i);
        it.state = 0;
      } else {
        it.local = static_cast<uint32_t>(atomic_add(&s.spill[0], uint64_t{1}));  // serial region full: spill
        it.state = 2;
      }
    } else {
      if (it.state == 2) a.spill[s.spill[1] + it.local] = static_cast<uint32_t>(i);
    }
  }
  ZEN_HD void block_step(int phase, uint32_t tid, uint32_t nthreads, uint8_t* sh) const {
    const Shared s = view(sh);
    if (phase == 0) {
      for (uint32_t o = tid; o < a.part.n_owners; o += nthreads) {
        if (s.hist[o]) atomic_add(&a.owner_counts[o], static_cast<uint64_t>(s.hist[o]));
        if (s.sreq[o]) s.sreq[o] = atomic_add(&a.serial_cnt[o], s.sreq[o]);
      }
    } else if (phase == 1) {
      if (tid == 0 && s.spill[0]) s.spill[1] = atomic_add(a.spill_cnt, s.spill[0]);
    }
  }
};

// Slot s of (parallel | serial | spill) -> entry id, or EMPTY (generator of the compaction).
struct SlotEntry {
  const uint32_t* par;
  const uint32_t* ser;
  const uint32_t* serial_cnt;
  const uint32_t* spill;
  const uint64_t* spill_cnt;
  uint64_t npar, nser, cap2;
  ZEN_HD uint32_t operator()(uint64_t s) const {
    if (s < npar) return par[s];
    s -= npar;
    if (s < nser) {
      const uint64_t p = s / cap2, j = s - p * cap2;
      const uint64_t cnt = serial_cnt[p];
      return j < (cnt < cap2 ? cnt : cap2) ? ser[s] : kEmpty;
    }
    s -= nser;
    return s < *spill_cnt ? spill[s] : kEmpty;
  }
};
struct NotEmpty {
  ZEN_HD bool operator()(uint32_t v) const { return v != kEmpty; }
};

struct CheckSelected {
  const uint64_t* num_sel;
  uint64_t nnz;
  DeviceError* err;
  ZEN_HD void operator()(uint64_t) const {
    if (*num_sel != nnz) report_error(err, kErrHashLost, 0, *num_sel, nnz);
  }
};

// Sort keys of the compaction: the owner of each selected entry. Slots past the selected count
// (compaction lost entries: CheckSelected reports it) and ids out of range are never read through;
// they become entry 0 of the last owner so that the sort and the packer stay in bounds.
struct OwnerKeys {
  uint32_t* sel;
  const uint32_t* owner_of;
  const uint64_t* num_sel;
  uint64_t nnz;
  uint32_t n_owners;
  uint32_t* keys;
  ZEN_HD void operator()(uint64_t i) const {
    const uint32_t e = i < *num_sel ? sel[i] : kEmpty;
    if (e < nnz) {
      keys[i] = owner_of[e];
    } else {
      sel[i] = 0;
      keys[i] = n_owners - 1;
    }
  }
};

// ============================================================================================
// Dense-gradient scan
struct RowId {
  ZEN_HD int64_t operator()(uint64_t r) const { return static_cast<int64_t>(r); }
};
template <typename V>
struct RowNonzero {
  const typename V::S* d;
  uint32_t D;
  ZEN_HD bool operator()(int64_t r) const {
    const typename V::S* row = d + static_cast<uint64_t>(r) * D;
    for (uint32_t c = 0; c < D; ++c)
      if (V::nonzero(row[c])) return true;
    return false;
  }
};
template <typename V>
struct RowNonzeroCount {
  RowNonzero<V> pred;
  ZEN_HD uint64_t operator()(uint64_t r) const { return pred(static_cast<int64_t>(r)) ? 1 : 0; }
};

template <typename V>
struct GatherRows {
  const typename V::S* values;
  const int64_t* value_row;
  const uint32_t* entry;
  uint32_t D;
  typename V::S* out;
  ZEN_HD void operator()(uint64_t t) const {
    const uint64_t r = t / D, c = t - r * D;
    const uint64_t e = entry[r];
    const uint64_t src = value_row ? static_cast<uint64_t>(value_row[e]) : e;
    out[t] = values[src * D + c];
  }
};

// Serial prefix sums over the n segment counts (one thread; n is the rank count).
struct Displacements {
  const uint64_t* counts;
  uint32_t n;
  uint64_t entry_bytes;
  uint64_t* displ;     // may be null
  uint64_t* item_off;  // may be null; n + 1 entries
  ZEN_HD void operator()(uint64_t) const {
    uint64_t b = 0, it = 0;
    for (uint32_t p = 0; p < n; ++p) {
      if (displ) displ[p] = b;
      if (item_off) item_off[p] = it;
      b += counts[p] * entry_bytes;
      it += counts[p];
    }
    if (item_off) item_off[n] = it;
  }
};

template <typename V>
struct PackPush {
  const uint32_t* entry;
  const uint64_t* pos_of;
  const uint64_t* item_off;
  const uint64_t* displ;
  uint32_t n;
  const typename V::S* values;
  const int64_t* value_row;
  uint32_t D;
  int isz;
  uint8_t* sbuf;
  ZEN_HD void operator()(uint64_t t) const {
    using Sv = typename V::S;
    const uint32_t p = segment_of(item_off, n, t);
    const uint64_t k = t - item_off[p], cnt = item_off[p + 1] - item_off[p];
    const uint32_t e = entry[t];
    uint8_t* seg = sbuf + displ[p];
    store_key(seg + k * isz, pos_of[e], isz);
    const uint64_t src = value_row ? static_cast<uint64_t>(value_row[e]) : e;
    const size_t rb = static_cast<size_t>(D) * sizeof(Sv);
    copy_bytes(seg + cnt * isz + k * rb, reinterpret_cast<const uint8_t*>(values + src * D), rb);
  }
};

// ============================================================================================
// Owner aggregation
struct UnpackKeys {
  const uint8_t* rbuf;
  const uint64_t* item_off;
  const uint64_t* rdispl;
  uint32_t n;
  uint64_t m;
  int isz;
  uint64_t* keys;
  uint32_t* arrival;
  DeviceError* err;
  ZEN_HD void operator()(uint64_t t) const {
    const uint32_t src = segment_of(item_off, n, t);
    const uint64_t k = t - item_off[src];
    uint64_t key = load_key(rbuf + rdispl[src] + k * isz, isz);
    if (key >= m) {
      report_error(err, kErrPushKeyRange, src, key, m);
      key = 0;  // keep the sort in range; the call reports the error
    }
    keys[t] = key;
    arrival[t] = static_cast<uint32_t>(t);
  }
};

struct RunHeads {
  const uint64_t* keys;
  uint8_t* heads;
  ZEN_HD void operator()(uint64_t t) const { heads[t] = (t == 0 || keys[t] != keys[t - 1]) ? 1 : 0; }
};

// One thread per (run, column), over received * D threads; those past K * D do nothing.
template <typename V>
struct RunReduce {
  const uint8_t* rbuf;
  const uint64_t* item_off;
  const uint64_t* rdispl;
  const uint64_t* rcount;
  uint32_t n;
  uint64_t received;
  int isz;
  uint32_t D;
  const uint64_t* keys_sorted;
  const uint32_t* arrival_sorted;
  const uint32_t* starts;
  const uint64_t* num_runs;
  uint64_t* res_pos;
  typename V::S* res_val;
  ZEN_HD void operator()(uint64_t t) const {
    using Sv = typename V::S;
    using A = typename V::A;
    const uint64_t K = *num_runs;
    if (t >= K * D) return;
    const size_t rb = static_cast<size_t>(D) * sizeof(Sv);
    const uint64_t r = t / D, c = t - r * D;
    const uint64_t b = starts[r], e = (r + 1 < K) ? starts[r + 1] : received;
    A acc{};
    for (uint64_t i = b; i < e; ++i) {
      const uint64_t a = arrival_sorted[i];
      const uint32_t src = segment_of(item_off, n, a);
      const uint64_t k = a - item_off[src];
      const uint8_t* vp = rbuf + rdispl[src] + rcount[src] * isz + k * rb + c * sizeof(Sv);
      const A v = V::up(load_u<Sv>(vp));
      acc = (i == b) ? v : acc + v;  // first contribution assigned, the rest added in arrival order
    }
    res_val[t] = V::down(acc);
    if (c == 0) res_pos[r] = keys_sorted[b];
  }
};

// ============================================================================================
// Hash bitmap
struct SetFlags {
  const uint64_t* pos;
  uint8_t* flags;
  ZEN_HD void operator()(uint64_t r) const { flags[pos[r]] = 1; }
};
// One warp per 32 positions: a ballot of the flags is the bitmap word (lane 0 writes it; the last
// word only its existing bytes).
struct BallotWords {
  const uint8_t* flags;
  uint64_t m;
  uint8_t* out;
  template <class W>
  ZEN_HD void operator()(W& w, uint64_t word) const {
    typename W::template Var<bool> f;
    w.lanes([&](unsigned lane) {
      const uint64_t q = word * 32 + lane;
      f[lane] = q < m && flags[q] != 0;
    });
    const uint32_t bits = w.ballot(f);
    w.lanes([&](unsigned lane) {
      if (lane != 0) return;
      const uint64_t nbytes = (m + 7) / 8, b0 = word * 4;
      uint8_t* p = out + b0;
      if (b0 + 4 <= nbytes) {
        store_u<uint32_t>(p, bits);
      } else {
        for (uint64_t b = b0; b < nbytes; ++b) p[b - b0] = static_cast<uint8_t>(bits >> (8 * (b - b0)));
      }
    });
  }
};
struct CooKeys {
  const uint64_t* pos;
  int isz;
  uint8_t* out;
  ZEN_HD void operator()(uint64_t r) const { store_key(out + r * isz, pos[r], isz); }
};

ZEN_HD uint32_t load_bitmap_word(const uint8_t* bm, uint64_t w, uint64_t nbytes) {
  const uint64_t b0 = w * 4;
  if (b0 + 4 <= nbytes) return load_u<uint32_t>(bm + b0);
  uint32_t v = 0;
  for (uint64_t b = b0; b < nbytes; ++b) v |= static_cast<uint32_t>(bm[b]) << (8 * (b - b0));
  return v;
}
struct WordPopc {
  const uint8_t* bm;
  uint64_t m;
  uint32_t owner;
  uint64_t* counts;
  DeviceError* err;
  ZEN_HD void operator()(uint64_t w) const {
    const uint64_t W = (m + 31) / 32, nbytes = (m + 7) / 8;
    const uint32_t v = load_bitmap_word(bm, w, nbytes);
    const uint32_t tail = static_cast<uint32_t>(m & 31);
    if (w == W - 1 && tail != 0 && (v >> tail) != 0)
      report_error(err, kErrBitmapPadding, owner, w * 32 + tail + (ffs32(v >> tail) - 1), m);
    counts[w] = static_cast<uint64_t>(popc32(v));
  }
};
template <typename V>
struct BitmapScatter {
  const uint8_t* bm;
  uint64_t m;
  const uint8_t* values;
  uint64_t announced;
  Partitioner part;
  uint32_t owner;
  uint32_t D;
  const uint64_t* prefix;
  const uint64_t* counts;
  typename V::S* dense;
  DeviceError* err;
  ZEN_HD void operator()(uint64_t w) const {
    using Sv = typename V::S;
    const uint64_t W = (m + 31) / 32, nbytes = (m + 7) / 8;
    const size_t rb = static_cast<size_t>(D) * sizeof(Sv);
    uint32_t v = load_bitmap_word(bm, w, nbytes);
    const uint32_t tail = static_cast<uint32_t>(m & 31);
    if (w == W - 1) {
      if (tail != 0) v &= (1u << tail) - 1u;  // padding bits were reported by WordPopc
      const uint64_t total = prefix[w] + counts[w];
      if (total != announced) report_error(err, kErrBitmapCount, owner, total, announced);
    }
    uint64_t slot = prefix[w];
    while (v) {
      const uint32_t b = static_cast<uint32_t>(ffs32(v) - 1);
      v &= v - 1;
      if (slot >= announced) break;  // never read past the announced values
      const uint64_t idx = part.index_at(owner, w * 32 + b);
      copy_bytes(reinterpret_cast<uint8_t*>(dense + idx * D), values + slot * rb, rb);
      ++slot;
    }
  }
};
template <typename V>
struct CooScatter {
  const uint8_t* keys;
  int isz;
  const uint8_t* values;
  Partitioner part;
  uint32_t owner;
  uint32_t D;
  typename V::S* dense;
  DeviceError* err;
  ZEN_HD void operator()(uint64_t r) const {
    using Sv = typename V::S;
    const uint64_t m = part.owner_size(owner);
    const size_t rb = static_cast<size_t>(D) * sizeof(Sv);
    const uint64_t key = load_key(keys + r * isz, isz);
    if (key >= m) {
      report_error(err, kErrCooKeyRange, owner, key, m);
      return;
    }
    const uint64_t idx = part.index_at(owner, key);
    copy_bytes(reinterpret_cast<uint8_t*>(dense + idx * D), values + r * rb, rb);
  }
};

// ============================================================================================
// Dense helpers
struct PtrPack {
  const void* p[64];
};
template <typename V>
struct ReduceRankOrder {
  PtrPack srcs;
  int n;
  int op;
  typename V::S* dst;
  ZEN_HD void operator()(uint64_t i) const {
    using Sv = typename V::S;
    using A = typename V::A;
    A acc = V::up(static_cast<const Sv*>(srcs.p[0])[i]);
    for (int p = 1; p < n; ++p) {
      const A v = V::up(static_cast<const Sv*>(srcs.p[p])[i]);
      if (op == 0) acc += v;
      else if (op == 1) acc = v > acc ? v : acc;
      else acc = v < acc ? v : acc;
    }
    dst[i] = V::down(acc);
  }
};

template <typename V>
struct ClearZeroRows {
  typename V::S* d;
  uint32_t D;
  ZEN_HD void operator()(uint64_t r) const {
    typename V::S* row = d + r * D;
    for (uint32_t c = 0; c < D; ++c)
      if (V::nonzero(row[c])) return;
    for (uint32_t c = 0; c < D; ++c) row[c] = typename V::S{};  // all bits zero: +0.0
  }
};

template <typename V>
struct FillGradient {
  typename V::S* d;
  uint32_t D;
  double density, hot_rows, hot_density;
  uint64_t seed;
  ZEN_HD void operator()(uint64_t t) const {
    const uint64_t r = t / D;
    const double u = static_cast<double>(hash64(r, seed) >> 11) * (1.0 / 9007199254740992.0);
    const double th = static_cast<double>(r) < hot_rows ? hot_density : density;
    float v = 0.0f;
    if (u < th) {
      v = static_cast<float>(hash64(t, seed ^ 0xabcdef12345ULL) >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
      if (v == 0.0f) v = 0.5f;
    }
    d[t] = V::down(static_cast<typename V::A>(v));
  }
};

}  // namespace zen::cuda::detail
