// zen_perf: sparse allreduce benchmark with nccl-tests conventions (docs/algorithms.md, "zen_perf").
//
//   mpirun -np 4 build/bin/zen_perf -b 1M -e 64M -f 4 -d 0.01 --overlap 2 --scheme all -c 1
//   build/bin/zen_perf --threads 4 ...            (loopback: ranks are threads of one process)
//   build/bin/zen_perf --threads 4 --trace DIR    (replay a trace, docs/trace-format.md)
//
// Sizes (-b/-e) are dense tensor sizes in BYTES, as in nccl-tests (suffixes K, M, G = 2^10, 2^20,
// 2^30); the element count N is size / dtype size, rounded down to a multiple of the row width D.
// One row per (size, scheme): time = median over iterations of the max over ranks of the call's
// wall time; algbw = dense bytes / time; busbw = algbw * 2(n-1)/n (the allreduce convention);
// sent_B / recv_B = the most bytes any rank sent / received in one call; imbalance = max of the
// push and pull imbalance (max/mean over owners); #wrong = elements (over all ranks) that differ
// from a reference computed by a dense scatter-add of every rank's input (each rank regenerates
// all ranks' inputs from the seed, independent of the scheme code).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "common/progress.hpp"
#include "zen/comm/communicator.hpp"
#include "zen/comm/loopback.hpp"
#include "zen/error.hpp"
#include "zen/hash/hash.hpp"
#include "zen/schemes/hierarchical.hpp"
#include "zen/schemes/scheme.hpp"
#include "zen/tensor.hpp"
#ifdef ZEN_HAVE_MPI
#include "zen/comm/mpi.hpp"
#endif
#ifdef ZEN_PERF_HAVE_TRACE
#include "zen/trace/trace.hpp"
#endif

namespace {

using namespace zen;
using json = nlohmann::json;

struct Config {
  std::string b = "1M", e = "1M";
  double f = 2.0;
  double density = 0.01;
  double overlap = -1;  // < 0: (n + 1) / 2
  double skew = 0.0;
  std::string dtype = "f32";
  uint32_t row_width = 1;
  int iters = 20, warmup = 5;
  int check = 1;
  std::string schemes = "all";
  std::string pull = "auto", push = "auto";
  std::string output = "dense";
  std::string index = "i64";
  std::string trace_dir, dump_dir, json_file;
  int threads = 0;
  uint64_t seed = 42;
  int cpu_threads = 0;
  uint32_t block_size = 256;
  double sparcml_switch = 0.0;
  bool explain = false;
  double auto_explore = 4.0, auto_gbps = 25.0, auto_alpha_us = 20.0;
  int auto_every = 500;
  int auto_settle = 1;  // 1: auto's first decision (statistics, exploration) is finished before timing
  std::string node_size = "host";  // hier_<scheme>: "host" (MPI shared-memory split) or ranks per node
  int64_t timeout_ms = 600000;
};

uint64_t parse_size(const std::string& s) {
  ZEN_ENFORCE(!s.empty(), "empty size");
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    ZEN_THROW(Result::InvalidArgument, "size '" + s + "' is not a number with an optional K/M/G suffix");
  }
  std::string suf = s.substr(pos);
  double mul = 1;
  if (suf == "K" || suf == "k") mul = 1024.0;
  else if (suf == "M" || suf == "m") mul = 1024.0 * 1024;
  else if (suf == "G" || suf == "g") mul = 1024.0 * 1024 * 1024;
  else ZEN_ENFORCE(suf.empty(), "size '" + s + "' has unknown suffix '" + suf + "' (use K, M or G)");
  ZEN_ENFORCE(v >= 0, "size '" + s + "' is negative");
  return static_cast<uint64_t>(std::llround(v * mul));
}

// ---- workload generator: deterministic from (seed, rank) ----
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(mix64(seed ^ 0x5851f42d4c957f2dULL)) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    return mix64(z);
  }
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
};

/// Row drawn with probability ~ (row+1)^-skew over [0, R) (continuous power-law inverse CDF).
uint64_t zipf_row(Rng& g, uint64_t R, double s) {
  const double u = g.unit();
  double x;
  if (s == 0.0) return std::min<uint64_t>(R - 1, static_cast<uint64_t>(u * static_cast<double>(R)));
  const double top = static_cast<double>(R) + 1.0;
  if (std::fabs(s - 1.0) < 1e-9) x = std::pow(top, u);
  else x = std::pow((std::pow(top, 1.0 - s) - 1.0) * u + 1.0, 1.0 / (1.0 - s));
  uint64_t row = static_cast<uint64_t>(x) - 1;
  return std::min<uint64_t>(row, R - 1);
}

struct Workload {
  std::vector<int64_t> idx;
  std::vector<uint8_t> vals;
};

/// Rank r's input. Rows split into classes by a seeded hash: a shared pool (fraction wp of the rows)
/// and one private class per rank (wq each), wp = f / gamma, wq = (1 - f) / gamma with
/// f = (n - gamma) / (n - 1), so that k = d * R rows per rank (f * k from the pool, drawn with a
/// seed common to all ranks, and (1 - f) * k private) give a union of about gamma * k rows.
/// Rows are drawn with Zipf(skew) over the row index (low rows hot); once draws stop finding free
/// rows the rest of the class is filled uniformly by a scan. Values: {-4..-1, 1..4}, exact in every
/// dtype for sums over up to 64 ranks.
Workload generate(uint64_t R, uint32_t D, DType dt, double d, double gamma, double skew, int n, int r, uint64_t seed) {
  Workload w;
  const uint64_t k = std::min<uint64_t>(R, static_cast<uint64_t>(std::llround(d * static_cast<double>(R))));
  const double f = n > 1 ? std::clamp((static_cast<double>(n) - gamma) / (n - 1), 0.0, 1.0) : 1.0;
  const double norm = f + n * (1.0 - f);
  const double wp = f / norm, wq = (1.0 - f) / norm;
  auto cls = [&](uint64_t row) -> int {  // -1 = pool, else the private rank
    const double u = static_cast<double>(hash64(row, seed ^ 0xc1a55ULL) >> 11) * (1.0 / 9007199254740992.0);
    if (u < wp || wq <= 0) return -1;
    return std::min(n - 1, static_cast<int>((u - wp) / wq));
  };
  std::vector<uint64_t> taken((R + 63) / 64, 0);
  auto draw = [&](uint64_t need, int want_cls, Rng& g) {
    uint64_t got = 0, tries = 0;
    const uint64_t max_tries = 32 * need + 1024;
    while (got < need && tries < max_tries) {
      ++tries;
      const uint64_t row = zipf_row(g, R, skew);
      if ((taken[row >> 6] >> (row & 63)) & 1) continue;
      if (cls(row) != want_cls) continue;
      taken[row >> 6] |= 1ULL << (row & 63);
      w.idx.push_back(static_cast<int64_t>(row));
      ++got;
    }
    if (got < need && R > 0) {  // saturated: fill uniformly from a random start
      const uint64_t start = g.next() % R;
      for (uint64_t i = 0; i < R && got < need; ++i) {
        const uint64_t row = (start + i) % R;
        if ((taken[row >> 6] >> (row & 63)) & 1) continue;
        if (cls(row) != want_cls) continue;
        taken[row >> 6] |= 1ULL << (row & 63);
        w.idx.push_back(static_cast<int64_t>(row));
        ++got;
      }
    }
  };
  const uint64_t kp = static_cast<uint64_t>(std::llround(f * static_cast<double>(k)));
  Rng pool(seed * 0x100000001b3ULL + 7);
  draw(kp, -1, pool);
  Rng mine(seed * 0x100000001b3ULL + 1000 + static_cast<uint64_t>(r));
  draw(k - kp, r, mine);
  Rng vr(seed * 0x100000001b3ULL + 2000000 + static_cast<uint64_t>(r));
  const size_t m = w.idx.size() * D;
  w.vals.resize(m * dtype_size(dt));
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    T* v = reinterpret_cast<T*>(w.vals.data());
    for (size_t i = 0; i < m; ++i) {
      const uint64_t x = vr.next();
      const int mag = 1 + static_cast<int>(x % 4);
      v[i] = static_cast<T>(static_cast<float>((x >> 8) & 1 ? -mag : mag));
    }
  });
  return w;
}

