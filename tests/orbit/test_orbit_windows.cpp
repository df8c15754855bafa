// Orbit module: window prediction against an independent brute-force scan, visible fractions,
// the north-pole closed form, first_window / EFC semantics.
#include <chrono>
#include <cmath>
#include <sstream>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "zen/error.hpp"
#include "zen/orbit/contact.hpp"

namespace zo = zen::orbit;
using zo::kDegToRad;
using zo::kPi;

namespace {

constexpr double kRE = 6371e3;

// Independent visibility rules (vector form, not the predictor's central-angle form).
bool brute_visible(const zo::Scenario& sc, const zo::Geometry& geo, int sat, int peer, double t) {
  const zo::Vec3 rs = geo.sat_position(sat, t);
  const auto& srv = sc.servers[peer];
  if (srv.kind == zo::ServerNode::Kind::Satellite) {
    const zo::Vec3 rm = geo.server_position(peer, t);
    const double R = kRE + sc.atmosphere_margin_m;
    return (rm - rs).norm() < std::sqrt(rm.squaredNorm() - R * R) + std::sqrt(rs.squaredNorm() - R * R);
  }
  // Station rotated by theta(t) = theta0 + omega_E t, elevation via the dot product.
  const double lat = srv.station.lat_deg * kDegToRad, lon = srv.station.lon_deg * kDegToRad;
  const double th = sc.gmst0_rad + 7.2921150e-5 * t;
  const double r = kRE + srv.station.alt_m;
  const zo::Vec3 g(r * std::cos(lat) * std::cos(lon + th), r * std::cos(lat) * std::sin(lon + th), r * std::sin(lat));
  const zo::Vec3 d = rs - g;
  return d.dot(g.normalized()) / d.norm() >= std::sin(sc.elevation_mask_deg * kDegToRad);
}

// Windows by a fixed fine grid; edges are the first visible / last visible sample.
std::vector<std::pair<double, double>> brute_windows(const zo::Scenario& sc, const zo::Geometry& geo, int sat,
                                                     int peer, double horizon, double step) {
  std::vector<std::pair<double, double>> out;
  bool in = false;
  double start = 0.0, last = 0.0;
  const long n = std::lround(horizon / step);
  for (long i = 0; i <= n; ++i) {
    const double t = i * step;
    const bool v = brute_visible(sc, geo, sat, peer, t);
    if (v && !in) start = t;
    if (!v && in) out.push_back({start, last});
    if (v) last = t;
    in = v;
  }
  if (in) out.push_back({start, last});
  return out;
}

void expect_edges_match(const zo::Scenario& sc, double horizon, const std::vector<int>& sats, double step) {
  const zo::Geometry geo(sc);
  zo::PredictOptions opt;
  opt.horizon_s = horizon;
  for (int s : sats) {
    for (int p = 0; p < static_cast<int>(sc.servers.size()); ++p) {
      const auto pred = zo::predict_pair_windows(geo, s, p, opt);
      const auto ref = brute_windows(sc, geo, s, p, horizon, step);
      ASSERT_EQ(pred.size(), ref.size()) << sc.name << " sat " << s;
      ASSERT_FALSE(ref.empty());
      for (std::size_t i = 0; i < ref.size(); ++i) {
        // The true edge lies within one grid step before the first visible sample / after the last.
        EXPECT_LE(std::abs(pred[i].start_s - ref[i].first), 0.1) << sc.name << " sat " << s << " window " << i;
        EXPECT_LE(std::abs(pred[i].end_s - ref[i].second), 0.1) << sc.name << " sat " << s << " window " << i;
        EXPECT_LE(pred[i].start_s, ref[i].first + 2 * opt.tolerance_s);
        EXPECT_GE(pred[i].end_s, ref[i].second - 2 * opt.tolerance_s);
        EXPECT_GE(pred[i].max_dist_m, geo.distance(s, p, 0.5 * (pred[i].start_s + pred[i].end_s)));
      }
    }
  }
}

}  // namespace

