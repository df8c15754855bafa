// The scheme helpers of src/schemes/common.hpp: sort-and-reduce, sparse results, imbalance, counts.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "common.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen::detail {

void sort_and_reduce(std::vector<int64_t>& keys, std::vector<uint8_t>& values, uint32_t row_width, DType t) {
  const size_t n = keys.size();
  bool sorted_unique = true;
  for (size_t i = 1; i < n && sorted_unique; ++i) sorted_unique = keys[i - 1] < keys[i];
  if (sorted_unique) return;
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    using A = typename accum_of<T>::type;
    const T* src = reinterpret_cast<const T*>(values.data());
    const size_t D = row_width;
    std::vector<int64_t> ok;
    std::vector<T> ov;
    ok.reserve(n);
    ov.reserve(n * D);
    std::vector<A> acc(D);
    size_t i = 0;
    while (i < n) {
      const int64_t k = keys[order[i]];
      for (size_t c = 0; c < D; ++c) acc[c] = static_cast<A>(src[order[i] * D + c]);
      size_t j = i + 1;
      for (; j < n && keys[order[j]] == k; ++j)
        for (size_t c = 0; c < D; ++c) acc[c] += static_cast<A>(src[order[j] * D + c]);
      ok.push_back(k);
      for (size_t c = 0; c < D; ++c) ov.push_back(static_cast<T>(acc[c]));
      i = j;
    }
    keys = std::move(ok);
    values.assign(reinterpret_cast<const uint8_t*>(ov.data()), reinterpret_cast<const uint8_t*>(ov.data()) + ov.size() * sizeof(T));
  });
}

void write_sparse_result(std::vector<int64_t>&& keys, std::vector<uint8_t>&& values, const TensorSpec& spec,
                         SparseTensor& out) {
  sort_and_reduce(keys, values, spec.row_width, spec.dtype);
  out.dense_len = spec.dense_len;
  out.row_width = spec.row_width;
  out.dtype = spec.dtype;
  out.indices = std::move(keys);
  out.values = std::move(values);
}

double imbalance(const std::vector<uint64_t>& load) {
  uint64_t total = 0, mx = 0;
  for (uint64_t v : load) {
    total += v;
    mx = std::max(mx, v);
  }
  return total == 0 ? 1.0 : static_cast<double>(mx) * static_cast<double>(load.size()) / static_cast<double>(total);
}

std::vector<uint64_t> alltoall_counts(Communicator& comm, const std::vector<uint64_t>& send) {
  const size_t n = static_cast<size_t>(comm.size());
  std::vector<uint64_t> recv(n);
  std::vector<size_t> c8(n, 8), d8(n);
  for (size_t p = 0; p < n; ++p) d8[p] = 8 * p;
  comm.alltoallv(send.data(), c8.data(), d8.data(), recv.data(), c8.data(), d8.data());
  return recv;
}

void sparse_to_dense(const SparseTensor& s, void* dense) {
  const size_t vs = dtype_size(s.dtype);
  if (s.dense_len) std::memset(dense, 0, s.dense_len * vs);
  const size_t rb = s.row_width * vs;
  auto* d = static_cast<uint8_t*>(dense);
  for (size_t i = 0; i < s.indices.size(); ++i)
    std::memcpy(d + static_cast<size_t>(s.indices[i]) * rb, s.values.data() + i * rb, rb);
}

}  // namespace zen::detail
