// Duplicates merged at the source (balanced) are summed in a fixed order: the same bits whatever the
// thread count and on every run, equal to a reference that sums each rank's occurrences of a row in
// input order (accumulation type, one rounding) and then the ranks in rank order. Non-integer values,
// so any other order would show.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "zen/comm/loopback.hpp"
#include "zen/schemes/scheme.hpp"

using namespace zen;

namespace {

template <typename T>
std::map<int64_t, std::vector<T>> reference(const std::vector<std::vector<int64_t>>& idx, const std::vector<std::vector<T>>& val,
                                            uint32_t D) {
  using A = typename accum_of<T>::type;
  std::map<int64_t, std::vector<A>> acc;
  for (size_t r = 0; r < idx.size(); ++r) {
    std::map<int64_t, std::vector<A>> mine;  // per rank: occurrences in input order
    for (size_t i = 0; i < idx[r].size(); ++i) {
      auto it = mine.find(idx[r][i]);
      if (it == mine.end()) {
        std::vector<A> row(D);
        for (uint32_t c = 0; c < D; ++c) row[c] = static_cast<A>(val[r][i * D + c]);
        mine.emplace(idx[r][i], row);
      } else {
        for (uint32_t c = 0; c < D; ++c) it->second[c] += static_cast<A>(val[r][i * D + c]);
      }
    }
    for (auto& [k, row] : mine) {  // rounded to T for the wire, then summed over ranks in rank order
      auto it = acc.find(k);
      if (it == acc.end()) {
        std::vector<A> first(D);
        for (uint32_t c = 0; c < D; ++c) first[c] = static_cast<A>(static_cast<T>(row[c]));
        acc.emplace(k, first);
      } else {
        for (uint32_t c = 0; c < D; ++c) it->second[c] += static_cast<A>(static_cast<T>(row[c]));
      }
    }
  }
  std::map<int64_t, std::vector<T>> out;
  for (auto& [k, row] : acc) {
    std::vector<T> t(D);
    for (uint32_t c = 0; c < D; ++c) t[c] = static_cast<T>(row[c]);
    out.emplace(k, t);
  }
  return out;
}

template <typename T>
void run_case(int n, uint32_t D, uint64_t rows, int threads, IndexEncoding push, const std::vector<std::vector<int64_t>>& idx,
              const std::vector<std::vector<T>>& val, std::vector<SparseTensor>& outs) {
  outs.assign(static_cast<size_t>(n), SparseTensor{});
  loopback::run(n, [&](Communicator& c) {
    SchemeOptions o;
    o.threads = threads;
    o.push = push;
    o.seed = 77;
    auto s = make_scheme("balanced", c, TensorSpec{rows * D, D, dtype_of<T>::value}, o);
    SparseView v;
    v.dense_len = rows * D;
    v.row_width = D;
    v.nnz = idx[static_cast<size_t>(c.rank())].size();
    v.indices = idx[static_cast<size_t>(c.rank())].data();
    v.dtype = dtype_of<T>::value;
    v.values = val[static_cast<size_t>(c.rank())].data();
    for (int rep = 0; rep < 3; ++rep) s->run(v, outs[static_cast<size_t>(c.rank())]);
  });
}

template <typename T>
void check_dtype() {
  const int n = 3;
  const uint32_t D = 5;
  const uint64_t rows = 20011;
  std::mt19937_64 g(9);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::vector<int64_t>> idx(n);
  std::vector<std::vector<T>> val(n);
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < 90000; ++i) {  // ~40k distinct rows, most repeated (Zipf-like head)
      const uint64_t x = g() % 1000 < 600 ? g() % 300 : g() % rows;
      idx[r].push_back(static_cast<int64_t>(x));
      for (uint32_t c = 0; c < D; ++c) val[r].push_back(static_cast<T>(u(g) * 3.1f));
    }
  }
  const auto ref = reference<T>(idx, val, D);
  std::vector<SparseTensor> first;
  // Pushed as COO the owner accumulates over its set; pushed sorted (Elias-Fano) it merges the
  // sorted segments (plan::owner_merge, split among the tasks): same sums, same bits.
  for (IndexEncoding push : {IndexEncoding::Coo, IndexEncoding::EliasFano}) {
    for (int threads : {1, 2, 4}) {
      std::vector<SparseTensor> outs;
      run_case<T>(n, D, rows, threads, push, idx, val, outs);
      for (int r = 0; r < n; ++r) {
        const SparseTensor& o = outs[static_cast<size_t>(r)];
        ASSERT_EQ(o.nnz(), ref.size()) << "threads " << threads << " rank " << r;
        size_t k = 0;
        for (auto& [row, want] : ref) {
          ASSERT_EQ(o.indices[k], row);
          ASSERT_EQ(std::memcmp(o.values.data() + k * D * sizeof(T), want.data(), D * sizeof(T)), 0)
              << dtype_name(dtype_of<T>::value) << " threads " << threads << " rank " << r << " row " << row;
          ++k;
        }
        if (!first.empty()) {
          EXPECT_EQ(o.values, first[0].values) << "threads " << threads;
        }
      }
      if (first.empty()) first = outs;
    }
  }
}

}  // namespace

TEST(Determinism, MergedDuplicatesSameBitsWhateverTheThreadCountF32) { check_dtype<float>(); }
TEST(Determinism, MergedDuplicatesSameBitsWhateverTheThreadCountF64) { check_dtype<double>(); }
TEST(Determinism, MergedDuplicatesSameBitsWhateverTheThreadCountBF16) { check_dtype<bfloat16>(); }
