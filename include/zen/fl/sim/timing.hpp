#pragma once
// Timing simulator of the orbit-aware FL schemes (docs/fl-orbit.md).
//
// A pure function of (scenario, contact plan, link preset, model size, training times, faults): it
// emits the Schedule of every transfer and training step, with durations from the link model, on a
// simulated clock. No learning happens here; learner.hpp replays the schedule with real models.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zen/error.hpp"
#include "zen/fl/sim/schedule.hpp"
#include "zen/orbit/contact.hpp"
#include "zen/orbit/link.hpp"
#include "zen/orbit/scenario.hpp"
#include "zen/orbit/visibility.hpp"

namespace zen::fl::sim {

/// Thrown when a contact query runs past the contact plan's horizon (predict a longer horizon).
class HorizonExceeded : public zen::Error {
 public:
  explicit HorizonExceeded(const std::string& msg) : zen::Error(zen::Result::InvalidArgument, msg) {}
};

/// Injected fault. Failures are permanent from time_s on; a missed upload hits the first upload
/// attempt of `sat` that starts at or after time_s (the attempt uses its window slot but delivers
/// nothing).
struct Fault {
  enum class Kind { Satellite, Link, MissedUpload };
  Kind kind = Kind::Satellite;
  int sat = 0;
  int sat2 = -1;  ///< Link: the other end (a ring neighbour of sat)
  double time_s = 0.0;

  static Fault satellite(int sat, double t) { return {Kind::Satellite, sat, -1, t}; }
  static Fault link(int a, int b, double t) { return {Kind::Link, a, b, t}; }
  static Fault missed_upload(int sat, double t) { return {Kind::MissedUpload, sat, -1, t}; }
};
/// "sat:ID@T", "link:A-B@T", "miss:ID@T" (T in seconds); throws zen::Error naming the text.
Fault parse_fault(const std::string& text);
std::string fault_to_string(const Fault& f);

struct TimingConfig {
  orbit::LinkPreset isl_link = orbit::LinkPreset::ka();     ///< satellite-satellite links
  orbit::LinkPreset server_link = orbit::LinkPreset::ka();  ///< satellite-server links
  /// Both links from a preset name: ka | s, or "scenario" for the scenario's own link budgets.
  void set_links(const std::string& preset, const orbit::Scenario& sc);
  std::size_t model_params = 7850;  ///< parameters of the model (float32 on the wire, wire.hpp)
  /// 0: partial aggregates carry dense float32 means. k > 0: compressed updates, every aggregate
  /// carries exactly min(k, params) entries of the model delta (SparseAggregate, error feedback
  /// at each sender); synchronous schemes only.
  std::size_t topk = 0;
  /// 0: downloads and ring scatters carry the dense float32 model. k > 0: compressed downloads,
  /// every model transfer carries exactly min(k, params) entries of the difference between the
  /// sender's model and what the receiver reconstructed from that sender's previous message (top-k
  /// with error feedback, wire.hpp); any scheme.
  std::size_t download_topk = 0;
  double train_s = 60.0;              ///< on-board training time per round (all satellites)
  int epochs = 1;                     ///< local epochs that train_s (or train_s_per_sat) covers
  std::vector<double> train_s_per_sat;  ///< overrides train_s when non-empty (size K)
  double ps_agg_s = 0.15e-3;          ///< server aggregation time
  double isl_agg_s = 10e-6;           ///< partial aggregation on a satellite
  double sink_choice_s = 10e-6;       ///< sink choice before an upload
  double staleness_exponent = 0.5;    ///< ring-async and fedasync: s = (1 + tau)^-a
  double fedasync_mixing = 0.5;       ///< fedasync: alpha of a_t = alpha s(tau)
  double round_deadline_s = 1200.0;   ///< baseline-deadline: uploads must complete by T0 + this
  /// Client selection of the schemes without ISLs, as FLySTacK space-ifies them (Kim, Svoboda, Lane,
  /// arXiv 2511.14889): a synchronous round (baseline, baseline-deadline, fedprox) takes the first
  /// C idle satellites in contact (the C earliest download completions after the round start, EFC
  /// order) and waits for all of them; fedbuff keeps at most C satellites training at once. 0: all.
  int clients_per_round = 0;
  double prox_mu = 0.01;              ///< fedprox: proximal term mu of the local objective
  /// fedprox: a client trains as many whole epochs as fit before its next contact (the next pass
  /// after the one it downloaded in), at least 1 and at most this many.
  int prox_max_epochs = 5;
  /// fedbuff: the server applies an update after this many buffered client deltas (clamped to the
  /// number of satellites that may train at once), w <- w + server_lr sum_i s(tau_i) delta_i / K.
  int buffer_size = 10;
  double server_lr = 1.0;             ///< fedbuff: the server's step on the buffered mean
  std::vector<Fault> faults;
};

/// On-board compute model: a satellite's training time per round follows from the work it does,
///
///   t_k = samples_k x epochs x flops_per_sample / (flops_per_s x f_k),
///
/// with flops_per_sample = 6 x params (dense layers: 2 N forward + 4 N backward per sample, the
/// usual estimate of Kaplan et al., arXiv 2001.08361) and f_k the satellite's share of the nominal
/// throughput, drawn uniformly from [1 - spread, 1 + spread] (seeded; spread 0: every f_k = 1).
struct ComputeModel {
  double flops_per_s = 1e9;  ///< sustained on-board training throughput [FLOP/s]
  double spread = 0.0;       ///< per-satellite relative spread of the throughput, in [0, 1)
  uint64_t seed = 1;
};
double train_flops_per_sample(std::size_t params) noexcept;
/// Training time of every satellite (samples[k] = its shard size); throws zen::Error on a
/// non-positive throughput, a spread outside [0, 1) or epochs < 1.
std::vector<double> compute_train_times(const ComputeModel& m, const std::vector<std::size_t>& samples, int epochs,
                                        std::size_t params);

/// Scenario + contact plan + link times; the input of every scheme.
class TimingContext {
 public:
  TimingContext(const orbit::Scenario& sc, const orbit::ContactPlan& plan, TimingConfig cfg);

