#pragma once
// The kernels' host-side logic (argument checks, workspace carving, launch order), written once for
// both backends: kernels_gpu.cu instantiates Kernels<Gpu> (exec_gpu.cuh: CUDA kernels and CUB),
// kernels_host.cpp instantiates Kernels<Host> (exec_host.hpp: the same bodies on the CPU and the
// standard library). Include it after the backend's exec header.
#include <algorithm>
#include <cmath>
#include <string>

#include "bodies.hpp"
#include "exec.hpp"
#include "workspace.hpp"
#include "zen/cuda/kernels.hpp"
#include "zen/error.hpp"

namespace zen::cuda {
namespace detail {

inline int bits_for(uint64_t max_value) {
  int b = 0;
  while (b < 64 && (max_value >> b) != 0) ++b;
  return std::max(b, 1);
}

template <typename F>
void dispatch_vt(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(F32{}); return;
    case DType::F64: f(F64{}); return;
    case DType::F16: f(F16{}); return;
    case DType::BF16: f(BF16{}); return;
  }
  ZEN_THROW(Result::InvalidArgument, std::string("device kernels: unsupported dtype ") + dtype_name(t));
}

struct HashLayout {
  uint32_t *owner_of, *par, *ser, *spill, *sel, *keys, *keys_sorted;
  uint64_t* num_sel;
  void* temp;
  size_t total;
};
// Regions for exactly `nnz` entries (they grow with nnz, so the prepared maximum covers every call).
inline HashLayout hash_layout(void* base, size_t nnz, uint32_t n, const HashParams& hp, size_t temp_bytes) {
  const HashCaps c = hash_caps(nnz, n, hp);
  Carver cv{static_cast<uint8_t*>(base)};
  HashLayout L{};
  L.owner_of = cv.take<uint32_t>(nnz);
  L.par = cv.take<uint32_t>(n * c.cap1);
  L.ser = cv.take<uint32_t>(n * c.cap2);
  L.spill = cv.take<uint32_t>(nnz);
  L.sel = cv.take<uint32_t>(nnz);
  L.keys = cv.take<uint32_t>(nnz);
  L.keys_sorted = cv.take<uint32_t>(nnz);
  L.num_sel = cv.take<uint64_t>(1);
  L.temp = cv.take<uint8_t>(temp_bytes);
  L.total = cv.bytes();
  return L;
}
inline uint64_t hash_slots(size_t nnz, uint32_t n, const HashParams& hp) {
  const HashCaps c = hash_caps(nnz, n, hp);
  return static_cast<uint64_t>(n) * c.cap1 + static_cast<uint64_t>(n) * c.cap2 + nnz;
}

struct AggLayout {
  uint64_t *item_off, *keys, *keys_sorted;
  uint32_t *arrival, *arrival_sorted, *starts;
  uint8_t* heads;
  void* temp;
  size_t total;
};
constexpr uint32_t kAggMaxRanks = 65536;  // the workspace reserves item offsets for this many sources
inline AggLayout agg_layout(void* base, size_t cap, size_t temp_bytes) {
  Carver cv{static_cast<uint8_t*>(base)};
  AggLayout L{};
  L.item_off = cv.take<uint64_t>(kAggMaxRanks + 1);
  L.keys = cv.take<uint64_t>(cap);
  L.keys_sorted = cv.take<uint64_t>(cap);
  L.arrival = cv.take<uint32_t>(cap);
  L.arrival_sorted = cv.take<uint32_t>(cap);
  L.starts = cv.take<uint32_t>(cap);
  L.heads = cv.take<uint8_t>(cap);
  L.temp = cv.take<uint8_t>(temp_bytes);
  L.total = cv.bytes();
  return L;
}

}  // namespace detail

// ============================================================================================
// Hashing
template <class B>
HashPrepared Kernels<B>::hash_prepare(size_t max_nnz, uint32_t n, const HashParams& hp) {
  using X = detail::Exec<B>;
  ZEN_ENFORCE(n >= 1 && n <= kMaxHashOwners, "device hash_partition: " + std::to_string(n) + " owners outside [1, " +
                                                 std::to_string(kMaxHashOwners) + "]");
  HashPrepared p;
  p.max_nnz = max_nnz;
  p.n_owners = n;
  p.hp = hp;
  const uint64_t slots = std::max<uint64_t>(detail::hash_slots(max_nnz, n, hp), 1);
  const size_t t1 = X::select_if_bytes(slots, detail::SlotEntry{}, detail::NotEmpty{}, static_cast<uint32_t*>(nullptr));
  const size_t t2 = X::template sort_pairs_bytes<uint32_t, uint32_t>(std::max<size_t>(max_nnz, 1), detail::bits_for(n - 1));
  p.temp_bytes = std::max(t1, t2);
  p.bytes = detail::hash_layout(nullptr, max_nnz, n, hp, p.temp_bytes).total;
  return p;
}

