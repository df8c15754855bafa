// zen_perf's benchmark body (bench.hpp): the trace replay and the synthetic size sweep of one rank,
// from the inputs through the timed rounds to the check, the dump and the rows.
#include "bench.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "common/progress.hpp"
#include "workload.hpp"
#include "zen/error.hpp"
#ifdef ZEN_PERF_HAVE_TRACE
#include "zen/trace/trace.hpp"
#endif

namespace zen_perf {

using namespace zen;

namespace {

/// --prelude K: K untimed calls of the raw MPI allgatherv on `in` (spec's tensor) before the group's
/// first timed call, through a runner of its own that is not reported.
void prelude(Communicator& comm, const Config& cfg, const TensorSpec& spec, const SchemeOptions& opt, bool dense_out,
             const SparseView& in) {
  if (cfg.prelude <= 0) return;
  ZEN_ENFORCE(comm.backend_name() == std::string("mpi"), "zen_perf: --prelude needs the MPI backend (it calls MPI_Allgatherv)");
  std::vector<Runner> pre = make_runners(comm, {"mpi_allgatherv"}, spec, opt, dense_out, false, cfg.node_size);
  for (int i = 0; i < cfg.prelude; ++i) timed_call(comm, pre[0], in, dense_out);
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

/// A run on this rank: its settings, parsed and checked once, and the two kinds of run.
struct Bench {
  Communicator& comm;
  const Config& cfg;
  int n, r;
  bool root;
  DType dt;  // synthetic inputs (a trace brings its own)
  uint32_t D;
  bool dense_out;
  std::vector<std::string> schemes;
  SchemeOptions opt;
  double gamma;  // target overlap of the synthetic inputs
  IndexType it;

  /// The trace replay (--trace).
  std::vector<Row> replay_traces() const;
  /// The synthetic size sweep (-b, -e, -f): inputs generated from the seed on every rank.
  std::vector<Row> sweep_sizes() const;
  /// Checks one runner's output on input `in` against the reference (its #wrong grows).
  void check_runner(Runner& rn, const SparseView& in, const Reference& ref, uint64_t N, uint32_t RD, DType rdt,
                    bool exact) const;
};

void Bench::check_runner(Runner& rn, const SparseView& in, const Reference& ref, uint64_t N, uint32_t RD, DType rdt,
                         bool exact) const {
  rn.call(in, dense_out);
  const bool dres = rn.dense_result(dense_out);
  rn.wrong += count_wrong(ref, dres ? rn.dense.data() : nullptr, &rn.sparse, N, RD, rdt, exact, n);
}

// The trace replay: several traces (a comma list) are timed in the same rounds, so their times compare fairly.
std::vector<Row> Bench::replay_traces() const {
  std::vector<Row> rows;
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
  for (auto& tr : runs) {
    groups.push_back(Group{&tr.runners, &tr.views});
    prelude(comm, cfg, TensorSpec{static_cast<uint64_t>(tr.meta.N), static_cast<uint32_t>(tr.meta.row_width), tr.meta.dtype}, opt,
            dense_out, tr.views[0]);
  }
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

std::vector<Row> Bench::sweep_sizes() const {
  std::vector<Row> rows;
  const size_t vs = dtype_size(dt);
  const char* type = dtype_name(dt);
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
    prelude(comm, cfg, TensorSpec{N, D, dt}, opt, dense_out, views[0]);
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

}  // namespace

std::vector<Row> run_bench(Communicator& comm, const Config& cfg) {
  const int n = comm.size(), r = comm.rank();
  const DType dt = parse_dtype(cfg.dtype);
  const uint32_t D = cfg.row_width;
  ZEN_ENFORCE(D >= 1, "--row-width must be >= 1");
  ZEN_ENFORCE(cfg.output == "dense" || cfg.output == "sparse", "--output must be dense or sparse, got '" + cfg.output + "'");
  ZEN_ENFORCE(cfg.index == "i32" || cfg.index == "i64", "--index must be i32 or i64, got '" + cfg.index + "'");
  const bool mpi = std::string(comm.backend_name()) == "mpi";
  const Bench b{comm,
                cfg,
                n,
                r,
                r == 0,
                dt,
                D,
                cfg.output == "dense",
                split_schemes(cfg.schemes, mpi),
                scheme_options(cfg),
                cfg.overlap < 0 ? (n + 1) / 2.0 : cfg.overlap,
                cfg.index == "i32" ? IndexType::I32 : IndexType::I64};
  ZEN_ENFORCE(b.gamma >= 1.0 && b.gamma <= std::max(1, n),
              "--overlap " + std::to_string(b.gamma) + " outside [1, n=" + std::to_string(n) + "]");
  ZEN_ENFORCE(cfg.iters >= 1, "-n must be >= 1");
  ZEN_ENFORCE(cfg.warmup >= 0, "-w must be >= 0");
  if (!cfg.dump_dir.empty()) ZEN_ENFORCE(!cfg.trace_dir.empty() || cfg.b == cfg.e, "--dump needs --trace or a single size (-b == -e)");
  return cfg.trace_dir.empty() ? b.sweep_sizes() : b.replay_traces();
}

}  // namespace zen_perf
