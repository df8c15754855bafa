// TimingContext, faults and the scheme dispatcher.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "zen/fl/sim/timing.hpp"
#include "zen/fl/rng.hpp"
#include "zen/fl/sim/wire.hpp"
#include "zen/orbit/visibility.hpp"

namespace zen::fl::sim {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

double parse_number(const std::string& s, const std::string& whole) {
  try {
    std::size_t used = 0;
    const double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  ZEN_THROW(Result::InvalidArgument, "fault '" + whole + "': '" + s + "' is not a number");
}
}  // namespace

const char* event_kind_name(EventKind k) noexcept {
  switch (k) {
    case EventKind::Download: return "download";
    case EventKind::IslModel: return "isl-model";
    case EventKind::Train: return "train";
    case EventKind::IslAggregate: return "isl-aggregate";
    case EventKind::Upload: return "upload";
    case EventKind::ServerUpdate: return "server-update";
  }
  return "?";
}

Fault parse_fault(const std::string& text) {
  const auto colon = text.find(':');
  const auto at = text.find('@');
  ZEN_ENFORCE(colon != std::string::npos && at != std::string::npos && at > colon,
              "fault '" + text + "': expected sat:ID@T, link:A-B@T or miss:ID@T");
  const std::string kind = text.substr(0, colon);
  const std::string what = text.substr(colon + 1, at - colon - 1);
  const double t = parse_number(text.substr(at + 1), text);
  if (kind == "sat") return Fault::satellite(static_cast<int>(parse_number(what, text)), t);
  if (kind == "miss") return Fault::missed_upload(static_cast<int>(parse_number(what, text)), t);
  if (kind == "link") {
    const auto dash = what.find('-');
    ZEN_ENFORCE(dash != std::string::npos, "fault '" + text + "': a link is A-B");
    return Fault::link(static_cast<int>(parse_number(what.substr(0, dash), text)),
                       static_cast<int>(parse_number(what.substr(dash + 1), text)), t);
  }
  ZEN_THROW(Result::InvalidArgument, "fault '" + text + "': unknown kind '" + kind + "' (sat, link, miss)");
}

std::string fault_to_string(const Fault& f) {
  std::ostringstream os;
  switch (f.kind) {
    case Fault::Kind::Satellite: os << "sat:" << f.sat; break;
    case Fault::Kind::Link: os << "link:" << f.sat << "-" << f.sat2; break;
    case Fault::Kind::MissedUpload: os << "miss:" << f.sat; break;
  }
  os << "@" << f.time_s;
  return os.str();
}

TimingContext::TimingContext(const orbit::Scenario& sc, const orbit::ContactPlan& plan, TimingConfig cfg)
    : sc_(sc), plan_(plan), cfg_(std::move(cfg)), geo_(sc) {
  const int K = sc_.num_satellites();
  ZEN_ENFORCE(K > 0, "timing: scenario '" + sc_.name + "' has no satellites");
  ZEN_ENFORCE(plan_.num_satellites() == K, "timing: contact plan has " + std::to_string(plan_.num_satellites()) +
                                               " satellites, scenario " + std::to_string(K));
  ZEN_ENFORCE(cfg_.model_params > 0, "timing: the model has no parameters");
  ZEN_ENFORCE(cfg_.train_s >= 0, "timing: train_s must be >= 0, got " + std::to_string(cfg_.train_s));
  ZEN_ENFORCE(cfg_.train_s_per_sat.empty() || static_cast<int>(cfg_.train_s_per_sat.size()) == K,
              "timing: train_s_per_sat has " + std::to_string(cfg_.train_s_per_sat.size()) + " entries for " +
                  std::to_string(K) + " satellites");
  ZEN_ENFORCE(cfg_.epochs >= 1, "timing: epochs must be >= 1, got " + std::to_string(cfg_.epochs));
  ZEN_ENFORCE(cfg_.clients_per_round >= 0,
              "timing: clients per round must be >= 0 (0: all), got " + std::to_string(cfg_.clients_per_round));
  model_bytes_ = model_message_bytes(cfg_.model_params, cfg_.download_topk);
  rings_.resize(static_cast<std::size_t>(sc_.planes));
  ring_uniform_.assign(static_cast<std::size_t>(sc_.planes), 0);
  ring_error_.assign(static_cast<std::size_t>(sc_.planes), std::string());
  for (int p = 0; p < sc_.planes; ++p) {
    rings_[static_cast<std::size_t>(p)] = sc_.plane_members(p);
    const orbit::RingInfo ri = orbit::ring_info(sc_, p);
    // A uniform ring keeps its chords for ever: check once. Any other ring is checked per transfer
    // (link_alive), where a blocked hop is handled like a cut link.
    ring_uniform_[static_cast<std::size_t>(p)] = ri.uniform ? 1 : 0;
    // Only the ring schemes use the ISLs: they refuse such a ring (check_ring), the others run.
    if (ri.uniform && ri.sats >= 2 && !ri.feasible)
      ring_error_[static_cast<std::size_t>(p)] =
          "timing: the ISL ring of plane " + std::to_string(p) + " is blocked by the Earth (chord clearance " +
          std::to_string(ri.chord_clearance_m / 1e3) + " km)";
    else if (ri.uniform && ri.sats >= 2 && orbit::rate_bps(cfg_.isl_link, ri.neighbour_distance_m) <= 0)
      ring_error_[static_cast<std::size_t>(p)] =
          "timing: the ISL link budget '" + cfg_.isl_link.name + "' carries nothing over plane " + std::to_string(p) +
          "'s " + std::to_string(ri.neighbour_distance_m / 1e3) + " km chord (SNR " +
          std::to_string(orbit::to_db(orbit::snr(cfg_.isl_link, ri.neighbour_distance_m))) + " dB below its minimum)";
  }
  node_fail_.assign(static_cast<std::size_t>(K), kInf);
  for (const Fault& f : cfg_.faults) {
    ZEN_ENFORCE(f.sat >= 0 && f.sat < K, "fault " + fault_to_string(f) + ": satellite " + std::to_string(f.sat) +
                                             " outside [0, " + std::to_string(K) + ")");
    ZEN_ENFORCE(f.time_s >= 0, "fault " + fault_to_string(f) + ": negative time");
    if (f.kind == Fault::Kind::Satellite) {
      auto& t = node_fail_[static_cast<std::size_t>(f.sat)];
      t = std::min(t, f.time_s);
    } else if (f.kind == Fault::Kind::Link) {
      ZEN_ENFORCE(f.sat2 >= 0 && f.sat2 < K, "fault " + fault_to_string(f) + ": satellite " +
                                                 std::to_string(f.sat2) + " out of range");
      const auto& a = sc_.satellites[static_cast<std::size_t>(f.sat)];
      const auto& b = sc_.satellites[static_cast<std::size_t>(f.sat2)];
      const int S = static_cast<int>(rings_[static_cast<std::size_t>(a.plane)].size());
      ZEN_ENFORCE(a.plane == b.plane && orbit::ring_hops(a.slot, b.slot, S) == 1,
                  "fault " + fault_to_string(f) + ": satellites " + std::to_string(f.sat) + " and " +
                      std::to_string(f.sat2) + " are not ring neighbours");
    }
  }
}

uint64_t TimingContext::aggregate_bytes(std::size_t members) const {
  return aggregate_message_bytes(cfg_.model_params, members, cfg_.topk);
}

double TimingContext::isl_time(int a, int b, double t, uint64_t bytes) const {
  const double d = (geo_.sat_position(a, t) - geo_.sat_position(b, t)).norm();
  return orbit::transfer_time_s(cfg_.isl_link, 8.0 * static_cast<double>(bytes), d);
}

double train_flops_per_sample(std::size_t params) noexcept { return 6.0 * static_cast<double>(params); }

std::vector<double> compute_train_times(const ComputeModel& m, const std::vector<std::size_t>& samples, int epochs,
                                        std::size_t params) {
  ZEN_ENFORCE(std::isfinite(m.flops_per_s) && m.flops_per_s > 0,
              "compute model: on-board throughput must be positive, got " + std::to_string(m.flops_per_s) + " FLOP/s");
  ZEN_ENFORCE(m.spread >= 0 && m.spread < 1, "compute model: spread must be in [0, 1), got " + std::to_string(m.spread));
  ZEN_ENFORCE(epochs >= 1, "compute model: epochs must be >= 1, got " + std::to_string(epochs));
  Rng rng(stream_seed(m.seed, Stream::Compute));
  std::uniform_real_distribution<double> share(1.0 - m.spread, 1.0 + m.spread);
  std::vector<double> t(samples.size());
  for (std::size_t k = 0; k < samples.size(); ++k) {
    const double f = m.spread > 0 ? share(rng) : 1.0;
    t[k] = static_cast<double>(samples[k]) * epochs * train_flops_per_sample(params) / (m.flops_per_s * f);
  }
  return t;
}

void TimingConfig::set_links(const std::string& preset, const orbit::Scenario& sc) {
  if (preset == "scenario") {
    ZEN_ENFORCE(sc.isl_link && sc.server_link, "link preset 'scenario': scenario '" + sc.name +
                                                   "' has no link budget (JSON \"links\": {\"isl\", \"server\"})");
    isl_link = *sc.isl_link;
    server_link = *sc.server_link;
    return;
  }
  isl_link = server_link = orbit::LinkPreset::named(preset);
}

void TimingContext::check_ring(int plane) const {
  const std::string& e = ring_error_.at(static_cast<std::size_t>(plane));
  ZEN_ENFORCE(e.empty(), e);
}

double TimingContext::epoch_time(int sat) const { return train_time(sat) / cfg_.epochs; }

std::vector<int> TimingContext::first_in_contact(const std::vector<int>& idle, double t) const {
  const std::size_t C = cfg_.clients_per_round > 0 ? static_cast<std::size_t>(cfg_.clients_per_round) : idle.size();
  if (C >= idle.size()) return idle;
  std::vector<orbit::Contact> c;
  for (int k : idle)
    if (auto x = try_contact(k, t, model_bytes_)) c.push_back(*x);
  if (c.size() < C)
    throw HorizonExceeded("timing: only " + std::to_string(c.size()) + " of the " + std::to_string(C) +
                          " clients to select reach the server after t = " + std::to_string(t) + " s within the horizon");
  std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(C), c.end(), orbit::efc_before);
  std::vector<int> out;
  for (std::size_t i = 0; i < C; ++i) out.push_back(c[i].sat);
  std::sort(out.begin(), out.end());
  return out;
}

