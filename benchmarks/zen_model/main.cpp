// zen_model: the cost model (zen/model/cost_model.hpp) on a trace.
//
//   zen_model --trace DIR [--ranks 4,8]            bytes per call of every scheme (exact: the model's
//                                                  counts are the trace's own index sets)
//   zen_model --trace DIR --check PERF.json        the same with zen_perf's settings from its --json
//                                                  output, compared with its measured sent_B/recv_B
//   zen_model --trace DIR --n 2,4,...,1024 --gbps 25,100 [--csv F] [--png F]
//                                                  predicted time normalized to the dense allreduce
//                                                  for rank counts beyond the trace (gamma(k)
//                                                  extrapolated, see docs/cost-model.md)
//   zen_model --calibrate PERF.json [--compute-from RUN.json] [--save CAL.json]
//                                                  fit alpha and beta (and a per-row compute cost per
//                                                  scheme) to a zen_perf run on this machine
//   zen_model --trace DIR --predict PERF.json --calibration CAL.json
//                                                  every row of a zen_perf trace run (another rank
//                                                  count) predicted from that calibration: alpha per
//                                                  round, beta per byte (the model's exact bytes),
//                                                  the scheme's compute per row; measured beside it
//
// One file per subcommand (common.hpp lists them); this one has the options and the bytes table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common.hpp"
#include "zen/error.hpp"

using namespace zen_model;

int main(int argc, char** argv) {
  CLI::App app{"zen_model: the cost model of zen's schemes on a trace (bytes, time, scaling)"};
  std::string traces, ranks, check, calibrate, save, predict, calibration, nlist, gbps = "25,100", csv, png, pull = "auto", push = "auto", output = "sparse";
  double alpha_us = 20.0, message_us = 1.0;
  uint64_t seed = 42;
  uint32_t block_size = 256;
  double sparcml_switch = 0.0;
  app.add_option("--trace", traces, "trace directory (comma list for --check)");
  app.add_option("--ranks", ranks, "rank counts for the byte table (default: 2..min(8, trace ranks))");
  app.add_option("--check", check, "zen_perf --json output to compare with (its settings are used)");
  app.add_option("--calibrate", calibrate, "zen_perf --json output of this machine: fit alpha, beta and compute costs");
  std::string compute_from;
  app.add_option("--compute-from", compute_from, "with --calibrate: fit the compute per row on this zen_perf run's rows");
  app.add_option("--save", save, "with --calibrate: write the calibration (JSON) for --predict");
  app.add_option("--predict", predict, "zen_perf --json output of a trace run to predict (needs --calibration, --trace)");
  app.add_option("--calibration", calibration, "the --save output of --calibrate");
  double within = 0.25;
  app.add_option("--within", within, "with --predict: the relative error counted as a hit (default 0.25)");
  app.add_option("--n", nlist, "rank counts to extrapolate to, e.g. 2,4,8,...,1024");
  app.add_option("--gbps", gbps, "per-rank bandwidths for --n, Gb/s (comma list)");
  app.add_option("--alpha-us", alpha_us, "latency per message round for --n, microseconds");
  app.add_option("--message-us", message_us, "overhead per message for --n, microseconds");
  app.add_option("--csv", csv, "write the --n table as CSV");
  app.add_option("--png", png, "plot the --n table (gnuplot)");
  app.add_option("--seed", seed, "h0 seed (zen_perf's --seed; default 42 like zen_perf)");
  app.add_option("--pull", pull, "pull encoding: auto, coo, bitmap or ef");
  app.add_option("--push", push, "push encoding: auto, coo, bitmap or ef");
  app.add_option("--output", output, "result form: sparse or dense");
  app.add_option("--block-size", block_size, "omnireduce block size in values");
  app.add_option("--sparcml-switch", sparcml_switch, "sparcml dense switch density (0 = byte break-even)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!calibrate.empty()) return run_calibrate(calibrate, compute_from, save);
    ZEN_ENFORCE(!traces.empty(), "--trace DIR is required (or --calibrate PERF.json)");
    std::vector<Trace> trs;
    for (const auto& d : split(traces)) trs.push_back(load(d));
    if (!check.empty()) return run_check(trs, check);
    if (!predict.empty()) {
      ZEN_ENFORCE(!calibration.empty(), "--predict needs --calibration CAL.json (zen_model --calibrate PERF.json --save CAL.json)");
      return run_predict(trs, predict, calibration, within);
    }
    SchemeOptions opt;
    opt.seed = seed;
    opt.pull = parse_index_encoding(pull);
    opt.push = parse_index_encoding(push);
    opt.block_size = block_size;
    opt.sparcml_dense_switch = sparcml_switch;
    ZEN_ENFORCE(output == "sparse" || output == "dense", "--output must be sparse or dense");
    if (!nlist.empty()) return run_scaling(trs.front(), parse_ints(nlist), parse_doubles(gbps), alpha_us, message_us, opt, output == "sparse", csv, png);
    const Trace& tr = trs.front();
    std::vector<int> ns = ranks.empty() ? std::vector<int>{} : parse_ints(ranks);
    if (ns.empty())
      for (int n = 2; n <= std::min(8, tr.meta.ranks); ++n) ns.push_back(n);
    std::printf("# zen_model: %s, output %s, pull %s, seed %llu; bytes per call (most any rank sends / receives), mean over "
                "the trace's %d iterations\n",
                tr.dir.c_str(), output.c_str(), pull.c_str(), static_cast<unsigned long long>(seed), tr.meta.iterations);
    const double bw0 = parse_doubles(gbps).front();
    const model::Link link{alpha_us * 1e-6, message_us * 1e-6, bw0 * 1e9 / 8.0, 0.0, {}};
    std::printf("# predicted time: first iteration, alpha %.1f us per round, %.1f us per message, %.0f Gb/s per rank\n", alpha_us,
                message_us, bw0);
    std::printf("%4s %14s %14s %14s %14s\n", "n", "scheme", "sent_B", "recv_B", "predicted_us");
    for (int n : ns) {
      ZEN_ENFORCE(n >= 1 && n <= tr.meta.ranks, "--ranks: " + std::to_string(n) + " is outside [1, " + std::to_string(tr.meta.ranks) + "]");
      RunSettings rs;
      rs.n = n;
      rs.opt = opt;
      rs.sparse_out = output == "sparse";
      rs.warmup = 0;
      rs.iters = tr.meta.iterations;
      const model::Problem p = problem_of(tr, rs);
      const std::vector<std::vector<int64_t>> first(tr.sets[0].begin(), tr.sets[0].begin() + n);
      const model::Counts c0 = model::count_exact(p, first);
      for (const auto& s : scheme_names()) {
        const auto [ms, mr] = zen_perf_bytes(tr, rs, s);
        std::printf("%4d %14s %14llu %14llu %14.1f\n", n, s.c_str(), static_cast<unsigned long long>(ms),
                    static_cast<unsigned long long>(mr), model::predict(s, p, c0, link).seconds * 1e6);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zen_model: %s\n", e.what());
    return 1;
  }
}
