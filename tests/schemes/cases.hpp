#pragma once
// Test cases for the sparse allreduce schemes, an independent dense reference, a per-rank checker
// and the byte formulas of docs/algorithms.md computed from the inputs by the cost model
// (zen/model/cost_model.hpp), which the tests hold against the communicator's counts. Shared by
// the loopback and MPI test binaries.
//
// Values are small integers (|v| <= 4, at most 3 duplicates of a row per rank, n <= 8), so every
// partial and final sum is exact in f32, f64, f16 and bf16 whatever the reduction order: every
// scheme must then produce exactly the reference bits. No input is -0.0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "zen/comm/communicator.hpp"
#include "zen/hash/hash.hpp"
#include "zen/model/cost_model.hpp"
#include "zen/schemes/scheme.hpp"
#include "zen/tensor.hpp"

namespace zen::test {

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  int small() { return static_cast<int>(below(9)) - 4; }  // [-4, 4]
};

struct Case {
  std::string name;
  uint64_t rows = 0;  // R = N / D
  uint32_t D = 1;
  DType dtype = DType::F32;
  IndexType itype = IndexType::I64;
  SchemeOptions opt;
  std::vector<std::vector<int64_t>> idx;  // per rank, any order, duplicates allowed
  std::vector<std::vector<double>> val;   // per rank, idx.size() * D small integers
  uint64_t N() const { return rows * D; }
  TensorSpec spec() const { return TensorSpec{N(), D, dtype}; }
};

inline void add_row(Case& c, int r, int64_t row, Rng& g) {
  c.idx[r].push_back(row);
  for (uint32_t k = 0; k < c.D; ++k) c.val[r].push_back(g.small());
}

inline std::vector<int64_t> sample_rows(uint64_t R, double d, Rng& g) {
  std::vector<int64_t> v;
  for (uint64_t i = 0; i < R; ++i)
    if (g.unit() < d) v.push_back(static_cast<int64_t>(i));
  return v;
}

/// Case kinds: every one has rows R not divisible by n (for n > 1) unless R < n by design.
inline const std::vector<std::string>& case_kinds() {
  static const std::vector<std::string> k{"empty",  "single",     "tiny",     "sparse1",      "half",     "full",
                                          "same",   "disjoint",   "skew",     "dups",         "cancel",   "empty_ranks",
                                          "one_rank_all", "switch"};
  return k;
}