double TimingContext::train_time(int sat) const {
  return cfg_.train_s_per_sat.empty() ? cfg_.train_s : cfg_.train_s_per_sat.at(static_cast<std::size_t>(sat));
}

bool TimingContext::node_alive(int sat, double t) const { return t < node_fail_.at(static_cast<std::size_t>(sat)); }

bool TimingContext::node_alive_known(int sat, double t, double known_s) const {
  const double f = node_fail_.at(static_cast<std::size_t>(sat));
  return f > known_s || t < f;
}

bool TimingContext::link_alive(int a, int b, double t) const { return link_alive_known(a, b, t, kInf); }

bool TimingContext::link_alive_known(int a, int b, double t, double known_s) const {
  const int plane = sc_.satellites.at(static_cast<std::size_t>(a)).plane;
  if (!ring_uniform_.at(static_cast<std::size_t>(plane)) &&
      (!geo_.sat_sat_visible(a, b, t) ||
       orbit::rate_bps(cfg_.isl_link, (geo_.sat_position(a, t) - geo_.sat_position(b, t)).norm()) <= 0))
    return false;
  for (const Fault& f : cfg_.faults) {
    if (f.kind != Fault::Kind::Link || f.time_s > known_s || t < f.time_s) continue;
    if ((f.sat == a && f.sat2 == b) || (f.sat == b && f.sat2 == a)) return false;
  }
  return true;
}

