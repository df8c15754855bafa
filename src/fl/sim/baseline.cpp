// Baselines without inter-satellite links (orbit-fl.md §5): synchronous FedAvg, the same with a round
// deadline, FedProx (synchronous, variable local epochs with a proximal term) and FedAsync
// (staleness-weighted mixing at the server on every arrival). FedBuff is in fedbuff.cpp.
#include <algorithm>
#include <cmath>

#include "sim_internal.hpp"

namespace zen::fl::sim {

namespace detail {

DirectCycle direct_cycle(const TimingContext& ctx, int k, double T0, int round, int version, MissTracker& miss,
                         bool fedprox) {
  DirectCycle c;
  const int plane = ctx.scenario().satellites[static_cast<std::size_t>(k)].plane;
  if (!ctx.node_alive(k, T0)) {
    c.skipped = true;
    return c;
  }
  // 1. Download at the first feasible contact after T0.
  const orbit::Contact dl = ctx.contact(k, T0, ctx.model_bytes());
  if (!ctx.node_alive(k, dl.completion_s)) {
    c.skipped = true;
    return c;
  }
  Event d;
  d.kind = EventKind::Download;
  d.start_s = dl.start_s;
  d.end_s = dl.completion_s;
  d.from = kServer;
  d.to = k;
  d.round = round;
  d.orbit = plane;
  d.version = version;
  d.bytes = ctx.model_bytes();
  c.events.push_back(d);
  // 2. Train. FedProx: as many whole epochs as fit before the next contact (the next pass after the
  // download's), at least one and at most prox_max_epochs.
  int epochs = 0;
  double train_s = ctx.train_time(k);
  if (fedprox) {
    const auto& ws = ctx.plan().windows(k);
    const auto next = std::find_if(ws.begin(), ws.end(), [&](const orbit::Window& w) {
      return w.start_s > dl.window_end_s;
    });
    if (next == ws.end())
      throw HorizonExceeded("timing: satellite " + std::to_string(k) + " has no contact after the pass ending at t = " +
                            std::to_string(dl.window_end_s) + " s within the horizon");
    const double te = ctx.epoch_time(k);
    const int cap = ctx.config().prox_max_epochs;
    const double fit = te > 0 ? std::floor((next->start_s - dl.completion_s) / te) : static_cast<double>(cap);
    epochs = static_cast<int>(std::clamp(fit, 1.0, static_cast<double>(cap)));
    train_s = te * epochs;
  }
  const double fin = dl.completion_s + train_s;
  if (!ctx.node_alive(k, fin)) {
    c.skipped = true;
    return c;
  }
  Event tr = d;
  tr.kind = EventKind::Train;
  tr.start_s = dl.completion_s;
  tr.end_s = fin;
  tr.from = tr.to = k;
  tr.bytes = 0;
  tr.epochs = epochs;
  c.events.push_back(tr);
  c.trained_s = fin;
  // 3. Upload at the next feasible contact; a missed window retries at the next window.
  double t = fin;
  for (;;) {
    const orbit::Contact up = ctx.contact(k, t, ctx.aggregate_bytes(1));
    if (!ctx.node_alive(k, up.completion_s)) {
      c.lost = true;
      return c;
    }
    Event u = d;
    u.kind = EventKind::Upload;
    u.start_s = up.start_s;
    u.end_s = up.completion_s;
    u.from = k;
    u.to = kServer;
    u.members = {k};
    u.bytes = ctx.aggregate_bytes(1);
    if (miss.misses(k, up.start_s)) {
      u.failed = true;
      c.events.push_back(u);
      t = up.window_end_s;
      continue;
    }
    c.events.push_back(u);
    c.done_s = up.completion_s;
    return c;
  }
}

}  // namespace detail

namespace {

/// Synchronous rounds; deadline_s > 0 drops the satellites whose upload cannot complete by
/// T0 + deadline (the contact plan tells them in advance, so they sit the round out).
Schedule sync_direct(const TimingContext& ctx, int rounds, double deadline_s, const char* name, bool fedprox = false) {
  ZEN_ENFORCE(rounds > 0, std::string(name) + ": rounds must be positive, got " + std::to_string(rounds));
  Schedule s = detail::new_schedule(ctx, name);
  if (fedprox) {
    ZEN_ENFORCE(ctx.config().prox_mu >= 0 && std::isfinite(ctx.config().prox_mu),
                "fedprox: the proximal term mu must be >= 0, got " + std::to_string(ctx.config().prox_mu));
    ZEN_ENFORCE(ctx.config().prox_max_epochs >= 1,
                "fedprox: the epoch cap must be >= 1, got " + std::to_string(ctx.config().prox_max_epochs));
    s.prox_mu = static_cast<float>(ctx.config().prox_mu);
  }
  MissTracker miss(ctx.config().faults);
  double T0 = 0.0;
  for (int r = 1; r <= rounds; ++r) {
    double t_agg = T0;
    std::vector<int> members;
    // The first C idle satellites in contact take part (all with clients_per_round = 0); the
    // others sit the round out without a transfer.
    std::vector<int> alive;
    for (int k = 0; k < ctx.num_satellites(); ++k)
      if (ctx.node_alive(k, T0)) alive.push_back(k);
    const std::vector<int> chosen = ctx.first_in_contact(alive, T0);
    for (int k = 0; k < ctx.num_satellites(); ++k) {
      if (ctx.node_alive(k, T0) && !std::binary_search(chosen.begin(), chosen.end(), k)) continue;
      MissTracker trial = miss;
      detail::DirectCycle c = detail::direct_cycle(ctx, k, T0, r, r - 1, trial, fedprox);
      // A satellite whose upload cannot complete by the deadline knows it from the contact plan and
      // sits the round out (no transfer, no missed window spent).
      const bool late = c.done_s && deadline_s > 0 && *c.done_s > T0 + deadline_s;
      if (late) {
        s.skipped.push_back(k);
        continue;
      }
      miss = std::move(trial);
      for (Event& e : c.events) s.events.push_back(std::move(e));
      if (c.lost) s.lost.push_back(k);
      if (c.skipped) s.skipped.push_back(k);
      if (!c.done_s) continue;
      t_agg = std::max(t_agg, *c.done_s);
      members.push_back(k);
    }
    ZEN_ENFORCE(!members.empty(), std::string(name) + ": round " + std::to_string(r) + " has no satellite that " +
                                      (deadline_s > 0 ? "reports within the deadline of " +
                                                            std::to_string(deadline_s) + " s"
                                                      : std::string("survives")));
    T0 = detail::add_sync_server_update(s, r, t_agg + ctx.config().ps_agg_s, members);
  }
  detail::finalize_schedule(s);
  return s;
}

}  // namespace

Schedule simulate_baseline(const TimingContext& ctx, int rounds) { return sync_direct(ctx, rounds, 0.0, "baseline"); }

Schedule simulate_fedprox(const TimingContext& ctx, int rounds) {
  return sync_direct(ctx, rounds, 0.0, "fedprox", true);
}

Schedule simulate_baseline_deadline(const TimingContext& ctx, int rounds) {
  ZEN_ENFORCE(ctx.config().round_deadline_s > 0, "baseline-deadline: the round deadline must be positive, got " +
                                                     std::to_string(ctx.config().round_deadline_s) + " s");
  return sync_direct(ctx, rounds, ctx.config().round_deadline_s, "baseline-deadline");
}

Schedule simulate_fedasync(const TimingContext& ctx, int rounds) {
  ZEN_ENFORCE(rounds > 0, "fedasync: rounds must be positive, got " + std::to_string(rounds));
  ZEN_ENFORCE(ctx.config().topk == 0, "fedasync: compressed updates (top-k) need a synchronous scheme "
                                      "(baseline, baseline-deadline, ring)");
  const double alpha = ctx.config().fedasync_mixing;
  ZEN_ENFORCE(alpha > 0 && alpha <= 1, "fedasync: the mixing weight must be in (0, 1], got " + std::to_string(alpha));
  Schedule s = detail::new_schedule(ctx, "fedasync");
  MissTracker miss(ctx.config().faults);
  // Every satellite cycles on its own (its timeline does not depend on the others); the server
  // applies each upload when it arrives: w <- (1 - a_t) w + a_t w_k, a_t = alpha (1 + tau)^-a.
  struct Cycle {
    std::size_t first, num;  ///< its events in `events`
    double download_s;       ///< start of its download
    int sat, iteration;
    std::optional<double> done_s;
  };
  std::vector<Event> events;
  std::vector<Cycle> cycles;
  for (int k = 0; k < ctx.num_satellites(); ++k) {
    double t = 0.0;
    for (int it = 1; it <= rounds; ++it) {
      detail::DirectCycle c = detail::direct_cycle(ctx, k, t, it, 0, miss);
      Cycle cy{events.size(), c.events.size(), 0.0, k, it, c.done_s};
      for (Event& e : c.events) {
        if (e.kind == EventKind::Download) cy.download_s = e.start_s;
        events.push_back(std::move(e));
      }
      if (cy.num > 0) cycles.push_back(cy);
      if (c.lost) s.lost.push_back(k);
      if (c.skipped) s.skipped.push_back(k);
      if (!c.done_s) break;  // the satellite is gone
      t = *c.done_s;
    }
  }
  // The server applies the arrivals in time order; a cycle trains from the version current when
  // its download started (updates at or before that instant count).
  std::vector<const Cycle*> arrivals;
  for (const Cycle& c : cycles)
    if (c.done_s) arrivals.push_back(&c);
  std::stable_sort(arrivals.begin(), arrivals.end(), [](const Cycle* a, const Cycle* b) {
    return *a->done_s != *b->done_s ? *a->done_s < *b->done_s : a->sat < b->sat;
  });
  std::vector<double> update_times;
  for (const Cycle* a : arrivals) update_times.push_back(*a->done_s + ctx.config().ps_agg_s);
  auto version_at = [&](double t) {
    return static_cast<int>(std::upper_bound(update_times.begin(), update_times.end(), t) - update_times.begin());
  };
  for (const Cycle& c : cycles)
    for (std::size_t i = c.first; i < c.first + c.num; ++i) {
      events[i].version = version_at(c.download_s);
      s.events.push_back(events[i]);
    }
  for (std::size_t j = 0; j < arrivals.size(); ++j) {
    const Cycle& a = *arrivals[j];
    const int u = static_cast<int>(j) + 1;
    const int b = version_at(a.download_s);
    Event su;
    su.kind = EventKind::ServerUpdate;
    su.start_s = su.end_s = update_times[j];
    su.from = su.to = kServer;
    su.round = a.iteration;
    su.orbit = ctx.scenario().satellites[static_cast<std::size_t>(a.sat)].plane;
    su.version = u;
    su.members = {a.sat};
    su.mix = alpha * std::pow(1.0 + static_cast<double>((u - 1) - b), -ctx.config().staleness_exponent);
    s.events.push_back(su);
    UpdateRecord rec;
    rec.version = u;
    rec.round = a.iteration;
    rec.orbit = su.orbit;
    rec.time_s = update_times[j];
    rec.members = {a.sat};
    rec.staleness = {(u - 1) - b};
    s.updates.push_back(rec);
  }
  ZEN_ENFORCE(!s.updates.empty(), "fedasync: no satellite ever reported");
  detail::finalize_schedule(s);
  return s;
}

}  // namespace zen::fl::sim