/// Build case `kind` for n ranks; `variant` picks dtype / row width / index type / options.
inline Case make_case(const std::string& kind, int n, int variant, uint64_t seed = 1) {
  static const DType dts[] = {DType::F32, DType::F16, DType::BF16, DType::F64};
  static const uint32_t ds[] = {1, 3, 1, 2, 1, 5, 1, 64};
  Case c;
  c.name = kind + "/v" + std::to_string(variant);
  c.dtype = dts[variant % 4];
  c.D = ds[(variant + kind.size()) % 8];
  c.itype = (variant % 2) ? IndexType::I32 : IndexType::I64;
  c.idx.assign(n, {});
  c.val.assign(n, {});
  Rng g(seed * 1000003 + static_cast<uint64_t>(variant) * 7919 + std::hash<std::string>{}(kind) % 100000 +
        static_cast<uint64_t>(n) * 31);
  uint64_t R = 997 + static_cast<uint64_t>(variant) * 240;  // prime-ish: not divisible by 2..8
  if (R % 2 == 0) ++R;
  while (n > 1 && (R % 3 == 0 || R % 5 == 0 || R % 7 == 0)) R += 2;
  if (c.D >= 64) R = 211;
  c.rows = R;
  if (variant % 3 == 1) c.opt.block_size = 16;  // omnireduce: many blocks per owner
  {  // hierarchical_sparse: nodes of several ranks first (2 nodes of 2.. when n allows), then one node, then 1
    std::vector<int> sizes;
    for (int L = 2; L < n; ++L)
      if (n % L == 0) sizes.push_back(L);
    sizes.push_back(n);
    if (n > 1) sizes.push_back(1);
    c.opt.node_size = sizes[static_cast<size_t>(variant) % sizes.size()];
  }
  if (kind == "empty") {
  } else if (kind == "single") {
    add_row(c, n - 1, static_cast<int64_t>(R - 1), g);
  } else if (kind == "tiny") {
    c.rows = 3;  // fewer rows than ranks for n > 3: empty owner ranges
    for (int r = 0; r < n; ++r) add_row(c, r, static_cast<int64_t>(r % 3), g);
  } else if (kind == "sparse1" || kind == "half" || kind == "full") {
    const double d = kind == "sparse1" ? 0.01 : (kind == "half" ? 0.5 : 1.1);
    for (int r = 0; r < n; ++r)
      for (int64_t row : sample_rows(R, d, g)) add_row(c, r, row, g);
    add_row(c, 0, 0, g);
    add_row(c, n - 1, static_cast<int64_t>(R - 1), g);
  } else if (kind == "same") {  // gamma = 1
    auto rows = sample_rows(R, 0.1, g);
    rows.push_back(0);
    rows.push_back(static_cast<int64_t>(R - 1));
    for (int r = 0; r < n; ++r)
      for (int64_t row : rows) add_row(c, r, row, g);
  } else if (kind == "disjoint") {  // gamma = n
    for (int r = 0; r < n; ++r)
      for (int64_t row : sample_rows(R, 0.3, g))
        if (row % n == r) add_row(c, r, row, g);
    add_row(c, 0, 0, g);
  } else if (kind == "skew") {  // Zipf(1.2) over rows: the head rows are hot
    std::vector<double> cdf(R);
    double s = 0;
    for (uint64_t i = 0; i < R; ++i) cdf[i] = (s += 1.0 / std::pow(static_cast<double>(i + 1), 1.2));
    for (int r = 0; r < n; ++r) {
      std::set<int64_t> rows;
      for (int t = 0; t < 60; ++t)
        rows.insert(static_cast<int64_t>(std::lower_bound(cdf.begin(), cdf.end(), g.unit() * s) - cdf.begin()));
      for (int64_t row : rows) add_row(c, r, std::min<int64_t>(row, static_cast<int64_t>(R - 1)), g);
    }
    add_row(c, n - 1, static_cast<int64_t>(R - 1), g);
  } else if (kind == "dups") {  // each row 1..3 times, shuffled
    for (int r = 0; r < n; ++r) {
      for (int64_t row : sample_rows(R, 0.05, g)) {
        int times = 1 + static_cast<int>(g.below(3));
        for (int t = 0; t < times; ++t) add_row(c, r, row, g);
      }
      add_row(c, r, 0, g);
      add_row(c, r, 0, g);
      // shuffle entries (Fisher-Yates) keeping each entry's D values with it
      const size_t m = c.idx[r].size();
      for (size_t i = m; i > 1; --i) {
        size_t j = g.below(i);
        std::swap(c.idx[r][i - 1], c.idx[r][j]);
        for (uint32_t k = 0; k < c.D; ++k) std::swap(c.val[r][(i - 1) * c.D + k], c.val[r][j * c.D + k]);
      }
    }
  } else if (kind == "cancel") {  // rows whose contributions sum to exactly 0 stay in the support
    for (int64_t row : sample_rows(R, 0.05, g)) {
      const int a = 0, b = n > 1 ? 1 : 0;
      add_row(c, a, row, g);
      c.idx[b].push_back(row);
      for (uint32_t k = 0; k < c.D; ++k) c.val[b].push_back(-c.val[a][c.val[a].size() - c.D + k]);
    }
    add_row(c, n - 1, static_cast<int64_t>(R - 1), g);
    // a present row with value exactly 0
    c.idx[0].push_back(static_cast<int64_t>(R / 2));
    for (uint32_t k = 0; k < c.D; ++k) c.val[0].push_back(0);
  } else if (kind == "empty_ranks") {
    for (int r = 0; r < n; r += 2)
      for (int64_t row : sample_rows(R, 0.05, g)) add_row(c, r, row, g);
  } else if (kind == "one_rank_all") {
    for (uint64_t row = 0; row < R; ++row) add_row(c, 0, static_cast<int64_t>(row), g);
  } else if (kind == "switch") {  // sparcml dense switch at 20% density: mixed representations
    c.opt.sparcml_dense_switch = 0.2;
    for (int r = 0; r < n; ++r)
      for (int64_t row : sample_rows(R, r == 0 ? 0.3 : 0.12, g)) add_row(c, r, row, g);
  } else {
    ADD_FAILURE() << "unknown case kind " << kind;
  }
  return c;
}

// ---- values in any dtype ----
inline std::vector<uint8_t> to_bytes(const std::vector<double>& v, DType t) {
  std::vector<uint8_t> out(v.size() * dtype_size(t));
  dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < v.size(); ++i) {
      T x = static_cast<T>(v[i]);
      std::memcpy(out.data() + i * sizeof(T), &x, sizeof(T));
    }
  });
  return out;
}

/// Rank r's input as a view with the case's index type (storage kept alive by the caller).
struct Input {
  std::vector<int32_t> i32;
  std::vector<int64_t> i64;
  std::vector<uint8_t> vals;
  SparseView view;
};
inline void make_input(const Case& c, int r, Input& in) {
  in.vals = to_bytes(c.val[r], c.dtype);
  SparseView& v = in.view;
  v.dense_len = c.N();
  v.row_width = c.D;
  v.nnz = c.idx[r].size();
  v.dtype = c.dtype;
  v.values = in.vals.data();
  v.index_type = c.itype;
  if (c.itype == IndexType::I32) {
    in.i32.assign(c.idx[r].begin(), c.idx[r].end());
    v.indices = in.i32.data();
  } else {
    in.i64 = c.idx[r];
    v.indices = in.i64.data();
  }
}