TEST(Windows, MeoEdgesMatchFineBruteForce) {
  expect_edges_match(zo::Scenario::named("reference"), 6 * 3600.0, {0, 13, 27, 39}, 0.05);
}

TEST(Windows, GroundEdgesMatchFineBruteForceWithEarthRotation) {
  zo::Scenario sc = zo::Scenario::named("bremen");
  sc.gmst0_rad = 0.7;
  expect_edges_match(sc, 8 * 3600.0, {0, 11, 22, 33}, 0.05);
}

TEST(Windows, J2AndAtmosphereMarginMatchBruteForce) {
  zo::Scenario sc = zo::Scenario::named("reference-star");
  sc.propagator = zo::Propagator::J2;
  sc.atmosphere_margin_m = 80e3;
  expect_edges_match(sc, 6 * 3600.0, {3, 21}, 0.05);
}

TEST(Windows, ReferenceMeoVisibleFraction) {
  const zo::Scenario sc = zo::Scenario::named("reference");
  const double H = 86400.0;
  zo::PredictOptions opt;
  opt.horizon_s = H;
  const zo::ContactPlan plan = zo::ContactPlan::predict(sc, opt);
  const zo::Geometry geo(sc);
  double mean = 0.0;
  for (int k = 0; k < 40; ++k) {
    long vis = 0;
    const long n = 86400;
    for (long i = 0; i < n; ++i) vis += brute_visible(sc, geo, k, 0, (i + 0.5) * H / n);
    const double brute = static_cast<double>(vis) / n;
    EXPECT_NEAR(plan.visible_fraction(k), brute, 2e-4) << "sat " << k;
    mean += plan.visible_fraction(k) / 40;
    // Every window ends at (or is clipped near) the tangent distance, the geometric maximum.
    EXPECT_LE(plan.max_distance(k), zo::tangent_distance(kRE + 2000e3, kRE + 20000e3, kRE) + 1.0);
  }
  // Estimate of orbit-fl.md: about 71.5 %.
  EXPECT_NEAR(mean, 0.715, 0.01);
}

TEST(Windows, NorthPoleClosedForm) {
  // Pole station: visible iff sin(u) sin(i) >= cos(psi_max): window = (pi - 2 asin(cos psi / sin i)) / n,
  // exactly periodic with the orbital period.
  const zo::Scenario sc = zo::Scenario::named("northpole");
  const double a = kRE + 2000e3, n = zo::mean_motion(a), T = zo::orbital_period(a);
  const double psi = zo::coverage_half_angle(a, kRE, 10 * kDegToRad);
  const double expect = (kPi - 2 * std::asin(std::cos(psi) / std::sin(60 * kDegToRad))) / n;
  EXPECT_NEAR(expect / 60.0, 7.0, 0.1);
  zo::PredictOptions opt;
  opt.horizon_s = 86400.0;
  const zo::ContactPlan plan = zo::ContactPlan::predict(sc, opt);
  for (int k = 0; k < 40; ++k) {
    const auto& ws = plan.windows(k);
    ASSERT_GE(ws.size(), 10u);
    for (std::size_t i = 0; i < ws.size(); ++i) {
      if (ws[i].open_at_start || ws[i].open_at_end) continue;
      EXPECT_NEAR(ws[i].duration_s(), expect, 2e-3) << "sat " << k;
      if (i > 0 && !ws[i - 1].open_at_start) {
        EXPECT_NEAR(ws[i].start_s - ws[i - 1].start_s, T, 2e-3);
      }
    }
  }
}

TEST(Windows, StarlinkDayIsFastAndComplete) {
  const zo::Scenario sc = zo::Scenario::named("starlink");
  zo::PredictOptions opt;
  opt.horizon_s = 86400.0;
  opt.threads = 2;
  const auto t0 = std::chrono::steady_clock::now();
  const zo::ContactPlan plan = zo::ContactPlan::predict(sc, opt);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 10.0);
  ASSERT_EQ(plan.num_satellites(), 1584);
  const double dmax = zo::max_slant_range(kRE + 550e3, kRE, 10 * kDegToRad);
  for (int k = 0; k < 1584; ++k) {
    ASSERT_FALSE(plan.windows(k).empty()) << k;
    for (const auto& w : plan.windows(k)) {
      EXPECT_LE(w.max_dist_m, dmax + 1.0);
      if (!w.open_at_start && !w.open_at_end) {
        EXPECT_NEAR(w.max_dist_m, dmax, 100.0);  // edges sit on the mask
      }
    }
  }
}