/// One iteration's inputs of every rank (for the check) plus this rank's view.
struct Inputs {
  std::vector<Workload> all;  // all ranks (check on) or only this rank (slot r)
  std::vector<int32_t> i32;
};

SparseView make_view(const Workload& w, uint64_t N, uint32_t D, DType dt, IndexType it, std::vector<int32_t>& i32) {
  SparseView v;
  v.dense_len = N;
  v.row_width = D;
  v.nnz = w.idx.size();
  v.dtype = dt;
  v.values = w.vals.data();
  v.index_type = it;
  if (it == IndexType::I32) {
    i32.assign(w.idx.begin(), w.idx.end());
    v.indices = i32.data();
  } else {
    v.indices = w.idx.data();
  }
  return v;
}

/// Reference: the sum (double) of every rank's input in rank order over the union support, held
/// sparsely (rows ascending, D sums and D sums of magnitudes each): memory in the non-zeros only,
/// so traces with N = 2^33 and more are checked.
struct Reference {
  std::vector<uint64_t> rows;        // union support, ascending
  std::vector<double> sum, sum_abs;  // rows.size() * D
  uint64_t union_rows = 0;
};

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

double dtype_eps(DType t) {
  switch (t) {
    case DType::F64: return std::ldexp(1.0, -52);
    case DType::F16: return std::ldexp(1.0, -10);
    case DType::BF16: return std::ldexp(1.0, -7);
    default: return std::ldexp(1.0, -23);
  }
}

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

struct Row {
  std::string label;  // trace directory (trace replay)
  uint64_t size = 0, count = 0;
  std::string scheme;
  double density = 0, gamma = 0;
  double time_us = 0, time_min_us = 0, time_max_us = 0;
  double algbw = 0, busbw = 0;
  uint64_t sent = 0, recv = 0;
  double push_imb = 1, pull_imb = 1;
  std::string encoding;
  double bound_eff = 0;  // bytes sent over the information bound of what was sent, all ranks (0: not known)
  uint64_t wrong = 0;
  std::vector<PhaseReport> phases;  // rank 0: bytes of the last call, seconds averaged over the timed calls
  std::vector<std::string> decisions;            // auto (rank 0): every distinct explanation, in order
  std::vector<std::pair<std::string, uint64_t>> ran;  // auto (rank 0): timed calls per scheme that ran
  uint64_t decision_calls = 0, decision_timed = 0;    // auto: its decision calls, and how many of them were timed
  double decision_s = 0;                              // auto: their slowest-rank seconds in all
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// The raw-MPI baselines: the code a user would otherwise write, timed beside zen in the same run.
const std::vector<std::string>& raw_names() {
  static const std::vector<std::string> v{"mpi_allreduce", "mpi_allgatherv"};
  return v;
}
bool is_raw(const std::string& s) { return std::find(raw_names().begin(), raw_names().end(), s) != raw_names().end(); }

std::vector<std::string> split_schemes(const std::string& s, bool mpi) {
  // "all" (alone or inside a list) is every zen scheme, auto and, under mpirun, the raw MPI baselines;
  // a name given twice runs once.
  std::vector<std::string> out;
  auto add = [&](const std::string& x) {
    if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  };
  size_t p = 0;
  while (p <= s.size()) {
    size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    const std::string x = s.substr(p, q - p);
    if (x == "all") {
      for (const auto& y : scheme_names()) add(y);
      add("auto");
      if (mpi)
        for (const auto& y : raw_names()) add(y);
    } else if (!x.empty()) {
      add(x);
    }
    p = q + 1;
  }
  for (const auto& x : out) {
    const auto& names = scheme_names();
    if (is_raw(x)) {
      ZEN_ENFORCE(mpi, "--scheme " + x + " calls MPI directly: run zen_perf under mpirun (not --threads)");
      continue;
    }
    std::string base = x.rfind("hier_", 0) == 0 ? x.substr(5) : x;
    if (const size_t colon = base.find(':'); colon != std::string::npos) {  // SCHEME:PUSH/PULL variant
      const std::string enc = base.substr(colon + 1);
      base = base.substr(0, colon);
      ZEN_ENFORCE(base == "balanced" || base == "sparse_ps",
                  "--scheme " + x + ": encoding variants (SCHEME:PUSH/PULL) exist for balanced and sparse_ps");
      ZEN_ENFORCE(enc.find('/') != std::string::npos, "--scheme " + x + ": write the variant as SCHEME:PUSH/PULL, e.g. balanced:ef/ef");
    }
    if (base != "auto" && std::find(names.begin(), names.end(), base) == names.end()) {
      std::string all;
      for (const auto& y : names) all += (all.empty() ? "" : ",") + y;
      all += ",auto";
      for (const auto& y : raw_names()) all += "," + y;
      ZEN_THROW(Result::InvalidArgument, "--scheme: unknown scheme '" + x + "' (known: all," + all +
                                              ", and hier_<scheme> for the hierarchical mode)");
    }
  }
  return out;
}

SchemeOptions scheme_options(const Config& cfg) {
  SchemeOptions o;
  o.seed = cfg.seed;
  o.threads = cfg.cpu_threads;
  o.block_size = cfg.block_size;
  o.sparcml_dense_switch = cfg.sparcml_switch;
  o.autotune.explore_within = cfg.auto_explore;
  o.autotune.bytes_per_s = cfg.auto_gbps * 1e9 / 8.0;
  o.autotune.alpha_s = cfg.auto_alpha_us * 1e-6;
  o.autotune.reevaluate_every = cfg.auto_every;
  o.pull = parse_index_encoding(cfg.pull);
  o.push = parse_index_encoding(cfg.push);
  return o;
}

#ifdef ZEN_HAVE_MPI
MPI_Datatype raw_value_type(DType t) {
  if (t == DType::F32) return MPI_FLOAT;
  if (t == DType::F64) return MPI_DOUBLE;
  ZEN_THROW(Result::Unsupported, std::string("the raw MPI baselines support f32 and f64 (MPI has no ") + dtype_name(t) + " type)");
}

class RawBaseline {
 public:
  virtual ~RawBaseline() = default;
  /// One call on this rank; dense_out selects the result form (mpi_allreduce is always dense).
  virtual void run(const SparseView& in, bool dense_out, void* dense, SparseTensor& sparse) = 0;
  uint64_t sent = 0, recv = 0;  ///< bytes this rank moved in the last call (logical, as zen counts)
};

// A plain MPI_Allreduce on the dense gradient: zero a dense buffer, scatter-add the local rows,
// MPI_Allreduce in place. Its result is the dense sum whatever --output says.
class RawAllreduce final : public RawBaseline {
 public:
  void run(const SparseView& in, bool, void* dense, SparseTensor&) override {
    const MPI_Datatype mt = raw_value_type(in.dtype);
    const uint64_t N = in.dense_len;
    const size_t D = in.row_width;
    dispatch_dtype(in.dtype, [&](auto tag) {
      using T = decltype(tag);
      T* d = static_cast<T*>(dense);
      if (N) std::memset(static_cast<void*>(d), 0, N * sizeof(T));
      const T* v = static_cast<const T*>(in.values);
      for (size_t i = 0; i < in.nnz; ++i) {
        T* row = d + static_cast<size_t>(in.index_at(i)) * D;
        for (size_t c = 0; c < D; ++c) row[c] += v[i * D + c];
      }
      const size_t per = size_t{1} << 30;
      for (uint64_t off = 0; off < N; off += per)
        MPI_Allreduce(MPI_IN_PLACE, d + off, static_cast<int>(std::min<uint64_t>(per, N - off)), mt, MPI_SUM, MPI_COMM_WORLD);
    });
    int n = 1, r = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    const size_t vs = dtype_size(in.dtype), S = N * vs;
    sent = recv = n > 1 ? 2 * (S - ring_chunk_bytes(N, vs, n, r)) : 0;
  }
};

// The hand-written sparse exchange (what ten lines of mpi4py do): MPI_Allgather of the counts,
// MPI_Allgatherv of the indices and of the values, then a local scatter-add in rank order. Dense
// output: into the zeroed dense buffer. Sparse output: into a dense accumulator kept across calls,
// whose touched rows are collected, sorted, gathered and cleared.
class RawAllgatherv final : public RawBaseline {
 public:
  void run(const SparseView& in, bool dense_out, void* dense, SparseTensor& sparse) override {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const MPI_Datatype mt = raw_value_type(in.dtype);
    const MPI_Datatype it = in.index_type == IndexType::I32 ? MPI_INT32_T : MPI_INT64_T;
    const size_t isz = index_size(in.index_type), D = in.row_width, vs = dtype_size(in.dtype);
    const int64_t mine = static_cast<int64_t>(in.nnz);
    counts64_.resize(static_cast<size_t>(n));
    MPI_Allgather(&mine, 1, MPI_INT64_T, counts64_.data(), 1, MPI_INT64_T, MPI_COMM_WORLD);
    counts_.resize(static_cast<size_t>(n));
    displs_.resize(static_cast<size_t>(n));
    vcounts_.resize(static_cast<size_t>(n));
    vdispls_.resize(static_cast<size_t>(n));
    size_t total = 0;
    for (int p = 0; p < n; ++p) {
      counts_[p] = static_cast<int>(counts64_[p]);
      displs_[p] = static_cast<int>(total);
      vcounts_[p] = static_cast<int>(counts64_[p] * static_cast<int64_t>(D));
      vdispls_[p] = static_cast<int>(total * D);
      total += static_cast<size_t>(counts64_[p]);
    }
    if (idx_.size() < total * isz) idx_.resize(total * isz);
    if (val_.size() < total * D * vs) val_.resize(total * D * vs);
    MPI_Allgatherv(in.indices, static_cast<int>(mine), it, idx_.data(), counts_.data(), displs_.data(), it, MPI_COMM_WORLD);
    MPI_Allgatherv(in.values, static_cast<int>(mine * static_cast<int64_t>(D)), mt, val_.data(), vcounts_.data(),
                   vdispls_.data(), mt, MPI_COMM_WORLD);
    auto row_of = [&](size_t i) -> size_t {
      if (in.index_type == IndexType::I32) return static_cast<size_t>(reinterpret_cast<const int32_t*>(idx_.data())[i]);
      return static_cast<size_t>(reinterpret_cast<const int64_t*>(idx_.data())[i]);
    };
    const uint64_t N = in.dense_len, R = N / D;
    dispatch_dtype(in.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T* v = reinterpret_cast<const T*>(val_.data());
      if (dense_out) {
        T* d = static_cast<T*>(dense);
        if (N) std::memset(static_cast<void*>(d), 0, N * sizeof(T));
        for (size_t i = 0; i < total; ++i)
          for (size_t c = 0; c < D; ++c) d[row_of(i) * D + c] += v[i * D + c];
        return;
      }
      if (acc_.size() < N * sizeof(T)) acc_.assign(N * sizeof(T), 0);
      if (touched_.size() < R) touched_.assign(R, 0);
      T* acc = reinterpret_cast<T*>(acc_.data());
      rows_.clear();
      for (size_t i = 0; i < total; ++i) {
        const size_t row = row_of(i);
        if (!touched_[row]) {
          touched_[row] = 1;
          rows_.push_back(static_cast<int64_t>(row));
        }
        for (size_t c = 0; c < D; ++c) acc[row * D + c] += v[i * D + c];
      }
      std::sort(rows_.begin(), rows_.end());
      sparse.dense_len = N;
      sparse.row_width = static_cast<uint32_t>(D);
      sparse.dtype = in.dtype;
      sparse.resize(rows_.size());
      T* out = sparse.vals<T>();
      for (size_t k = 0; k < rows_.size(); ++k) {
        const size_t row = static_cast<size_t>(rows_[k]);
        sparse.indices[k] = rows_[k];
        for (size_t c = 0; c < D; ++c) {
          out[k * D + c] = acc[row * D + c];
          acc[row * D + c] = T(0);
        }
        touched_[row] = 0;
      }
    });
    const size_t eb = isz + D * vs;
    sent = 8 * static_cast<uint64_t>(n - 1) + static_cast<uint64_t>(n - 1) * in.nnz * eb;
    recv = 8 * static_cast<uint64_t>(n - 1) + (total - in.nnz) * eb;
  }

