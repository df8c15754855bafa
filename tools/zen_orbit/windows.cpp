// `zen_orbit windows`: the server contact windows of a scenario as CSV, with a summary on stderr
// (windows per satellite, visible fraction, prediction time).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "scenario_args.hpp"
#include "zen/error.hpp"

namespace zen_orbit_cli {

namespace {

struct PlanSummary {
  double mean_fraction = 0, min_fraction = 1, max_fraction = 0;
  double mean_windows = 0;
  std::size_t min_windows = 0, max_windows = 0;
};

PlanSummary summarize(const zo::ContactPlan& plan) {
  PlanSummary s;
  const int n = plan.num_satellites();
  s.min_windows = static_cast<std::size_t>(-1);
  for (int k = 0; k < n; ++k) {
    const double f = plan.visible_fraction(k);
    const std::size_t w = plan.windows(k).size();
    s.mean_fraction += f / n;
    s.min_fraction = std::min(s.min_fraction, f);
    s.max_fraction = std::max(s.max_fraction, f);
    s.mean_windows += static_cast<double>(w) / n;
    s.min_windows = std::min(s.min_windows, w);
    s.max_windows = std::max(s.max_windows, w);
  }
  return s;
}

int cmd_windows(const ScenarioArgs& a, const std::string& out) {
  const zo::Scenario sc = load(a);
  const zo::PredictOptions opt = predict_options(a);
  const auto t0 = std::chrono::steady_clock::now();
  const zo::ContactPlan plan = zo::ContactPlan::predict(sc, opt);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (out.empty() || out == "-") {
    plan.write_csv(std::cout, sc);
  } else {
    std::ofstream f(out);
    ZEN_CHECK_CODE(f.good(), zen::Result::SystemError, "cannot write '" + out + "'");
    plan.write_csv(f, sc);
    ZEN_CHECK_CODE(f.good(), zen::Result::SystemError, "write to '" + out + "' failed");
  }
  const PlanSummary s = summarize(plan);
  std::fprintf(stderr,
               "scenario %s (%s): %d satellites, %zu server endpoint(s), %.3f days\n"
               "windows: %zu total, per satellite mean %.3f (min %zu, max %zu)\n"
               "visible fraction: mean %.4f (min %.4f, max %.4f)\n"
               "prediction time: %.3f s\n%s",
               sc.name.c_str(), zo::propagator_name(sc.propagator), sc.num_satellites(), sc.servers.size(), a.days,
               plan.total_windows(), s.mean_windows, s.min_windows, s.max_windows, s.mean_fraction, s.min_fraction,
               s.max_fraction, secs,
               sc.propagator == zo::Propagator::Sgp4 ? ("t = 0 is " + sc.epoch_utc + " (UTC)\n").c_str() : "");
  return 0;
}

}  // namespace

Command add_windows_command(CLI::App& app) {
  auto a = std::make_shared<ScenarioArgs>();
  auto out = std::make_shared<std::string>();
  auto* windows = app.add_subcommand("windows", "predict server contact windows (CSV)");
  add_scenario_options(windows, *a, true);
  windows->add_option("--out", *out, "CSV output file (default: stdout)");
  return {windows, [a, out] { return cmd_windows(*a, *out); }};
}

}  // namespace zen_orbit_cli
