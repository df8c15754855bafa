// SGP4 scenarios: element sets in a Scenario, the Geometry on SGP4 positions (WGS-84 stations,
// elevation margin and its step bound, line of sight to a server satellite), automatic planes, JSON
// "tle", decay errors. The pass times against Skyfield are in sgp4_oracle_test.py (ctest).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "zen/error.hpp"
#include "zen/orbit/contact.hpp"
#include "zen/orbit/scenario.hpp"
#include "zen/orbit/sgp4.hpp"
#include "zen/orbit/time.hpp"
#include "zen/orbit/tle.hpp"
#include "zen/orbit/visibility.hpp"

namespace zo = zen::orbit;

namespace {

const std::string kStarlink = std::string(ZEN_STARLINK_DIR) + "/starlink-2022-06.tle";

// TLE checksum: digits count their value, '-' counts 1, modulo 10.
int checksum(const std::string& l) {
  int s = 0;
  for (char c : l.substr(0, 68)) s += (c >= '0' && c <= '9') ? c - '0' : (c == '-' ? 1 : 0);
  return s % 10;
}

// A two-line element set in the fixed columns of the format (near-circular, no drag).
std::string tle(const std::string& name, int catnr, double incl, double raan, double argp, double mean_anom,
                double rev_per_day) {
  char l1[80], l2[80];
  std::snprintf(l1, sizeof l1, "1 %05dU 22001A   22168.50000000  .00000000  00000-0  00000-0 0  999", catnr);
  std::snprintf(l2, sizeof l2, "2 %05d %8.4f %8.4f %07d %8.4f %8.4f %11.8f%5d", catnr, incl, raan, 1000, argp,
                mean_anom, rev_per_day, 1);
  std::string a(l1), b(l2);
  EXPECT_EQ(a.size(), 68u);
  EXPECT_EQ(b.size(), 68u);
  a += static_cast<char>('0' + checksum(a));
  b += static_cast<char>('0' + checksum(b));
  return name + "\n" + a + "\n" + b + "\n";
}

// Mean motion [rev/day] of a circular orbit of radius a (two-body).
double rev_per_day(double a) { return std::sqrt(zo::kEarthMu / (a * a * a)) * 86400.0 / zo::kTwoPi; }

struct WalkerTles {
  std::string text;
  std::vector<int> plane, slot;  // Walker plane / slot of each element set in file order
};

// Walker delta 53 deg: P planes of S at 550 km, written as TLEs in a shuffled order, plus `extra`
// satellites at 97.6 deg (each in a plane of its own).
WalkerTles walker_tles(int P, int S, int F, int extra, unsigned seed) {
  std::vector<std::pair<int, int>> order;
  for (int p = 0; p < P; ++p)
    for (int j = 0; j < S; ++j) order.push_back({p, j});
  for (int x = 0; x < extra; ++x) order.push_back({-1, x});
  std::mt19937 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  WalkerTles w;
  const double n = rev_per_day(zo::kEarthRadius + 550e3);
  int cat = 90000;
  for (auto [p, j] : order) {
    if (p < 0) {
      w.text += tle("POLAR-" + std::to_string(j), cat++, 97.6, 40.0 + 90.0 * j, 0.0, 10.0 * j, n * 0.98);
    } else {
      const double raan = 360.0 * p / P;
      const double u = 360.0 * (static_cast<double>(j) / S + static_cast<double>(F) * p / (P * S));
      w.text += tle("W-P" + std::to_string(p) + "S" + std::to_string(j), cat++, 53.0, raan, 0.0, std::fmod(u, 360.0), n);
    }
    w.plane.push_back(p);
    w.slot.push_back(j);
  }
  return w;
}

}  // namespace