 private:
  std::vector<int64_t> counts64_;
  std::vector<int> counts_, displs_, vcounts_, vdispls_;
  std::vector<uint8_t> idx_, val_, acc_, touched_;
  std::vector<int64_t> rows_;
};
#endif

/// One timed contender: a zen plan or a raw-MPI baseline, with its output buffers and statistics.
/// The (intra-node, inter-node) communicators of the hierarchical runners (hier_<scheme>).
struct NodeGroups {
  std::unique_ptr<Communicator> intra, inter;
  int node_size = 1;
};

/// Node groups of `world`: "host" = the ranks sharing memory (MPI_Comm_split_type; under mpirun across
/// hosts, one host), otherwise that many consecutive ranks per node (any backend).
std::shared_ptr<NodeGroups> make_node_groups(Communicator& world, const std::string& how) {
  auto g = std::make_shared<NodeGroups>();
  const int n = world.size();
  if (how == "host") {
#ifdef ZEN_HAVE_MPI
    ZEN_ENFORCE(std::string(world.backend_name()) == "mpi", "--node-size host needs mpirun (with --threads give a number)");
    MPI_Comm intra = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    const int r = world.rank();
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &intra);
    int local = 0, L = 0;
    MPI_Comm_rank(intra, &local);
    MPI_Comm_size(intra, &L);
    MPI_Comm_split(MPI_COMM_WORLD, local, r, &inter);
    // Every host the same size, its ranks consecutive (rank = node * L + local): what the scheme assumes.
    const auto sizes = world.allgather_value(static_cast<int64_t>(L));
    const auto locals = world.allgather_value(static_cast<int64_t>(local));
    for (int q = 0; q < n; ++q)
      ZEN_ENFORCE(sizes[static_cast<size_t>(q)] == L && locals[static_cast<size_t>(q)] == q % L,
                  "--node-size host: rank " + std::to_string(q) + " has local index " +
                      std::to_string(locals[static_cast<size_t>(q)]) + " on a host of " +
                      std::to_string(sizes[static_cast<size_t>(q)]) + " ranks; place the same number of consecutive ranks on every host (mpirun --map-by ppr:K:node)");
    g->intra = mpi::create(intra);
    g->inter = mpi::create(inter);
    MPI_Comm_free(&intra);
    MPI_Comm_free(&inter);
    g->node_size = L;
    return g;
#else
    ZEN_THROW(Result::InvalidArgument, "--node-size host needs the MPI build; give a number of ranks per node");
#endif
  }
  int L = 0;
  try {
    L = std::stoi(how);
  } catch (const std::exception&) {
    ZEN_THROW(Result::InvalidArgument, "--node-size '" + how + "': use 'host' or a number of ranks per node");
  }
  ZEN_ENFORCE(L >= 1 && n % L == 0, "--node-size " + how + " must divide the rank count " + std::to_string(n));
  NodeComms nc = split_nodes(world, L);
  g->intra = std::move(nc.intra);
  g->inter = std::move(nc.inter);
  g->node_size = L;
  return g;
}

