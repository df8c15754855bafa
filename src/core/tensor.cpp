#include "zen/tensor.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "zen/error.hpp"

namespace zen {

SparseView SparseTensor::view() const {
  const size_t want = indices.size() * static_cast<size_t>(row_width) * dtype_size(dtype);
  ZEN_ENFORCE(values.size() == want, "sparse tensor: " + std::to_string(indices.size()) + " indices x row width " +
                                         std::to_string(row_width) + " x " + dtype_name(dtype) + " need " +
                                         std::to_string(want) + " value bytes, but " + std::to_string(values.size()) +
                                         " are present (indices/values length mismatch)");
  SparseView v;
  v.dense_len = dense_len;
  v.row_width = row_width;
  v.nnz = indices.size();
  v.index_type = IndexType::I64;
  v.indices = indices.data();
  v.dtype = dtype;
  v.values = values.data();
  return v;
}

SparseTensor to_tensor(const SparseView& v) {
  SparseTensor t(v.dense_len, v.dtype, v.row_width);
  t.resize(v.nnz);
  for (size_t i = 0; i < v.nnz; ++i) t.indices[i] = v.index_at(i);
  if (!t.values.empty()) std::memcpy(t.values.data(), v.values, t.values.size());
  return t;
}

void validate(const SparseView& v, int rank, const char* op) {
  // The message is built only on failure (a call that passes allocates nothing).
  auto where = [&] { return "rank " + std::to_string(rank) + " " + op + ": "; };
  ZEN_ENFORCE(v.row_width >= 1, where() + "row width must be >= 1");
  ZEN_ENFORCE(v.dense_len % v.row_width == 0,
              where() + "dense length " + std::to_string(v.dense_len) + " is not divisible by row width " +
                  std::to_string(v.row_width));
  ZEN_ENFORCE(v.dense_len <= (1ULL << 63), where() + "dense length " + std::to_string(v.dense_len) + " exceeds 2^63");
  ZEN_ENFORCE(v.space == MemSpace::Host, where() + "host path given a device tensor");
  const uint64_t rows = v.rows();
  if (v.index_type == IndexType::I32)
    ZEN_ENFORCE(rows <= (1ULL << 31), where() + "int32 indices cannot address " + std::to_string(rows) +
                                          " rows (N/D >= 2^31); use int64 indices");
  ZEN_ENFORCE(v.nnz == 0 || (v.indices && v.values), where() + "null indices or values with nnz " + std::to_string(v.nnz));
  for (size_t i = 0; i < v.nnz; ++i) {
    int64_t x = v.index_at(i);
    if (x < 0 || static_cast<uint64_t>(x) >= rows)
      ZEN_THROW(Result::InvalidArgument, where() + "index " + std::to_string(x) + " at position " + std::to_string(i) +
                                             " is outside [0, " + std::to_string(rows) + ")");
  }
}

namespace {
template <typename T>
void coalesce_typed(SparseTensor& t, const std::vector<size_t>& order, size_t& out_n) {
  using A = typename accum_of<T>::type;
  const size_t D = t.row_width;
  const T* src = t.vals<T>();
  std::vector<int64_t> idx;
  std::vector<T> out;
  idx.reserve(order.size());
  out.reserve(order.size() * D);
  std::vector<A> acc(D);
  size_t i = 0;
  while (i < order.size()) {
    int64_t key = t.indices[order[i]];
    for (size_t c = 0; c < D; ++c) acc[c] = static_cast<A>(src[order[i] * D + c]);
    size_t j = i + 1;
    for (; j < order.size() && t.indices[order[j]] == key; ++j)
      for (size_t c = 0; c < D; ++c) acc[c] += static_cast<A>(src[order[j] * D + c]);
    idx.push_back(key);
    for (size_t c = 0; c < D; ++c) out.push_back(static_cast<T>(acc[c]));
    i = j;
  }
  out_n = idx.size();
  t.indices = std::move(idx);
  t.values.resize(out.size() * sizeof(T));
  if (!out.empty()) std::memcpy(t.values.data(), out.data(), t.values.size());
}
}  // namespace

bool coalesce(SparseTensor& t) {
  std::vector<size_t> order(t.indices.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t.indices[a] < t.indices[b]; });
  size_t before = t.indices.size(), after = 0;
  dispatch_dtype(t.dtype, [&](auto tag) { coalesce_typed<decltype(tag)>(t, order, after); });
  return after != before;
}

bool has_duplicates(const SparseView& v) {
  std::vector<int64_t> idx(v.nnz);
  for (size_t i = 0; i < v.nnz; ++i) idx[i] = v.index_at(i);
  std::sort(idx.begin(), idx.end());
  return std::adjacent_find(idx.begin(), idx.end()) != idx.end();
}

void scatter_add(const SparseView& v, void* dense) {
  dispatch_dtype(v.dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = typename accum_of<T>::type;
    T* out = static_cast<T*>(dense);
    const T* vals = static_cast<const T*>(v.values);
    const size_t D = v.row_width;
    for (size_t i = 0; i < v.nnz; ++i) {
      uint64_t base = static_cast<uint64_t>(v.index_at(i)) * D;
      for (size_t c = 0; c < D; ++c) out[base + c] = static_cast<T>(static_cast<A>(out[base + c]) + static_cast<A>(vals[i * D + c]));
    }
  });
}

SparseTensor dense_to_sparse(const void* dense, uint64_t n, DType t, uint32_t row_width) {
  SparseTensor s(n, t, row_width);
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const T* d = static_cast<const T*>(dense);
    std::vector<T> vals;
    for (uint64_t r = 0; r < n / row_width; ++r) {
      bool nz = false;
      for (uint32_t c = 0; c < row_width; ++c) nz |= !(d[r * row_width + c] == T(0));
      if (!nz) continue;
      s.indices.push_back(static_cast<int64_t>(r));
      for (uint32_t c = 0; c < row_width; ++c) vals.push_back(d[r * row_width + c]);
    }
    s.values.resize(vals.size() * sizeof(T));
    if (!vals.empty()) std::memcpy(s.values.data(), vals.data(), s.values.size());
  });
  return s;
}

}  // namespace zen
