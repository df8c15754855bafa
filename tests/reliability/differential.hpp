#pragma once
// Differential testing of every sparse allreduce scheme against an independent exact reference.
//
// A case is drawn from a seed: rank count n, tensor (N, D, dtype, index type), scheme, options
// (pull encoding, hash region sizes, seeds, threads), density gamma, skew, duplicates, empty ranks,
// index 0 / last row presence, output mode (sparse or dense) and 1-2 iterations with fresh inputs.
// Values are small integers, so every sum is exact in every dtype and the reference (a sorted
// std::map from row to the per-column sum over all ranks, in double) must match bit-for-value.
// N reaches 2^34 for the schemes whose cost does not grow with N (balanced, allgather, sparse_ps);
// the reference never allocates N.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "zen/schemes/hierarchical.hpp"
#include "zen/schemes/scheme.hpp"
#include "zen/tensor.hpp"

namespace zen::difftest {

inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// One rank's input of one iteration (int64 indices; int32 copies made when the case asks).
struct RankInput {
  std::vector<int64_t> idx;
  std::vector<int32_t> idx32;
  std::vector<uint8_t> vals;
};

struct Case {
  uint64_t id = 0;
  int n = 1;
  std::string scheme;
  TensorSpec spec;
  IndexType itype = IndexType::I64;
  SchemeOptions opt;
  bool dense_out = false;
  std::string shape;  // density/skew description
  int hier_node = 0;        // > 0: hierarchical mode with this node size, `scheme` across nodes
  bool fractional = false;  // 16-bit values that are not integers (one-shot schemes only)
  std::vector<std::vector<RankInput>> in;  // [iteration][rank]

  uint64_t rows() const { return spec.dense_len / spec.row_width; }
  SparseView view(int it, int r) const {
    const RankInput& x = in[static_cast<size_t>(it)][static_cast<size_t>(r)];
    SparseView v;
    v.dense_len = spec.dense_len;
    v.row_width = spec.row_width;
    v.nnz = x.idx.size();
    v.index_type = itype;
    v.indices = itype == IndexType::I32 ? static_cast<const void*>(x.idx32.data()) : static_cast<const void*>(x.idx.data());
    v.dtype = spec.dtype;
    v.values = x.vals.data();
    return v;
  }
  std::string describe() const {
    std::ostringstream s;
    size_t tot = 0;
    for (auto& it : in)
      for (auto& r : it) tot += r.idx.size();
    s << "case " << id << ": scheme=" << scheme << " n=" << n << " N=" << spec.dense_len << " D=" << spec.row_width
      << " dtype=" << dtype_name(spec.dtype) << " index=" << index_type_name(itype)
      << " pull=" << static_cast<int>(opt.pull) << " push=" << static_cast<int>(opt.push) << " seed=" << opt.seed << " k=" << opt.hash_functions
      << " pf=" << opt.parallel_factor << " sf=" << opt.serial_fraction << " threads=" << opt.threads
      << " block=" << opt.block_size << " sparcml_switch=" << opt.sparcml_dense_switch
      << " out=" << (dense_out ? "dense" : "sparse") << " iters=" << in.size() << " total_nnz=" << tot << " " << shape
      << " hier_node=" << hier_node << " fractional=" << fractional;
    return s.str();
  }
};

/// Schemes whose time or memory grows with N: drawn only with N <= 2^20.
inline bool scheme_is_dense_cost(const std::string& s) {
  return s == "dense" || s == "dense_native" || s == "omnireduce" || s == "sparcml";
}

template <typename T>
inline void put_value(uint8_t* p, double v) {
  T x;
  if constexpr (std::is_same_v<T, double>) x = v;
  else x = static_cast<T>(static_cast<float>(v));
  std::memcpy(static_cast<void*>(p), &x, sizeof(T));
}
inline double get_value(DType t, const uint8_t* p) {
  return dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    T x;
    std::memcpy(static_cast<void*>(&x), p, sizeof(T));
    if constexpr (std::is_same_v<T, double>) return x;
    else return static_cast<double>(static_cast<float>(x));
  });
}