struct Runner {
  std::string name;
  std::shared_ptr<NodeGroups> nodes;  // hier_<scheme>: declared before plan, so it outlives it
  std::unique_ptr<SparseAllreduce> plan;
#ifdef ZEN_HAVE_MPI
  std::unique_ptr<RawBaseline> raw;
#endif
  bool dense_only = false;  // mpi_allreduce: always the dense sum
  std::vector<uint8_t> dense;
  SparseTensor sparse;
  std::vector<double> times;
  uint64_t sent_sum = 0, recv_sum = 0, calls = 0, wrong = 0;
  double bound_sum = 0;  // SyncReport::bound_bytes summed over the timed calls
  double push = 1, pull = 1;
  std::string encoding;
  std::vector<PhaseReport> phases;  // rank 0's phases: bytes of the last call, mean seconds
  std::vector<double> phase_sum;
  std::vector<std::string> decisions;                 // auto: distinct explanations, in order
  std::vector<std::pair<std::string, uint64_t>> ran;  // auto: timed calls per scheme that ran
  // auto's decision calls (src/schemes/auto.cpp): the call that gathers the statistics (phase
  // auto_stats) and, when the model cannot separate the close candidates, every call up to the one
  // that ends their measurement. Counted apart from the steady state, warm-up and timed calls alike.
  bool deciding = false;  // the last call left auto exploring: the next one is a decision call too
  uint64_t decision_calls = 0, decision_timed = 0;
  double decision_s = 0;

  bool dense_result(bool dense_out) const { return dense_out || dense_only; }
  void call(const SparseView& in, bool dense_out) {
#ifdef ZEN_HAVE_MPI
    if (raw) {
      raw->run(in, dense_result(dense_out), dense.data(), sparse);
      return;
    }
#endif
    if (dense_out) plan->run_dense(in, dense.data());
    else plan->run(in, sparse);
  }
  void account() {
#ifdef ZEN_HAVE_MPI
    if (raw) {
      sent_sum += raw->sent;
      recv_sum += raw->recv;
      encoding = dense_only ? "dense" : "coo";
      ++calls;
      return;
    }
#endif
    const SyncReport& rep = plan->report();
    if (!rep.decision.empty() && (decisions.empty() || decisions.back() != rep.decision)) decisions.push_back(rep.decision);
    if (name == "auto") {
      auto it = std::find_if(ran.begin(), ran.end(), [&](const auto& x) { return x.first == rep.scheme; });
      if (it == ran.end()) ran.emplace_back(rep.scheme, 1);
      else ++it->second;
    }
    sent_sum += rep.sent;
    recv_sum += rep.recv;
    bound_sum += rep.bound_bytes;
    push = std::max(push, rep.push_imbalance);
    pull = std::max(pull, rep.pull_imbalance);
    // Every distinct pull encoding of the timed calls, in the order first seen: a trace's iterations
    // may choose differently, and the row describes all of them (not the last call's alone).
    if (!rep.encoding.empty() && ("," + encoding + ",").find("," + rep.encoding + ",") == std::string::npos)
      encoding += (encoding.empty() ? "" : ",") + rep.encoding;
    // Phases: bytes of the last call, seconds averaged over the timed calls.
    if (phases.size() != rep.phases.size()) {
      phases = rep.phases;
      phase_sum.assign(phases.size(), 0.0);
    } else {
      for (size_t i = 0; i < phases.size(); ++i) phases[i].sent = rep.phases[i].sent, phases[i].recv = rep.phases[i].recv;
    }
    for (size_t i = 0; i < phases.size() && i < phase_sum.size(); ++i) phase_sum[i] += rep.phases[i].seconds;
    ++calls;
    for (size_t i = 0; i < phases.size(); ++i) phases[i].seconds = phase_sum[i] / static_cast<double>(calls);
  }
  /// After every call (dt: its slowest-rank seconds): count it if it was one of auto's decision
  /// calls. Returns whether auto is still deciding. The same on every rank: auto's state is a
  /// function of allgathered numbers only. A fixed scheme never decides.
  bool note_decision(double dt, bool timed) {
    if (!plan) return false;
    const SyncReport& rep = plan->report();
    bool stats = false;
    for (const auto& p : rep.phases) stats = stats || p.name == "auto_stats";
    if (stats || deciding) {
      ++decision_calls;
      decision_s += dt;
      if (timed) ++decision_timed;
    }
    deciding = rep.decision.rfind("auto exploring", 0) == 0;
    return deciding;
  }
};

/// Schemes whose memory grows with N (an N-value buffer or accumulator): in `--scheme all` they are
/// skipped for tensors above 4 GiB (a trace of N = 2^33 held sparsely must still run); named
/// explicitly they run (and fail with a clear allocation error if the memory is not there).
bool dense_cost(const std::string& s) {
  return s == "dense" || s == "dense_native" || s == "sparcml" || s == "omnireduce" || s == "mpi_allreduce" ||
         s == "mpi_allgatherv";
}

std::vector<Runner> make_runners(Communicator& comm, const std::vector<std::string>& names, const TensorSpec& spec,
                                 const SchemeOptions& opt, bool dense_out, bool from_all, const std::string& node_size) {
  std::vector<Runner> out;
  std::shared_ptr<NodeGroups> nodes;
  const uint64_t bytes = spec.dense_len * dtype_size(spec.dtype);
  for (const auto& name : names) {
    if (from_all && dense_cost(name) && bytes > (uint64_t{4} << 30)) {
      if (comm.rank() == 0)
        std::printf("# %s skipped: it needs N-value buffers (%.1f GiB); name it in --scheme to run it anyway\n",
                    name.c_str(), static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 30));
      continue;
    }
    Runner rn;
    rn.name = name;
    if (is_raw(name)) {
#ifdef ZEN_HAVE_MPI
      if (name == "mpi_allreduce") {
        rn.raw = std::make_unique<RawAllreduce>();
        rn.dense_only = true;
      } else {
        rn.raw = std::make_unique<RawAllgatherv>();
      }
      raw_value_type(spec.dtype);  // f32/f64 only: a clear error otherwise
#endif
    } else if (name.rfind("hier_", 0) == 0) {
      if (!nodes) nodes = make_node_groups(comm, node_size);
      rn.nodes = nodes;
      rn.plan = make_hierarchical(comm, *nodes->intra, *nodes->inter, spec, opt, name.substr(5));
    } else if (const size_t colon = name.find(':'); colon != std::string::npos) {
      // SCHEME:PUSH/PULL: the scheme with its own push and pull encodings (timed beside the others).
      Config c;
      const size_t slash = name.find('/', colon);
      c.push = name.substr(colon + 1, slash - colon - 1);
      c.pull = name.substr(slash + 1);
      SchemeOptions o = opt;
      const SchemeOptions e = scheme_options(c);
      o.push = e.push;
      o.pull = e.pull;
      rn.plan = make_scheme(name.substr(0, colon), comm, spec, o);
    } else {
      rn.plan = make_scheme(name, comm, spec, opt);
    }
    if (rn.dense_result(dense_out)) rn.dense.resize(spec.dense_len * dtype_size(spec.dtype));
    out.push_back(std::move(rn));
  }
  return out;
}

/// One timed call on every rank; returns this call's max-over-ranks wall time (seconds).
double timed_call(Communicator& comm, Runner& rn, const SparseView& in, bool dense_out) {
  comm.barrier();
  const double t0 = detail::seconds_now();
  rn.call(in, dense_out);
  const double dt = detail::seconds_now() - t0;
  auto all = comm.allgather_value(dt);
  return *std::max_element(all.begin(), all.end());
}

/// Time every runner on the inputs: round k calls every runner once on input k mod T (so the
/// schemes share the machine's conditions and their ratios are fair); the first `warmup` rounds are
/// not timed. With `settle`, an auto runner still deciding after them (gathering statistics,
/// measuring its candidates) gets further untimed calls, on the next inputs in turn, until it has
/// chosen: its timed calls are then its steady state, and its decision calls are counted apart.
struct Group {
  std::vector<Runner>* runners;
  const std::vector<SparseView>* views;
};
void time_runners(Communicator& comm, const std::vector<Group>& groups, bool dense_out, int warmup, int iters,
                  bool settle) {
  constexpr uint64_t kMaxSettleCalls = 1000;  // auto explores at most max_explore x trials calls
  // Still deciding, or auto not called yet (-w 0: its first call gathers the statistics).
  auto undecided = [](const Runner& rn) { return rn.deciding || (rn.name == "auto" && rn.decision_calls == 0); };
  for (int k = 0; k < warmup + iters; ++k) {
    if (settle && k == warmup)
      for (const Group& g : groups)
        for (auto& rn : *g.runners)
          for (uint64_t extra = 0; undecided(rn); ++extra) {
            ZEN_ENFORCE(extra < kMaxSettleCalls, "zen_perf: " + rn.name + " still deciding after " +
                                                     std::to_string(kMaxSettleCalls) + " warm-up calls");
            const SparseView& in = (*g.views)[static_cast<size_t>(warmup + extra) % g.views->size()];
            rn.note_decision(timed_call(comm, rn, in, dense_out), false);
          }
    for (const Group& g : groups) {
      const SparseView& in = (*g.views)[static_cast<size_t>(k) % g.views->size()];
      for (auto& rn : *g.runners) {
        const double dt = timed_call(comm, rn, in, dense_out);
        rn.note_decision(dt, k >= warmup);
        if (k < warmup) continue;
        rn.times.push_back(dt);
        rn.account();
      }
    }
  }
}