std::optional<orbit::Contact> TimingContext::try_contact(int sat, double t, uint64_t bytes) const {
  const double bits = 8.0 * static_cast<double>(bytes);
  return plan_.first_window(sat, t, [&](const orbit::Window& w, double start) {
    return orbit::window_integrated_transfer_end(cfg_.server_link, geo_, w, start, bits);
  });
}

orbit::Contact TimingContext::contact(int sat, double t, uint64_t bytes) const {
  auto c = try_contact(sat, t, bytes);
  if (!c)
    throw HorizonExceeded("timing: satellite " + std::to_string(sat) + " has no server window after t = " +
                          std::to_string(t) + " s within the horizon " + std::to_string(plan_.horizon_s()) + " s");
  return *c;
}

std::optional<orbit::Contact> TimingContext::efc(const std::vector<int>& sats, double t, uint64_t bytes) const {
  std::optional<orbit::Contact> best;
  for (int s : sats) {
    const auto c = try_contact(s, t, bytes);
    if (c && (!best || orbit::efc_before(*c, *best))) best = c;
  }
  return best;
}

MissTracker::MissTracker(const std::vector<Fault>& faults) {
  for (const Fault& f : faults)
    if (f.kind == Fault::Kind::MissedUpload) pending_.push_back(f);
}

bool MissTracker::misses(int sat, double start_s) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->sat == sat && start_s >= it->time_s) {
      pending_.erase(it);
      return true;
    }
  }
  return false;
}

std::vector<std::string> scheme_names() {
  return {"baseline", "baseline-deadline", "fedasync", "fedprox", "fedbuff", "ring", "ring-async"};
}

Schedule simulate(const std::string& scheme, const TimingContext& ctx, int rounds) {
  if (scheme == "baseline") return simulate_baseline(ctx, rounds);
  if (scheme == "ring") return simulate_ring(ctx, rounds);
  if (scheme == "ring-async") return simulate_ring_async(ctx, rounds);
  if (scheme == "baseline-deadline") return simulate_baseline_deadline(ctx, rounds);
  if (scheme == "fedasync") return simulate_fedasync(ctx, rounds);
  if (scheme == "fedprox") return simulate_fedprox(ctx, rounds);
  if (scheme == "fedbuff") return simulate_fedbuff(ctx, rounds);
  std::string all;
  for (const auto& n : scheme_names()) all += (all.empty() ? "" : ", ") + n;
  ZEN_THROW(Result::InvalidArgument, "unknown scheme '" + scheme + "' (" + all + ")");
}

}  // namespace zen::fl::sim