/// Draw case `id` of the sweep `base` for rank count `n` (n <= 0: draw n in 1..max_n too).
inline Case make_case(uint64_t base, uint64_t id, int n, int max_n = 16) {
  std::mt19937_64 g(splitmix(base ^ splitmix(id + 1)));
  auto uni = [&](uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(g); };
  auto coin = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(g) < p; };
  Case c;
  c.id = id;
  c.n = n > 0 ? n : (coin(0.75) ? static_cast<int>(uni(1, std::min(8, max_n))) : static_cast<int>(uni(1, static_cast<uint64_t>(max_n))));
  const auto& names = scheme_names();
  c.scheme = names[uni(0, names.size() - 1)];
  const bool dense_cost = scheme_is_dense_cost(c.scheme);

  // Rows, row width and N.
  uint32_t D = coin(0.75) ? 1u : static_cast<uint32_t>(uni(2, 4));
  uint64_t rows;
  bool large = false;
  if (!dense_cost && coin(0.15)) {
    large = true;
    D = 1;
    rows = uni(uint64_t{1} << 20, uint64_t{1} << 34);
    if (coin(0.3)) rows = (uint64_t{1} << 31) + uni(0, 3);  // right at the int32 boundary
  } else {
    const double r = std::uniform_real_distribution<double>(0, 1)(g);
    if (r < 0.30) rows = uni(1, 40);
    else if (r < 0.75) rows = uni(41, 3000);
    else if (r < 0.97 || c.n > 8) rows = uni(3001, 50000);
    else rows = uni(50001, uint64_t{1} << 20) / D;
    if (rows == 0) rows = 1;
  }
  if (coin(0.02)) rows = 0;  // N = 0: nothing to sum
  c.spec.row_width = D;
  c.spec.dense_len = rows * D;
  const DType dts[] = {DType::F32, DType::F32, DType::F64, DType::F16, DType::BF16};
  c.spec.dtype = dts[uni(0, 4)];
  c.itype = (rows <= (uint64_t{1} << 31) && coin(0.3)) ? IndexType::I32 : IndexType::I64;

  // Options.
  SchemeOptions& o = c.opt;
  o.seed = g();
  o.threads = coin(0.8) ? 1 : 2;
  const double pr = std::uniform_real_distribution<double>(0, 1)(g);
  const bool bitmap_ok = rows <= (uint64_t{1} << 22);  // a forced bitmap costs rows/8 bytes per message
  o.pull = pr < 0.5    ? PullEncoding::Auto
           : pr < 0.65 ? PullEncoding::Coo
           : pr < 0.8  ? (bitmap_ok ? PullEncoding::Bitmap : PullEncoding::Coo)
                       : PullEncoding::EliasFano;
  // The push code from the seed's bits (draws nothing: every case keeps its other parameters).
  const uint64_t ps = (o.seed >> 17) % 10;
  o.push = ps < 5 ? IndexEncoding::Auto
           : ps < 7 ? IndexEncoding::Coo
           : ps < 8 ? (bitmap_ok ? IndexEncoding::Bitmap : IndexEncoding::Auto)
                    : IndexEncoding::EliasFano;
  if (coin(0.25)) {  // tiny hash regions: force serial-region overflow and spills
    o.parallel_factor = std::uniform_real_distribution<double>(0.01, 0.3)(g);
    o.serial_fraction = std::uniform_real_distribution<double>(0.0, 0.05)(g);
  }
  o.hash_functions = static_cast<int>(uni(1, 4));
  if (coin(0.3)) o.sparcml_dense_switch = std::uniform_real_distribution<double>(0.001, 0.6)(g);
  if (coin(0.3)) o.block_size = static_cast<uint32_t>(uni(1, 64));
  c.dense_out = rows * D <= (uint64_t{1} << 20) && coin(0.3);
  const int iters = coin(0.8) ? 1 : 2;

  // Values: small integers, exact in every dtype even after summing n ranks x 2 duplicates.
  const int V = c.spec.dtype == DType::BF16 ? 4 : 8;
  const size_t vsz = dtype_size(c.spec.dtype);
  const size_t cap = rows == 0 ? 0 : static_cast<size_t>(std::min<uint64_t>(rows, c.n > 8 ? 800 : 2500));
  const double gammas[] = {0.0, 1e-9, 0.001, 0.01, 0.1, 0.5, 1.0};
  const double gamma = gammas[uni(0, 6)];
  const int skew = static_cast<int>(uni(0, 2));  // 0 uniform, 1 hot window, 2 shared small set
  const bool dups = coin(0.2);
  const bool empties = coin(0.2);
  const bool ends = coin(0.5);
  {
    std::ostringstream s;
    s << "gamma=" << gamma << " skew=" << skew << " dups=" << dups << " empties=" << empties << " ends=" << ends
      << " large=" << large;
    c.shape = s.str();
  }
  const uint64_t hot_w = std::max<uint64_t>(1, rows / 100), hot_b = rows ? uni(0, rows - 1) : 0;
  std::vector<uint64_t> shared;
  for (int i = 0; i < 16 && rows; ++i) shared.push_back(uni(0, rows - 1));
  c.in.resize(static_cast<size_t>(iters));
  for (int it = 0; it < iters; ++it) {
    c.in[it].resize(static_cast<size_t>(c.n));
    for (int r = 0; r < c.n; ++r) {
      RankInput& x = c.in[it][r];
      if (rows == 0 || (empties && coin(0.4))) continue;
      double mult = skew == 1 ? std::uniform_real_distribution<double>(0.1, 2.0)(g) : 1.0;
      size_t k = static_cast<size_t>(std::min<double>(static_cast<double>(cap), gamma * mult * static_cast<double>(rows) + 0.5));
      if (gamma > 0 && k == 0) k = 1;
      std::vector<int64_t> idx;
      idx.reserve(k + 4);
      std::vector<uint64_t> seen;
      auto draw = [&]() -> uint64_t {
        if (skew == 1 && coin(0.8)) return (hot_b + uni(0, hot_w - 1)) % rows;
        if (skew == 2 && coin(0.7)) return shared[uni(0, shared.size() - 1)];
        return uni(0, rows - 1);
      };
      for (size_t j = 0; j < k; ++j) idx.push_back(static_cast<int64_t>(draw()));
      if (ends && coin(0.5)) idx.push_back(0);
      if (ends && coin(0.5)) idx.push_back(static_cast<int64_t>(rows - 1));
      // Unique unless the case allows duplicates; then each index appears at most twice.
      std::sort(idx.begin(), idx.end());
      idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
      if (dups) {
        const size_t u = idx.size();
        for (size_t j = 0; j < u; ++j)
          if (coin(0.3)) idx.push_back(idx[j]);
      }
      std::shuffle(idx.begin(), idx.end(), g);
      x.idx = std::move(idx);
      if (c.itype == IndexType::I32) x.idx32.assign(x.idx.begin(), x.idx.end());
      x.vals.resize(x.idx.size() * D * vsz);
      dispatch_dtype(c.spec.dtype, [&](auto tag) {
        using T = decltype(tag);
        for (size_t j = 0; j < x.idx.size() * D; ++j) {
          int v = static_cast<int>(uni(0, 2 * static_cast<uint64_t>(V))) - V;
          put_value<T>(x.vals.data() + j * vsz, static_cast<double>(v));
        }
      });
    }
  }
  // Drawn after everything above, so that earlier sweeps keep their cases: the hierarchical mode
  // (node size a divisor of n, the drawn scheme across nodes), and non-integer 16-bit values for the
  // one-shot schemes (checked against a reference that sums in fp32 in rank order, rounded once).
  if (rows <= (uint64_t{1} << 20) && coin(0.12)) {
    std::vector<int> divs;
    for (int L = 1; L <= c.n; ++L)
      if (c.n % L == 0) divs.push_back(L);
    c.hier_node = divs[uni(0, divs.size() - 1)];
  }
  const bool one_shot = c.scheme == "balanced" || c.scheme == "allgather" || c.scheme == "sparse_ps";
  if (one_shot && c.hier_node == 0 && (c.spec.dtype == DType::F16 || c.spec.dtype == DType::BF16) && coin(0.5)) {
    c.fractional = true;
    for (auto& it : c.in)
      for (auto& x : it)
        dispatch_dtype(c.spec.dtype, [&](auto tag) {
          using T = decltype(tag);
          for (size_t j = 0; j < x.idx.size() * D; ++j) {
            float f = std::uniform_real_distribution<float>(-3.0f, 3.0f)(g);
            if (static_cast<float>(static_cast<T>(f)) == 0.0f) f = 0.5f;  // never a (possibly -0.0) zero
            put_value<T>(x.vals.data() + j * vsz, static_cast<double>(f));
          }
        });
  }
  return c;
}