TEST(Sgp4Scenario, WalkerTlesGroupIntoTheirPlanesInOrderOfArgumentOfLatitude) {
  const int P = 4, S = 10;
  const WalkerTles w = walker_tles(P, S, 1, 2, 7);
  const auto els = zo::parse_elements_text(w.text, "walker.tle");
  ASSERT_EQ(els.size(), static_cast<std::size_t>(P * S + 2));
  const zo::Scenario sc = zo::Scenario::from_elements(els);
  EXPECT_EQ(sc.propagator, zo::Propagator::Sgp4);
  ASSERT_EQ(sc.planes, P + 2);
  // Our plane <-> Walker plane is one to one; each polar satellite is alone.
  std::map<int, std::set<int>> walker_of;
  for (int k = 0; k < sc.num_satellites(); ++k) walker_of[sc.satellites[k].plane].insert(w.plane[k]);
  for (const auto& [plane, set] : walker_of) EXPECT_EQ(set.size(), 1u) << "plane " << plane;
  std::set<int> singles;
  for (int p = 0; p < sc.planes; ++p) {
    const auto ids = sc.plane_members(p);
    if (w.plane[ids[0]] < 0) {
      EXPECT_EQ(ids.size(), 1u);
      singles.insert(ids[0]);
      continue;
    }
    ASSERT_EQ(ids.size(), static_cast<std::size_t>(S));
    // Slot order = Walker slot order up to a rotation (argument of latitude increases along the ring).
    for (int j = 0; j < S; ++j)
      EXPECT_EQ((w.slot[ids[(j + 1) % S]] - w.slot[ids[j]] + S) % S, 1) << "plane " << p << " slot " << j;
    const zo::RingInfo r = zo::ring_info(sc, p);
    EXPECT_FALSE(r.uniform);
    EXPECT_TRUE(r.feasible);
    // Chord of a 10-ring at ~550 km: 2 a sin(pi/S), a within the short-period wobble of SGP4.
    EXPECT_NEAR(r.neighbour_distance_m, zo::ring_chord(zo::kEarthRadius + 550e3, S), 30e3);
  }
  EXPECT_EQ(singles.size(), 2u);
  // Planes are numbered by their first member in file order.
  int next = 0;
  for (const auto& s : sc.satellites)
    if (s.plane == next) ++next;
    else EXPECT_LT(s.plane, next);
}

TEST(Sgp4Scenario, ThresholdsDecideWhatAPlaneIs) {
  // Two Walker planes 3 deg apart in RAAN (orbit normals ~2.4 deg apart at 53 deg): separate planes at
  // the default 1.5 deg, one plane at 3 deg.
  const double n = rev_per_day(zo::kEarthRadius + 550e3);
  std::string text;
  for (int j = 0; j < 4; ++j) text += tle("A" + std::to_string(j), 100 + j, 53.0, 10.0, 0.0, 90.0 * j, n);
  for (int j = 0; j < 4; ++j) text += tle("B" + std::to_string(j), 200 + j, 53.0, 13.0, 0.0, 90.0 * j + 45.0, n);
  const auto els = zo::parse_elements_text(text, "two.tle");
  EXPECT_EQ(zo::Scenario::from_elements(els).planes, 2);
  zo::PlaneClustering wide;
  wide.max_normal_angle_deg = 3.0;
  EXPECT_EQ(zo::Scenario::from_elements(els, "", {}, wide).planes, 1);
  // Same plane but 100 km apart in altitude: two planes (they drift apart along the track).
  std::string alt;
  for (int j = 0; j < 3; ++j) alt += tle("L" + std::to_string(j), 300 + j, 53.0, 10.0, 0.0, 120.0 * j, n);
  for (int j = 0; j < 3; ++j)
    alt += tle("H" + std::to_string(j), 400 + j, 53.0, 10.0, 0.0, 120.0 * j + 60.0, rev_per_day(zo::kEarthRadius + 650e3));
  EXPECT_EQ(zo::Scenario::from_elements(zo::parse_elements_text(alt, "alt.tle")).planes, 2);
  zo::PlaneClustering bad;
  bad.max_sma_diff_km = -1.0;
  EXPECT_THROW(zo::Scenario::from_elements(els, "", {}, bad), zen::Error);
}

TEST(Sgp4Scenario, StarlinkFileHasItsThreePlanesAndTheOddSatelliteAlone) {
  const zo::Scenario sc = zo::Scenario::from_elements_file(kStarlink);
  ASSERT_EQ(sc.num_satellites(), 60);
  // The file (README.md): three whole planes of the 53 deg shell and one satellite of the 70 deg shell.
  ASSERT_EQ(sc.planes, 4);
  std::vector<std::size_t> sizes;
  for (int p = 0; p < sc.planes; ++p) {
    const auto ids = sc.plane_members(p);
    sizes.push_back(ids.size());
    for (int id : ids)  // every member of a plane has the TLE inclination of its shell
      EXPECT_NEAR(sc.satellites[id].elements->inclination_deg, ids.size() == 1 ? 70.0 : 53.05, 0.2)
          << sc.satellites[id].name;
    const zo::RingInfo r = zo::ring_info(sc, p);
    EXPECT_EQ(r.uniform, ids.size() == 1);  // a plane of one has no ISL to check
    if (ids.size() > 1) {
      // ring_info's chords are the SGP4 positions at the start, as the Geometry gives them.
      const zo::Geometry geo(sc);
      double worst = 0;
      for (std::size_t j = 0; j < ids.size(); ++j)
        worst = std::max(worst, (geo.sat_position(ids[j], 0) - geo.sat_position(ids[(j + 1) % ids.size()], 0)).norm());
      EXPECT_DOUBLE_EQ(r.neighbour_distance_m, worst);
    }
  }
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, (std::vector<std::size_t>{1, 19, 20, 20}));
  // The start is the earliest epoch; GMST follows from it.
  double earliest = 1e300;
  for (const auto& s : sc.satellites) earliest = std::min(earliest, s.elements->epoch_jd + s.elements->epoch_jd_frac);
  EXPECT_NEAR(sc.start_jd + sc.start_jd_frac, earliest, 1e-9);
  EXPECT_NEAR(sc.gmst0_rad, zo::gmst_rad(earliest), 1e-12);
}

