#pragma once
// Shared inputs and the exact reference of the hierarchical mode (used by the loopback and MPI tests).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "zen/schemes/hierarchical.hpp"

namespace zen::test {

struct HierCase {
  uint64_t rows;
  uint32_t D;
  double density;
  bool duplicates;
  bool integer_values;
};

/// Rank r's input: rows drawn with density d (ascending, plus row 0 on rank 0 and row R-1 on the last
/// rank), a shared hot set for overlap, optional duplicates, and a cancelling pair (rank 0: +v,
/// rank n-1: -v on one row) so that an exact zero must stay in the support.
template <typename T>
SparseTensor make_input(const HierCase& hc, int r, int n, DType dt, uint64_t seed) {
  SparseTensor t(hc.rows * hc.D, dt, hc.D);
  std::mt19937_64 g(seed * 1315423911ULL + static_cast<uint64_t>(r) * 7919 + 1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<int64_t> idx;
  for (uint64_t q = 0; q < hc.rows; ++q) {
    const bool hot = (q % 7 == 3) && u(g) < 0.8;  // shared rows (overlap)
    if (hot || u(g) < hc.density) idx.push_back(static_cast<int64_t>(q));
  }
  if (hc.rows) {
    if (r == 0 && (idx.empty() || idx.front() != 0)) idx.insert(idx.begin(), 0);
    if (r == n - 1 && (idx.empty() || idx.back() != static_cast<int64_t>(hc.rows - 1))) idx.push_back(static_cast<int64_t>(hc.rows - 1));
  }
  if (hc.duplicates && !idx.empty()) {
    const size_t k = idx.size();
    for (size_t i = 0; i < k; i += 5) idx.push_back(idx[i]);
  }
  std::shuffle(idx.begin(), idx.end(), g);
  t.resize(idx.size());
  t.indices = idx;
  std::uniform_int_distribution<int> iv(-8, 8);
  for (size_t e = 0; e < idx.size(); ++e)
    for (uint32_t c = 0; c < hc.D; ++c) {
      double v = hc.integer_values ? static_cast<double>(iv(g)) : (u(g) * 2 - 1) * 3.7;
      t.vals<T>()[e * hc.D + c] = static_cast<T>(v);
    }
  // Cancelling pair on the middle row: rank 0 holds +1.25, rank n-1 holds -1.25 (n > 1).
  if (n > 1 && hc.rows > 2 && !hc.duplicates && (r == 0 || r == n - 1)) {
    const int64_t mid = static_cast<int64_t>(hc.rows / 2);
    auto it = std::find(t.indices.begin(), t.indices.end(), mid);
    size_t e;
    if (it == t.indices.end()) {
      t.indices.push_back(mid);
      t.values.resize(t.values.size() + hc.D * sizeof(T));
      e = t.indices.size() - 1;
    } else {
      e = static_cast<size_t>(it - t.indices.begin());
    }
    for (uint32_t c = 0; c < hc.D; ++c) t.vals<T>()[e * hc.D + c] = static_cast<T>(r == 0 ? 1.25 : -1.25);
    // Every other rank must not touch that row.
  } else if (n > 1 && hc.rows > 2 && !hc.duplicates) {
    const int64_t mid = static_cast<int64_t>(hc.rows / 2);
    SparseTensor o(t.dense_len, dt, hc.D);
    for (size_t e = 0; e < t.nnz(); ++e) {
      if (t.indices[e] == mid) continue;
      o.indices.push_back(t.indices[e]);
      const auto* p = t.values.data() + e * hc.D * sizeof(T);
      o.values.insert(o.values.end(), p, p + hc.D * sizeof(T));
    }
    t = std::move(o);
  }
  return t;
}

/// Exact reference of the hierarchical order: per rank, duplicates summed in input order (accum,
/// rounded to T); per node, present contributions in local order (accum, rounded); across nodes in
/// node order (accum, rounded). Returns the sorted sparse result (union support).
template <typename T>
SparseTensor reference(const std::vector<SparseTensor>& ins, int node_size, const TensorSpec& spec) {
  using A = typename accum_of<T>::type;
  const size_t D = spec.row_width;
  const int n = static_cast<int>(ins.size());
  std::vector<std::map<int64_t, std::vector<T>>> per_rank(n);
  for (int r = 0; r < n; ++r) {
    std::map<int64_t, std::vector<A>> acc;
    for (size_t e = 0; e < ins[r].nnz(); ++e) {
      auto it = acc.find(ins[r].indices[e]);
      const T* v = ins[r].template vals<T>() + e * D;
      if (it == acc.end()) {
        std::vector<A> a(D);
        for (size_t c = 0; c < D; ++c) a[c] = static_cast<A>(v[c]);
        acc.emplace(ins[r].indices[e], a);
      } else {
        for (size_t c = 0; c < D; ++c) it->second[c] += static_cast<A>(v[c]);
      }
    }
    for (auto& [k, a] : acc) {
      std::vector<T> t(D);
      for (size_t c = 0; c < D; ++c) t[c] = static_cast<T>(a[c]);
      per_rank[r].emplace(k, t);
    }
  }
  auto sum_in_order = [&](const std::vector<const std::map<int64_t, std::vector<T>>*>& parts) {
    std::map<int64_t, std::vector<A>> acc;
    for (auto* m : parts)
      for (auto& [k, v] : *m) {
        auto it = acc.find(k);
        if (it == acc.end()) {
          std::vector<A> a(D);
          for (size_t c = 0; c < D; ++c) a[c] = static_cast<A>(v[c]);
          acc.emplace(k, a);
        } else {
          for (size_t c = 0; c < D; ++c) it->second[c] += static_cast<A>(v[c]);
        }
      }
    std::map<int64_t, std::vector<T>> out;
    for (auto& [k, a] : acc) {
      std::vector<T> t(D);
      for (size_t c = 0; c < D; ++c) t[c] = static_cast<T>(a[c]);
      out.emplace(k, t);
    }
    return out;
  };
  std::vector<std::map<int64_t, std::vector<T>>> nodes;
  for (int g = 0; g < n / node_size; ++g) {
    std::vector<const std::map<int64_t, std::vector<T>>*> parts;
    for (int l = 0; l < node_size; ++l) parts.push_back(&per_rank[g * node_size + l]);
    nodes.push_back(sum_in_order(parts));
  }
  std::vector<const std::map<int64_t, std::vector<T>>*> parts;
  for (auto& m : nodes) parts.push_back(&m);
  auto fin = sum_in_order(parts);
  SparseTensor out(spec.dense_len, spec.dtype, spec.row_width);
  for (auto& [k, v] : fin) {
    out.indices.push_back(k);
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out.values.insert(out.values.end(), p, p + D * sizeof(T));
  }
  return out;
}

inline void expect_same_bits(const SparseTensor& got, const SparseTensor& want, const std::string& what) {
  ASSERT_EQ(got.indices, want.indices) << what;
  ASSERT_EQ(got.values.size(), want.values.size()) << what;
  if (!got.values.empty()) {
    ASSERT_EQ(0, std::memcmp(got.values.data(), want.values.data(), got.values.size())) << what;
  }
}

/// Dense image of a sorted sparse tensor.
inline std::vector<uint8_t> dense_of(const SparseTensor& s) {
  std::vector<uint8_t> d(s.dense_len * dtype_size(s.dtype), 0);
  const size_t rb = s.row_width * dtype_size(s.dtype);
  for (size_t i = 0; i < s.nnz(); ++i) std::memcpy(d.data() + s.indices[i] * rb, s.values.data() + i * rb, rb);
  return d;
}

/// One rank's part of a hierarchical test: run sparse and dense output, compare with the reference.
template <typename T>
void check_hierarchical_rank(Communicator& world, Communicator* intra, Communicator* inter, int node_size,
                             const HierCase& hc, uint64_t seed) {
  const DType dt = dtype_of<T>::value;
  const int n = world.size(), r = world.rank();
  TensorSpec spec{hc.rows * hc.D, hc.D, dt};
  std::vector<SparseTensor> ins;
  for (int p = 0; p < n; ++p) ins.push_back(make_input<T>(hc, p, n, dt, seed));
  const SparseTensor want = reference<T>(ins, node_size, spec);
  SchemeOptions opt;
  opt.seed = seed;
  opt.threads = 1;
  std::unique_ptr<SparseAllreduce> s;
  if (intra)
    s = make_hierarchical(world, *intra, *inter, spec, opt);
  else
    s = make_hierarchical(world, spec, opt, HierarchicalOptions{node_size, "balanced"});
  const std::string what = "rank " + std::to_string(r) + "/" + std::to_string(n) + " L=" + std::to_string(node_size) +
                           " rows=" + std::to_string(hc.rows) + " D=" + std::to_string(hc.D) + " " + dtype_name(dt);
  SparseTensor got;
  s->run(ins[r].view(), got);
  expect_same_bits(got, want, what + " sparse");
  EXPECT_EQ(s->report().result_nnz, want.nnz()) << what;
  std::vector<uint8_t> dense(spec.dense_len * sizeof(T) + 1, 0xAB);
  s->run_dense(ins[r].view(), dense.data());
  const auto wd = dense_of(want);
  if (!wd.empty()) {
    ASSERT_EQ(0, std::memcmp(dense.data(), wd.data(), wd.size())) << what << " dense";
  }
  ASSERT_EQ(dense.back(), 0xAB) << what << " wrote past the dense buffer";
  EXPECT_EQ(s->report().result_nnz, want.nnz()) << what;
}

}  // namespace zen::test