/// Independent reference: row -> per-column sums over every rank's input (double, exact). For
/// fractional 16-bit cases: each rank's duplicates summed in fp32 in input order and rounded to the
/// dtype (what goes on the wire), then the ranks summed in fp32 in rank order and rounded once.
inline std::map<int64_t, std::vector<double>> reference(const Case& c, int it) {
  std::map<int64_t, std::vector<double>> ref;
  if (c.fractional) {
    return dispatch_dtype(c.spec.dtype, [&](auto tag) {
      using T = decltype(tag);
      const size_t D = c.spec.row_width, vsz = sizeof(T);
      std::map<int64_t, std::vector<float>> acc;
      for (int r = 0; r < c.n; ++r) {
        const RankInput& x = c.in[it][r];
        std::map<int64_t, std::vector<float>> mine;
        for (size_t j = 0; j < x.idx.size(); ++j) {
          auto& row = mine[x.idx[j]];
          const bool first = row.empty();
          if (first) row.assign(D, 0.0f);
          for (size_t col = 0; col < D; ++col) {
            const float v = static_cast<float>(get_value(c.spec.dtype, x.vals.data() + (j * D + col) * vsz));
            row[col] = first ? v : row[col] + v;
          }
        }
        for (auto& [k, row] : mine) {
          auto pos = acc.find(k);
          for (size_t col = 0; col < D; ++col) row[col] = static_cast<float>(static_cast<T>(row[col]));
          if (pos == acc.end()) acc.emplace(k, row);
          else
            for (size_t col = 0; col < D; ++col) pos->second[col] += row[col];
        }
      }
      std::map<int64_t, std::vector<double>> out;
      for (auto& [k, row] : acc) {
        std::vector<double> d(D);
        for (size_t col = 0; col < D; ++col) d[col] = static_cast<double>(static_cast<float>(static_cast<T>(row[col])));
        out.emplace(k, d);
      }
      return out;
    });
  }
  const size_t D = c.spec.row_width, vsz = dtype_size(c.spec.dtype);
  for (int r = 0; r < c.n; ++r) {
    const RankInput& x = c.in[it][r];
    for (size_t j = 0; j < x.idx.size(); ++j) {
      auto& row = ref[x.idx[j]];
      if (row.empty()) row.assign(D, 0.0);
      for (size_t col = 0; col < D; ++col) row[col] += get_value(c.spec.dtype, x.vals.data() + (j * D + col) * vsz);
    }
  }
  return ref;
}

