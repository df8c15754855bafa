// zen_orbit's scenario options (scenario_args.hpp): their registration and the scenario they load.
#include "scenario_args.hpp"

#include <iostream>

#include "zen/error.hpp"
#include "zen/orbit/tle.hpp"

namespace zen_orbit_cli {

void add_scenario_options(CLI::App* app, ScenarioArgs& a, bool with_days) {
  app->add_option("--scenario", a.name, "built-in scenario: reference, reference-star, bremen, northpole, starlink")
      ->capture_default_str();
  app->add_option("--config", a.config, "scenario JSON file (overrides --scenario; format in docs/orbit.md)");
  app->add_option("--propagator", a.propagator, "two-body (default), j2, or sgp4 (needs --tle or a JSON with \"tle\")")
      ->check(CLI::IsMember({"two-body", "j2", "sgp4"}));
  app->add_option("--tle", a.tle,
                  "SGP4 constellation from a TLE / OMM (JSON or CSV) file: satellite k = the k-th element set, planes "
                  "grouped automatically (docs/orbit.md)");
  app->add_option("--start", a.start, "with --tle: UTC of t = 0, e.g. 2022-06-17T00:00:00Z (default: the earliest epoch)");
  app->add_option("--station", a.stations,
                  "ground station server (repeatable) [NAME=]LAT,LON[,ALT_M] (deg, m; WGS-84 geodetic with --tle); "
                  "added to the --server list");
  app->add_option("--mask", a.mask_deg, "ground-station elevation mask [deg] (default: the scenario's, 10)");
  app->add_option("--threads", a.threads, "worker threads for window prediction (0 = all cores)");
  app->add_option("--server", a.servers,
                  "replace the servers (repeatable): meo, bremen, northpole or a ground station [NAME=]LAT,LON[,ALT_M]");
  if (with_days) app->add_option("--days", a.days, "prediction horizon in days")->capture_default_str();
}

namespace {

std::vector<zo::ServerNode> parse_servers(const std::vector<std::string>& servers,
                                          const std::vector<std::string>& stations) {
  std::vector<zo::ServerNode> out;
  for (const auto& s : servers) out.push_back(zo::parse_server(s));
  for (const auto& s : stations) {
    out.push_back(zo::parse_server(s));
    ZEN_ENFORCE(out.back().kind == zo::ServerNode::Kind::Ground,
                "--station '" + s + "' is not a ground station ([NAME=]LAT,LON[,ALT_M]); use --server for satellites");
  }
  return out;
}

}  // namespace

zo::Scenario load(const ScenarioArgs& a) {
  const std::vector<zo::ServerNode> servers = parse_servers(a.servers, a.stations);
  zo::Scenario sc;
  if (!a.tle.empty()) {
    ZEN_ENFORCE(a.config.empty(), "--tle and --config: give one (a JSON config names its TLE file with \"tle\")");
    ZEN_ENFORCE(a.propagator.empty() || a.propagator == "sgp4",
                "--tle needs --propagator sgp4 (or none), got '" + a.propagator + "'");
    sc = zo::Scenario::from_elements_file(a.tle, a.start, servers);
  } else {
    ZEN_ENFORCE(a.start.empty(), "--start needs --tle");
    sc = a.config.empty() ? zo::Scenario::named(a.name) : zo::Scenario::from_file(a.config);
    if (!a.propagator.empty()) sc.propagator = zo::parse_propagator(a.propagator);
    if (!servers.empty()) sc.servers = servers;
  }
  if (a.mask_deg >= 0.0) sc.elevation_mask_deg = a.mask_deg;
  sc.validate();
  for (const auto& w : zo::ring_warnings(sc)) std::cerr << "warning: " << w << "\n";
  return sc;
}

zo::PredictOptions predict_options(const ScenarioArgs& a) {
  ZEN_ENFORCE(a.days > 0.0, "--days must be positive, got " + std::to_string(a.days));
  zo::PredictOptions o;
  o.horizon_s = a.days * 86400.0;
  o.threads = a.threads;
  return o;
}

}  // namespace zen_orbit_cli
