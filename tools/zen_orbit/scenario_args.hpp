#pragma once
// The scenario options shared by zen_orbit's windows, links, plot and config subcommands (built-in,
// JSON config, TLE / OMM file, servers, stations, mask, horizon) and the scenario they load.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "zen/orbit/contact.hpp"
#include "zen/orbit/scenario.hpp"

namespace zen_orbit_cli {

namespace zo = zen::orbit;

struct ScenarioArgs {
  std::string name = "reference";
  std::string config;
  std::string propagator;  // empty: the scenario's own (two-body for the built-ins)
  double days = 1.0;
  unsigned threads = 0;
  std::vector<std::string> servers;  // --server (repeatable): replace the scenario's servers
  std::vector<std::string> stations;  // --station (repeatable): ground stations, with the servers
  std::string tle;                   // --tle: SGP4 scenario from a TLE / OMM file
  std::string start;                 // --start: UTC of t = 0 (with --tle)
  double mask_deg = -1.0;            // --mask: elevation mask (< 0: the scenario's)
};

/// Registers the options on a subcommand (with_days: also --days, the prediction horizon).
void add_scenario_options(CLI::App* app, ScenarioArgs& a, bool with_days);

/// The scenario the options name, validated (ring warnings on stderr).
zo::Scenario load(const ScenarioArgs& a);

/// The window prediction's options (horizon from --days, threads).
zo::PredictOptions predict_options(const ScenarioArgs& a);

}  // namespace zen_orbit_cli