  const orbit::Scenario& scenario() const noexcept { return sc_; }
  const orbit::ContactPlan& plan() const noexcept { return plan_; }
  const TimingConfig& config() const noexcept { return cfg_; }
  int num_satellites() const noexcept { return sc_.num_satellites(); }
  int num_planes() const noexcept { return sc_.planes; }
  /// Members of a plane in ring (slot) order.
  const std::vector<int>& ring(int plane) const { return rings_.at(static_cast<std::size_t>(plane)); }
  /// Throws zen::Error when the plane's uniform ring cannot carry ISL traffic (its chord is blocked by
  /// the Earth, or the ISL link budget gives no rate over it); the ring schemes call it.
  void check_ring(int plane) const;

  const orbit::Geometry& geometry() const noexcept { return geo_; }
  /// Bytes on the link of a model / of a partial aggregate of `members` clients (wire.hpp): what
  /// every transfer is charged and what the learner sends.
  uint64_t model_bytes() const noexcept { return model_bytes_; }
  uint64_t aggregate_bytes(std::size_t members) const;
  /// Train time of `sat` for `epochs` local epochs (train_time(sat) covers config().epochs).
  double epoch_time(int sat) const;
  /// The first C idle satellites in contact after t (C = clients_per_round, 0: all of `idle`):
  /// the C earliest download completions in EFC order; satellites without a contact before the
  /// horizon are left out (HorizonExceeded when fewer than C remain).
  std::vector<int> first_in_contact(const std::vector<int>& idle, double t) const;
  /// ISL transfer of `bytes` from satellite a to b starting at t: bits / R(d) + d / c at their
  /// distance at t (constant in time on a uniform ring).
  double isl_time(int a, int b, double t, uint64_t bytes) const;
  double train_time(int sat) const;
  // ---- failure state (faults from the config) ----
  bool node_alive(int sat, double t) const;
  /// An ISL is up when no fault cut it and, on a ring that is not uniform (unequal spacing, radii or
  /// planes), the two satellites have line of sight at t (predictable, so the planner knows it).
  bool link_alive(int a, int b, double t) const;
  /// Same, but only failures that happened by `known_s` count (the planner's view at known_s).
  bool node_alive_known(int sat, double t, double known_s) const;
  bool link_alive_known(int a, int b, double t, double known_s) const;

