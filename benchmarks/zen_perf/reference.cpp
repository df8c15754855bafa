// zen_perf's check (workload.hpp): the reference sum of every rank's input, held sparsely, and the
// count of result elements that differ from it (#wrong).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "workload.hpp"

namespace zen_perf {

using namespace zen;

Reference build_reference(const std::vector<Workload>& all, uint32_t D, DType dt) {
  Reference ref;
  // (row, rank, entry), sorted by row then rank then entry: the sums run in rank order.
  std::vector<std::tuple<uint64_t, uint32_t, uint32_t>> e;
  for (size_t r = 0; r < all.size(); ++r)
    for (size_t i = 0; i < all[r].idx.size(); ++i)
      e.emplace_back(static_cast<uint64_t>(all[r].idx[i]), static_cast<uint32_t>(r), static_cast<uint32_t>(i));
  std::sort(e.begin(), e.end());
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    for (size_t k = 0; k < e.size(); ++k) {
      const auto [row, r, i] = e[k];
      if (ref.rows.empty() || ref.rows.back() != row) {
        ref.rows.push_back(row);
        ref.sum.resize(ref.sum.size() + D, 0.0);
        ref.sum_abs.resize(ref.sum_abs.size() + D, 0.0);
      }
      const T* v = reinterpret_cast<const T*>(all[r].vals.data()) + static_cast<size_t>(i) * D;
      double* s = ref.sum.data() + ref.sum.size() - D;
      double* a = ref.sum_abs.data() + ref.sum_abs.size() - D;
      for (uint32_t c = 0; c < D; ++c) {
        const double x = static_cast<double>(static_cast<float>(v[c]));
        s[c] += x;
        a[c] += std::fabs(x);
      }
    }
  });
  ref.union_rows = ref.rows.size();
  return ref;
}

namespace {

double dtype_eps(DType t) {
  switch (t) {
    case DType::F64: return std::ldexp(1.0, -52);
    case DType::F16: return std::ldexp(1.0, -10);
    case DType::BF16: return std::ldexp(1.0, -7);
    default: return std::ldexp(1.0, -23);
  }
}

}  // namespace

/// Count wrong elements of a result. exact: bitwise equal to the reference rounded to the dtype;
/// otherwise within eps * (n + 1) * sum|x| (traces with arbitrary values, any summation order).
/// A dense result is walked once (zeros expected outside the support); a sparse one is merged with
/// the reference rows, so it costs O(nnz) memory and time.
uint64_t count_wrong(const Reference& ref, const void* dense, const SparseTensor* sparse, uint64_t N, uint32_t D,
                     DType dt, bool exact, int n) {
  uint64_t wrong = 0;
  const double eps = dtype_eps(dt) * (n + 1);
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    auto bad = [&](T got, double want_sum, double want_abs) {
      const T want = static_cast<T>(want_sum);
      if (std::memcmp(&got, &want, sizeof(T)) == 0) return false;
      if (exact) return true;
      return std::fabs(static_cast<double>(static_cast<float>(got)) - want_sum) > eps * want_abs;
    };
    if (dense) {
      const T* d = static_cast<const T*>(dense);
      size_t k = 0;
      for (uint64_t row = 0; row < N / D; ++row) {
        const bool in = k < ref.rows.size() && ref.rows[k] == row;
        for (uint32_t c = 0; c < D; ++c)
          wrong += in ? bad(d[row * D + c], ref.sum[k * D + c], ref.sum_abs[k * D + c]) : bad(d[row * D + c], 0.0, 0.0);
        if (in) ++k;
      }
      return;
    }
    // sparse: indices must be exactly the union, ascending; values per element
    const T* v = sparse->vals<T>();
    const size_t got = sparse->indices.size();
    size_t j = 0, k = 0;
    while (j < got || k < ref.rows.size()) {
      const bool have = j < got, want = k < ref.rows.size();
      const uint64_t gr = have ? static_cast<uint64_t>(sparse->indices[j]) : ~uint64_t{0};
      if (have && j > 0 && static_cast<uint64_t>(sparse->indices[j - 1]) >= gr) {  // unsorted or repeated
        wrong += D;
        ++j;
        continue;
      }
      if (want && (!have || ref.rows[k] < gr)) {  // a missing row
        wrong += D;
        ++k;
      } else if (!want || gr < ref.rows[k]) {  // an extra row
        wrong += D;
        ++j;
      } else {
        for (uint32_t c = 0; c < D; ++c) wrong += bad(v[j * D + c], ref.sum[k * D + c], ref.sum_abs[k * D + c]);
        ++j;
        ++k;
      }
    }
  });
  return wrong;
}

}  // namespace zen_perf
