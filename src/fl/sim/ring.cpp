// Ring: intra-orbit scatter and two-chain partial aggregation, synchronous over the orbits
// (orbit-fl.md §6). The server aggregates when every orbit has reported.
#include <algorithm>

#include "sim_internal.hpp"

namespace zen::fl::sim {

Schedule simulate_ring(const TimingContext& ctx, int rounds) {
  ZEN_ENFORCE(rounds > 0, "ring: rounds must be positive, got " + std::to_string(rounds));
  Schedule s = detail::new_schedule(ctx, "ring");
  MissTracker miss(ctx.config().faults);
  double T0 = 0.0;
  for (int r = 1; r <= rounds; ++r) {
    double t_agg = T0;
    std::vector<int> members;
    for (int p = 0; p < ctx.num_planes(); ++p) {
      detail::OrbitRound o = detail::ring_orbit_round(ctx, p, T0, r, r - 1, miss);
      for (auto& e : o.events) s.events.push_back(std::move(e));
      t_agg = std::max(t_agg, o.report_s);
      const std::size_t before = members.size();
      members = detail::sorted_union(members, o.members);
      ZEN_CHECK_CODE(members.size() == before + o.members.size(), Result::InternalError,
                     "ring: plane " + std::to_string(p) + " reported a client of another plane");
      s.lost.insert(s.lost.end(), o.lost.begin(), o.lost.end());
      s.skipped.insert(s.skipped.end(), o.skipped.begin(), o.skipped.end());
    }
    ZEN_ENFORCE(!members.empty(), "ring: round " + std::to_string(r) + " has no surviving satellite");
    T0 = detail::add_sync_server_update(s, r, t_agg + ctx.config().ps_agg_s, members);
  }
  detail::finalize_schedule(s);
  return s;
}

}  // namespace zen::fl::sim
