#pragma once
// Sparse-gradient trace format (docs/trace-format.md).
//
// A trace is a directory with trace.json
//   {"N": <dense length>, "ranks": n, "iterations": T, "dtype": "f32"|"f64"|"f16"|"bf16",
//    "source": "<free text>", "row_width": D (optional, default 1, N % D == 0)}
// and, for every rank r and iteration t, r<r>_t<t>.idx (little-endian int64 indices, any order,
// duplicates allowed; row indices < N/D when D > 1) and r<r>_t<t>.val (count * D values of the
// dtype, little-endian; f16/bf16 as their 16-bit patterns).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "zen/error.hpp"
#include "zen/types.hpp"

namespace zen::trace {

struct TraceMeta {
  int64_t N = 0;            ///< dense length in elements
  int ranks = 0;            ///< number of ranks n
  int iterations = 0;       ///< number of iterations T
  DType dtype = DType::F32; ///< value type
  std::string source;       ///< free text (generator and its parameters)
  int64_t row_width = 1;    ///< D: values per index; indices are row indices < N/D when D > 1

  /// Number of addressable items: rows (N / D), or elements when D == 1.
  int64_t items() const { return N / row_width; }
};

/// Throws zen::Error (InvalidArgument) naming the bad field when meta is not a valid trace header.
void validate_meta(const TraceMeta& meta);

/// Read and validate DIR/trace.json.
TraceMeta read_meta(const std::string& dir);
/// Validate and write DIR/trace.json, creating DIR (and parents) when missing.
void write_meta(const std::string& dir, const TraceMeta& meta);

/// Paths of the two files of rank r, iteration t: `DIR/r<r>_t<t>.idx` and `.val`.
std::string idx_path(const std::string& dir, int r, int t);
std::string val_path(const std::string& dir, int r, int t);

/// One rank's sparse gradient for one iteration.
struct RankIter {
  std::vector<int64_t> idx;    ///< item indices (rows when row_width > 1), as stored
  std::vector<uint8_t> values; ///< raw little-endian values: idx.size() * row_width * dtype_size bytes

  size_t count() const { return idx.size(); }
  /// Typed view of the values; T must match the trace dtype (checked).
  template <typename T>
  const T* values_as(DType dtype) const;
};

/// Read DIR/rR_tT.idx and DIR/rR_tT.val (R = rank, T = iteration), checking r < ranks,
/// t < iterations, file sizes (index file a multiple of 8 bytes, value file = count * row_width *
/// dtype_size) and index ranges [0, items).
RankIter read_rank_iter(const std::string& dir, const TraceMeta& meta, int r, int t);
/// Read only the index file (stats do not need values); same checks on the index file.
std::vector<int64_t> read_rank_indices(const std::string& dir, const TraceMeta& meta, int r, int t);

/// Write DIR/rR_tT.idx and .val: count indices and count * row_width values (raw bytes of the
/// trace dtype). Indices are checked against [0, items). DIR must exist (write_meta creates it).
void write_rank_iter(const std::string& dir, const TraceMeta& meta, int r, int t, const int64_t* idx,
                     size_t count, const void* values);
inline void write_rank_iter(const std::string& dir, const TraceMeta& meta, int r, int t,
                            const RankIter& ri) {
  write_rank_iter(dir, meta, r, t, ri.idx.data(), ri.idx.size(), ri.values.data());
}

/// Row-level record (row_width D) -> element-level record (D = 1): row i becomes elements
/// i*D .. i*D+D-1, in the same order. Returns ri unchanged when D == 1.
RankIter expand_rows(const RankIter& ri, const TraceMeta& meta);

/// Sort entries by index ascending (stable), moving each entry's D values with it.
void sort_by_index(RankIter& ri, const TraceMeta& meta);

/// Values of a record converted to double (for checking and statistics).
std::vector<double> values_to_double(const RankIter& ri, const TraceMeta& meta);
/// Convert doubles to raw bytes of dtype (round to nearest).
std::vector<uint8_t> values_from_double(const std::vector<double>& v, DType dtype);

template <typename T>
const T* RankIter::values_as(DType dtype) const {
  ZEN_ENFORCE(dtype_of<T>::value == dtype,
              std::string("values_as: requested type ") + dtype_name(dtype_of<T>::value) +
                  " but the trace dtype is " + dtype_name(dtype));
  return reinterpret_cast<const T*>(values.data());
}

}  // namespace zen::trace