struct Aggregates {
  uint64_t sent = 0, recv = 0, wrong = 0;
  double push = 1, pull = 1;
  double bound_eff = 0;  // sum over ranks of bytes sent / sum of their bounds (0 when no rank knows its bound)
};
Aggregates aggregate(Communicator& comm, uint64_t sent, uint64_t recv, uint64_t wrong, double push, double pull,
                     double bound) {
  struct Rec {
    uint64_t sent, recv, wrong;
    double push, pull, bound;
  };
  auto all = comm.allgather_value(Rec{sent, recv, wrong, push, pull, bound});
  Aggregates a;
  double sent_all = 0, bound_all = 0;
  for (const auto& x : all) {
    sent_all += static_cast<double>(x.sent);
    bound_all += x.bound;
  }
  if (bound_all > 0) a.bound_eff = sent_all / bound_all;
  for (const auto& x : all) {
    a.sent = std::max(a.sent, x.sent);
    a.recv = std::max(a.recv, x.recv);
    a.wrong += x.wrong;
    a.push = std::max(a.push, x.push);
    a.pull = std::max(a.pull, x.pull);
  }
  return a;
}

void print_header(const Config& cfg, int n, const char* backend, double gamma, bool trace, int iters, uint32_t D) {
  std::printf("# zen_perf: %d ranks (%s), dtype %s, row width %u, %s, iters %d, warm-up %d, check %d, output %s, pull %s, push %s\n", n,
              backend, cfg.dtype.c_str(), D,
              trace ? ("trace " + cfg.trace_dir).c_str()
                    : ("density " + std::to_string(cfg.density) + ", overlap (target gamma) " + std::to_string(gamma) +
                       ", skew " + std::to_string(cfg.skew) + ", seed " + std::to_string(cfg.seed))
                          .c_str(),
              iters, cfg.warmup, cfg.check, cfg.output.c_str(), cfg.pull.c_str(), cfg.push.c_str());
  std::printf("# size: dense bytes; time_us: median over iterations of the max over ranks (min_us/max_us: fastest and\n"
              "# slowest iteration); each iteration calls every scheme once in turn; algbw = size / time and busbw =\n"
              "# algbw * 2(n-1)/n are dense-equivalent rates (comparable with all_reduce_perf); sent_B/recv_B: most bytes\n"
              "# any rank sent/received per call; imbalance: max/mean load over owners (push or pull, the larger);\n"
              "# #wrong: elements differing from a dense reference of all ranks' inputs. mpi_allreduce and\n"
              "# mpi_allgatherv are raw MPI calls written as a user would (mpi_allreduce always yields the dense sum).\n");
  std::printf("# bound_eff: bytes all ranks sent per call / (value bytes + log2 C(m, K) / 8 of every index set sent),\n"
              "# the distance to the information bound (balanced, sparse_ps and auto running them; '-' otherwise).\n");
  std::printf("%12s %11s %5s %19s %8s %11s %10s %10s %8s %8s %12s %12s %9s %9s %7s\n", "size", "count", "type", "scheme",
              "density", "time_us", "min_us", "max_us", "algbw", "busbw", "sent_B", "recv_B", "imbalance", "bound_eff", "#wrong");
  std::fflush(stdout);
}

void print_row(const Row& r, const char* type, bool explain) {
  char eff[32] = "-";
  if (r.bound_eff > 0) std::snprintf(eff, sizeof eff, "%.3f", r.bound_eff);
  std::printf("%12llu %11llu %5s %19s %8.4f %11.1f %10.1f %10.1f %8.3f %8.3f %12llu %12llu %9.3f %9s %7llu\n",
              static_cast<unsigned long long>(r.size), static_cast<unsigned long long>(r.count), type, r.scheme.c_str(),
              r.density, r.time_us, r.time_min_us, r.time_max_us, r.algbw, r.busbw, static_cast<unsigned long long>(r.sent),
              static_cast<unsigned long long>(r.recv), std::max(r.push_imb, r.pull_imb), eff,
              static_cast<unsigned long long>(r.wrong));
  if (!r.ran.empty()) {
    std::printf("#   auto ran:");
    for (const auto& [name, calls] : r.ran) std::printf(" %s x%llu", name.c_str(), static_cast<unsigned long long>(calls));
    std::printf("\n");
  }
  if (r.decision_calls > 0)
    std::printf("#   %s decided in %llu calls (%llu of them timed), %.1f ms in all (slowest rank)\n", r.scheme.c_str(),
                static_cast<unsigned long long>(r.decision_calls), static_cast<unsigned long long>(r.decision_timed),
                r.decision_s * 1e3);
  if (r.scheme.rfind("hier_", 0) == 0 && !r.phases.empty()) {
    // The hierarchical mode's traffic by where it goes: inside a node (reduce-scatter, allgather) and
    // across nodes (the inter-node scheme), rank 0, last call.
    uint64_t in_s = 0, in_r = 0, x_s = 0, x_r = 0;
    for (const auto& p : r.phases) {
      const bool inter = p.name == "inter";
      (inter ? x_s : in_s) += p.sent;
      (inter ? x_r : in_r) += p.recv;
    }
    std::printf("#   %s bytes on rank 0 per call: inside the node sent %llu recv %llu, across nodes sent %llu recv %llu\n",
                r.scheme.c_str(), static_cast<unsigned long long>(in_s), static_cast<unsigned long long>(in_r),
                static_cast<unsigned long long>(x_s), static_cast<unsigned long long>(x_r));
  }
  if (explain)
    for (const auto& d : r.decisions) std::printf("#   %s\n", d.c_str());
  std::fflush(stdout);
}

void fill_bw(Row& row, int n) {
  const double t = row.time_us * 1e-6;
  row.algbw = t > 0 ? static_cast<double>(row.size) / t / 1e9 : 0;
  row.busbw = row.algbw * (n > 1 ? 2.0 * (n - 1) / n : 0.0);
}

/// A finished runner as a table row (aggregated over ranks).
Row finish_runner(Communicator& comm, Runner& rn, uint64_t N, DType dt, double dens, double gam) {
  const uint64_t calls = std::max<uint64_t>(1, rn.calls);
  auto agg = aggregate(comm, rn.sent_sum / calls, rn.recv_sum / calls, rn.wrong, rn.push, rn.pull,
                       rn.bound_sum / static_cast<double>(calls));
  Row row;
  row.size = N * dtype_size(dt);
  row.count = N;
  row.scheme = rn.name;
  row.density = dens;
  row.gamma = gam;
  row.time_us = median(rn.times) * 1e6;
  row.time_min_us = rn.times.empty() ? 0 : *std::min_element(rn.times.begin(), rn.times.end()) * 1e6;
  row.time_max_us = rn.times.empty() ? 0 : *std::max_element(rn.times.begin(), rn.times.end()) * 1e6;
  row.sent = agg.sent;
  row.recv = agg.recv;
  row.push_imb = agg.push;
  row.pull_imb = agg.pull;
  row.wrong = agg.wrong;
  row.bound_eff = agg.bound_eff;
  row.encoding = rn.encoding;
  row.phases = rn.phases;
  row.decisions = rn.decisions;
  row.ran = rn.ran;
  row.decision_calls = rn.decision_calls;
  row.decision_timed = rn.decision_timed;
  row.decision_s = rn.decision_s;
  fill_bw(row, comm.size());
  return row;
}

