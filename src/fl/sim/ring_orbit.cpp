// One orbit's ring round: source, two-way scatter, local training, two-chain partial aggregation
// toward the sink predicted to reach the server first, upload; with failure re-routing.
#include <algorithm>
#include <cmath>
#include <limits>

#include "sim_internal.hpp"

namespace zen::fl::sim::detail {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

/// Failure view: the planner only knows failures that happened by known_s; execution sees all.
struct View {
  const TimingContext* ctx;
  double known_s;
  bool alive(int sat, double t) const { return ctx->node_alive_known(sat, t, known_s); }
  bool link(int a, int b, double t) const { return ctx->link_alive_known(a, b, t, known_s); }
  /// A transfer a -> b arriving at t succeeds iff both ends and the link are up then.
  bool hop(int a, int b, double t) const { return alive(a, t) && alive(b, t) && link(a, b, t); }
};

/// A connected piece of the ring at T0: satellite ids in ring order; cyclic = the whole ring.
struct Component {
  std::vector<int> sats;
  bool cyclic = false;
  int size() const { return static_cast<int>(sats.size()); }
  /// Neighbour of index i in direction dir (+1/-1); -1 past a path's end.
  int step(int i, int dir) const {
    const int n = size();
    const int j = i + dir;
    if (cyclic) return ((j % n) + n) % n;
    return (j < 0 || j >= n) ? -1 : j;
  }
};

std::vector<Component> components(const TimingContext& ctx, const std::vector<int>& ring, double T0) {
  const int S = static_cast<int>(ring.size());
  auto alive = [&](int i) { return ctx.node_alive(ring[static_cast<std::size_t>(i)], T0); };
  // edge i joins ring[i] and ring[i+1 mod S]
  auto edge = [&](int i) {
    const int j = (i + 1) % S;
    return alive(i) && alive(j) && ctx.link_alive(ring[static_cast<std::size_t>(i)], ring[static_cast<std::size_t>(j)], T0);
  };
  int broken = -1;
  for (int i = 0; i < S; ++i)
    if (!edge(i)) { broken = i; break; }
  std::vector<Component> out;
  if (S == 1) {
    if (alive(0)) out.push_back({{ring[0]}, true});
    return out;
  }
  if (broken < 0) {
    out.push_back({ring, true});
    return out;
  }
  Component cur;
  for (int s = 1; s <= S; ++s) {
    const int i = (broken + s) % S;
    if (alive(i)) cur.sats.push_back(ring[static_cast<std::size_t>(i)]);
    if (!edge(i) && !cur.sats.empty()) {
      out.push_back(cur);
      cur = Component{};
    }
  }
  if (!cur.sats.empty()) out.push_back(cur);
  return out;
}

Event make_event(EventKind kind, double start, double end, int from, int to, int round, int orbit, int version,
                 uint64_t bytes = 0) {
  Event e;
  e.bytes = bytes;
  e.kind = kind;
  e.start_s = start;
  e.end_s = end;
  e.from = from;
  e.to = to;
  e.round = round;
  e.orbit = orbit;
  e.version = version;
  return e;
}

/// Result of routing the partial aggregates of one component to the server.
struct AggResult {
  std::vector<Event> events;
  std::vector<OrbitRound::Delivered> uploads;
  std::vector<int> lost;
  double cost = 0.0;   ///< latest delivered completion (inf if an upload cannot happen)
  double remaining = 0.0;  ///< remaining window of the main sink upload (tie-break)
  bool feasible = true;
};

class Aggregator {
 public:
  Aggregator(const TimingContext& ctx, const Component& comp, const std::vector<double>& fin,
             const std::vector<char>& part, int round, int plane, int version)
      : ctx_(ctx), comp_(comp), fin_(fin), part_(part), round_(round), plane_(plane), version_(version) {}

