// Asynchronous ring (journal variant): each orbit loops on its own; the server keeps every orbit's
// latest pair (sum D_k w_k, sum D_k) and recomputes the staleness-weighted mean on every arrival:
//   w = sum_p s_p A_p / sum_p s_p W_p,  s_p = (1 + tau_p)^-a,  tau_p = (u - 1) - b_p,
// where u is the new version and b_p the version orbit p's pair was trained from.
#include <algorithm>
#include <cmath>
#include <map>
#include <queue>

#include "sim_internal.hpp"

namespace zen::fl::sim {

Schedule simulate_ring_async(const TimingContext& ctx, int rounds) {
  ZEN_ENFORCE(rounds > 0, "ring-async: rounds must be positive, got " + std::to_string(rounds));
  ZEN_ENFORCE(ctx.config().topk == 0, "ring-async: compressed updates (top-k) need a synchronous scheme "
                                      "(baseline, baseline-deadline, ring)");
  Schedule s = detail::new_schedule(ctx, "ring-async");
  MissTracker miss(ctx.config().faults);
  const int P = ctx.num_planes();
  const int total = rounds * P;
  const double agg = ctx.config().ps_agg_s;
  // Pending iteration of each orbit, ordered by its report time (ties: plane).
  std::vector<detail::OrbitRound> pending(static_cast<std::size_t>(P));
  std::vector<int> iter(static_cast<std::size_t>(P), 1);
  using Key = std::pair<double, int>;
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> heap;
  auto launch = [&](int p, double T0) {
    detail::OrbitRound o = detail::ring_orbit_round(ctx, p, T0, iter[static_cast<std::size_t>(p)], 0, miss);
    if (o.uploads.empty()) return;  // the orbit is gone
    heap.push({o.report_s, p});
    pending[static_cast<std::size_t>(p)] = std::move(o);
  };
  for (int p = 0; p < P; ++p) launch(p, 0.0);
  std::vector<double> update_times;
  std::vector<int> base(static_cast<std::size_t>(P), -1);  // base version of each orbit's latest pair
  while (static_cast<int>(s.updates.size()) < total && !heap.empty()) {
    const auto [t_rep, p] = heap.top();
    heap.pop();
    detail::OrbitRound o = std::move(pending[static_cast<std::size_t>(p)]);
    const double t_upd = t_rep + agg;
    // The iteration trained from the version current when its download started.
    double t_dl = t_rep;
    for (const Event& e : o.events)
      if (e.kind == EventKind::Download) t_dl = std::min(t_dl, e.start_s);
    const int b = static_cast<int>(std::upper_bound(update_times.begin(), update_times.end(), t_dl) -
                                   update_times.begin());
    for (Event& e : o.events) {
      e.version = b;
      s.events.push_back(std::move(e));
    }
    const int u = static_cast<int>(s.updates.size()) + 1;
    base[static_cast<std::size_t>(p)] = b;
    Event su;
    su.kind = EventKind::ServerUpdate;
    su.start_s = su.end_s = t_upd;
    su.from = su.to = kServer;
    su.round = iter[static_cast<std::size_t>(p)];
    su.orbit = p;
    su.version = u;
    su.members = o.members;
    for (int q = 0; q < P; ++q) {
      const int bq = base[static_cast<std::size_t>(q)];
      if (bq < 0) continue;
      const double tau = static_cast<double>((u - 1) - bq);
      su.orbit_weights.push_back({q, std::pow(1.0 + tau, -ctx.config().staleness_exponent)});
    }
    s.events.push_back(su);
    UpdateRecord rec;
    rec.version = u;
    rec.round = iter[static_cast<std::size_t>(p)];
    rec.orbit = p;
    rec.time_s = t_upd;
    rec.members = o.members;
    rec.staleness = {(u - 1) - b};
    s.updates.push_back(rec);
    update_times.push_back(t_upd);
    s.lost.insert(s.lost.end(), o.lost.begin(), o.lost.end());
    s.skipped.insert(s.skipped.end(), o.skipped.begin(), o.skipped.end());
    ++iter[static_cast<std::size_t>(p)];
    if (static_cast<int>(s.updates.size()) < total) launch(p, t_upd);
  }
  detail::finalize_schedule(s);
  return s;
}

}  // namespace zen::fl::sim