template <class B>
void Kernels<B>::hash_partition(const HashPrepared& prep, const void* d_indices, IndexType it, size_t nnz,
                                const Partitioner& part, void* d_ws, size_t ws_bytes, uint32_t* d_entry, uint64_t* d_pos,
                                uint64_t* d_counts, uint32_t* d_serial, uint64_t* d_spilled, DeviceError* d_err,
                                void* stream) {
  using X = detail::Exec<B>;
  using M = Memory<B>;
  const uint32_t n = part.n_owners;
  const HashParams& hp = prep.hp;
  ZEN_ENFORCE(nnz < 0xFFFFFFFFull, "device hash_partition: " + std::to_string(nnz) + " entries exceed 2^32-1 per call");
  ZEN_ENFORCE(hp.hash_functions >= 1 && hp.hash_functions <= 16,
              "device hash_partition: hash function count " + std::to_string(hp.hash_functions) + " outside [1, 16]");
  ZEN_ENFORCE(n == prep.n_owners && nnz <= prep.max_nnz,
              "device hash_partition: " + std::to_string(nnz) + " entries over " + std::to_string(n) +
                  " owners, prepared for at most " + std::to_string(prep.max_nnz) + " over " +
                  std::to_string(prep.n_owners));
  detail::HashLayout L = detail::hash_layout(d_ws, nnz, n, hp, prep.temp_bytes);
  detail::need_ws(ws_bytes, L.total, "device hash_partition");
  const HashCaps c = hash_caps(nnz, n, hp);
  M::fill(d_counts, 0, n * sizeof(uint64_t), stream);
  M::fill(d_serial, 0, n * sizeof(uint32_t), stream);
  M::fill(d_spilled, 0, sizeof(uint64_t), stream);
  if (nnz == 0) return;
  M::fill(L.par, 0xFF, n * c.cap1 * sizeof(uint32_t), stream);
  detail::HashArgs a{};
  a.part = part;
  a.k = hp.hash_functions;
  // The CPU's h_1..h_k seeds (src/hash/region_hash.cpp), pre-mixed.
  for (int j = 0; j < hp.hash_functions; ++j)
    a.hseed[j] = mix_seed(mix64(hp.seed * 0x100000001b3ULL + static_cast<uint64_t>(j) + 1));
  a.cap1 = c.cap1;
  a.cap2 = c.cap2;
  a.par = L.par;
  a.ser = L.ser;
  a.serial_cnt = d_serial;
  a.spill = L.spill;
  a.spill_cnt = d_spilled;
  a.owner_counts = d_counts;
  a.owner_of = L.owner_of;
  a.pos_of = d_pos;
  a.err = d_err;
  if (it == IndexType::I32)
    X::for_each_tile(nnz, detail::HashInsert<int32_t>{static_cast<const int32_t*>(d_indices), nnz, a}, stream);
  else
    X::for_each_tile(nnz, detail::HashInsert<int64_t>{static_cast<const int64_t*>(d_indices), nnz, a}, stream);
  // Compaction: occupied slots in slot order, then grouped by owner with a stable radix sort.
  const detail::SlotEntry se{L.par, L.ser, d_serial, L.spill, d_spilled, n * c.cap1, n * c.cap2, c.cap2};
  X::select_if(L.temp, prep.temp_bytes, se, detail::hash_slots(nnz, n, hp), detail::NotEmpty{}, L.sel, L.num_sel, stream);
  if (d_err) X::for_each(1, detail::CheckSelected{L.num_sel, nnz, d_err}, stream);
  X::for_each(nnz, detail::OwnerKeys{L.sel, L.owner_of, L.num_sel, nnz, n, L.keys}, stream);
  X::template sort_pairs<uint32_t, uint32_t>(L.temp, prep.temp_bytes, L.keys, L.keys_sorted, L.sel, d_entry, nnz,
                                             detail::bits_for(n - 1), stream);
}

