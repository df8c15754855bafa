// zen_perf's command line (CLI11; --help shows every default), the size parser, the contender list
// of --scheme and the SchemeOptions every plan of a run is made with.
#include "options.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>

#include "raw_baselines.hpp"
#include "zen/detail/parse.hpp"
#include "zen/error.hpp"

namespace zen_perf {

using namespace zen;

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
  for (const auto& full : out) {
    const auto& names = scheme_names();
    // NAME#TAG: one more instance of NAME, timed beside it (the same code twice in one run: the
    // spread between the two is the run's noise).
    const std::string x = full.substr(0, full.find('#'));
    if (x != full)
      ZEN_ENFORCE(full.size() > x.size() + 1 && x != "auto" && x != "all",
                  "--scheme " + full + ": NAME#TAG needs a fixed scheme or raw baseline and a tag (auto and all have none)");
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
  o.phase_cpu_time = cfg.phase_cpu;
  o.block_size = cfg.block_size;
  o.sparcml_dense_switch = cfg.sparcml_switch;
  o.autotune.explore_within = cfg.auto_explore;
  o.autotune.explore_budget = cfg.auto_budget;
  if (cfg.auto_cpu != "default") {  // none, or scheme=VALUE_S/DENSE_S[/ROW_S],...
    o.autotune.cpu.clear();
    for (size_t p = 0; cfg.auto_cpu != "none" && p < cfg.auto_cpu.size();) {
      size_t q = cfg.auto_cpu.find(',', p);
      if (q == std::string::npos) q = cfg.auto_cpu.size();
      const std::string item = cfg.auto_cpu.substr(p, q - p);
      const size_t eq = item.find('=');
      const std::string bad = "--auto-cpu: '" + item +
                              "' is not scheme=VALUE_S/DENSE_S[/ROW_S] (seconds per value touched / per dense value / per row touched)";
      ZEN_ENFORCE(eq != std::string::npos && eq > 0, bad);
      const std::vector<double> secs = zen::detail::parse_doubles(item.substr(eq + 1), '/', bad);
      for (double v : secs) ZEN_ENFORCE(v >= 0, bad + ": seconds must be >= 0");
      ZEN_ENFORCE(secs.size() == 2 || secs.size() == 3, bad);
      SchemeOptions::Auto::CpuTerm t;
      t.scheme = item.substr(0, eq);
      t.value_s = secs[0];
      t.dense_s = secs[1];
      t.row_s = secs.size() == 3 ? secs[2] : 0.0;
      o.autotune.cpu.push_back(t);
      p = q + 1;
    }
  }
  o.autotune.bytes_per_s = cfg.auto_gbps * 1e9 / 8.0;
  o.autotune.alpha_s = cfg.auto_alpha_us * 1e-6;
  o.autotune.reevaluate_every = cfg.auto_every;
  o.autotune.sample_rows = cfg.auto_sample_rows;
  o.autotune.cores = cfg.auto_cores;
  o.autotune.learn_link = cfg.auto_learn_link;
  o.autotune.cache = cfg.auto_cache;
  o.pull = parse_index_encoding(cfg.pull);
  o.push = parse_index_encoding(cfg.push);
  return o;
}

int parse_options(int argc, char** argv, Config& cfg) {
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
                 "mpi_allreduce,mpi_allgatherv; NAME#TAG times one more instance of NAME beside it (its noise)");
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
                 "hier_<scheme> runs <scheme> across nodes in the hierarchical mode, hierarchical_sparse its "
                 "sparse variant; a node is 'host' (ranks sharing memory, under mpirun) or this many consecutive ranks")
      ->capture_default_str();
  app.add_option("--timeout-ms", cfg.timeout_ms, "communicator timeout under mpirun (a missing peer is named after it)")
      ->check(CLI::Range(int64_t{1}, int64_t{86400000}))
      ->capture_default_str();
  app.add_flag("--explain", cfg.explain, "print what scheme auto chose and why (every decision)");
  app.add_flag("--phase-cpu", cfg.phase_cpu,
               "measure each phase's CPU time (thread CPU clocks of the caller and the plan's pool; a few system calls per "
               "phase) and print per phase: wall time, CPU time and bytes over the ranks (also in the JSON)");
  app.add_option("--auto-explore", cfg.auto_explore,
                 "auto: measure the candidates predicted within this factor of the best (<= 1: model only)");
  app.add_option("--auto-budget", cfg.auto_budget,
                 "auto: measure only while the predicted extra time of the trial calls is within this many calls of the best");
  app.add_option("--auto-cpu", cfg.auto_cpu,
                 "auto: the model's CPU terms per scheme: default (this machine's calibration), none, or "
                 "scheme=VALUE_S/DENSE_S[/ROW_S],... (seconds per value touched / per dense value / per row touched; "
                 "scripts/calibrate_auto.sh prints them)");
  app.add_option("--auto-gbps", cfg.auto_gbps, "auto: model bandwidth per rank in Gb/s");
  app.add_option("--auto-alpha-us", cfg.auto_alpha_us, "auto: model latency per message round in microseconds");
  app.add_option("--auto-every", cfg.auto_every, "auto: calls between re-evaluations (0 = never)");
  app.add_option("--auto-cores", cfg.auto_cores,
                 "auto: cores the ranks of one machine share, for its model's CPU time (0: found from the kernel's boot "
                 "id and the ranks' affinity masks; < 0: ranks never share cores)");
  app.add_option("--auto-learn-link", cfg.auto_learn_link,
                 "auto: when the chosen scheme's calls take more than this many times its prediction, charge the excess "
                 "to the link (a slower bytes_per_s, kept) and decide again (<= 1: never)");
  app.add_option("--auto-cache", cfg.auto_cache,
                 "auto: a file of remembered decisions; a later run in the same situation (host, rank, sizes, tensor, "
                 "input size within 19 %, options) starts with the choice remembered there, checked against its calls; "
                 "a new choice is appended (empty: none)");
  app.add_option("--auto-sample-rows", cfg.auto_sample_rows,
                 "auto: the most rows per rank its statistics sample (exact when no rank has more non-zeros; omnireduce "
                 "is a candidate only then)")
      ->check(CLI::PositiveNumber);
  app.add_option("--prelude", cfg.prelude,
                 "untimed calls of the raw MPI allgatherv on each input before the first timed call: a job's start-up "
                 "(a training job moves data through MPI, its model's broadcast, before its first gradient sync), so "
                 "that with -w 0 no scheme's first call pays the process's first use of MPI for being first in round 0 "
                 "(MPI backend only)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--auto-settle", cfg.auto_settle,
                 "auto: after the warm-up rounds, call it untimed until its first decision (statistics, measuring the "
                 "candidates) is over, so that its timed calls are its steady state (0: time those calls too); its "
                 "decision calls are counted apart either way")
      ->check(CLI::Range(0, 1));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return -1;
}

}  // namespace zen_perf