  /// Routes everything to sink index qi. miss == nullptr: planning (no missed uploads).
  AggResult run(int qi, const View& view, MissTracker* miss) const {
    AggResult r;
    const int n = comp_.size();
    std::vector<std::pair<double, std::vector<int>>> at_q;  // arrivals at the sink
    std::vector<std::pair<int, std::pair<double, std::vector<int>>>> extras;  // (holder idx, (t, members))
    // Chains: far end first; `dir` is the direction of flow toward q.
    std::vector<std::pair<std::vector<int>, int>> chains;
    if (comp_.cyclic) {
      const int m = n / 2;
      std::vector<int> a, b;
      for (int k = m; k >= 1; --k) a.push_back((qi + k) % n);
      for (int k = n - 1 - m; k >= 1; --k) b.push_back(((qi - k) % n + n) % n);
      chains.push_back({a, -1});
      chains.push_back({b, +1});
    } else {
      std::vector<int> a, b;
      for (int i = 0; i < qi; ++i) a.push_back(i);
      for (int i = n - 1; i > qi; --i) b.push_back(i);
      chains.push_back({a, +1});
      chains.push_back({b, -1});
    }
    for (const auto& [chain, dir] : chains) {
      std::vector<int> carry;
      double t_in = -kInf;
      for (int idx : chain) {
        const int sat = comp_.sats[static_cast<std::size_t>(idx)];
        const bool own = part_[static_cast<std::size_t>(idx)] != 0;
        if (!own && carry.empty()) continue;
        double a;
        if (own && !carry.empty()) a = std::max(fin_[static_cast<std::size_t>(idx)], t_in) + ctx_.config().isl_agg_s;
        else if (own) a = fin_[static_cast<std::size_t>(idx)];
        else a = t_in;
        std::vector<int> payload = carry;
        if (own) payload = sorted_union(payload, {sat});
        carry.clear();
        t_in = -kInf;
        const int nidx = comp_.step(idx, dir);
        const int next = comp_.sats[static_cast<std::size_t>(nidx)];
        const uint64_t bytes = ctx_.aggregate_bytes(payload.size());
        const double arr = a + ctx_.isl_time(sat, next, a, bytes);
        if (!view.alive(sat, a)) {  // died holding the payload
          r.lost.insert(r.lost.end(), payload.begin(), payload.end());
          continue;
        }
        if (view.hop(sat, next, arr)) {
          Event e = make_event(EventKind::IslAggregate, a, arr, sat, next, round_, plane_, version_, bytes);
          e.members = payload;
          r.events.push_back(std::move(e));
          if (nidx == qi) {
            at_q.push_back({arr, payload});
          } else {
            carry = std::move(payload);
            t_in = arr;
          }
        } else {
          Event e = make_event(EventKind::IslAggregate, a, arr, sat, next, round_, plane_, version_, bytes);
          e.members = payload;
          e.failed = true;
          r.events.push_back(std::move(e));
          detour(idx, -dir, arr, std::move(payload), qi, view, r, at_q, extras);
        }
      }
    }
    // The sink.
    const int qsat = comp_.sats[static_cast<std::size_t>(qi)];
    std::vector<int> members;
    double ready = -kInf;
    if (part_[static_cast<std::size_t>(qi)]) {
      members.push_back(qsat);
      ready = fin_[static_cast<std::size_t>(qi)];
    }
    for (const auto& [t, m] : at_q) {
      members = sorted_union(members, m);
      ready = std::max(ready, t);
    }
    bool first = true;
    if (!members.empty()) {
      upload(qi, std::move(members), ready + ctx_.config().sink_choice_s, view, miss, r, first);
    }
    for (auto& [h, tm] : extras) upload(h, std::move(tm.second), tm.first + ctx_.config().sink_choice_s, view, miss, r, first);
    r.cost = -kInf;
    for (const auto& u : r.uploads) r.cost = std::max(r.cost, u.completion_s);
    if (!r.feasible) r.cost = kInf;
    return r;
  }