// ============================================================================================
// Dense-gradient scan
template <class B>
NonzeroPrepared Kernels<B>::nonzero_prepare(uint64_t rows) {
  using X = detail::Exec<B>;
  using V = detail::F32;  // the scratch does not depend on the value type
  const uint64_t r = std::max<uint64_t>(rows, 1);
  const size_t t1 = X::select_if_bytes(r, detail::RowId{}, detail::RowNonzero<V>{nullptr, 1}, static_cast<int64_t*>(nullptr));
  const size_t t2 = X::sum_bytes(r, detail::RowNonzeroCount<V>{{nullptr, 1}});
  NonzeroPrepared p;
  p.rows = rows;
  p.bytes = (std::max(t1, t2) + 255) & ~size_t{255};
  return p;
}

template <class B>
void Kernels<B>::count_nonzero_rows(const NonzeroPrepared& prep, const void* d_dense, DType t, uint64_t rows, uint32_t D,
                                    uint64_t* d_count, void* d_ws, size_t ws_bytes, void* stream) {
  using X = detail::Exec<B>;
  ZEN_ENFORCE(rows <= prep.rows, "device count_nonzero_rows: " + std::to_string(rows) + " rows, prepared for " +
                                     std::to_string(prep.rows));
  detail::need_ws(ws_bytes, prep.bytes, "device count_nonzero_rows");
  if (rows == 0) {
    Memory<B>::fill(d_count, 0, sizeof(uint64_t), stream);
    return;
  }
  detail::dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    X::sum(d_ws, prep.bytes, detail::RowNonzeroCount<V>{{static_cast<const typename V::S*>(d_dense), D}}, rows, d_count,
           stream);
  });
}

template <class B>
void Kernels<B>::nonzero_rows(const NonzeroPrepared& prep, const void* d_dense, DType t, uint64_t rows, uint32_t D,
                              int64_t* d_rows, uint64_t* d_count, void* d_ws, size_t ws_bytes, void* stream) {
  using X = detail::Exec<B>;
  ZEN_ENFORCE(rows <= prep.rows, "device nonzero_rows: " + std::to_string(rows) + " rows, prepared for " +
                                     std::to_string(prep.rows));
  detail::need_ws(ws_bytes, prep.bytes, "device nonzero_rows");
  if (rows == 0) {
    Memory<B>::fill(d_count, 0, sizeof(uint64_t), stream);
    return;
  }
  detail::dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    X::select_if(d_ws, prep.bytes, detail::RowId{}, rows,
                 detail::RowNonzero<V>{static_cast<const typename V::S*>(d_dense), D}, d_rows, d_count, stream);
  });
}

template <class B>
void Kernels<B>::gather_rows(const void* d_values, const int64_t* d_value_row, const uint32_t* d_entry, size_t k,
                             uint32_t D, DType t, void* d_out, void* stream) {
  if (k == 0 || D == 0) return;
  detail::dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    detail::Exec<B>::for_each(k * D,
                              detail::GatherRows<V>{static_cast<const typename V::S*>(d_values), d_value_row, d_entry, D,
                                                    static_cast<typename V::S*>(d_out)},
                              stream);
  });
}

template <class B>
void Kernels<B>::segment_displacements(const uint64_t* d_counts, uint32_t n, size_t entry_bytes, uint64_t* d_displ,
                                       uint64_t* d_item_off, void* stream) {
  detail::Exec<B>::for_each(1, detail::Displacements{d_counts, n, entry_bytes, d_displ, d_item_off}, stream);
}

template <class B>
void Kernels<B>::pack_push(const uint32_t* d_entry, const uint64_t* d_pos, size_t nnz, const uint64_t* d_item_off,
                           const uint64_t* d_displ, uint32_t n, const void* d_values, const int64_t* d_value_row,
                           uint32_t D, DType t, int isz, uint8_t* d_sbuf, void* stream) {
  if (nnz == 0) return;
  detail::dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    detail::Exec<B>::for_each(nnz,
                              detail::PackPush<V>{d_entry, d_pos, d_item_off, d_displ, n,
                                                  static_cast<const typename V::S*>(d_values), d_value_row, D, isz, d_sbuf},
                              stream);
  });
}