TEST(Sgp4Scenario, PositionsAreSgp4AtStartPlusT) {
  const zo::Scenario sc = zo::Scenario::from_elements_file(kStarlink, "2022-06-17T00:00:00Z");
  const zo::Geometry geo(sc);
  const auto [jd, fr] = zo::parse_utc("2022-06-17T00:00:00Z");
  for (int k : {0, 17, 59})
    for (double t : {0.0, 1234.5, 86400.0}) {
      // Independent path: the model at the Julian date itself.
      const zo::Sgp4 m(*sc.satellites[k].elements);
      const auto st = m.propagate_jd(jd, fr + t / 86400.0);
      EXPECT_LT((geo.sat_position(k, t) - st.r_km * 1e3).norm(), 1e-3) << k << " " << t;
    }
}

TEST(Sgp4Scenario, WindowScanFindsEveryWindowOfABruteForceScan) {
  // The margin's step bound must not jump over a window: compare with sampling every 0.25 s.
  zo::Scenario sc = zo::Scenario::from_elements_file(kStarlink, "", {zo::parse_server("45.0,10.0,500"),
                                                                      zo::parse_server("meo")});
  sc.elevation_mask_deg = 20.0;
  const zo::Geometry geo(sc);
  zo::PredictOptions opt;
  opt.horizon_s = 6 * 3600.0;
  for (int k : {0, 30, 59}) {
    for (int peer = 0; peer < 2; ++peer) {
      const auto ws = zo::predict_pair_windows(geo, k, peer, opt);
      std::vector<std::pair<double, double>> brute;
      bool in = false;
      double start = 0;
      for (double t = 0; t <= opt.horizon_s; t += 0.25) {
        const bool v = geo.margin(k, peer, t) >= 0;
        if (v && !in) start = t;
        if (!v && in) brute.push_back({start, t});
        in = v;
      }
      if (in) brute.push_back({start, opt.horizon_s});
      ASSERT_EQ(ws.size(), brute.size()) << "sat " << k << " peer " << peer;
      for (std::size_t i = 0; i < ws.size(); ++i) {
        EXPECT_NEAR(ws[i].start_s, brute[i].first, 0.26);
        EXPECT_NEAR(ws[i].end_s, brute[i].second, 0.26);
      }
      // Visibility agrees with the geometry itself: elevation above the ellipsoid normal / line of sight.
      for (const auto& w : ws) {
        const double mid = 0.5 * (w.start_s + w.end_s);
        const zo::Vec3 r = geo.sat_position(k, mid), g = geo.server_position(peer, mid);
        if (peer == 1) {
          EXPECT_TRUE(zo::line_of_sight(r, g, zo::kEarthRadius));
        } else {
          const zo::Vec3 up = zo::ecef_to_eci(zo::geodetic_up(sc.servers[0].station), zo::gmst(mid, sc.gmst0_rad));
          EXPECT_GT(std::asin((r - g).normalized().dot(up)), 20.0 * zo::kDegToRad);
        }
      }
    }
  }
}

TEST(Sgp4Scenario, WgsStationIsOnTheEllipsoid) {
  // Geodetic -> Earth-fixed: the pole is b = a (1 - f) from the centre, the equator a; the normal at 45 deg
  // is not the radial direction (geocentric latitude < geodetic).
  const zo::Vec3 pole = zo::geodetic_ecef({"p", 90.0, 0.0, 0.0});
  EXPECT_NEAR(pole.z(), zo::kWgs84A * (1.0 - zo::kWgs84F), 1e-6);
  const zo::Vec3 eq = zo::geodetic_ecef({"e", 0.0, 90.0, 100.0});
  EXPECT_NEAR(eq.y(), zo::kWgs84A + 100.0, 1e-6);
  const zo::GroundStation mid{"m", 45.0, 0.0, 0.0};
  const zo::Vec3 r = zo::geodetic_ecef(mid);
  EXPECT_LT(std::atan2(r.z(), r.x()), 45.0 * zo::kDegToRad);
  EXPECT_NEAR(zo::geodetic_up(mid).dot(zo::Vec3(1, 0, 1).normalized()), 1.0, 1e-12);
  EXPECT_THROW(zo::geodetic_ecef({"bad", 91.0, 0.0, 0.0}), zen::Error);
}

