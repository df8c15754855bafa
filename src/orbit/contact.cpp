#include "zen/orbit/contact.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <thread>

#include "zen/error.hpp"

namespace zen::orbit {

namespace {

// Largest distance over [a, b]: endpoints plus interior samples, refined by golden section
// around the best interior sample.
double window_max_distance(const Geometry& geo, int sat, int peer, double a, double b) {
  const int kSamples = 16;
  double best_t = a, best_d = geo.distance(sat, peer, a);
  const double de = geo.distance(sat, peer, b);
  if (de > best_d) best_d = de, best_t = b;
  const double h = (b - a) / kSamples;
  int best_k = -1;
  for (int k = 1; k < kSamples; ++k) {
    const double d = geo.distance(sat, peer, a + k * h);
    if (d > best_d) best_d = d, best_k = k;
  }
  if (best_k < 0 || h <= 0.0) return best_d;
  double lo = a + (best_k - 1) * h, hi = a + (best_k + 1) * h;
  const double g = 0.5 * (std::sqrt(5.0) - 1.0);
  double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
  double f1 = geo.distance(sat, peer, x1), f2 = geo.distance(sat, peer, x2);
  for (int it = 0; it < 40 && hi - lo > 1e-3; ++it) {
    if (f1 > f2) {
      hi = x2, x2 = x1, f2 = f1, x1 = hi - g * (hi - lo), f1 = geo.distance(sat, peer, x1);
    } else {
      lo = x1, x1 = x2, f1 = f2, x2 = lo + g * (hi - lo), f2 = geo.distance(sat, peer, x2);
    }
  }
  (void)best_t;
  return std::max({best_d, f1, f2});
}

}  // namespace

std::vector<Window> predict_pair_windows(const Geometry& geo, int sat, int peer, const PredictOptions& opt) {
  ZEN_ENFORCE(opt.horizon_s > 0.0, "horizon must be positive, got " + std::to_string(opt.horizon_s) + " s");
  ZEN_ENFORCE(opt.tolerance_s > 0.0 && opt.tolerance_s <= opt.min_step_s,
              "tolerance " + std::to_string(opt.tolerance_s) + " s must be in (0, min_step_s = " +
                  std::to_string(opt.min_step_s) + "]");
  ZEN_ENFORCE(opt.min_step_s > 0.0 && opt.max_step_s >= opt.min_step_s,
              "step bounds [" + std::to_string(opt.min_step_s) + ", " + std::to_string(opt.max_step_s) + "] invalid");
  const double H = opt.horizon_s;
  // The margin g(t) changes no faster than L, so g cannot change sign within |g| / L.
  const double L = geo.margin_rate_bound(sat, peer) * (1.0 + 1e-9);
  std::vector<Window> out;
  double t = 0.0;
  double g = geo.margin(sat, peer, t);
  bool inside = g >= 0.0;
  double start = 0.0;
  bool open_start = inside;
  while (t < H) {
    double step = L > 0.0 ? std::abs(g) / L : opt.max_step_s;
    step = std::clamp(step, opt.min_step_s, opt.max_step_s);
    const double tn = std::min(t + step, H);
    const double gn = geo.margin(sat, peer, tn);
    const bool in_n = gn >= 0.0;
    if (in_n != inside) {
      // Bisect: lo has state `inside`, hi has state in_n.
      double lo = t, hi = tn;
      while (hi - lo > opt.tolerance_s) {
        const double mid = 0.5 * (lo + hi);
        if ((geo.margin(sat, peer, mid) >= 0.0) == inside) lo = mid;
        else hi = mid;
      }
      // Report the visible side of the bracket: windows are conservative (visible throughout)
      // and within tolerance_s of the true edge.
      if (!inside) {
        start = hi;
        open_start = false;
      } else {
        Window w;
        w.sat = sat;
        w.peer = peer;
        w.start_s = start;
        w.end_s = lo;
        w.open_at_start = open_start;
        out.push_back(w);
      }
      inside = in_n;
    }
    t = tn;
    g = gn;
  }
  if (inside) {
    Window w;
    w.sat = sat;
    w.peer = peer;
    w.start_s = start;
    w.end_s = H;
    w.open_at_start = open_start;
    w.open_at_end = true;
    out.push_back(w);
  }
  for (Window& w : out) w.max_dist_m = window_max_distance(geo, sat, peer, w.start_s, w.end_s);
  return out;
}

ContactPlan::ContactPlan(std::vector<std::vector<Window>> windows, double horizon_s)
    : windows_(std::move(windows)), horizon_s_(horizon_s) {
  ZEN_ENFORCE(horizon_s >= 0.0, "horizon must be >= 0, got " + std::to_string(horizon_s));
  prefix_max_end_.resize(windows_.size());
  for (std::size_t k = 0; k < windows_.size(); ++k) {
    auto& ws = windows_[k];
    for (const Window& w : ws)
      ZEN_ENFORCE(w.sat == static_cast<int>(k) && w.end_s >= w.start_s,
                  "window of sat " + std::to_string(w.sat) + " [" + std::to_string(w.start_s) + ", " +
                      std::to_string(w.end_s) + "] filed under satellite " + std::to_string(k));
    std::sort(ws.begin(), ws.end(), [](const Window& a, const Window& b) {
      return a.start_s != b.start_s ? a.start_s < b.start_s : a.peer < b.peer;
    });
    auto& pm = prefix_max_end_[k];
    pm.resize(ws.size());
    double m = -1e300;
    for (std::size_t i = 0; i < ws.size(); ++i) pm[i] = m = std::max(m, ws[i].end_s);
  }
}

ContactPlan ContactPlan::predict(const Scenario& sc, const PredictOptions& opt) {
  const Geometry geo(sc);
  return predict(geo, opt);
}

ContactPlan ContactPlan::predict(const Geometry& geo, const PredictOptions& opt) {
  const int n = geo.num_satellites();
  std::vector<std::vector<Window>> per_sat(static_cast<std::size_t>(n));
  unsigned threads = opt.threads ? opt.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, static_cast<unsigned>(std::max(1, n)));
  std::vector<std::exception_ptr> errors(threads);
  auto work = [&](unsigned tid) {
    try {
      for (int k = static_cast<int>(tid); k < n; k += static_cast<int>(threads)) {
        auto& ws = per_sat[static_cast<std::size_t>(k)];
        for (int p = 0; p < geo.num_servers(); ++p) {
          auto w = predict_pair_windows(geo, k, p, opt);
          ws.insert(ws.end(), w.begin(), w.end());
        }
      }
    } catch (...) {
      errors[tid] = std::current_exception();
    }
  };
  if (threads == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work, t);
    for (auto& th : pool) th.join();
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return ContactPlan(std::move(per_sat), opt.horizon_s);
}