namespace {
zo::Window win(int sat, int peer, double s, double e) {
  zo::Window w;
  w.sat = sat;
  w.peer = peer;
  w.start_s = s;
  w.end_s = e;
  w.max_dist_m = 1000.0 * (s + 1);
  return w;
}
}  // namespace

TEST(ContactPlan, FirstWindowSemantics) {
  std::vector<std::vector<zo::Window>> ws(3);
  ws[0] = {win(0, 0, 50, 100), win(0, 0, 10, 20), win(0, 0, 30, 35)};  // unsorted on purpose
  ws[1] = {win(1, 0, 10, 40), win(1, 1, 12, 60)};                       // two peers, overlapping
  ws[2] = {win(2, 0, 10, 15), win(2, 0, 10, 40)};
  const zo::ContactPlan plan(ws, 200.0);
  auto c = plan.first_window(0, 0.0, 5.0);
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->start_s, 10.0);
  EXPECT_DOUBLE_EQ(c->completion_s, 15.0);
  EXPECT_EQ(c->window_index, 0u);
  c = plan.first_window(0, 18.0, 5.0);  // [18, 23] overruns [10, 20]; next fits exactly in [30, 35]
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->completion_s, 35.0);
  EXPECT_DOUBLE_EQ(c->remaining_s(), 0.0);
  c = plan.first_window(0, 18.0, 6.0);
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->start_s, 50.0);
  EXPECT_DOUBLE_EQ(c->completion_s, 56.0);
  EXPECT_DOUBLE_EQ(c->max_dist_m, 51000.0);
  c = plan.first_window(0, 60.0, 10.0);
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->completion_s, 70.0);
  EXPECT_FALSE(plan.first_window(0, 95.0, 10.0));
  EXPECT_FALSE(plan.first_window(0, 0.0, 51.0));
  // Overlapping windows of two peers: at t = 35 only the peer-1 window still fits 10 s.
  c = plan.first_window(1, 35.0, 10.0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->peer, 1);
  EXPECT_DOUBLE_EQ(c->completion_s, 45.0);
  // Same completion: the longer remaining window wins.
  c = plan.first_window(2, 11.0, 2.0);
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->window_end_s, 40.0);
  EXPECT_THROW(plan.first_window(3, 0.0, 1.0), zen::Error);
  EXPECT_THROW(plan.first_window(0, 0.0, -1.0), zen::Error);
  // Visibility and union time.
  EXPECT_TRUE(plan.visible(0, 32.0));
  EXPECT_FALSE(plan.visible(0, 25.0));
  EXPECT_DOUBLE_EQ(plan.visible_time(0), 10 + 5 + 50);
  EXPECT_DOUBLE_EQ(plan.visible_time(1), 50.0);
  EXPECT_DOUBLE_EQ(plan.visible_time(2), 30.0);
}

TEST(ContactPlan, EarliestContactTieBreaks) {
  std::vector<std::vector<zo::Window>> ws(3);
  ws[0] = {win(0, 0, 100, 130)};
  ws[1] = {win(1, 0, 100, 150)};
  ws[2] = {win(2, 0, 90, 104)};
  const zo::ContactPlan plan(ws, 200.0);
  auto c = plan.earliest_contact({0, 1, 2}, 0.0, 5.0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->sat, 2);  // completes at 95
  c = plan.earliest_contact({0, 1, 2}, 95.0, 10.0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->sat, 1);  // 0 and 1 both complete at 110; 1 has the longer remaining window
  EXPECT_DOUBLE_EQ(c->completion_s, 110.0);
  c = plan.earliest_contact({0}, 95.0, 10.0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->sat, 0);
  EXPECT_FALSE(plan.earliest_contact({0, 1, 2}, 0.0, 60.0));
}