// ============================================================================================
// Owner aggregation
template <class B>
AggregatePrepared Kernels<B>::aggregate_prepare(size_t capacity, uint64_t m) {
  using X = detail::Exec<B>;
  const uint64_t c = std::max<size_t>(capacity, 1);
  const size_t t1 = X::template sort_pairs_bytes<uint64_t, uint32_t>(c, detail::bits_for(m ? m - 1 : 0));
  const size_t t2 = X::select_flagged_bytes(c);
  AggregatePrepared p;
  p.capacity = capacity;
  p.m = m;
  p.temp_bytes = std::max(t1, t2);
  p.bytes = detail::agg_layout(nullptr, capacity, p.temp_bytes).total;
  return p;
}

template <class B>
void Kernels<B>::owner_aggregate(const AggregatePrepared& prep, const uint8_t* d_rbuf, const uint64_t* d_rcount,
                                 const uint64_t* d_rdispl, uint32_t n, size_t received, uint64_t m, uint32_t D, DType t,
                                 int isz, void* d_ws, size_t ws_bytes, uint64_t* d_res_pos, void* d_res_val,
                                 uint64_t* d_num_runs, DeviceError* d_err, void* stream) {
  using X = detail::Exec<B>;
  ZEN_ENFORCE(n <= detail::kAggMaxRanks,
              "device owner_aggregate: " + std::to_string(n) + " sources exceed " + std::to_string(detail::kAggMaxRanks));
  ZEN_ENFORCE(received < 0xFFFFFFFFull,
              "device owner_aggregate: " + std::to_string(received) + " received entries exceed 2^32-1");
  ZEN_ENFORCE(isz == 4 || isz == 8, "device owner_aggregate: key width " + std::to_string(isz) + " is not 4 or 8");
  ZEN_ENFORCE(received <= prep.capacity && m <= std::max<uint64_t>(prep.m, 1),
              "device owner_aggregate: " + std::to_string(received) + " entries with positions below " +
                  std::to_string(m) + ", prepared for " + std::to_string(prep.capacity) + " below " +
                  std::to_string(prep.m));
  detail::AggLayout L = detail::agg_layout(d_ws, received, prep.temp_bytes);
  detail::need_ws(ws_bytes, L.total, "device owner_aggregate");
  Memory<B>::fill(d_num_runs, 0, sizeof(uint64_t), stream);
  if (received == 0) return;
  X::for_each(1, detail::Displacements{d_rcount, n, 0, nullptr, L.item_off}, stream);
  X::for_each(received, detail::UnpackKeys{d_rbuf, L.item_off, d_rdispl, n, m, isz, L.keys, L.arrival, d_err}, stream);
  // Stable LSD radix sort: equal positions keep their arrival (= source-rank) order.
  X::template sort_pairs<uint64_t, uint32_t>(L.temp, prep.temp_bytes, L.keys, L.keys_sorted, L.arrival, L.arrival_sorted,
                                             received, detail::bits_for(m ? m - 1 : 0), stream);
  X::for_each(received, detail::RunHeads{L.keys_sorted, L.heads}, stream);
  X::select_flagged(L.temp, prep.temp_bytes, L.heads, received, L.starts, d_num_runs, stream);
  detail::dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    X::for_each(received * D,
                detail::RunReduce<V>{d_rbuf, L.item_off, d_rdispl, d_rcount, n, received, isz, D, L.keys_sorted,
                                     L.arrival_sorted, L.starts, d_num_runs, d_res_pos,
                                     static_cast<typename V::S*>(d_res_val)},
                stream);
  });
}

// ============================================================================================
// Hash bitmap
template <class B>
void Kernels<B>::bitmap_encode(const uint64_t* d_pos, size_t k, uint64_t m, uint8_t* d_flags, uint8_t* d_out,
                               void* stream) {
  using X = detail::Exec<B>;
  if (m == 0) return;
  Memory<B>::fill(d_flags, 0, m, stream);
  if (k) X::for_each(k, detail::SetFlags{d_pos, d_flags}, stream);
  X::for_each_warp((m + 31) / 32, detail::BallotWords{d_flags, m, d_out}, stream);
}

template <class B>
void Kernels<B>::coo_encode_keys(const uint64_t* d_pos, size_t k, int isz, uint8_t* d_out, void* stream) {
  if (k == 0) return;
  detail::Exec<B>::for_each(k, detail::CooKeys{d_pos, isz, d_out}, stream);
}