 private:
  /// A blocked payload goes the other way around the ring toward the sink, relayed hop by hop;
  /// when that is blocked too (or the component is a path) its holder uploads it itself.
  void detour(int idx, int dir, double t, std::vector<int> payload, int qi, const View& view, AggResult& r,
              std::vector<std::pair<double, std::vector<int>>>& at_q,
              std::vector<std::pair<int, std::pair<double, std::vector<int>>>>& extras) const {
    int cur = idx;
    for (int hops = 0; comp_.cyclic && hops < comp_.size(); ++hops) {
      const int nidx = comp_.step(cur, dir);
      const int a = comp_.sats[static_cast<std::size_t>(cur)];
      const int b = comp_.sats[static_cast<std::size_t>(nidx)];
      const uint64_t bytes = ctx_.aggregate_bytes(payload.size());
      const double arr = t + ctx_.isl_time(a, b, t, bytes);
      Event e = make_event(EventKind::IslAggregate, t, arr, a, b, round_, plane_, version_, bytes);
      e.members = payload;
      if (!view.hop(a, b, arr)) {
        e.failed = true;
        r.events.push_back(std::move(e));
        t = arr;
        break;
      }
      r.events.push_back(std::move(e));
      t = arr;
      cur = nidx;
      if (cur == qi) {
        at_q.push_back({t, std::move(payload)});
        return;
      }
    }
    const int holder = comp_.sats[static_cast<std::size_t>(cur)];
    if (!view.alive(holder, t)) {
      r.lost.insert(r.lost.end(), payload.begin(), payload.end());
      return;
    }
    extras.push_back({cur, {t, std::move(payload)}});
  }

  /// Upload from index hi at or after t; a missed window re-routes to the next visible sink:
  /// the holder's next window or a ring neighbour's first window, whichever completes first.
  void upload(int hi, std::vector<int> members, double t, const View& view, MissTracker* miss, AggResult& r,
              bool& first) const {
    const uint64_t bytes = ctx_.aggregate_bytes(members.size());
    for (int attempt = 0; attempt < 4 * comp_.size() + 8; ++attempt) {
      const int holder = comp_.sats[static_cast<std::size_t>(hi)];
      const auto c = ctx_.try_contact(holder, t, bytes);
      if (!c) {
        if (miss) throw HorizonExceeded("timing: satellite " + std::to_string(holder) +
                                        " has no server window after t = " + std::to_string(t) + " s");
        r.feasible = false;
        return;
      }
      if (!view.alive(holder, c->completion_s)) {
        r.lost.insert(r.lost.end(), members.begin(), members.end());
        return;
      }
      Event e = make_event(EventKind::Upload, c->start_s, c->completion_s, holder, kServer, round_, plane_, version_,
                           bytes);
      e.members = members;
      if (miss && miss->misses(holder, c->start_s)) {
        e.failed = true;
        r.events.push_back(std::move(e));
        const double tf = c->completion_s;
        // Options: own next window, or forward to a ring neighbour (either direction).
        double best = kInf;
        int best_idx = -1;
        double best_t = 0.0;
        if (auto own = ctx_.try_contact(holder, c->window_end_s, bytes)) {
          best = own->completion_s;
          best_idx = hi;
          best_t = c->window_end_s;
        }
        for (int dir : {+1, -1}) {
          const int nidx = comp_.step(hi, dir);
          if (nidx < 0 || nidx == hi) continue;
          const int nb = comp_.sats[static_cast<std::size_t>(nidx)];
          const double arr = tf + ctx_.isl_time(holder, nb, tf, bytes);
          if (!view.hop(holder, nb, arr)) continue;
          const double tt = arr + ctx_.config().sink_choice_s;
          if (auto cn = ctx_.try_contact(nb, tt, bytes); cn && cn->completion_s < best) {
            best = cn->completion_s;
            best_idx = nidx;
            best_t = tt;
          }
        }
        if (best_idx < 0) throw HorizonExceeded("timing: no server window to re-route the upload of satellite " +
                                                std::to_string(holder) + " after t = " + std::to_string(tf) + " s");
        if (best_idx != hi) {
          const int nb = comp_.sats[static_cast<std::size_t>(best_idx)];
          Event f = make_event(EventKind::IslAggregate, tf, tf + ctx_.isl_time(holder, nb, tf, bytes), holder, nb,
                               round_, plane_, version_, bytes);
          f.members = members;
          r.events.push_back(std::move(f));
        }
        hi = best_idx;
        t = best_t;
        continue;
      }
      r.events.push_back(std::move(e));
      if (first) {
        r.remaining = c->remaining_s();
        first = false;
      }
      r.uploads.push_back({holder, std::move(members), c->completion_s});
      return;
    }
    ZEN_THROW(Result::InternalError, "timing: upload re-routing did not terminate");
  }