TEST(ContactPlan, PredictedPlanAnswersFromBruteForce) {
  // first_window on a predicted plan agrees with a brute-force search on the visibility function.
  const zo::Scenario sc = zo::Scenario::named("reference");
  zo::PredictOptions opt;
  opt.horizon_s = 20000.0;
  const zo::ContactPlan plan = zo::ContactPlan::predict(sc, opt);
  const zo::Geometry geo(sc);
  for (int k : {0, 9, 31}) {
    for (double t0 : {0.0, 4000.0, 9000.0}) {
      const double delta = 120.0;
      const auto c = plan.first_window(k, t0, delta);
      ASSERT_TRUE(c);
      // Brute force: the first s >= t0 (0.05 s grid) with [s, s + delta] visible throughout.
      double found = -1.0;
      double run_start = -1.0;
      for (double t = t0; t < 20000.0; t += 0.05) {
        if (brute_visible(sc, geo, k, 0, t)) {
          if (run_start < 0) run_start = t;
          if (t - run_start >= delta) { found = run_start + delta; break; }
        } else {
          run_start = -1.0;
        }
      }
      ASSERT_GT(found, 0.0);
      EXPECT_NEAR(c->completion_s, found, 0.1) << "sat " << k << " t0 " << t0;
    }
  }
}

TEST(ContactPlan, CsvHeaderAndRows) {
  const zo::Scenario sc = zo::Scenario::named("reference");
  zo::PredictOptions opt;
  opt.horizon_s = 10000.0;
  const zo::ContactPlan plan = zo::ContactPlan::predict(sc, opt);
  std::ostringstream os;
  plan.write_csv(os, sc);
  std::istringstream is(os.str());
  std::string line;
  std::getline(is, line);
  EXPECT_EQ(line, "sat,plane,slot,peer,start_s,end_s,max_dist_m");
  std::size_t rows = 0;
  while (std::getline(is, line)) ++rows;
  EXPECT_EQ(rows, plan.total_windows());
}

TEST(ContactPlan, WindowLinkHelpers) {
  const zo::Scenario sc = zo::Scenario::named("bremen");
  zo::PredictOptions opt;
  opt.horizon_s = 43200.0;
  const zo::ContactPlan plan = zo::ContactPlan::predict(sc, opt);
  const zo::Geometry geo(sc);
  const zo::LinkPreset ka = zo::LinkPreset::ka();
  int checked = 0;
  for (int k = 0; k < 40; ++k) {
    for (const auto& w : plan.windows(k)) {
      if (w.open_at_start || w.open_at_end) continue;
      ++checked;
      // Worst case = rate at the largest distance; the mean over the pass is higher.
      EXPECT_DOUBLE_EQ(zo::window_rate_bps(ka, w), zo::rate_bps(ka, w.max_dist_m));
      const double mean = zo::window_mean_rate_bps(ka, geo, w, 1.0);
      EXPECT_GT(mean, zo::window_rate_bps(ka, w));
      // A transfer that needs ~half the pass at the worst-case rate finishes sooner when integrated.
      const double bits = 0.5 * w.duration_s() * zo::window_rate_bps(ka, w);
      const auto end = zo::window_integrated_transfer_end(ka, geo, w, w.start_s, bits, 1.0);
      ASSERT_TRUE(end);
      EXPECT_LT(*end, w.start_s + zo::window_transfer_time_s(ka, bits, w));
      EXPECT_GT(*end, w.start_s + bits / zo::rate_bps(ka, 2000e3));  // never closer than the altitude
      // Twice the bits deliverable over the whole pass does not fit.
      EXPECT_FALSE(zo::window_integrated_transfer_end(ka, geo, w, w.start_s, 2.0 * mean * w.duration_s(), 1.0));
    }
  }
  EXPECT_GT(checked, 20);
}
