#pragma once
// End-to-end runs of the orbit-aware FL schemes: scenario -> contact plan -> timing schedule ->
// learner (real Fashion-MNIST training through the loopback communicator) -> CSV / plot / summary.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zen/fl/dataset.hpp"
#include "zen/fl/federation.hpp"
#include "zen/fl/sim/learner.hpp"
#include "zen/fl/sim/timing.hpp"
#include "zen/orbit/scenario.hpp"

namespace zen::fl::sim {

struct ExperimentConfig {
  std::string scenario = "reference";  ///< built-in name
  std::string scenario_file;           ///< JSON config (overrides scenario)
  std::string tle_file;                ///< TLE / OMM file: SGP4 scenario (orbit::Scenario::from_elements_file)
  std::string start_utc;               ///< with tle_file: t = 0 (default: the earliest epoch)
  std::string server;                  ///< "" (scenario's own), meo, bremen, northpole
  std::vector<std::string> servers;    ///< more server specs (orbit::parse_server), after `server`
  std::string preset = "ka";
  int rounds = 0;             ///< 0: max_rounds when target_acc > 0, else 20
  double target_acc = 0.0;    ///< > 0: report (and stop the CSV at) the first update reaching it
  int max_rounds = 40;
  // learning
  std::string model = "logreg";
  int hidden = 32;
  std::string split = "iid";  ///< iid | dirichlet:ALPHA | dirichlet-class:ALPHA | lognormal:SIGMA | orbit:C
  std::string weighting = "samples";
  float lr = 0.1f;
  std::size_t batch = 10;
  int epochs = 1;
  uint64_t seed = 1;
  std::string data_dir;       ///< default: default_fashion_mnist_dir()
  std::size_t train_limit = 0;
  std::size_t test_limit = 0;
  // timing
  std::string train_time = "60";  ///< seconds, "measured", or "work" (ComputeModel, timing.hpp)
  double train_scale = 1.0;       ///< measured: simulated time = measured wall time * scale
  double onboard_gflops = 1.0;    ///< work: sustained on-board training throughput [GFLOP/s]
  double compute_spread = 0.0;    ///< work: per-satellite throughput spread, uniform in [1 -+ spread]
  std::vector<Fault> faults;
  double staleness_exponent = 0.5;
  double fedasync_mixing = 0.5;   ///< fedasync: alpha of a_t = alpha (1 + tau)^-a
  double round_deadline_s = 1200.0;  ///< baseline-deadline
  /// Compressed updates: the fraction of the parameters every partial aggregate carries (top-k of
  /// the model delta with error feedback, SparseAggregate); 1 = dense means. Sync schemes only.
  double topk = 1.0;
  /// Compressed downloads: the fraction of the parameters every model transfer (download, ring
  /// scatter) carries (top-k of the difference to what the receiver holds, error feedback); 1 = dense.
  double topk_down = 1.0;
  /// Client selection without ISLs (TimingConfig::clients_per_round): the first C idle satellites in
  /// contact per synchronous round, fedbuff's concurrency; 0 = all.
  int clients_per_round = 0;
  double prox_mu = 0.01;          ///< fedprox: proximal term mu
  int prox_max_epochs = 5;        ///< fedprox: most local epochs a client runs before its next contact
  int buffer_size = 10;           ///< fedbuff: deltas per server update (clamped to the concurrency)
  double server_lr = 1.0;         ///< fedbuff: server step
  /// > 0: every satellite holds this many training samples (the first K x n of the set, split as
  /// `split` says); 0: the whole (limited) training set is split.
  std::size_t samples_per_satellite = 0;
  /// Data sets already loaded (shared by many experiments, e.g. a sweep); when set, data_dir,
  /// train_limit and test_limit are not used to load them.
  std::shared_ptr<const Dataset> train_data, test_data;
  /// Contact plans from the caller (e.g. a sweep sharing the windows of one constellation between
  /// its ground-station subsets): a plan for this experiment's scenario covering at least the given
  /// horizon. Empty: the experiment predicts its own.
  std::function<std::shared_ptr<const orbit::ContactPlan>(const orbit::Scenario&, double min_horizon_s)> plan_source;
  /// Prebuilt scenario (overrides scenario / scenario_file / tle_file / servers when set).
  std::shared_ptr<const orbit::Scenario> scenario_object;
  double initial_days = 1.0;      ///< first prediction horizon (doubled until the schedule fits)
  LearnRunner learn;              ///< runs the learner (required): on_communicator(comm), loopback_runner(ranks), ...
  std::function<void(const std::string&)> on_phase;  ///< progress: called as each phase of a run starts (optional)
  unsigned threads = 0;           ///< window prediction threads
};

/// Scenario with the server replaced as requested (meo | bremen | northpole).
orbit::Scenario make_scenario(const ExperimentConfig& cfg);

struct RunResult {
  std::string scheme;
  std::string preset;
  double topk_fraction = 1.0;
  double topk_down_fraction = 1.0;
  Schedule schedule;
  LearnResult learn;
  double horizon_s = 0.0;
  int rounds = 0;                   ///< sync rounds, or async iterations per orbit
  double mean_round_s = 0.0;        ///< sync: mean round; async: mean time per P updates
  double ps_transfers_per_round = 0.0;
  double isl_transfers_per_round = 0.0;
  double ps_bits_per_round = 0.0, isl_bits_per_round = 0.0;  ///< bits the transfers carried (wire.hpp)
  double time_to_target_s = -1.0;   ///< -1: not reached
  int rounds_to_target = -1;
  double final_accuracy = 0.0;
  /// Fraction of satellite-time in [0, last update] not spent training (all K satellites).
  double idle_fraction = 0.0;
  /// Staleness of the contributions to the global updates (async schemes; 0 for synchronous ones).
  double staleness_mean = 0.0;
  int staleness_max = 0;
  double sim_wall_s = 0.0, learn_wall_s = 0.0;
  std::string summary() const;
  /// "<scheme>-<preset>[-top<fraction>][-down<fraction>]": the CSV's base name and the plot's label.
  std::string name() const;
};

/// Round time of each scheme when on-board training follows the compute model at one throughput.
struct ComputeSweepRow {
  double gflops = 0.0;
  double mean_train_s = 0.0, max_train_s = 0.0;  ///< over the satellites
  std::vector<double> round_s;                   ///< per scheme (async: time per P updates)
};

/// Data, federation and contact plan shared by the runs of one scenario.
class Experiment {
 public:
  explicit Experiment(ExperimentConfig cfg);
  const ExperimentConfig& config() const noexcept { return cfg_; }
  const orbit::Scenario& scenario() const noexcept { return sc_; }
  const Federation& federation() const noexcept { return *fed_; }
  /// Per-satellite training times used by the timing simulator.
  const TimingConfig& timing() const noexcept { return timing_; }
  double load_wall_s() const noexcept { return load_wall_s_; }