  const TimingContext& ctx_;
  const Component& comp_;
  const std::vector<double>& fin_;
  const std::vector<char>& part_;
  int round_, plane_, version_;
};

}  // namespace

std::vector<int> sorted_union(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

OrbitRound ring_orbit_round(const TimingContext& ctx, int plane, double T0, int round, int version,
                            MissTracker& miss) {
  ctx.check_ring(plane);
  OrbitRound out;
  out.report_s = T0;
  const std::vector<int>& ring = ctx.ring(plane);
  const View actual{&ctx, kInf};
  const View planned{&ctx, T0};
  for (int s : ring)
    if (!ctx.node_alive(s, T0)) out.skipped.push_back(s);
  for (const Component& comp : components(ctx, ring, T0)) {
    const int n = comp.size();
    // 1. Source: EFC over the component.
    const uint64_t model_bytes = ctx.model_bytes();
    const auto src = ctx.efc(comp.sats, T0, model_bytes);
    if (!src)
      throw HorizonExceeded("timing: no satellite of plane " + std::to_string(plane) +
                            " reaches the server after t = " + std::to_string(T0) + " s within the horizon");
    const int si = static_cast<int>(std::find(comp.sats.begin(), comp.sats.end(), src->sat) - comp.sats.begin());
    if (!ctx.node_alive(src->sat, src->completion_s)) {
      out.skipped.insert(out.skipped.end(), comp.sats.begin(), comp.sats.end());
      continue;
    }
    out.events.push_back(
        make_event(EventKind::Download, src->start_s, src->completion_s, kServer, src->sat, round, plane, version,
                   model_bytes));
    // 2. Two-way scatter (earliest arrival over the live ring).
    std::vector<double> recv(static_cast<std::size_t>(n), kInf);
    std::vector<int> parent(static_cast<std::size_t>(n), -1);
    std::vector<char> done(static_cast<std::size_t>(n), 0);
    recv[static_cast<std::size_t>(si)] = src->completion_s;
    for (int it = 0; it < n; ++it) {
      int u = -1;
      for (int i = 0; i < n; ++i)
        if (!done[static_cast<std::size_t>(i)] && std::isfinite(recv[static_cast<std::size_t>(i)]) &&
            (u < 0 || recv[static_cast<std::size_t>(i)] < recv[static_cast<std::size_t>(u)]))
          u = i;
      if (u < 0) break;
      done[static_cast<std::size_t>(u)] = 1;
      for (int dir : {+1, -1}) {
        const int v = comp.step(u, dir);
        if (v < 0 || v == u || done[static_cast<std::size_t>(v)]) continue;
        const double ru = recv[static_cast<std::size_t>(u)];
        const double arr =
            ru + ctx.isl_time(comp.sats[static_cast<std::size_t>(u)], comp.sats[static_cast<std::size_t>(v)], ru, model_bytes);
        if (arr < recv[static_cast<std::size_t>(v)] &&
            actual.hop(comp.sats[static_cast<std::size_t>(u)], comp.sats[static_cast<std::size_t>(v)], arr)) {
          recv[static_cast<std::size_t>(v)] = arr;
          parent[static_cast<std::size_t>(v)] = u;
        }
      }
    }
    // 3. Local training.
    std::vector<double> fin(static_cast<std::size_t>(n), kInf);
    std::vector<char> part(static_cast<std::size_t>(n), 0);
    for (int i = 0; i < n; ++i) {
      const int sat = comp.sats[static_cast<std::size_t>(i)];
      const double r = recv[static_cast<std::size_t>(i)];
      if (!std::isfinite(r)) {
        out.skipped.push_back(sat);
        continue;
      }
      if (parent[static_cast<std::size_t>(i)] >= 0)  // start = the parent's own arrival (exact, no r - t_isl)
        out.events.push_back(make_event(EventKind::IslModel, recv[static_cast<std::size_t>(parent[static_cast<std::size_t>(i)])], r,
                                        comp.sats[static_cast<std::size_t>(parent[static_cast<std::size_t>(i)])], sat,
                                        round, plane, version, model_bytes));
      const double f = r + ctx.train_time(sat);
      if (!ctx.node_alive(sat, f)) {
        out.skipped.push_back(sat);
        continue;
      }
      fin[static_cast<std::size_t>(i)] = f;
      part[static_cast<std::size_t>(i)] = 1;
      Event tr = make_event(EventKind::Train, r, f, sat, sat, round, plane, version);
      out.events.push_back(std::move(tr));
    }
    if (std::none_of(part.begin(), part.end(), [](char c) { return c != 0; })) continue;
    // 4./5. Sink: the candidate whose aggregate reaches the server earliest (planner's view at T0).
    const Aggregator agg(ctx, comp, fin, part, round, plane, version);
    int best = -1;
    AggResult best_r;
    for (int q = 0; q < n; ++q) {
      if (!planned.alive(comp.sats[static_cast<std::size_t>(q)], T0)) continue;
      AggResult r = agg.run(q, planned, nullptr);
      if (!r.feasible) continue;
      if (best < 0 || r.cost < best_r.cost ||
          (r.cost == best_r.cost && r.remaining > best_r.remaining)) {
        best = q;
        best_r = std::move(r);
      }
    }
    if (best < 0)
      throw HorizonExceeded("timing: no sink of plane " + std::to_string(plane) + " reaches the server after t = " +
                            std::to_string(T0) + " s within the horizon");
    // 6. Execute with the real failures and missed windows.
    AggResult r = agg.run(best, actual, &miss);
    for (auto& e : r.events) out.events.push_back(std::move(e));
    out.lost.insert(out.lost.end(), r.lost.begin(), r.lost.end());
    for (auto& u : r.uploads) {
      out.report_s = std::max(out.report_s, u.completion_s);
      out.members = sorted_union(out.members, u.members);
      out.uploads.push_back(std::move(u));
    }
  }
  std::sort(out.skipped.begin(), out.skipped.end());
  out.skipped.erase(std::unique(out.skipped.begin(), out.skipped.end()), out.skipped.end());
  return out;
}

double add_sync_server_update(Schedule& s, int r, double t, const std::vector<int>& members) {
  Event su;
  su.kind = EventKind::ServerUpdate;
  su.start_s = su.end_s = t;
  su.from = su.to = kServer;
  su.round = r;
  su.version = r;
  su.members = members;
  s.events.push_back(su);
  UpdateRecord rec;
  rec.version = r;
  rec.round = r;
  rec.time_s = t;
  rec.members = members;
  s.updates.push_back(rec);
  return t;
}

Schedule new_schedule(const TimingContext& ctx, const char* name) {
  Schedule s;
  s.scheme = name;
  s.num_satellites = ctx.num_satellites();
  s.num_planes = ctx.num_planes();
  s.model_params = ctx.config().model_params;
  s.topk = ctx.config().topk;
  s.download_topk = ctx.config().download_topk;
  return s;
}

void finalize_schedule(Schedule& s) {
  std::stable_sort(s.events.begin(), s.events.end(),
                   [](const Event& a, const Event& b) { return a.start_s < b.start_s; });
  for (std::size_t i = 0; i < s.events.size(); ++i) s.events[i].id = static_cast<int>(i);
  std::vector<double> times;
  for (const auto& u : s.updates) times.push_back(u.time_s);
  for (const Event& e : s.events) {
    if (!e.is_transfer()) continue;
    const auto it = std::lower_bound(times.begin(), times.end(), e.end_s);
    if (it == times.end()) continue;
    UpdateRecord& u = s.updates[static_cast<std::size_t>(it - times.begin())];
    if (e.failed) {
      if (e.touches_server()) ++u.ps_failed;
      continue;
    }
    const double bits = 8.0 * static_cast<double>(e.bytes);
    if (e.touches_server()) {
      ++u.ps_transfers;
      u.ps_bits += bits;
    } else {
      ++u.isl_transfers;
      u.isl_bits += bits;
    }
  }
}

}  // namespace zen::fl::sim::detail