template <class B>
ScatterPrepared Kernels<B>::scatter_prepare(uint64_t m_max) {
  const uint64_t W = std::max<uint64_t>((m_max + 31) / 32, 1);
  ScatterPrepared p;
  p.m_max = m_max;
  p.temp_bytes = detail::Exec<B>::exclusive_sum_bytes(W);
  detail::Carver cv{nullptr};
  cv.take<uint64_t>(W);
  cv.take<uint64_t>(W);
  cv.take<uint8_t>(p.temp_bytes);
  p.bytes = cv.bytes();
  return p;
}

template <class B>
void Kernels<B>::bitmap_scatter(const ScatterPrepared& prep, const uint8_t* d_bm, uint64_t m, const uint8_t* d_values,
                                uint64_t announced, const Partitioner& part, uint32_t owner, uint32_t D, DType t,
                                void* d_dense, void* d_ws, size_t ws_bytes, DeviceError* d_err, void* stream) {
  using X = detail::Exec<B>;
  if (m == 0) return;
  ZEN_ENFORCE(m <= prep.m_max, "device bitmap_scatter: " + std::to_string(m) + " positions, prepared for " +
                                   std::to_string(prep.m_max));
  detail::need_ws(ws_bytes, prep.bytes, "device bitmap_scatter");
  const uint64_t W = (m + 31) / 32;
  detail::Carver cv{static_cast<uint8_t*>(d_ws)};
  uint64_t* counts = cv.take<uint64_t>(std::max<uint64_t>((prep.m_max + 31) / 32, 1));
  uint64_t* prefix = cv.take<uint64_t>(std::max<uint64_t>((prep.m_max + 31) / 32, 1));
  void* temp = cv.take<uint8_t>(prep.temp_bytes);
  X::for_each(W, detail::WordPopc{d_bm, m, owner, counts, d_err}, stream);
  X::exclusive_sum(temp, prep.temp_bytes, counts, prefix, W, stream);
  detail::dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    X::for_each(W,
                detail::BitmapScatter<V>{d_bm, m, d_values, announced, part, owner, D, prefix, counts,
                                         static_cast<typename V::S*>(d_dense), d_err},
                stream);
  });
}

template <class B>
void Kernels<B>::coo_scatter(const uint8_t* d_keys, size_t k, int isz, const uint8_t* d_values, const Partitioner& part,
                             uint32_t owner, uint32_t D, DType t, void* d_dense, DeviceError* d_err, void* stream) {
  if (k == 0) return;
  detail::dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    detail::Exec<B>::for_each(
        k, detail::CooScatter<V>{d_keys, isz, d_values, part, owner, D, static_cast<typename V::S*>(d_dense), d_err},
        stream);
  });
}

// ============================================================================================
// Dense helpers
template <class B>
void Kernels<B>::reduce_rank_order(const void* const* srcs, int n, size_t count, DType t, ReduceOp op, void* d_dst,
                                   void* stream) {
  ZEN_ENFORCE(n >= 1 && n <= 64, "device reduce_rank_order: " + std::to_string(n) + " sources outside [1, 64]");
  if (count == 0) return;
  detail::PtrPack pk{};
  for (int p = 0; p < n; ++p) pk.p[p] = srcs[p];
  detail::dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    detail::Exec<B>::for_each(
        count, detail::ReduceRankOrder<V>{pk, n, static_cast<int>(op), static_cast<typename V::S*>(d_dst)}, stream);
  });
}

template <class B>
void Kernels<B>::clear_zero_rows(void* d_dense, DType t, uint64_t rows, uint32_t D, void* stream) {
  if (rows == 0 || D == 0) return;
  detail::dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    detail::Exec<B>::for_each(rows, detail::ClearZeroRows<V>{static_cast<typename V::S*>(d_dense), D}, stream);
  });
}

template <class B>
void Kernels<B>::fill_sparse_gradient(void* d_dense, DType t, uint64_t rows, uint32_t D, double density,
                                      double hot_fraction, uint64_t seed, void* stream) {
  if (rows == 0 || D == 0) return;
  const double hot_rows = std::max(0.0, hot_fraction) * static_cast<double>(rows);
  const double hot_density = hot_fraction > 0 ? std::min(1.0, 4 * density) : density;
  detail::dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    detail::Exec<B>::for_each(
        rows * D, detail::FillGradient<V>{static_cast<typename V::S*>(d_dense), D, density, hot_rows, hot_density, seed},
        stream);
  });
}

}  // namespace zen::cuda
