#pragma once
// Sparse tensors: a non-owning view (what the schemes take) and an owning host tensor.
//
// A sparse tensor has a dense length N (elements, up to 2^63), a row width D >= 1 (N divisible by D),
// nnz indices in [0, N/D) (int32 or int64) and nnz*D values (f32, f64, f16, bf16): index i names the
// D contiguous dense elements [i*D, i*D + D) (PyTorch's hybrid sparse / TensorFlow's IndexedSlices
// layout). With D = 1 this is plain COO.
#include <cstdint>
#include <string>
#include <vector>

#include "zen/types.hpp"

namespace zen {

struct SparseView {
  uint64_t dense_len = 0;      ///< N, in elements
  uint32_t row_width = 1;      ///< D
  size_t nnz = 0;              ///< number of indices (rows when D > 1)
  IndexType index_type = IndexType::I64;
  const void* indices = nullptr;
  DType dtype = DType::F32;
  const void* values = nullptr;  ///< nnz * D values, row-major
  MemSpace space = MemSpace::Host;

  uint64_t rows() const { return row_width ? dense_len / row_width : 0; }
  size_t value_count() const { return nnz * static_cast<size_t>(row_width); }
  int64_t index_at(size_t i) const {
    return index_type == IndexType::I32 ? static_cast<const int32_t*>(indices)[i]
                                        : static_cast<const int64_t*>(indices)[i];
  }
};

/// Owning host sparse tensor with int64 indices and raw value bytes of `dtype`.
struct SparseTensor {
  uint64_t dense_len = 0;
  uint32_t row_width = 1;
  DType dtype = DType::F32;
  std::vector<int64_t> indices;
  std::vector<uint8_t> values;  ///< indices.size() * row_width * dtype_size(dtype) bytes

  SparseTensor() = default;
  SparseTensor(uint64_t n, DType t, uint32_t d = 1) : dense_len(n), row_width(d), dtype(t) {}

  size_t nnz() const { return indices.size(); }
  uint64_t rows() const { return row_width ? dense_len / row_width : 0; }
  template <typename T> T* vals() { return reinterpret_cast<T*>(values.data()); }
  template <typename T> const T* vals() const { return reinterpret_cast<const T*>(values.data()); }
  void resize(size_t nnz) {
    indices.resize(nnz);
    values.resize(nnz * row_width * dtype_size(dtype));
  }
  SparseView view() const;
};

/// Copy a view (any index type) into an owning host tensor.
SparseTensor to_tensor(const SparseView& v);

/// Check a view's shape: D >= 1, N divisible by D, indices in [0, N/D), int32 indices only when
/// N/D <= 2^31. Throws InvalidArgument naming `rank`, `op` and the offending position and value.
void validate(const SparseView& v, int rank, const char* op);

/// Local coalescing: sort by index (stable) and sum duplicate rows, in input order, accumulating
/// 16-bit values in fp32. Returns true when duplicates were found.
bool coalesce(SparseTensor& t);

/// True when the view has no repeated index (O(nnz log nnz)).
bool has_duplicates(const SparseView& v);

/// Dense helpers (host): scatter-add a sparse tensor into a dense buffer of N values of its dtype,
/// and gather the sparse tensor of the positions where `mask` is set / values are non-zero.
void scatter_add(const SparseView& v, void* dense);
SparseTensor dense_to_sparse(const void* dense, uint64_t n, DType t, uint32_t row_width = 1);

}  // namespace zen