const std::vector<Window>& ContactPlan::windows(int sat) const {
  ZEN_ENFORCE(sat >= 0 && sat < num_satellites(),
              "satellite " + std::to_string(sat) + " out of [0, " + std::to_string(num_satellites()) + ")");
  return windows_[static_cast<std::size_t>(sat)];
}

std::size_t ContactPlan::total_windows() const noexcept {
  std::size_t n = 0;
  for (const auto& w : windows_) n += w.size();
  return n;
}

bool ContactPlan::visible(int sat, double t) const {
  for (const Window& w : windows(sat)) {
    if (w.start_s > t) break;
    if (t <= w.end_s) return true;
  }
  return false;
}

std::optional<Contact> ContactPlan::first_window(int sat, double t, double delta) const {
  ZEN_ENFORCE(delta >= 0.0, "transfer duration must be >= 0, got " + std::to_string(delta));
  return first_window(
      sat, t,
      [delta](const Window& w, double s) -> std::optional<double> {
        const double c = s + delta;
        if (c > w.end_s) return std::nullopt;
        return c;
      },
      delta);
}

std::optional<Contact> ContactPlan::first_window(int sat, double t, const CompletionFn& completion,
                                                 double min_delta) const {
  ZEN_ENFORCE(min_delta >= 0.0, "transfer duration bound must be >= 0, got " + std::to_string(min_delta));
  const auto& ws = windows(sat);
  const auto& pm = prefix_max_end_[static_cast<std::size_t>(sat)];
  std::optional<Contact> best;
  auto consider = [&](std::size_t i) {
    const Window& w = ws[i];
    const double s = std::max(t, w.start_s);
    if (s + min_delta > w.end_s) return;
    const std::optional<double> done = completion(w, s);
    if (!done || *done > w.end_s) return;
    const double c = *done;
    const double rem = w.end_s - c;
    if (!best || c < best->completion_s || (c == best->completion_s && rem > best->remaining_s())) {
      Contact x;
      x.sat = sat;
      x.peer = w.peer;
      x.window_index = i;
      x.start_s = s;
      x.completion_s = c;
      x.window_start_s = w.start_s;
      x.window_end_s = w.end_s;
      x.max_dist_m = w.max_dist_m;
      best = x;
    }
  };
  // Windows that start at or before t: usable only if they end at or after t + min_delta.
  const std::size_t idx = static_cast<std::size_t>(
      std::upper_bound(ws.begin(), ws.end(), t, [](double v, const Window& w) { return v < w.start_s; }) - ws.begin());
  for (std::size_t i = idx; i-- > 0;) {
    if (pm[i] < t + min_delta) break;
    consider(i);
  }
  // Later windows: completion >= start + min_delta grows with the start; stop once starts pass the
  // best completion.
  for (std::size_t i = idx; i < ws.size(); ++i) {
    if (best && ws[i].start_s + min_delta > best->completion_s) break;
    consider(i);
  }
  return best;
}

