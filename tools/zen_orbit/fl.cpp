// `zen_orbit fl`: federated learning over a constellation, one run per scheme (baseline, ring,
// ring-async, ...), with the summary of each and the CSV / plot outputs.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "fl_args.hpp"

namespace zen_orbit_cli {

namespace {

int cmd_fl(FlArgs& a) {
  BackendScope backend(a);
  const auto t0 = std::chrono::steady_clock::now();
  const auto schemes = split_list(a.schemes);
  zen::tools::Progress progress("zen_orbit fl", schemes.size(), a.root);
  attach_progress(a, progress);
  zs::Experiment ex(finish_config(a));
  std::vector<zs::RunResult> runs;
  for (const std::string& scheme : schemes) {
    runs.push_back(ex.run(scheme, a.cfg.preset));
    report_run(progress, runs.back(), scheme + " done");
  }
  finish_runs(a, runs, "FL on " + ex.scenario().name + " (" + a.cfg.preset + ")", ex, t0);
  return 0;
}

}  // namespace

Command add_fl_command(CLI::App& app, const std::vector<const zs::PaperSetup*>& papers) {
  auto fa = std::make_shared<FlArgs>();
  fa->schemes = "ring";
  auto* fl = app.add_subcommand("fl", "federated learning over the constellation (baseline | ring | ring-async)");
  add_fl_options(fl, *fa);
  fl->add_option("--topk", fa->cfg.topk,
                 "compressed updates: the fraction of the parameters every partial aggregate carries (1 = dense)")
      ->capture_default_str();
  fl->add_option("--topk-down", fa->cfg.topk_down,
                 "compressed downloads: the fraction of the parameters every model transfer (download, ring scatter) "
                 "carries (1 = dense)")
      ->capture_default_str();
  fl->add_option("--scheme,--schemes", fa->schemes,
                 "scheme(s), comma-separated: baseline, baseline-deadline, fedasync, fedprox, fedbuff, ring, ring-async")
      ->capture_default_str();
  fl->add_option("--preset", fa->cfg.preset, "link preset: ka, s, or scenario (the scenario's own link budgets)")
      ->check(CLI::IsMember({"ka", "s", "scenario"}))
      ->capture_default_str();
  for (const zs::PaperSetup* paper : papers) {
    zs::apply_paper_setup(*paper, fa->cfg);
    fa->cfg.preset = "scenario";
  }
  return {fl, [fa] { return cmd_fl(*fa); }};
}

}  // namespace zen_orbit_cli