TEST(Sgp4Scenario, JsonTleRelativeToTheFileAndErrors) {
  const zo::Scenario sc = zo::Scenario::from_json_text(
      R"({"tle": "starlink-2022-06.tle", "start_utc": "2022-06-17T00:00:00Z", "elevation_mask_deg": 25,
          "servers": [{"type": "ground", "name": "bremen", "lat_deg": 53.0, "lon_deg": 8.8}]})",
      ZEN_STARLINK_DIR);
  EXPECT_EQ(sc.propagator, zo::Propagator::Sgp4);
  EXPECT_EQ(sc.num_satellites(), 60);
  EXPECT_EQ(sc.servers.size(), 1u);
  EXPECT_EQ(sc.epoch_utc, "2022-06-17T00:00:00.000000Z");
  EXPECT_NEAR(sc.gmst0_rad, zo::gmst_rad(zo::julian_date(2022, 6, 17, 0, 0, 0)), 1e-12);
  // Round trip through to_json_text.
  const zo::Scenario back = zo::Scenario::from_json_text(sc.to_json_text());
  EXPECT_EQ(back.num_satellites(), 60);
  EXPECT_EQ(back.planes, sc.planes);
  EXPECT_EQ(back.epoch_utc, sc.epoch_utc);
  EXPECT_EQ(back.elevation_mask_deg, 25.0);
  const std::string dir = ZEN_STARLINK_DIR;
  for (const std::string bad : {
           R"({"tle": "starlink-2022-06.tle", "walker": {"inclination_deg": 53, "total": 4, "planes": 2, "altitude_km": 550}})",
           R"({"tle": "starlink-2022-06.tle", "propagator": "j2"})",
           R"({"tle": "starlink-2022-06.tle", "gmst0_deg": 10})",
           R"({"tle": "no-such-file.tle"})",
           R"({"tle": "starlink-2022-06.tle", "start_utc": "17 June 2022"})",
           R"({"base": "reference", "start_utc": "2022-06-17T00:00:00Z"})",
           R"({"base": "reference", "propagator": "sgp4"})"}) {
    EXPECT_THROW(zo::Scenario::from_json_text(bad, dir), zen::Error) << bad;
  }
  // Elements and a circular propagator do not mix.
  zo::Scenario mixed = sc;
  mixed.propagator = zo::Propagator::TwoBody;
  EXPECT_THROW(mixed.validate(), zen::Error);
}

TEST(Sgp4Scenario, DecayIsAClearErrorNamingTheSatelliteAndTime) {
  // A real element set pushed low: 16.3 rev/day (~230 km) with heavy drag decays within days.
  zo::MeanElements e = zo::read_elements(kStarlink).at(0);
  e.name = "LOW-DRAG";
  e.mean_motion_rev_per_day = 16.3;
  e.bstar = 0.05;
  const zo::Scenario sc = zo::Scenario::from_elements({e}, "", {zo::parse_server("53.0,8.8")});
  const zo::Geometry geo(sc);
  bool threw = false;
  for (double t = 0; t < 60 * 86400.0 && !threw; t += 600.0) {
    try {
      geo.sat_position(0, t);
    } catch (const zen::Error& err) {
      threw = true;
      const std::string msg = err.what();
      EXPECT_NE(msg.find("satellite 0 'LOW-DRAG'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("SGP4 error"), std::string::npos) << msg;
      EXPECT_NE(msg.find("t = "), std::string::npos) << msg;
    }
  }
  EXPECT_TRUE(threw);
  // The window scan stops with a zen::Error too (the radius bound or SGP4), naming the satellite.
  zo::PredictOptions opt;
  opt.horizon_s = 60 * 86400.0;
  try {
    zo::ContactPlan::predict(geo, opt);
    ADD_FAILURE() << "a decaying satellite predicted for 60 days without an error";
  } catch (const zen::Error& err) {
    EXPECT_NE(std::string(err.what()).find("satellite 0 'LOW-DRAG'"), std::string::npos) << err.what();
  }
}
