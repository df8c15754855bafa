// `zen_orbit compare`: several FL schemes on one constellation per link preset, with speed-ups,
// server-traffic ratios, the paper's figures where the scenario is a paper's, and an optional sweep
// of the on-board compute throughput.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "fl_args.hpp"
#include "zen/error.hpp"
#include "zen/fl/sim/paper.hpp"
#include "zen/fl/sim/wire.hpp"

namespace zen_orbit_cli {

namespace {

int cmd_compare(FlArgs& a) {
  BackendScope backend(a);
  const auto t0 = std::chrono::steady_clock::now();
  const auto schemes = split_list(a.schemes);
  ZEN_ENFORCE(schemes.size() >= 2, "compare needs at least two schemes, got '" + a.schemes + "'");
  zen::tools::Progress progress("zen_orbit compare", schemes.size() * split_list(a.presets).size(), a.root);
  attach_progress(a, progress);
  zs::Experiment ex(finish_config(a));
  std::vector<zs::RunResult> runs;
  std::printf("scenario %s: %d satellites in %d planes, server(s):", ex.scenario().name.c_str(),
              ex.scenario().num_satellites(), ex.scenario().planes);
  for (const auto& s : ex.scenario().servers) std::printf(" %s", s.name.c_str());
  const std::size_t params = ex.federation().global().num_params();
  std::string train = a.cfg.train_time + " s";
  if (a.cfg.train_time == "work" || a.cfg.train_time == "measured") {
    const auto& ts = ex.timing().train_s_per_sat;
    double mean = 0, mx = 0;
    for (double t : ts) mean += t / static_cast<double>(ts.size()), mx = std::max(mx, t);
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s (mean %.3g s, max %.3g s)", a.cfg.train_time.c_str(), mean, mx);
    train = buf;
  }
  std::printf("; model %s (%zu parameters; a model message is %zu B, a one-client aggregate %zu B), train time %s, "
              "target accuracy %.3f\n",
              a.cfg.model.c_str(), params, zs::model_message_bytes(params), zs::aggregate_message_bytes(params, 1),
              train.c_str(), a.cfg.target_acc);
  for (const std::string& preset : split_list(a.presets)) {
    const std::size_t first = runs.size();
    ZEN_ENFORCE(a.topk_down.size() == 1 || a.topk_down.size() == a.topk.size(),
                "--topk-down takes one fraction or as many as --topk (paired in order)");
    for (std::size_t ki = 0; ki < a.topk.size(); ++ki)
      for (const std::string& scheme : schemes) {
        const double k = a.topk[ki], kd = a.topk_down[a.topk_down.size() == 1 ? 0 : ki];
        runs.push_back(ex.run(scheme, preset, k, kd));
        report_run(progress, runs.back(), scheme + " " + preset + " done");
      }
    const zs::RunResult& b = runs[first];
    std::printf("\npreset %s (vs %s)\n", preset.c_str(), b.name().c_str());
    std::printf("| scheme | round [s] (async: per iteration of every orbit / satellite) | speed-up/round | time to %.2f [s] | speed-up to target | server transfers/round | traffic ratio | ISL transfers/round | server Mbit/round | ISL Mbit/round | final acc |\n",
                a.cfg.target_acc);
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (std::size_t i = first; i < runs.size(); ++i) {
      const zs::RunResult& r = runs[i];
      char tt[64] = "not reached", su[64] = "-";
      if (r.time_to_target_s >= 0) std::snprintf(tt, sizeof(tt), "%.1f", r.time_to_target_s);
      if (r.time_to_target_s > 0 && b.time_to_target_s > 0)
        std::snprintf(su, sizeof(su), "%.2fx", b.time_to_target_s / r.time_to_target_s);
      std::string label = r.scheme;
      if (a.topk.size() > 1 || r.topk_fraction < 1 || r.topk_down_fraction < 1) {
        char kb[64];
        std::snprintf(kb, sizeof kb, " (top %g%%, down %g%%)", 100.0 * r.topk_fraction, 100.0 * r.topk_down_fraction);
        label += kb;
      }
      std::printf("| %s | %.2f | %.2fx | %s | %s | %.2f | %.2fx | %.2f | %.3f | %.3f | %.4f |\n", label.c_str(),
                  r.mean_round_s, b.mean_round_s / r.mean_round_s, tt, su, r.ps_transfers_per_round,
                  b.ps_transfers_per_round / r.ps_transfers_per_round, r.isl_transfers_per_round,
                  r.ps_bits_per_round / 1e6, r.isl_bits_per_round / 1e6, r.final_accuracy);
    }
    std::printf("\n");
    if (const zs::PaperSetup* paper =
            a.cfg.scenario_file.empty() && a.cfg.tle_file.empty() ? zs::paper_setup(a.cfg.scenario) : nullptr) {
      std::printf("paper: %s\n  published: %.0fx training-time speed-up, %.0fx fewer server transfers\n",
                  paper->citation.c_str(), paper->speedup, paper->ps_traffic_reduction);
      for (std::size_t i = first + 1; i < runs.size(); ++i) {
        const zs::RunResult& r = runs[i];
        char su[64] = "target not reached";
        if (r.time_to_target_s > 0 && b.time_to_target_s > 0)
          std::snprintf(su, sizeof(su), "%.2fx to %.2f accuracy", b.time_to_target_s / r.time_to_target_s,
                        a.cfg.target_acc);
        std::printf("  this run, %s vs %s (preset %s): %s, %.2fx per round, %.2fx fewer server transfers\n",
                    r.scheme.c_str(), b.scheme.c_str(), preset.c_str(), su, b.mean_round_s / r.mean_round_s,
                    b.ps_transfers_per_round / r.ps_transfers_per_round);
      }
      std::printf("  as the paper / its authors' simulator set it up:\n");
      for (const auto& s : paper->stated) std::printf("    - %s\n", s.c_str());
      std::printf("  where the paper is silent, chosen here:\n");
      for (const auto& s : paper->chosen) std::printf("    - %s\n", s.c_str());
      std::printf("  why the figures differ: docs/fl-orbit.md, section \"The paper's number\"\n\n");
    }
    if (!a.sweep_gflops.empty()) {
      const int rounds = b.rounds;
      std::printf("on-board compute sweep, preset %s, %d rounds, timing only (training = samples x epochs x 6 x %zu "
                  "FLOP at the given throughput, spread %.2f)\n",
                  preset.c_str(), rounds, params, a.cfg.compute_spread);
      std::printf("| GFLOP/s | train mean [s] | train max [s] |");
      for (const auto& sc : schemes) std::printf(" %s round [s] |", sc.c_str());
      for (std::size_t i = 1; i < schemes.size(); ++i) std::printf(" %s speed-up |", schemes[i].c_str());
      std::printf("\n|---|---|---|");
      for (std::size_t i = 0; i < 2 * schemes.size() - 1; ++i) std::printf("---|");
      std::printf("\n");
      for (const auto& row : ex.compute_sweep(schemes, preset, a.sweep_gflops, rounds)) {
        std::printf("| %g | %.4g | %.4g |", row.gflops, row.mean_train_s, row.max_train_s);
        for (double r : row.round_s) std::printf(" %.2f |", r);
        for (std::size_t i = 1; i < row.round_s.size(); ++i) std::printf(" %.2fx |", row.round_s[0] / row.round_s[i]);
        std::printf("\n");
      }
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  finish_runs(a, runs, "FL on " + ex.scenario().name + ", split " + a.cfg.split + ", model " + a.cfg.model, ex, t0);
  return 0;
}

}  // namespace

Command add_compare_command(CLI::App& app, const std::vector<const zs::PaperSetup*>& papers) {
  auto cmpa = std::make_shared<FlArgs>();
  cmpa->schemes = "baseline,ring";
  cmpa->presets = "ka,s";
  cmpa->cfg.target_acc = 0.80;
  cmpa->cfg.rounds = 20;
  auto* compare = app.add_subcommand("compare", "run several schemes; print speed-ups and server-traffic ratios");
  add_fl_options(compare, *cmpa);
  compare->add_option("--schemes,--scheme", cmpa->schemes, "schemes, the first is the reference")->capture_default_str();
  compare->add_option("--presets,--preset", cmpa->presets,
                      "link presets, comma-separated: ka, s, scenario (the scenario's own link budgets)")
      ->capture_default_str();
  compare->add_option("--topk", cmpa->topk,
                      "compressed updates: fractions of the parameters every partial aggregate carries (top-k of "
                      "the model delta, error feedback), e.g. 1,0.1,0.01; 1 = dense")
      ->delimiter(',')
      ->capture_default_str();
  compare->add_option("--topk-down", cmpa->topk_down,
                      "compressed downloads: fractions of the parameters every model transfer carries, one or paired "
                      "with --topk in order, e.g. 1,0.1,0.01; 1 = dense")
      ->delimiter(',')
      ->capture_default_str();
  compare->add_option("--sweep-gflops", cmpa->sweep_gflops,
                      "also print each scheme's round time and the speed-up with training times from the compute "
                      "model at these on-board throughputs [GFLOP/s] (timing only)")
      ->delimiter(',');
  for (const zs::PaperSetup* paper : papers) {
    zs::apply_paper_setup(*paper, cmpa->cfg);
    cmpa->presets = paper->presets;
  }
  return {compare, [cmpa] { return cmd_compare(*cmpa); }};
}

}  // namespace zen_orbit_cli