/// What one rank produced for one iteration: the sparse result, or the dense buffer.
struct Output {
  SparseTensor sparse;
  std::vector<uint8_t> dense;
  uint64_t serial_overflows = 0;
};

/// Run the case's scheme on communicator `comm` (rank comm.rank()) for every iteration.
inline std::vector<Output> run_rank(const Case& c, Communicator& comm) {
  auto s = c.hier_node > 0 ? make_hierarchical(comm, c.spec, c.opt, HierarchicalOptions{c.hier_node, c.scheme})
                           : make_scheme(c.scheme, comm, c.spec, c.opt);
  std::vector<Output> outs(c.in.size());
  for (size_t it = 0; it < c.in.size(); ++it) {
    SparseView v = c.view(static_cast<int>(it), comm.rank());
    if (c.dense_out) {
      outs[it].dense.assign(c.spec.dense_len * dtype_size(c.spec.dtype), 0xAB);
      s->run_dense(v, outs[it].dense.data());
    } else {
      s->run(v, outs[it].sparse);
    }
    outs[it].serial_overflows = s->report().serial_overflows;
  }
  return outs;
}

/// Compare one rank's output with the reference; returns "" when exact, else the first difference.
inline std::string check_output(const Case& c, int /*it*/, const Output& o, const std::map<int64_t, std::vector<double>>& ref) {
  const size_t D = c.spec.row_width, vsz = dtype_size(c.spec.dtype);
  std::ostringstream e;
  if (c.dense_out) {
    auto nxt = ref.begin();
    for (uint64_t row = 0; row < c.rows(); ++row) {
      const bool has = nxt != ref.end() && static_cast<uint64_t>(nxt->first) == row;
      for (size_t col = 0; col < D; ++col) {
        const double got = get_value(c.spec.dtype, o.dense.data() + (row * D + col) * vsz);
        const double want = has ? nxt->second[col] : 0.0;
        if (!(got == want)) {
          e << "dense row " << row << " col " << col << ": got " << got << " want " << want;
          return e.str();
        }
      }
      if (has) ++nxt;
    }
    return "";
  }
  const SparseTensor& s = o.sparse;
  if (s.dense_len != c.spec.dense_len || s.row_width != c.spec.row_width || s.dtype != c.spec.dtype)
    return "sparse result has the wrong shape (N=" + std::to_string(s.dense_len) + " D=" + std::to_string(s.row_width) + ")";
  if (s.values.size() != s.indices.size() * D * vsz) return "sparse result values/indices size mismatch";
  if (s.indices.size() != ref.size()) {
    e << "result nnz " << s.indices.size() << " != reference support " << ref.size();
    // Name the first missing or extra index.
    auto it2 = ref.begin();
    for (size_t k = 0; k < s.indices.size() && it2 != ref.end(); ++k, ++it2)
      if (s.indices[k] != it2->first) {
        e << " (first difference at position " << k << ": got index " << s.indices[k] << ", want " << it2->first << ")";
        break;
      }
    return e.str();
  }
  size_t k = 0;
  for (auto& [row, vals] : ref) {
    if (s.indices[k] != row) {
      e << "position " << k << ": got index " << s.indices[k] << " want " << row;
      return e.str();
    }
    for (size_t col = 0; col < D; ++col) {
      const double got = get_value(c.spec.dtype, s.values.data() + (k * D + col) * vsz);
      if (!(got == vals[col])) {
        e << "index " << row << " col " << col << ": got " << got << " want " << vals[col];
        return e.str();
      }
    }
    ++k;
  }
  return "";
}

/// FNV-1a over an output's bytes (indices and values, or the dense buffer): ranks must agree bitwise.
inline uint64_t output_hash(const Output& o) {
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&](const void* p, size_t b) {
    auto* q = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < b; ++i) h = (h ^ q[i]) * 1099511628211ULL;
  };
  mix(o.dense.data(), o.dense.size());
  mix(o.sparse.indices.data(), o.sparse.indices.size() * sizeof(int64_t));
  mix(o.sparse.values.data(), o.sparse.values.size());
  return h;
}

}  // namespace zen::difftest