#ifdef ZEN_PERF_HAVE_TRACE
/// Dump the runner's result on input `in` as record (r, t) of the trace `dir`. The result is computed
/// here, by one call with sparse output on `in` itself, never taken from what an earlier call left in
/// rn.sparse: that holds the result of the LAST call (the timed loop's last iteration unless a check
/// re-ran this input), so reusing it wrote the last timed call's result for every iteration of a
/// multi-iteration trace when the run's output was sparse and the check was off.
void dump_result(Communicator& comm, Runner& rn, const SparseView& in, const std::string& dir,
                 const trace::TraceMeta& meta, int t) {
  comm.barrier();
  rn.call(in, false);
  const SparseTensor& out = rn.sparse;
  trace::write_rank_iter(dir, meta, comm.rank(), t, out.indices.data(), out.indices.size(), out.values.data());
}
#endif

/// The benchmark body on one rank. Returns the rows (meaningful on rank 0).
std::vector<Row> run_bench(Communicator& comm, const Config& cfg) {
  const int n = comm.size(), r = comm.rank();
  const bool root = r == 0;
  const DType dt = parse_dtype(cfg.dtype);
  const size_t vs = dtype_size(dt);
  const uint32_t D = cfg.row_width;
  ZEN_ENFORCE(D >= 1, "--row-width must be >= 1");
  ZEN_ENFORCE(cfg.output == "dense" || cfg.output == "sparse", "--output must be dense or sparse, got '" + cfg.output + "'");
  ZEN_ENFORCE(cfg.index == "i32" || cfg.index == "i64", "--index must be i32 or i64, got '" + cfg.index + "'");
  const bool dense_out = cfg.output == "dense";
  const bool mpi = std::string(comm.backend_name()) == "mpi";
  const auto schemes = split_schemes(cfg.schemes, mpi);
  const SchemeOptions opt = scheme_options(cfg);
  const double gamma = cfg.overlap < 0 ? (n + 1) / 2.0 : cfg.overlap;
  ZEN_ENFORCE(gamma >= 1.0 && gamma <= std::max(1, n),
              "--overlap " + std::to_string(gamma) + " outside [1, n=" + std::to_string(n) + "]");
  ZEN_ENFORCE(cfg.iters >= 1, "-n must be >= 1");
  ZEN_ENFORCE(cfg.warmup >= 0, "-w must be >= 0");
  std::vector<Row> rows;
  const char* type = dtype_name(dt);
  IndexType it = cfg.index == "i32" ? IndexType::I32 : IndexType::I64;
  if (!cfg.dump_dir.empty()) ZEN_ENFORCE(!cfg.trace_dir.empty() || cfg.b == cfg.e, "--dump needs --trace or a single size (-b == -e)");

  // Check one runner's output on input t against the reference; dump it when asked.
  auto check_runner = [&](Runner& rn, const SparseView& in, const Reference& ref, uint64_t N, uint32_t RD, DType rdt,
                          bool exact) {
    rn.call(in, dense_out);
    const bool dres = rn.dense_result(dense_out);
    rn.wrong += count_wrong(ref, dres ? rn.dense.data() : nullptr, &rn.sparse, N, RD, rdt, exact, n);
  };

  // ---------------- trace replay ----------------
  // Several traces (a comma list) are timed in the same rounds, so their times compare fairly.
  if (!cfg.trace_dir.empty()) {
#ifdef ZEN_PERF_HAVE_TRACE
    std::vector<std::string> dirs;
    for (size_t p = 0; p <= cfg.trace_dir.size();) {
      size_t q = cfg.trace_dir.find(',', p);
      if (q == std::string::npos) q = cfg.trace_dir.size();
      if (q > p) dirs.push_back(cfg.trace_dir.substr(p, q - p));
      p = q + 1;
    }
    struct TraceRun {
      std::string dir;
      trace::TraceMeta meta;
      std::vector<Workload> mine;
      std::vector<std::vector<int32_t>> i32;
      std::vector<SparseView> views;
      std::vector<Runner> runners;
    };
    std::vector<TraceRun> runs(dirs.size());
    for (size_t g = 0; g < dirs.size(); ++g) {
      TraceRun& tr = runs[g];
      tr.dir = dirs[g];
      tr.meta = trace::read_meta(tr.dir);
      const trace::TraceMeta& meta = tr.meta;
      // A run with fewer ranks than the trace replays the trace's first n ranks.
      ZEN_ENFORCE(meta.ranks >= n, "trace " + tr.dir + " has " + std::to_string(meta.ranks) + " ranks but the run has " +
                                       std::to_string(n) + " (a run may use the first n <= ranks of a trace, not more)");
      const uint64_t N = static_cast<uint64_t>(meta.N);
      const uint32_t TD = static_cast<uint32_t>(meta.row_width);
      const int T = std::max(1, meta.iterations);
      tr.mine.resize(static_cast<size_t>(T));
      tr.i32.resize(static_cast<size_t>(T));
      tr.views.resize(static_cast<size_t>(T));
      const IndexType vit = (it == IndexType::I32 && N / TD <= (1ULL << 31)) ? it : IndexType::I64;
      for (int t = 0; t < T; ++t) {
        trace::RankIter ri = trace::read_rank_iter(tr.dir, meta, r, t);
        tr.mine[t] = Workload{std::move(ri.idx), std::move(ri.values)};
        tr.views[t] = make_view(tr.mine[t], N, TD, meta.dtype, vit, tr.i32[t]);
      }
      tr.runners = make_runners(comm, schemes, TensorSpec{N, TD, meta.dtype}, opt, dense_out, cfg.schemes == "all", cfg.node_size);
    }
    if (root) print_header(cfg, n, comm.backend_name(), 0, true, cfg.iters, static_cast<uint32_t>(runs[0].meta.row_width));
    std::vector<Group> groups;
    for (auto& tr : runs) groups.push_back(Group{&tr.runners, &tr.views});
    time_runners(comm, groups, dense_out, cfg.warmup, cfg.iters, cfg.auto_settle != 0);
    for (auto& tr : runs) {
      const trace::TraceMeta& meta = tr.meta;
      const uint64_t N = static_cast<uint64_t>(meta.N);
      const uint32_t TD = static_cast<uint32_t>(meta.row_width);
      const DType tdt = meta.dtype;
      const int T = std::max(1, meta.iterations);
      double dens = 0, gam = 0;
      uint64_t entries = 0;
      if (cfg.check || !cfg.dump_dir.empty()) {
        for (int t = 0; t < T; ++t) {
          std::vector<Workload> all(static_cast<size_t>(n));
          for (int p = 0; p < n; ++p) {
            trace::RankIter ri = trace::read_rank_iter(tr.dir, meta, p, t);
            all[p] = Workload{std::move(ri.idx), std::move(ri.values)};
          }
          const Reference ref = build_reference(all, TD, tdt);
          uint64_t local = 0;
          for (auto& x : all) local += x.idx.size();
          entries += local;
          dens += static_cast<double>(local) / n / static_cast<double>(N / TD);
          gam += local ? static_cast<double>(ref.union_rows) * n / static_cast<double>(local) : 0;
          for (auto& rn : tr.runners) {
            if (cfg.check) check_runner(rn, tr.views[t], ref, N, TD, tdt, false);
            if (!cfg.dump_dir.empty() && !rn.dense_only) {
              const std::string dump = cfg.dump_dir + "/" + rn.name;
              trace::TraceMeta out_meta = meta;
              out_meta.ranks = n;
              out_meta.source = "zen_perf " + rn.name + " results of " + tr.dir;
              if (t == 0 && root) trace::write_meta(dump, out_meta);
              dump_result(comm, rn, tr.views[t], dump, out_meta, t);
            }
          }
        }
      }
      if (root) {
        std::printf("# trace %s: N=%llu D=%u %s, first %d of %d ranks, %d iterations", tr.dir.c_str(),
                    static_cast<unsigned long long>(N), TD, dtype_name(tdt), n, meta.ranks, T);
        if (entries) std::printf(", %.1f entries per rank and iteration, gamma %.3f", static_cast<double>(entries) / n / T, gam / T);
        std::printf("\n");
      }
      for (auto& rn : tr.runners) {
        rows.push_back(finish_runner(comm, rn, N, tdt, dens / T, gam / T));
        rows.back().label = tr.dir;
        if (root) print_row(rows.back(), dtype_name(tdt), cfg.explain);
      }
    }
    return rows;
#else
    ZEN_THROW(Result::Unsupported, "--trace: zen_perf was built without the trace reader (zen_trace_lib)");
#endif
  }

  // ---------------- synthetic sweep ----------------
  const uint64_t b = parse_size(cfg.b), e = parse_size(cfg.e);
  ZEN_ENFORCE(b >= 1 && e >= b, "sizes: need 1 <= -b <= -e, got -b " + cfg.b + " -e " + cfg.e);
  ZEN_ENFORCE(cfg.f > 1.0 || b == e, "-f must be > 1 when -b < -e");
  if (root) print_header(cfg, n, comm.backend_name(), gamma, false, cfg.iters, D);
  std::vector<uint64_t> sizes;
  for (double s = static_cast<double>(b); s <= static_cast<double>(e) * (1 + 1e-12); s *= cfg.f) {
    sizes.push_back(static_cast<uint64_t>(std::llround(s)));
    if (cfg.f <= 1.0) break;
  }
  // Progress on stderr when it is a terminal (tools/common/progress.hpp; ZEN_PROGRESS=0/1 overrides).
  zen::tools::Progress progress("zen_perf", sizes.size(), root);
  for (uint64_t size : sizes) {
    progress.update(progress.done(), "size " + std::to_string(size) + " B: generating and timing " +
                                         std::to_string(schemes.size()) + " scheme(s)");
    const uint64_t N = size / vs / D * D;
    if (N == 0) {
      if (root) std::printf("# size %llu: fewer than one row of %u %s values, skipped\n", static_cast<unsigned long long>(size), D, type);
      continue;
    }
    const uint64_t R = N / D;
    const IndexType iti = (it == IndexType::I32 && R <= (1ULL << 31)) ? IndexType::I32 : IndexType::I64;
    // Inputs: this rank's, plus every rank's when checking (regenerated from the seed).
    std::vector<Workload> all;
    Workload mine = generate(R, D, dt, cfg.density, gamma, cfg.skew, n, r, cfg.seed);
    Reference ref;
    double dens = static_cast<double>(mine.idx.size()) / static_cast<double>(R), gam = 0;
    if (cfg.check) {
      all.resize(n);
      for (int p = 0; p < n; ++p) all[p] = p == r ? mine : generate(R, D, dt, cfg.density, gamma, cfg.skew, n, p, cfg.seed);
      ref = build_reference(all, D, dt);
      uint64_t local = 0;
      for (auto& x : all) local += x.idx.size();
      dens = static_cast<double>(local) / n / static_cast<double>(R);
      gam = local ? static_cast<double>(ref.union_rows) * n / static_cast<double>(local) : 0;
      all.clear();
    }
    if (root)
      std::printf("# N=%llu rows=%llu local density %.5f%s gamma %.3f\n", static_cast<unsigned long long>(N),
                  static_cast<unsigned long long>(R), dens, cfg.check ? " (mean over ranks)," : ", target", cfg.check ? gam : gamma);
    std::vector<int32_t> i32;
    const std::vector<SparseView> views{make_view(mine, N, D, dt, iti, i32)};
    auto runners = make_runners(comm, schemes, TensorSpec{N, D, dt}, opt, dense_out, cfg.schemes == "all", cfg.node_size);
    time_runners(comm, {Group{&runners, &views}}, dense_out, cfg.warmup, cfg.iters, cfg.auto_settle != 0);
    progress.step("size " + std::to_string(size) + " B done");
    progress.finish();
    for (auto& rn : runners) {
      if (cfg.check) check_runner(rn, views[0], ref, N, D, dt, true);
#ifdef ZEN_PERF_HAVE_TRACE
      if (!cfg.dump_dir.empty() && !rn.dense_only) {
        trace::TraceMeta m;
        m.N = static_cast<int64_t>(N);
        m.ranks = n;
        m.iterations = 1;
        m.dtype = dt;
        m.row_width = D;
        m.source = "zen_perf " + rn.name + " result, synthetic d=" + std::to_string(cfg.density) + " gamma=" +
                   std::to_string(gamma) + " skew=" + std::to_string(cfg.skew) + " seed=" + std::to_string(cfg.seed);
        const std::string dir = cfg.dump_dir + "/" + rn.name;
        if (root) trace::write_meta(dir, m);
        dump_result(comm, rn, views[0], dir, m, 0);
      }
#endif
      rows.push_back(finish_runner(comm, rn, N, dt, dens, gam));
      if (root) print_row(rows.back(), type, cfg.explain);
    }
  }
  return rows;
}

