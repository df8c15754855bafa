#pragma once
// Private helpers of the baseline schemes (dense ring / native, allgather, sparcml, omnireduce,
// sparse_ps). Not installed; see docs/algorithms.md for the algorithms and their byte counts.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../comm/ring.hpp"
#include "plan_util.hpp"
#include "../comm/ring_chunk.hpp"
#include "zen/comm/communicator.hpp"
#include "zen/error.hpp"
#include "zen/schemes/scheme.hpp"
#include "zen/tensor.hpp"

namespace zen::baseline {

/// The caller's input coalesced: keys strictly increasing (int64 rows), one value row per key
/// (duplicates summed in input order, accumulating in accum_of<T>, rounded once).
struct Local {
  std::vector<int64_t> keys;
  std::vector<uint8_t> vals;
};

inline Local coalesce_input(const SparseView& in, const TensorSpec& spec) {
  Local l;
  l.keys.resize(in.nnz);
  const uint64_t R = spec.dense_len / spec.row_width;
  for (size_t i = 0; i < in.nnz; ++i) {
    l.keys[i] = in.index_at(i);
    // Checked even when the caller skipped validation: the row indexes buffers below.
    plan::check_index(l.keys[i], i, R);
  }
  const size_t vb = in.nnz * spec.row_width * dtype_size(spec.dtype);
  l.vals.resize(vb);
  if (vb) std::memcpy(l.vals.data(), in.values, vb);
  detail::sort_and_reduce(l.keys, l.vals, spec.row_width, spec.dtype);
  return l;
}

using detail::imbalance;

/// Start of part o when `total` items are split into n contiguous near-equal parts (the first
/// total % n parts get one more item); the same split as ring_chunk_bytes.
inline uint64_t range_begin(uint64_t total, int n, int o) {
  const uint64_t un = static_cast<uint64_t>(n), uo = static_cast<uint64_t>(o);
  return uo * (total / un) + std::min<uint64_t>(uo, total % un);
}

inline bool get_bit(const uint8_t* bm, uint64_t i) { return (bm[i >> 3] >> (i & 7)) & 1u; }
inline void set_bit(uint8_t* bm, uint64_t i) { bm[i >> 3] = static_cast<uint8_t>(bm[i >> 3] | (1u << (i & 7))); }

/// Scratch of the ring helpers (kept by a plan so that a call allocates nothing).
using RingScratch = ring::Scratch;

/// The ring schedule of src/comm/ring.hpp over the public sendrecv with `tag` (counted as
/// point-to-point traffic): reduce-scatter (rank r ends with the reduced chunk r; combine(dst, src, k)
/// folds k received elements into dst), then allgather.
template <typename Combine>
void ring_reduce_scatter(Communicator& c, uint8_t* buf, size_t count, size_t elem, Combine&& combine, int tag,
                         RingScratch& rs) {
  ring::reduce_scatter(
      [&](const void* sb, size_t sn, int dst, void* rb, size_t rn, int src) { c.sendrecv(sb, sn, dst, rb, rn, src, tag); },
      c.size(), c.rank(), buf, count, elem, combine, rs);
}

inline void ring_allgather(Communicator& c, uint8_t* buf, size_t count, size_t elem, int tag, RingScratch& rs) {
  ring::allgather(
      [&](const void* sb, size_t sn, int dst, void* rb, size_t rn, int src) { c.sendrecv(sb, sn, dst, rb, rn, src, tag); },
      c.size(), c.rank(), buf, count, elem, rs);
}

/// dst[i] = T(A(dst[i]) + A(src[i])): one addition in the accumulation type, rounded to T.
template <typename T>
inline void add_into(T* dst, const T* src, size_t k) {
  using A = typename accum_of<T>::type;
  for (size_t i = 0; i < k; ++i) dst[i] = static_cast<T>(static_cast<A>(dst[i]) + static_cast<A>(src[i]));
}

/// Ring-OR of a presence bitmap of `bytes` bytes (the union of the supports), in place.
inline void ring_or(Communicator& c, uint8_t* bm, size_t bytes, int tag, RingScratch& rs) {
  ring::bitwise_or(
      [&](const void* sb, size_t sn, int dst, void* rb, size_t rn, int src) { c.sendrecv(sb, sn, dst, rb, rn, src, tag); },
      c.size(), c.rank(), bm, bytes, rs);
}

/// Sparse result from a dense buffer and a presence bitmap over rows (word-wise scan of the bitmap).
inline void dense_with_support_to_sparse(const uint8_t* dense, const uint8_t* bm, const TensorSpec& spec,
                                         SparseTensor& out) {
  plan::support_rows_to_sparse(dense, bm, spec.dense_len / spec.row_width, spec.row_width * dtype_size(spec.dtype), out);
}

}  // namespace zen::baseline