/// Independent reference: per-row sums in double over all ranks (exact for these inputs).
struct Reference {
  std::vector<int64_t> rows;   // sorted union of the input supports
  std::vector<uint8_t> vals;   // rows.size() * D values of the dtype
  std::vector<uint8_t> dense;  // N values of the dtype
};
inline Reference reference(const Case& c) {
  std::map<int64_t, std::vector<double>> acc;
  for (size_t r = 0; r < c.idx.size(); ++r)
    for (size_t i = 0; i < c.idx[r].size(); ++i) {
      auto& a = acc[c.idx[r][i]];
      a.resize(c.D, 0.0);
      for (uint32_t k = 0; k < c.D; ++k) a[k] += c.val[r][i * c.D + k];
    }
  Reference ref;
  std::vector<double> sv, dv(c.N(), 0.0);
  for (auto& [row, a] : acc) {
    ref.rows.push_back(row);
    for (uint32_t k = 0; k < c.D; ++k) {
      sv.push_back(a[k]);
      dv[static_cast<size_t>(row) * c.D + k] = a[k];
    }
  }
  ref.vals = to_bytes(sv, c.dtype);
  ref.dense = to_bytes(dv, c.dtype);
  return ref;
}

inline uint64_t fnv(const void* p, size_t n, uint64_t h = 1469598103934665603ULL) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

/// Run `scheme` on this rank for case c, sparse then dense output (same scheme object), and check
/// both bitwise against the reference and across ranks (checksums allgathered). `sparse_report`
/// receives the report of the sparse call when non-null.
inline void check_case(Communicator& comm, const std::string& scheme, const Case& c, const Reference& ref,
                       SyncReport* sparse_report = nullptr, SyncReport* dense_report = nullptr) {
  const int r = comm.rank();
  const std::string where = scheme + " " + c.name + " n=" + std::to_string(comm.size()) + " rank " + std::to_string(r) +
                            " dtype " + dtype_name(c.dtype) + " D=" + std::to_string(c.D) + ": ";
  Input in;
  make_input(c, r, in);
  auto s = make_scheme(scheme, comm, c.spec(), c.opt);
  SparseTensor out;
  s->run(in.view, out);
  if (sparse_report) *sparse_report = s->report();
  EXPECT_EQ(out.dense_len, c.N()) << where;
  EXPECT_EQ(out.row_width, c.D) << where;
  EXPECT_EQ(out.dtype, c.dtype) << where;
  EXPECT_EQ(out.indices, ref.rows) << where << "sparse support differs";
  EXPECT_TRUE(out.values == ref.vals) << where << "sparse values differ (" << out.values.size() << " vs "
                                      << ref.vals.size() << " bytes)";
  EXPECT_EQ(s->report().result_nnz, ref.rows.size()) << where;
  std::vector<uint8_t> dense(c.N() * dtype_size(c.dtype), 0xAB);
  s->run_dense(in.view, dense.data());
  if (dense_report) *dense_report = s->report();
  size_t wrong = 0;
  for (size_t i = 0; i < dense.size(); ++i) wrong += dense[i] != ref.dense[i];
  EXPECT_EQ(wrong, 0u) << where << "dense output has " << wrong << " wrong bytes";
  // identical bits on every rank
  uint64_t h = fnv(out.indices.data(), out.indices.size() * 8);
  h = fnv(out.values.data(), out.values.size(), h);
  h = fnv(dense.data(), dense.size(), h);
  auto all = comm.allgather_value(h);
  for (size_t p = 0; p < all.size(); ++p) EXPECT_EQ(all[p], all[0]) << where << "rank " << p << " result differs from rank 0";
}

// ---- byte formulas of docs/algorithms.md, from the inputs: the cost model's exact mode ----
/// Bytes of one call for every rank and phase (sparse_out: the sparse-output variant).
inline model::Traffic expected_traffic(const std::string& scheme, const Case& c, int n, bool sparse_out) {
  const model::Problem p = model::Problem::of(c.spec(), n, c.opt, sparse_out);
  return model::traffic(scheme, p, model::count_exact(p, c.idx));
}

/// The model's bytes of every phase equal the report's (phases of one name summed; a phase the
/// model lists but the scheme did not run on this rank must carry no bytes).
inline void expect_phases_match(const model::Traffic& want, const SyncReport& got, int r, const std::string& where) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> m, g;
  for (const auto& ph : want.phases) {
    m[ph.name].first += ph.sent[static_cast<size_t>(r)];
    m[ph.name].second += ph.recv[static_cast<size_t>(r)];
  }
  for (const auto& ph : got.phases) {
    g[ph.name].first += ph.sent;
    g[ph.name].second += ph.recv;
    EXPECT_TRUE(m.count(ph.name)) << where << ": the model has no phase '" << ph.name << "'";
  }
  for (const auto& [name, sr] : m) {
    const auto it = g.find(name);
    const std::pair<uint64_t, uint64_t> have = it == g.end() ? std::pair<uint64_t, uint64_t>{0, 0} : it->second;
    EXPECT_EQ(have.first, sr.first) << where << " phase " << name << " sent";
    EXPECT_EQ(have.second, sr.second) << where << " phase " << name << " received";
  }
}

}  // namespace zen::test