json summarize(const std::vector<Row>& rows, bool print) {
  // Per scheme: geometric mean over sizes of t_ref / t_scheme (> 1: faster than the reference), for
  // every reference present in the run (zen's dense and allgather, the raw MPI baselines).
  std::map<std::pair<std::string, uint64_t>, std::map<std::string, double>> t;  // (trace, size) -> scheme -> time
  std::vector<std::string> order;
  for (const auto& r : rows) {
    t[{r.label, r.size}][r.scheme] = r.time_us;
    if (std::find(order.begin(), order.end(), r.scheme) == order.end()) order.push_back(r.scheme);
  }
  std::vector<std::string> refs;
  for (const char* ref : {"dense", "allgather", "mpi_allreduce", "mpi_allgatherv"})
    if (std::find(order.begin(), order.end(), ref) != order.end()) refs.emplace_back(ref);
  json out = json::object();
  if (print) {
    std::printf("# summary: speedup = time(reference) / time(scheme), geometric mean over sizes (and traces)\n# %13s", "scheme");
    for (const auto& ref : refs) std::printf(" %16s", ("vs " + ref).c_str());
    std::printf("\n");
  }
  for (const auto& s : order) {
    json j;
    if (print) std::printf("# %13s", s.c_str());
    for (const auto& ref : refs) {
      double l = 0;
      int k = 0;
      for (const auto& [size, m] : t) {
        if (!m.count(s) || !m.count(ref) || m.at(s) <= 0) continue;
        l += std::log(m.at(ref) / m.at(s));
        ++k;
      }
      if (k) j["vs_" + ref] = std::exp(l / k);
      if (print) {
        char buf[32] = "-";
        if (k) std::snprintf(buf, sizeof buf, "%.3fx", std::exp(l / k));
        std::printf(" %16s", buf);
      }
    }
    if (print) std::printf("\n");
    out[s] = j;
  }
  return out;
}

