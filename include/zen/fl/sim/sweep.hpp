#pragma once
// Survey sweeps: a cartesian grid of constellations (planes x satellites per plane x altitude x
// inclination x Walker pattern and phasing), ground-station sets, link presets, on-board compute,
// data splits and FL schemes, each point run with real training (the learner of `zen_orbit fl`).
// Points that share a constellation share its contact windows: they are predicted once for the
// largest station set of the grid and filtered per subset (windows are per satellite-station pair).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zen/fl/dataset.hpp"
#include "zen/fl/sim/experiment.hpp"
#include "zen/orbit/contact.hpp"
#include "zen/orbit/scenario.hpp"

namespace zen::fl::sim {

/// The axes of a sweep. Every combination is one point.
struct SweepGrid {
  std::vector<int> planes{1};
  std::vector<int> sats_per_plane{1};
  std::vector<double> altitude_km{500.0};
  std::vector<double> inclination_deg{90.0};
  std::vector<std::string> pattern{"star"};  ///< delta | star
  std::vector<int> phasing{1};               ///< Walker F (taken modulo P: a single plane has F = 0)
  /// "N": the first N sites of the station list; "meo": the MEO server (20 000 km, equatorial).
  std::vector<std::string> stations{"1"};
  std::vector<std::string> preset{"ka"};     ///< ka | s
  /// On-board training time: "SECONDS" per round, or "work:GFLOPS" (compute model, timing.hpp).
  std::vector<std::string> compute{"60"};
  std::vector<std::string> split{"iid"};     ///< as ExperimentConfig::split
  std::vector<std::string> scheme{"baseline"};
};

/// Settings shared by every point (ExperimentConfig fields), and the station list.
struct SweepSettings {
  ExperimentConfig fl;           ///< model, lr, batch, epochs, rounds, target, seed, samples per satellite, ...
  double elevation_mask_deg = 10.0;
  std::string propagator = "two-body";  ///< two-body | j2
  std::vector<orbit::ServerNode> stations;  ///< the ordered list "N stations" takes its first N from
  std::string stations_source;              ///< where the list came from (CSV column / messages)
  /// Stable text of everything that changes a point's result besides its axes (written to the CSV:
  /// a resumed sweep must have been started with the same settings).
  std::string fingerprint() const;
};

/// One point of the grid.
struct SweepPoint {
  std::size_t index = 0;  ///< position in the expanded grid
  int planes = 1, sats_per_plane = 1;
  double altitude_km = 500.0, inclination_deg = 90.0;
  std::string pattern = "star";
  int phasing = 0;  ///< F actually used (mod P)
  int phasing_axis = 0;  ///< the grid's phasing value it came from (not in the CSV)
  std::string stations = "1", preset = "ka", compute = "60", split = "iid", scheme = "baseline";
  int satellites() const noexcept { return planes * sats_per_plane; }
  /// Identifies the point (the CSV's `key`): every axis value.
  std::string key() const;
  /// Identifies its constellation (points with the same one share windows).
  std::string constellation_key() const;
};

/// The cartesian product in a fixed order (scheme varies fastest, planes slowest). Throws zen::Error
/// for an empty axis or a bad value (naming the axis).
std::vector<SweepPoint> expand(const SweepGrid& grid);

/// The point's scenario: Walker constellation, the first N stations of `settings.stations` (or the
/// MEO server), mask and propagator.
orbit::Scenario sweep_scenario(const SweepPoint& p, const SweepSettings& settings);

/// Contact plans shared between the points of a sweep (thread-safe): one prediction per
/// constellation for its largest station set, covering at least the requested horizon (doubled on
/// demand), filtered to the first N stations for each point.
class SharedPlans {
 public:
  explicit SharedPlans(const SweepSettings& settings, std::size_t max_stations) noexcept
      : settings_(settings), max_stations_(max_stations) {}
  std::shared_ptr<const orbit::ContactPlan> plan(const SweepPoint& p, const orbit::Scenario& sc, double min_horizon_s);
  std::size_t predictions() const;  ///< window predictions made so far

 private:
  struct Entry {
    std::mutex m;
    std::shared_ptr<const orbit::ContactPlan> full;  ///< all stations of the largest set (or MEO)
    std::map<std::string, std::shared_ptr<const orbit::ContactPlan>> subsets;
  };
  const SweepSettings& settings_;
  std::size_t max_stations_;
  mutable std::mutex m_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;
  std::size_t predictions_ = 0;
};

/// One CSV row: a point and what its run measured.
struct SweepRow {
  SweepPoint point;
  std::string settings;  ///< SweepSettings::fingerprint()
  std::string status = "ok";  ///< ok, or "error: ..." (a point that cannot run, e.g. a ring blocked by the Earth)
  int rounds = 0;                 ///< sync rounds / async updates simulated (RunResult::rounds)
  std::size_t updates = 0;        ///< global updates
  double sim_time_s = 0.0;        ///< simulated time of the last update
  double time_to_target_s = -1.0; ///< -1: not reached
  int rounds_to_target = -1;
  double final_accuracy = 0.0;
  double first_accuracy = 0.0;    ///< after the first global update
  double server_transfers = 0.0, server_bits = 0.0;
  double isl_transfers = 0.0, isl_bytes = 0.0;
  double idle_fraction = 0.0, staleness_mean = 0.0;
  int staleness_max = 0;
  double wall_s = 0.0;
};

/// The CSV header and one row (fields never contain commas).
std::string sweep_csv_header();
std::string sweep_csv_row(const SweepRow& r);
/// Rows of an existing sweep CSV (a missing file gives none; a torn last line is ignored); throws
/// zen::Error for another header or a malformed row.
std::vector<SweepRow> read_sweep_csv(const std::string& path);

/// Runs one point with real training: the experiment of the point's scenario with the shared data
/// and plans. Errors of the point itself become status "error: ..." rows.
SweepRow run_point(const SweepPoint& p, const SweepSettings& settings, const std::shared_ptr<const Dataset>& train,
                   const std::shared_ptr<const Dataset>& test, SharedPlans& plans, const LearnRunner& learn);

}  // namespace zen::fl::sim