std::optional<Contact> ContactPlan::earliest_contact(const std::vector<int>& sats, double t, double delta) const {
  std::optional<Contact> best;
  for (int s : sats) {
    auto c = first_window(s, t, delta);
    if (c && (!best || efc_before(*c, *best))) best = c;
  }
  return best;
}

double ContactPlan::visible_time(int sat) const {
  double total = 0.0, cur_s = 0.0, cur_e = -1.0;
  bool have = false;
  for (const Window& w : windows(sat)) {
    const double s = std::clamp(w.start_s, 0.0, horizon_s_), e = std::clamp(w.end_s, 0.0, horizon_s_);
    if (!have || s > cur_e) {
      if (have) total += cur_e - cur_s;
      cur_s = s, cur_e = e, have = true;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (have) total += cur_e - cur_s;
  return total;
}

double ContactPlan::max_distance(int sat) const {
  double m = 0.0;
  for (const Window& w : windows(sat)) m = std::max(m, w.max_dist_m);
  return m;
}

void ContactPlan::write_csv(std::ostream& os, const Scenario& sc) const {
  ZEN_ENFORCE(sc.num_satellites() == num_satellites(),
              "write_csv: scenario has " + std::to_string(sc.num_satellites()) + " satellites, plan has " +
                  std::to_string(num_satellites()));
  os << "sat,plane,slot,peer,start_s,end_s,max_dist_m\n";
  char buf[160];
  for (int k = 0; k < num_satellites(); ++k) {
    const Satellite& s = sc.satellites[static_cast<std::size_t>(k)];
    for (const Window& w : windows(k)) {
      std::snprintf(buf, sizeof buf, "%d,%d,%d,%d,%.4f,%.4f,%.1f\n", k, s.plane, s.slot, w.peer, w.start_s, w.end_s,
                    w.max_dist_m);
      os << buf;
    }
  }
}

double window_rate_bps(const LinkPreset& p, const Window& w) { return rate_bps(p, w.max_dist_m); }

double window_transfer_time_s(const LinkPreset& p, double bits, const Window& w) {
  return transfer_time_s(p, bits, w.max_dist_m);
}

double window_mean_rate_bps(const LinkPreset& p, const Geometry& geo, const Window& w, double step_s) {
  ZEN_ENFORCE(step_s > 0.0, "integration step must be positive, got " + std::to_string(step_s));
  const double dur = w.duration_s();
  if (dur <= 0.0) return rate_bps(p, geo.distance(w.sat, w.peer, w.start_s));
  const int n = std::max(1, static_cast<int>(std::ceil(dur / step_s)));
  const double h = dur / n;
  double sum = 0.5 * (rate_bps(p, geo.distance(w.sat, w.peer, w.start_s)) +
                      rate_bps(p, geo.distance(w.sat, w.peer, w.end_s)));
  for (int k = 1; k < n; ++k) sum += rate_bps(p, geo.distance(w.sat, w.peer, w.start_s + k * h));
  return sum * h / dur;
}

std::optional<double> window_integrated_transfer_end(const LinkPreset& p, const Geometry& geo, const Window& w,
                                                     double t_start, double bits, double step_s) {
  ZEN_ENFORCE(t_start >= w.start_s && t_start <= w.end_s,
              "transfer start " + std::to_string(t_start) + " s is outside the window [" + std::to_string(w.start_s) +
                  ", " + std::to_string(w.end_s) + "]");
  const auto arrival = integrated_transfer_end(
      p, [&](double t) { return geo.distance(w.sat, w.peer, t); }, t_start, w.end_s, bits, step_s);
  if (arrival && *arrival > w.end_s) return std::nullopt;  // like first_window: completion <= window end
  return arrival;
}

}  // namespace zen::orbit