void finish(Communicator& comm, const Config& cfg, const std::vector<Row>& rows) {
  if (comm.rank() != 0) return;
  uint64_t wrong = 0;
  for (const auto& r : rows) wrong += r.wrong;
  json summary = summarize(rows, true);
  std::printf("# total #wrong: %llu\n", static_cast<unsigned long long>(wrong));
  if (cfg.json_file.empty()) return;
  json j;
  j["ranks"] = comm.size();
  j["backend"] = comm.backend_name();
  j["config"] = {{"b", cfg.b},         {"e", cfg.e},       {"f", cfg.f},         {"density", cfg.density},
                 {"overlap", cfg.overlap}, {"skew", cfg.skew}, {"dtype", cfg.dtype}, {"row_width", cfg.row_width},
                 {"iters", cfg.iters}, {"warmup", cfg.warmup}, {"check", cfg.check}, {"pull", cfg.pull}, {"push", cfg.push},
                 {"output", cfg.output}, {"seed", cfg.seed}, {"trace", cfg.trace_dir}, {"block_size", cfg.block_size},
                 {"sparcml_switch", cfg.sparcml_switch}, {"auto_settle", cfg.auto_settle}};
  j["rows"] = json::array();
  for (const auto& r : rows) {
    json x = {{"trace", r.label},     {"size", r.size},       {"count", r.count},         {"scheme", r.scheme},       {"density", r.density},
              {"gamma", r.gamma},     {"time_us", r.time_us},     {"time_min_us", r.time_min_us},
              {"time_max_us", r.time_max_us}, {"algbw_GBps", r.algbw}, {"busbw_GBps", r.busbw}, {"sent_B", r.sent},
              {"recv_B", r.recv},     {"push_imbalance", r.push_imb}, {"pull_imbalance", r.pull_imb},
              {"encoding", r.encoding}, {"wrong", r.wrong}};
    if (r.bound_eff > 0) x["bound_eff"] = r.bound_eff;
    x["phases_rank0"] = json::array();
    for (const auto& p : r.phases) x["phases_rank0"].push_back({{"name", p.name}, {"sent", p.sent}, {"recv", p.recv}, {"seconds", p.seconds}});
    if (!r.decisions.empty()) x["decisions"] = r.decisions;
    if (!r.ran.empty()) {
      x["ran"] = json::object();
      for (const auto& [name, calls] : r.ran) x["ran"][name] = calls;
    }
    if (r.decision_calls > 0)
      x["decision"] = {{"calls", r.decision_calls}, {"timed", r.decision_timed}, {"ms", r.decision_s * 1e3}};
    j["rows"].push_back(x);
  }
  j["summary"] = summary;
  j["total_wrong"] = wrong;
  std::ofstream f(cfg.json_file);
  ZEN_ENFORCE(f.good(), "--json: cannot open '" + cfg.json_file + "' for writing");
  f << j.dump(2) << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  CLI::App app{"zen_perf: sparse allreduce benchmark (nccl-tests conventions)"};
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.add_option("-b,--minbytes", cfg.b, "smallest dense size in bytes (suffix K/M/G)");
  app.add_option("-e,--maxbytes", cfg.e, "largest dense size in bytes (suffix K/M/G)");
  app.add_option("-f,--stepfactor", cfg.f, "multiplicative size step");
  app.add_option("-d,--density", cfg.density, "local density d: rows per rank = d * N / D")->check(CLI::Range(0.0, 1.0));
  app.add_option("--overlap", cfg.overlap, "target gamma = union rows / local rows, in [1, n] (default (n+1)/2)");
  app.add_option("--skew", cfg.skew, "Zipf exponent of the row distribution (0 = uniform; low rows hot)")->check(CLI::Range(0.0, 10.0));
  app.add_option("-t,--dtype", cfg.dtype, "f32, f64, f16 or bf16");
  app.add_option("--row-width", cfg.row_width, "row width D (values per index)");
  app.add_option("-n,--iters", cfg.iters, "timed iterations");
  app.add_option("-w,--warmup", cfg.warmup, "warm-up iterations");
  app.add_option("-c,--check", cfg.check, "check results against the dense reference (0/1)");
  app.add_option("--scheme", cfg.schemes,
                 "all, or a comma list of: balanced,dense,dense_native,allgather,sparcml,omnireduce,sparse_ps,auto, hier_<scheme> (the "
                 "hierarchical mode, nodes from --node-size), and (under mpirun) the raw MPI baselines "
                 "mpi_allreduce,mpi_allgatherv");
  app.add_option("--pull", cfg.pull, "balanced/sparse_ps pull encoding: auto, coo, bitmap or ef (Elias-Fano)");
  app.add_option("--push", cfg.push, "balanced/sparse_ps push encoding: auto, coo, bitmap or ef (Elias-Fano); "
                                     "--scheme balanced:PUSH/PULL times one variant beside the others");
  app.add_option("--output", cfg.output, "result form timed: dense (N values) or sparse (sorted COO)");
  app.add_option("--index", cfg.index, "input index type: i32 or i64");
  app.add_option("--trace", cfg.trace_dir,
                 "replay a trace directory (docs/trace-format.md) instead of synthetic inputs; a comma list times several "
                 "traces in the same rounds");
  app.add_option("--dump", cfg.dump_dir, "write every rank's result per iteration as a trace under DIR/<scheme>/");
  app.add_option("--json", cfg.json_file, "write all rows and the summary as JSON (rank 0)");
  app.add_option("--threads", cfg.threads, "run N ranks as threads on the loopback backend (no MPI; 0 = under mpirun)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--seed", cfg.seed, "workload seed (and h0 seed)");
  app.add_option("--cpu-threads", cfg.cpu_threads, "CPU threads per rank for hashing (0 = all cores)");
  app.add_option("--block-size", cfg.block_size, "omnireduce block size in values");
  app.add_option("--sparcml-switch", cfg.sparcml_switch, "sparcml dense switch density (0 = byte break-even)");
  app.add_option("--node-size", cfg.node_size,
                 "hier_<scheme> runs <scheme> across nodes in the hierarchical mode; a node is 'host' (ranks "
                 "sharing memory, under mpirun) or this many consecutive ranks")
      ->capture_default_str();
  app.add_option("--timeout-ms", cfg.timeout_ms, "communicator timeout under mpirun (a missing peer is named after it)")
      ->check(CLI::Range(int64_t{1}, int64_t{86400000}))
      ->capture_default_str();
  app.add_flag("--explain", cfg.explain, "print what scheme auto chose and why (every decision)");
  app.add_option("--auto-explore", cfg.auto_explore,
                 "auto: measure the candidates predicted within this factor of the best (<= 1: model only)");
  app.add_option("--auto-gbps", cfg.auto_gbps, "auto: model bandwidth per rank in Gb/s");
  app.add_option("--auto-alpha-us", cfg.auto_alpha_us, "auto: model latency per message round in microseconds");
  app.add_option("--auto-every", cfg.auto_every, "auto: calls between re-evaluations (0 = never)");
  app.add_option("--auto-settle", cfg.auto_settle,
                 "auto: after the warm-up rounds, call it untimed until its first decision (statistics, measuring the "
                 "candidates) is over, so that its timed calls are its steady state (0: time those calls too); its "
                 "decision calls are counted apart either way")
      ->check(CLI::Range(0, 1));
  CLI11_PARSE(app, argc, argv);

  try {
    if (cfg.threads > 0) {
      std::vector<Row> rows;
      std::mutex mu;
      loopback::run(
          cfg.threads,
          [&](Communicator& c) {
            auto r = run_bench(c, cfg);
            std::lock_guard<std::mutex> lk(mu);
            if (c.rank() == 0) {
              rows = r;
              finish(c, cfg, rows);
            }
          },
          Communicator::Ms(600000));
      uint64_t wrong = 0;
      for (const auto& r : rows) wrong += r.wrong;
      return wrong ? 2 : 0;
    }
#ifdef ZEN_HAVE_MPI
    mpi::Environment env(&argc, &argv);
    int rank = 0, rc = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::unique_ptr<Communicator> comm;
    try {
      comm = mpi::create(MPI_COMM_WORLD);
      comm->set_timeout(Communicator::Ms(cfg.timeout_ms));
      auto rows = run_bench(*comm, cfg);
      finish(*comm, cfg, rows);
      uint64_t wrong = 0;
      for (const auto& r : rows) wrong += r.wrong;
      rc = wrong ? 2 : 0;
      comm.reset();
    } catch (const std::exception& ex) {
      // One rank's error ends the job at once: print it, tell the peers (they may be waiting in a
      // zen call) and abort the job (they may also be outside any, e.g. reading their own records).
      std::fprintf(stderr, "zen_perf: rank %d: %s\n", rank, ex.what());
      std::fflush(stderr);
      if (comm) comm->abort(ex.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return rc;
#else
    cfg.threads = 1;
    std::vector<Row> rows;
    loopback::run(1, [&](Communicator& c) {
      rows = run_bench(c, cfg);
      finish(c, cfg, rows);
    });
    return 0;
#endif
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "zen_perf: %s\n", ex.what());
    return 1;
  }
}
