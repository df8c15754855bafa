// Baseline: synchronous FedAvg without inter-satellite links (orbit-fl.md §5).
#include <algorithm>

#include "sim_internal.hpp"

namespace zen::fl::sim {

Schedule simulate_baseline(const TimingContext& ctx, int rounds) {
  ZEN_ENFORCE(rounds > 0, "baseline: rounds must be positive, got " + std::to_string(rounds));
  Schedule s;
  s.scheme = "baseline";
  s.num_satellites = ctx.num_satellites();
  s.num_planes = ctx.num_planes();
  s.model_params = ctx.config().model_params;
  MissTracker miss(ctx.config().faults);
  const double agg = ctx.config().ps_agg_s;
  double T0 = 0.0;
  for (int r = 1; r <= rounds; ++r) {
    double t_agg = T0;
    std::vector<int> members;
    for (int k = 0; k < ctx.num_satellites(); ++k) {
      const int plane = ctx.scenario().satellites[static_cast<std::size_t>(k)].plane;
      if (!ctx.node_alive(k, T0)) {
        s.skipped.push_back(k);
        continue;
      }
      // 1. Download at the first feasible contact after T0.
      const orbit::Contact dl = ctx.contact(k, T0, ctx.model_bytes());
      if (!ctx.node_alive(k, dl.completion_s)) {
        s.skipped.push_back(k);
        continue;
      }
      Event d;
      d.kind = EventKind::Download;
      d.start_s = dl.start_s;
      d.end_s = dl.completion_s;
      d.from = kServer;
      d.to = k;
      d.round = r;
      d.orbit = plane;
      d.version = r - 1;
      d.bytes = ctx.model_bytes();
      s.events.push_back(d);
      // 2. Train.
      const double fin = dl.completion_s + ctx.train_time(k);
      if (!ctx.node_alive(k, fin)) {
        s.skipped.push_back(k);
        continue;
      }
      Event tr = d;
      tr.kind = EventKind::Train;
      tr.start_s = dl.completion_s;
      tr.end_s = fin;
      tr.from = tr.to = k;
      tr.bytes = 0;
      s.events.push_back(tr);
      // 3. Upload at the next feasible contact; a missed window retries at the next window.
      double t = fin;
      for (;;) {
        const orbit::Contact up = ctx.contact(k, t, ctx.aggregate_bytes(1));
        if (!ctx.node_alive(k, up.completion_s)) {
          s.lost.push_back(k);
          break;
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
          s.events.push_back(u);
          t = up.window_end_s;
          continue;
        }
        s.events.push_back(u);
        t_agg = std::max(t_agg, up.completion_s);
        members.push_back(k);
        break;
      }
    }
    ZEN_ENFORCE(!members.empty(), "baseline: round " + std::to_string(r) + " has no surviving satellite");
    T0 = detail::add_sync_server_update(s, r, t_agg + agg, members);
  }
  detail::finalize_schedule(s);
  return s;
}

}  // namespace zen::fl::sim