  /// Server transfer of `bytes` by `sat` at or after t: the first window where it fits, with the
  /// rate integrated over the distance the transfer actually sees (orbit::integrated_transfer_end);
  /// throws HorizonExceeded when nothing fits.
  orbit::Contact contact(int sat, double t, uint64_t bytes) const;
  std::optional<orbit::Contact> try_contact(int sat, double t, uint64_t bytes) const;
  /// EFC over a set: earliest completion, ties by longest remaining window, then lowest id.
  /// nullopt when none fits before the horizon.
  std::optional<orbit::Contact> efc(const std::vector<int>& sats, double t, uint64_t bytes) const;

 private:
  const orbit::Scenario& sc_;
  const orbit::ContactPlan& plan_;
  TimingConfig cfg_;
  orbit::Geometry geo_;
  uint64_t model_bytes_ = 0;
  std::vector<std::vector<int>> rings_;
  std::vector<char> ring_uniform_;  ///< per plane: ISL distance and line of sight constant in time
  std::vector<std::string> ring_error_;  ///< per plane: why its uniform ring cannot be used ("" = usable)
  std::vector<double> node_fail_;  ///< failure time per satellite (+inf: never)
};

/// Stateful helper for missed-upload faults: each fault is consumed by the first matching attempt.
class MissTracker {
 public:
  explicit MissTracker(const std::vector<Fault>& faults);
  /// True (and consumes the fault) if the upload attempt of `sat` starting at start_s misses.
  bool misses(int sat, double start_s);

 private:
  std::vector<Fault> pending_;
};

// ---- the schemes (one file each) ----

/// Synchronous FedAvg without ISLs (orbit-fl.md §5): 2K server transfers per round (2C with
/// clients_per_round = C: the first C idle satellites in contact).
Schedule simulate_baseline(const TimingContext& ctx, int rounds);
/// FedProx space-ified (Li et al., arXiv 1812.06127; Kim et al., arXiv 2511.14889): the baseline's
/// synchronous rounds and client selection; every client trains with the proximal term prox_mu for
/// as many epochs as fit before its next contact (1 .. prox_max_epochs, Event::epochs).
Schedule simulate_fedprox(const TimingContext& ctx, int rounds);
/// FedBuff space-ified (Nguyen et al., arXiv 2106.06639; Kim et al., arXiv 2511.14889): satellites
/// cycle download-train-upload; at most clients_per_round train at once (a freed slot goes to the
/// first idle satellite in contact); the server buffers the uploaded deltas and applies
/// w <- w + server_lr sum_i s(tau_i) delta_i / K after every K = buffer_size of them,
/// s(tau) = (1 + tau)^-staleness_exponent. rounds = global updates.
Schedule simulate_fedbuff(const TimingContext& ctx, int rounds);
/// Synchronous FedAvg without ISLs with a round deadline: satellites whose upload cannot complete
/// by T0 + round_deadline_s sit the round out (stragglers dropped; the contact plan tells them in
/// advance); the round closes at the last upload that makes it.
Schedule simulate_baseline_deadline(const TimingContext& ctx, int rounds);
/// FedAsync without ISLs (Xie et al., arXiv 1903.03934): every satellite cycles download-train-upload
/// on its own; the server mixes each arrival in, w <- (1 - a_t) w + a_t w_k with
/// a_t = fedasync_mixing (1 + tau)^-staleness_exponent. rounds cycles per satellite.
Schedule simulate_fedasync(const TimingContext& ctx, int rounds);
/// Ring partial aggregation, synchronous over the orbits (orbit-fl.md §6): 2P server transfers.
Schedule simulate_ring(const TimingContext& ctx, int rounds);
/// Asynchronous ring: every orbit loops on its own; the server updates on every orbit report,
/// staleness-weighted. rounds * P global updates.
Schedule simulate_ring_async(const TimingContext& ctx, int rounds);
/// Dispatch by name: baseline | baseline-deadline | fedasync | fedprox | fedbuff | ring | ring-async.
Schedule simulate(const std::string& scheme, const TimingContext& ctx, int rounds);
std::vector<std::string> scheme_names();

}  // namespace zen::fl::sim