  /// Timing schedule for a scheme and preset (grows the prediction horizon until it fits).
  Schedule schedule(const std::string& scheme, const std::string& preset, int rounds, double* horizon_s = nullptr);
  /// Schedule + learning + metrics.
  RunResult run(const std::string& scheme, const std::string& preset);
  /// Same with compressed updates carrying this fraction of the parameters (1: dense).
  RunResult run(const std::string& scheme, const std::string& preset, double topk_fraction);
  /// Same with compressed downloads carrying topk_down_fraction of the parameters (1: dense).
  RunResult run(const std::string& scheme, const std::string& preset, double topk_fraction, double topk_down_fraction);
  /// Entries per compressed aggregate for a fraction (0 for 1: dense means).
  std::size_t topk_entries(double fraction) const;
  /// Training times of the compute model (timing.hpp) at `gflops` with this experiment's shards,
  /// epochs, model size, spread and seed.
  std::vector<double> work_train_times(double gflops) const;
  /// Timing only (no learning): the round time of every scheme over `rounds` rounds with training
  /// times from the compute model at each throughput; how the speed-up depends on on-board compute.
  std::vector<ComputeSweepRow> compute_sweep(const std::vector<std::string>& schemes, const std::string& preset,
                                             const std::vector<double>& gflops, int rounds);

 private:
  const orbit::ContactPlan& plan_for(double min_horizon);
  std::size_t entries(double fraction, const char* what) const;
  Schedule schedule_with(TimingConfig tc, const std::string& scheme, const std::string& preset, int rounds,
                         double* horizon_s);

  ExperimentConfig cfg_;
  orbit::Scenario sc_;
  std::shared_ptr<const Dataset> train_, test_;
  std::unique_ptr<Federation> fed_;
  TimingConfig timing_;
  std::shared_ptr<const orbit::ContactPlan> plan_;
  double load_wall_s_ = 0.0;
};

/// Idle fraction and staleness of a schedule (RunResult's metrics): satellite-time not training in
/// [0, last update] over K x that span; mean and largest staleness of the contributions.
struct ScheduleMetrics {
  double idle_fraction = 0.0;
  double staleness_mean = 0.0;
  int staleness_max = 0;
};
ScheduleMetrics schedule_metrics(const Schedule& s);

/// CSV: time_s,round,accuracy,loss,ps_transfers,ps_bits,isl_transfers,isl_bits (one row per global update,
/// the first row the initial model; transfers counted since the previous row).
void write_csv(const std::string& path, const RunResult& r);
/// gnuplot PNG of accuracy vs simulated time for several runs (CSV files next to it).
void write_plot(const std::string& dir, const std::vector<const RunResult*>& runs, const std::string& title);

}  // namespace zen::fl::sim
