#pragma once
// `zen_orbit sweep`: a survey grid of constellations, ground-station sets, links, compute, splits
// and FL schemes with real training per point (zen::fl::sim::sweep), run in parallel, resumable,
// written as one CSV row per point plus heatmap and speed-up PNGs (docs/fl-orbit.md, "Sweeps").
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace zen_orbit_cli {

struct SweepArgs {
  std::string grid_file;  ///< JSON grid (format in docs/fl-orbit.md); flags override its values
  // Axes (comma-separated lists; given flags override the file's)
  std::string planes, sats_per_plane, altitude_km, inclination_deg, pattern, phasing, stations, presets, compute,
      splits, schemes;
  // Settings shared by every point
  std::string stations_file, data_dir, model, propagator;
  int rounds = 0, clients_per_round = 0, epochs = 0, batch = 0, prox_max_epochs = 0, buffer = 0, hidden = 0;
  double target_acc = 0, lr = 0, prox_mu = 0, server_lr = 0, mask_deg = 0, topk = 0, topk_down = 0, staleness = 0;
  std::size_t samples_per_sat = 0, test_limit = 0;
  unsigned long long seed = 0;
  // Execution
  std::string out = "sweep_out";
  unsigned jobs = 0;  ///< 0: all cores
  int ranks = 2;      ///< loopback ranks of each run's learner (server on rank 0, satellites on the others)
  bool dry_run = false, no_plots = false;
  CLI::App* cmd = nullptr;
};

/// Registers the subcommand and its options on `app`.
CLI::App* add_sweep_command(CLI::App& app, SweepArgs& a);
/// Runs it (after parsing); returns the exit status.
int run_sweep_command(const SweepArgs& a);

}  // namespace zen_orbit_cli
