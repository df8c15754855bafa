// FedBuff without ISLs, adapted to contact windows (Nguyen et al., arXiv 2106.06639, space-ified as
// in Kim, Svoboda, Lane, arXiv 2511.14889): satellites cycle download-train-upload; at most C train
// at once and a freed slot goes to the first idle satellite in contact; the server buffers the
// uploaded deltas and applies w <- w + server_lr sum_i s(tau_i) delta_i / K after every K of them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

#include "sim_internal.hpp"

namespace zen::fl::sim {

Schedule simulate_fedbuff(const TimingContext& ctx, int rounds) {
  ZEN_ENFORCE(rounds > 0, "fedbuff: rounds must be positive, got " + std::to_string(rounds));
  ZEN_ENFORCE(ctx.config().topk == 0, "fedbuff: compressed uploads (top-k) need a synchronous scheme "
                                      "(baseline, baseline-deadline, fedprox, ring)");
  ZEN_ENFORCE(ctx.config().buffer_size >= 1,
              "fedbuff: the buffer size must be >= 1, got " + std::to_string(ctx.config().buffer_size));
  ZEN_ENFORCE(ctx.config().server_lr > 0 && std::isfinite(ctx.config().server_lr),
              "fedbuff: the server learning rate must be positive, got " + std::to_string(ctx.config().server_lr));
  Schedule s = detail::new_schedule(ctx, "fedbuff");
  s.server_lr = ctx.config().server_lr;
  MissTracker miss(ctx.config().faults);
  const int K = ctx.num_satellites();
  const int C = ctx.config().clients_per_round > 0 ? std::min(ctx.config().clients_per_round, K) : K;
  // A buffer larger than the number of satellites that may train at once would only make the same
  // satellites report several times per update; FLySTacK clamps it the same way (min(C, K)).
  const int Kb = std::min(ctx.config().buffer_size, C);
  const std::size_t needed = static_cast<std::size_t>(rounds) * static_cast<std::size_t>(Kb);

  struct Cycle {
    std::vector<Event> events;
    double download_s = 0.0;
    double done_s = 0.0;
    int sat = 0, iteration = 0;
  };
  std::vector<Cycle> cycles;  // completed (uploaded) cycles
  std::vector<Cycle> broken;  // cycles of satellites that died on the way (their attempts happened)
  std::vector<double> busy_until(static_cast<std::size_t>(K), 0.0);
  std::vector<int> iteration(static_cast<std::size_t>(K), 0);
  std::vector<char> gone(static_cast<std::size_t>(K), 0);
  // Slots: times at which a training slot frees (C of them free at t = 0).
  std::priority_queue<double, std::vector<double>, std::greater<double>> slots;
  for (int i = 0; i < C; ++i) slots.push(0.0);
  // A slot that finds no satellite to start (all busy or gone) waits for the next completion.
  std::size_t completed = 0;
  int guard = 0;
  while (completed < needed && !slots.empty()) {
    const double t = slots.top();
    slots.pop();
    std::vector<int> idle;
    for (int k = 0; k < K; ++k)
      if (!gone[static_cast<std::size_t>(k)] && busy_until[static_cast<std::size_t>(k)] <= t && ctx.node_alive(k, t))
        idle.push_back(k);
    if (idle.empty()) {
      // Retry when the next busy satellite is done; none busy and none idle: the constellation is gone.
      double next = std::numeric_limits<double>::infinity();
      for (int k = 0; k < K; ++k)
        if (!gone[static_cast<std::size_t>(k)] && busy_until[static_cast<std::size_t>(k)] > t)
          next = std::min(next, busy_until[static_cast<std::size_t>(k)]);
      if (std::isfinite(next)) slots.push(next);
      ZEN_CHECK_CODE(++guard < 1000000, Result::InternalError, "fedbuff: slot scheduling did not progress");
      continue;
    }
    // The first idle satellite in contact takes the slot.
    const auto first = ctx.efc(idle, t, ctx.model_bytes());
    if (!first)
      throw HorizonExceeded("fedbuff: no idle satellite reaches the server after t = " + std::to_string(t) +
                            " s within the horizon");
    const int k = first->sat;
    const int it = ++iteration[static_cast<std::size_t>(k)];
    detail::DirectCycle c = detail::direct_cycle(ctx, k, t, it, 0, miss);
    if (c.lost) s.lost.push_back(k);
    if (c.skipped) s.skipped.push_back(k);
    if (!c.done_s) {  // died: its slot frees at its last attempt
      gone[static_cast<std::size_t>(k)] = 1;
      Cycle b;
      b.sat = k;
      b.download_s = t;
      double free_at = t;
      for (const Event& e : c.events) {
        free_at = std::max(free_at, e.end_s);
        if (e.kind == EventKind::Download) b.download_s = e.start_s;
      }
      b.events = std::move(c.events);
      broken.push_back(std::move(b));
      slots.push(free_at);
      continue;
    }
    Cycle cy;
    cy.sat = k;
    cy.iteration = it;
    cy.done_s = *c.done_s;
    for (const Event& e : c.events)
      if (e.kind == EventKind::Download) cy.download_s = e.start_s;
    cy.events = std::move(c.events);
    // The slot (and the satellite) is free once the server has taken the upload in (its processing
    // time after the arrival), so a satellite that is handed the model again gets any update its
    // own delta completed.
    busy_until[static_cast<std::size_t>(k)] = cy.done_s + ctx.config().ps_agg_s;
    slots.push(cy.done_s + ctx.config().ps_agg_s);
    cycles.push_back(std::move(cy));
    ++completed;
  }
  ZEN_ENFORCE(completed >= needed, "fedbuff: the satellites delivered " + std::to_string(completed) + " of the " +
                                       std::to_string(needed) + " updates " + std::to_string(rounds) +
                                       " global updates need");
  // Arrivals in time order; the first `needed` make `rounds` updates of Kb deltas each. Cycles that
  // would arrive after the last update are not part of the run (their events are dropped).
  std::vector<const Cycle*> arrivals;
  for (const Cycle& c : cycles) arrivals.push_back(&c);
  std::stable_sort(arrivals.begin(), arrivals.end(), [](const Cycle* a, const Cycle* b) {
    return a->done_s != b->done_s ? a->done_s < b->done_s : a->sat < b->sat;
  });
  arrivals.resize(needed);
  std::vector<double> update_times;
  for (int u = 1; u <= rounds; ++u)
    update_times.push_back(arrivals[static_cast<std::size_t>(u) * static_cast<std::size_t>(Kb) - 1]->done_s +
                           ctx.config().ps_agg_s);
  // A cycle trains from the version current when its download started.
  auto version_at = [&](double t) {
    return static_cast<int>(std::upper_bound(update_times.begin(), update_times.end(), t) - update_times.begin());
  };
  for (const Cycle* c : arrivals)
    for (Event e : c->events) {
      e.version = version_at(c->download_s);
      s.events.push_back(std::move(e));
    }
  for (const Cycle& c : broken)
    if (c.download_s <= update_times.back())
      for (Event e : c.events) {
        e.version = version_at(c.download_s);
        s.events.push_back(std::move(e));
      }
  const double a = ctx.config().staleness_exponent;
  for (int u = 1; u <= rounds; ++u) {
    Event su;
    su.kind = EventKind::ServerUpdate;
    su.start_s = su.end_s = update_times[static_cast<std::size_t>(u - 1)];
    su.from = su.to = kServer;
    su.version = u;
    UpdateRecord rec;
    rec.version = u;
    rec.time_s = su.start_s;
    for (int i = 0; i < Kb; ++i) {
      const Cycle& c = *arrivals[static_cast<std::size_t>((u - 1) * Kb + i)];
      const int tau = (u - 1) - version_at(c.download_s);
      su.orbit_weights.push_back({c.sat, std::pow(1.0 + tau, -a)});
      rec.members.push_back(c.sat);
      rec.staleness.push_back(tau);
      su.round = rec.round = std::max(rec.round, c.iteration);
    }
    std::sort(rec.members.begin(), rec.members.end());
    su.members = rec.members;
    s.events.push_back(std::move(su));
    s.updates.push_back(std::move(rec));
  }
  detail::finalize_schedule(s);
  return s;
}

}  // namespace zen::fl::sim
