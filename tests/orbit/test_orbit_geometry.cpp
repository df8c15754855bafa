// Orbit module: periods, Walker slots, J2 rates, rings, visibility geometry, scenarios.
#include <cmath>

#include <gtest/gtest.h>

#include "zen/error.hpp"
#include "zen/orbit/scenario.hpp"
#include "zen/orbit/visibility.hpp"

namespace zo = zen::orbit;
using zo::kDegToRad;
using zo::kPi;

namespace {
constexpr double kMu = 3.986004418e14;
constexpr double kRE = 6371e3;
}  // namespace

TEST(OrbitPeriod, MatchesClosedFormAndTable) {
  // Table of orbit-fl.md (period in minutes, speed in km/s).
  const struct { double h_km, period_min, speed_kms; } rows[] = {
      {500, 94.47, 7.617}, {1000, 104.97, 7.354}, {1500, 115.83, 7.116}, {2000, 127.04, 6.900}, {20000, 710.4, 3.888}};
  for (const auto& r : rows) {
    const double a = kRE + r.h_km * 1e3;
    const double closed = 2 * kPi * std::sqrt(a * a * a / kMu);
    EXPECT_NEAR(zo::orbital_period(a), closed, 1e-9 * closed);
    EXPECT_NEAR(zo::orbital_period(a) / 60.0, r.period_min, 0.01 * (r.h_km == 20000 ? 100 : 1)) << r.h_km;
    EXPECT_NEAR(zo::orbital_speed(a) / 1e3, r.speed_kms, 6e-4) << r.h_km;
  }
  EXPECT_NEAR(zo::orbital_period(kRE + 2000e3), 7622.0, 0.5);
  EXPECT_NEAR(zo::orbital_period(kRE + 20000e3) / 3600.0, 11.84, 0.005);
}

TEST(OrbitPeriod, TwoBodyPositionReturnsAfterOnePeriod) {
  zo::CircularOrbit o{2000e3, 60 * kDegToRad, 0.3, 1.1};
  const zo::Trajectory tr(o, zo::Propagator::TwoBody);
  const double T = zo::orbital_period(o.radius_m());
  EXPECT_LT((tr.position(T) - tr.position(0)).norm(), 1e-4);
  EXPECT_GT((tr.position(T / 2) - tr.position(0)).norm(), 2 * o.radius_m() - 1.0);
  EXPECT_NEAR(tr.position(123.0).norm(), o.radius_m(), 1e-6);
}

TEST(Walker, SlotsFollowTheFormula) {
  const zo::Scenario sc = zo::Scenario::named("reference");
  ASSERT_EQ(sc.num_satellites(), 40);
  ASSERT_EQ(sc.planes, 5);
  const double a = kRE + 2000e3, inc = 60 * kDegToRad;
  const zo::Geometry geo(sc);
  for (int k = 0; k < 40; ++k) {
    const int p = k / 8, j = k % 8;
    const auto& s = sc.satellites[k];
    EXPECT_EQ(s.id, k);
    EXPECT_EQ(s.plane, p);
    EXPECT_EQ(s.slot, j);
    const double O = 2 * kPi * p / 5.0;
    const double u = 2 * kPi * (j / 8.0 + 1.0 * p / 40.0);
    EXPECT_NEAR(s.orbit.raan_rad, O, 1e-12);
    EXPECT_NEAR(s.orbit.arg_lat_rad, u, 1e-12);
    const zo::Vec3 expect(a * (std::cos(O) * std::cos(u) - std::sin(O) * std::sin(u) * std::cos(inc)),
                          a * (std::sin(O) * std::cos(u) + std::cos(O) * std::sin(u) * std::cos(inc)),
                          a * std::sin(u) * std::sin(inc));
    EXPECT_LT((geo.sat_position(k, 0.0) - expect).norm(), 1e-6) << k;
  }
}

TEST(Walker, StarSpreadsOverPiAndValidates) {
  const zo::Scenario sc = zo::Scenario::named("reference-star");
  for (const auto& s : sc.satellites) {
    EXPECT_NEAR(s.orbit.raan_rad, kPi * s.plane / 5.0, 1e-12);
    EXPECT_NEAR(s.orbit.inclination_rad, 85 * kDegToRad, 1e-12);
  }
  zo::WalkerSpec w;
  w.inclination_deg = 50;
  w.total = 10;
  w.planes = 3;
  w.altitude_m = 1e6;
  EXPECT_THROW(zo::make_walker(w), zen::Error);  // T % P != 0
  w.planes = 5;
  w.phasing = 5;
  EXPECT_THROW(zo::make_walker(w), zen::Error);  // F out of [0, P-1]
  w.phasing = 4;
  EXPECT_EQ(zo::make_walker(w).size(), 10u);
}

TEST(J2, SecularRatesMatchReference) {
  const double day = 86400.0;
  zo::CircularOrbit o{2000e3, 60 * kDegToRad, 0, 0};
  auto r = zo::secular_rates(o, zo::Propagator::J2);
  EXPECT_NEAR(r.raan_dot * day / kDegToRad, -1.92, 0.01);
  EXPECT_NEAR(r.arg_lat_dot, zo::mean_motion(o.radius_m()), 1e-3 * zo::mean_motion(o.radius_m()) * 1e-3);
  o.inclination_rad = 85 * kDegToRad;
  r = zo::secular_rates(o, zo::Propagator::J2);
  EXPECT_NEAR(r.raan_dot * day / kDegToRad, -0.34, 0.01);
  const auto tb = zo::secular_rates(o, zo::Propagator::TwoBody);
  EXPECT_EQ(tb.raan_dot, 0.0);
  EXPECT_EQ(tb.arg_lat_dot, zo::mean_motion(o.radius_m()));
  // The trajectory's RAAN moves at the J2 rate.
  const zo::Trajectory tr(o, zo::Propagator::J2);
  EXPECT_NEAR(tr.raan(day) - tr.raan(0), r.raan_dot * day, 1e-12);
  EXPECT_EQ(zo::parse_propagator("j2"), zo::Propagator::J2);
  EXPECT_EQ(zo::parse_propagator("sgp4"), zo::Propagator::Sgp4);
  EXPECT_THROW(zo::parse_propagator("SGP4"), zen::Error);
}

TEST(Ring, ReferenceChordAndFeasibility) {
  const zo::Scenario sc = zo::Scenario::named("reference");
  const double a = kRE + 2000e3;
  EXPECT_NEAR(zo::ring_chord(a, 8), 6406.9e3, 0.1e3);
  EXPECT_NEAR(zo::ring_chord(a, 8), 2 * a * std::sin(kPi / 8), 1e-6);
  for (const auto& r : zo::ring_infos(sc)) {
    EXPECT_EQ(r.sats, 8);
    EXPECT_TRUE(r.uniform);
    EXPECT_TRUE(r.feasible);
    EXPECT_NEAR(r.neighbour_distance_m, 2 * a * std::sin(kPi / 8), 1e-3);
    EXPECT_NEAR(r.chord_clearance_m, a * std::cos(kPi / 8) - kRE, 1e-3);
  }
  EXPECT_TRUE(zo::ring_warnings(sc).empty());
  // Neighbours keep line of sight and a constant distance as the ring turns (also under J2).
  zo::Scenario j2 = sc;
  j2.propagator = zo::Propagator::J2;
  const zo::Geometry geo(j2);
  for (double t : {0.0, 1000.0, 33333.0, 86400.0}) {
    for (int j = 0; j < 8; ++j) {
      const int b = 8 + (j + 1) % 8, c = 8 + j;
      EXPECT_TRUE(geo.sat_sat_visible(b, c, t));
      EXPECT_NEAR((geo.sat_position(b, t) - geo.sat_position(c, t)).norm(), 2 * a * std::sin(kPi / 8), 1e-3);
    }
  }
}

TEST(Ring, MinimumAltitudesAndBlockedRing) {
  EXPECT_NEAR(zo::ring_min_altitude(6) / 1e3, 986, 1);
  EXPECT_NEAR(zo::ring_min_altitude(8) / 1e3, 525, 1);
  EXPECT_NEAR(zo::ring_min_altitude(8, 80e3) / 1e3, 612, 1);
  EXPECT_NEAR(zo::ring_min_altitude(10) / 1e3, 328, 1);
  EXPECT_NEAR(zo::ring_min_altitude(12) / 1e3, 225, 1);
  EXPECT_TRUE(zo::ring_feasible(kRE + 530e3, 8, kRE));
  EXPECT_FALSE(zo::ring_feasible(kRE + 520e3, 8, kRE));
  EXPECT_FALSE(zo::ring_feasible(kRE + 600e3, 8, kRE + 80e3));
  EXPECT_EQ(zo::ring_hops(0, 7, 8), 1);
  EXPECT_EQ(zo::ring_hops(1, 5, 8), 4);
  EXPECT_EQ(zo::ring_hops(2, 7, 8), 3);

  // 8 satellites per plane at 500 km: the chord cuts ~24 km into the Earth, and it is flagged.
  zo::Scenario sc = zo::Scenario::named("reference");
  zo::WalkerSpec w{zo::WalkerPattern::Delta, 60, 40, 5, 1, 500e3, 0, 0};
  sc.satellites = zo::make_walker(w);
  const auto r = zo::ring_info(sc, 0);
  EXPECT_FALSE(r.feasible);
  EXPECT_NEAR(r.chord_clearance_m, (kRE + 500e3) * std::cos(kPi / 8) - kRE, 1e-3);
  EXPECT_NEAR(r.chord_clearance_m / 1e3, -23.0, 1.5);  // "about 24 km into the Earth"
  const auto warnings = zo::ring_warnings(sc);
  ASSERT_EQ(warnings.size(), 5u);
  EXPECT_NE(warnings[0].find("blocked"), std::string::npos);
  const zo::Geometry geo(sc);
  EXPECT_FALSE(geo.sat_sat_visible(0, 1, 0.0));
}

TEST(Visibility, TangentAndSlantDistances) {
  const double rL = kRE + 2000e3, rM = kRE + 20000e3;
  EXPECT_NEAR(zo::tangent_distance(rL, rM, kRE) / 1e3, 31020, 1);
  EXPECT_NEAR(zo::max_slant_range(rL, kRE, 10 * kDegToRad) / 1e3, 4435, 1);
  EXPECT_NEAR(zo::max_slant_range(kRE + 500e3, kRE, 10 * kDegToRad) / 1e3, 1695, 1);
  EXPECT_NEAR(zo::coverage_half_angle(rL, kRE, 10 * kDegToRad) / kDegToRad, 31.45, 0.01);
  // line_of_sight agrees with the distance rule |r_M - r_L| < tangent distance.
  for (double ang = 0.0; ang < kPi; ang += 0.01) {
    const zo::Vec3 a(rL, 0, 0), b(rM * std::cos(ang), rM * std::sin(ang), 0);
    const bool rule = (a - b).norm() < zo::tangent_distance(rL, rM, kRE);
    if (std::abs((a - b).norm() - zo::tangent_distance(rL, rM, kRE)) > 1.0) {
      EXPECT_EQ(zo::line_of_sight(a, b, kRE), rule);
    }
  }
  // Elevation: straight up = 90 deg, at the coverage angle = the mask.
  const zo::Vec3 g(kRE, 0, 0);
  EXPECT_NEAR(zo::elevation(zo::Vec3(rL, 0, 0), g), kPi / 2, 1e-12);
  const double psi = zo::coverage_half_angle(rL, kRE, 10 * kDegToRad);
  EXPECT_NEAR(zo::elevation(zo::Vec3(rL * std::cos(psi), rL * std::sin(psi), 0), g), 10 * kDegToRad, 1e-12);
}

TEST(Visibility, GroundStationRotatesWithGmst) {
  zo::GroundStation gs{"eq", 0.0, 90.0, 0.0};
  const zo::Vec3 e = zo::ground_ecef(gs);
  EXPECT_NEAR(e.y(), kRE, 1e-6);
  const double quarter = (kPi / 2) / zo::kEarthRotation;
  const zo::Vec3 i = zo::ecef_to_eci(e, zo::gmst(quarter, 0.0));
  EXPECT_NEAR(i.x(), -kRE, 1e-6);
  const zo::LatLon ll = zo::subpoint(i, zo::gmst(quarter, 0.0));
  EXPECT_NEAR(ll.lon_deg, 90.0, 1e-9);
  EXPECT_NEAR(ll.lat_deg, 0.0, 1e-9);
  EXPECT_THROW(zo::ground_ecef(zo::GroundStation{"bad", 95.0, 0.0, 0.0}), zen::Error);
}

TEST(Scenario, BuiltinsAndJsonRoundTrip) {
  for (const auto& name : zo::Scenario::builtin_names()) {
    const zo::Scenario sc = zo::Scenario::named(name);
    const zo::Scenario back = zo::Scenario::from_json_text(sc.to_json_text());
    ASSERT_EQ(back.num_satellites(), sc.num_satellites()) << name;
    ASSERT_EQ(back.servers.size(), sc.servers.size());
    const zo::Geometry g1(sc), g2(back);
    for (int k = 0; k < sc.num_satellites(); k += 97) {
      EXPECT_EQ(back.satellites[k].plane, sc.satellites[k].plane);
      EXPECT_LT((g1.sat_position(k, 5000.0) - g2.sat_position(k, 5000.0)).norm(), 1e-3);
    }
    EXPECT_LT((g1.server_position(0, 5000.0) - g2.server_position(0, 5000.0)).norm(), 1e-3);
  }
  EXPECT_EQ(zo::Scenario::named("starlink").num_satellites(), 1584);
  EXPECT_EQ(zo::Scenario::named("starlink").planes, 72);
  EXPECT_EQ(zo::Scenario::named("bremen").servers[0].kind, zo::ServerNode::Kind::Ground);
  EXPECT_THROW(zo::Scenario::named("nosuch"), zen::Error);
}

TEST(Scenario, JsonConfig) {
  const zo::Scenario sc = zo::Scenario::from_json_text(R"({
    "name": "mine", "propagator": "j2", "elevation_mask_deg": 5, "atmosphere_margin_km": 80,
    "walker": {"pattern": "star", "inclination_deg": 85, "total": 12, "planes": 3, "phasing": 1, "altitude_km": 1200},
    "satellites": [{"plane": 3, "slot": 0, "altitude_km": 900, "inclination_deg": 97.5, "raan_deg": 10, "arg_lat_deg": 5}],
    "servers": [{"type": "ground", "name": "a", "lat_deg": 10, "lon_deg": 20},
                {"type": "satellite", "name": "geo", "altitude_km": 35786}]
  })");
  EXPECT_EQ(sc.name, "mine");
  EXPECT_EQ(sc.propagator, zo::Propagator::J2);
  EXPECT_EQ(sc.num_satellites(), 13);
  EXPECT_EQ(sc.planes, 4);
  EXPECT_DOUBLE_EQ(sc.atmosphere_margin_m, 80e3);
  EXPECT_DOUBLE_EQ(sc.elevation_mask_deg, 5.0);
  EXPECT_NEAR(sc.satellites[12].orbit.inclination_rad, 97.5 * kDegToRad, 1e-12);
  ASSERT_EQ(sc.servers.size(), 2u);
  EXPECT_EQ(sc.servers[1].kind, zo::ServerNode::Kind::Satellite);

  const zo::Scenario based = zo::Scenario::from_json_text(R"({"base": "reference", "gmst0_deg": 90})");
  EXPECT_EQ(based.num_satellites(), 40);
  EXPECT_NEAR(based.gmst0_rad, kPi / 2, 1e-12);

  EXPECT_THROW(zo::Scenario::from_json_text(R"({"base": "reference", "colour": 1})"), zen::Error);
  EXPECT_THROW(zo::Scenario::from_json_text(R"({"base": "reference", "propagator": "sgp4"})"), zen::Error);
  EXPECT_THROW(zo::Scenario::from_json_text(R"({"base": "reference", "servers": [{"type": "balloon"}]})"), zen::Error);
  EXPECT_THROW(zo::Scenario::from_json_text(
                   R"({"base": "reference", "satellites": [{"plane": 0, "slot": 1, "altitude_km": 500}]})"),
               zen::Error);  // slots of plane 0 are not 0..0
  EXPECT_THROW(zo::Scenario::from_json_text("{not json"), zen::Error);
}

// The link budget is part of the scenario: a base preset plus overrides, in the units papers state.
TEST(Scenario, LinkBudgetsFromJsonRoundTrip) {
  const zo::Scenario sc = zo::Scenario::from_json_text(R"({"base": "reference", "links": {
      "isl": {"preset": "s", "losses_db": 2, "rate": "dvbs2", "rolloff": 0.35},
      "server": {"frequency_ghz": 26, "bandwidth_mhz": 250, "tx_power_dbw": 13, "gain_tx_dbi": 35,
                 "gain_rx_dbi": 40, "noise_temp_k": 500, "min_snr_db": -3}}})");
  ASSERT_TRUE(sc.isl_link && sc.server_link);
  EXPECT_DOUBLE_EQ(sc.isl_link->frequency_hz, 2.4e9);  // from the s preset
  EXPECT_DOUBLE_EQ(sc.isl_link->losses_db, 2.0);
  EXPECT_EQ(sc.isl_link->rate_model, zo::RateModel::DvbS2);
  EXPECT_DOUBLE_EQ(sc.isl_link->rolloff, 0.35);
  EXPECT_DOUBLE_EQ(sc.server_link->frequency_hz, 26e9);
  EXPECT_NEAR(sc.server_link->tx_power_w, 19.95262315, 1e-6);
  EXPECT_NEAR(sc.server_link->gain_rx, 1e4, 1e-6);
  EXPECT_EQ(sc.server_link->rate_model, zo::RateModel::Shannon);
  EXPECT_DOUBLE_EQ(sc.server_link->min_snr_db, -3.0);
  const zo::Scenario back = zo::Scenario::from_json_text(sc.to_json_text());
  ASSERT_TRUE(back.isl_link && back.server_link);
  for (double d : {1000e3, 6406.9e3, 31020e3}) {
    EXPECT_NEAR(zo::rate_bps(*back.isl_link, d), zo::rate_bps(*sc.isl_link, d), 1e-6 * zo::rate_bps(*sc.isl_link, d) + 1e-9);
    EXPECT_NEAR(zo::rate_bps(*back.server_link, d), zo::rate_bps(*sc.server_link, d), 1e-6 * zo::rate_bps(*sc.server_link, d) + 1e-9);
  }
  EXPECT_FALSE(zo::Scenario::named("reference").isl_link);
  for (const char* bad : {R"({"base": "reference", "links": {"isl": {"frequncy_ghz": 2}}})",
                          R"({"base": "reference", "links": {"uplink": {}}})",
                          R"({"base": "reference", "links": {"isl": {"rate": "magic"}}})",
                          R"({"base": "reference", "links": {"isl": {"bandwidth_mhz": 0}}})"}) {
    EXPECT_THROW(zo::Scenario::from_json_text(bad), zen::Error) << bad;
  }
}

TEST(Scenario, Razmi2022IsTheReferenceWithItsKaLinkBudget) {
  const zo::Scenario r = zo::Scenario::named("razmi2022");
  const zo::Scenario ref = zo::Scenario::named("reference");
  ASSERT_EQ(r.num_satellites(), 40);
  EXPECT_EQ(r.planes, 5);
  for (int k = 0; k < 40; ++k) EXPECT_EQ(r.satellites[k].orbit.arg_lat_rad, ref.satellites[k].orbit.arg_lat_rad);
  ASSERT_EQ(r.servers.size(), 1u);
  EXPECT_EQ(r.servers[0].name, "meo");
  ASSERT_TRUE(r.isl_link && r.server_link);
  EXPECT_EQ(r.isl_link->frequency_hz, 20e9);
  EXPECT_EQ(r.server_link->gain_tx, 1633.0);
  EXPECT_EQ(r.epoch_utc, "2021-10-24T14:58:51Z");
}

TEST(Scenario, ServerSpecsFromTheCommandLine) {
  EXPECT_EQ(zo::parse_server("meo").kind, zo::ServerNode::Kind::Satellite);
  EXPECT_EQ(zo::parse_server("bremen").station.lat_deg, 53.0);
  const zo::ServerNode oslo = zo::parse_server("oslo=59.9,10.7,20");
  EXPECT_EQ(oslo.kind, zo::ServerNode::Kind::Ground);
  EXPECT_EQ(oslo.name, "oslo");
  EXPECT_DOUBLE_EQ(oslo.station.lat_deg, 59.9);
  EXPECT_DOUBLE_EQ(oslo.station.lon_deg, 10.7);
  EXPECT_DOUBLE_EQ(oslo.station.alt_m, 20.0);
  const zo::ServerNode anon = zo::parse_server("-33.9,18.4");
  EXPECT_DOUBLE_EQ(anon.station.lat_deg, -33.9);
  EXPECT_EQ(anon.station.alt_m, 0.0);
  for (const char* bad : {"mars", "1,2,3,4", "91,0", "10,abc", "10,", "x=10"}) EXPECT_THROW(zo::parse_server(bad), zen::Error) << bad;
}

// A "walker" block over a base takes the fields it omits from the base's Walker spec.
TEST(Scenario, WalkerFieldsDefaultToTheBase) {
  const zo::Scenario sc = zo::Scenario::from_json_text(R"({"base": "reference", "walker": {"altitude_km": 1200}})");
  ASSERT_EQ(sc.num_satellites(), 40);
  EXPECT_EQ(sc.planes, 5);
  for (const auto& s : sc.satellites) {
    EXPECT_NEAR(s.orbit.altitude_m, 1200e3, 1e-6);
    EXPECT_NEAR(s.orbit.inclination_rad, 60.0 * kDegToRad, 1e-12);
  }
  ASSERT_TRUE(sc.walker.has_value());
  EXPECT_EQ(sc.walker->phasing, 1);
  const zo::Scenario star = zo::Scenario::from_json_text(R"({"base": "reference-star", "walker": {"total": 20, "planes": 4}})");
  EXPECT_EQ(star.num_satellites(), 20);
  EXPECT_EQ(star.walker->pattern, zo::WalkerPattern::Star);
  EXPECT_NEAR(star.satellites[0].orbit.inclination_rad, 85.0 * kDegToRad, 1e-12);
  // Without a base, the Walker shape fields are required.
  EXPECT_THROW(zo::Scenario::from_json_text(R"({"walker": {"altitude_km": 1200}, "servers": [{"type": "ground", "lat_deg": 0, "lon_deg": 0}]})"),
               zen::Error);
}

// Unknown fields are errors at every level, naming the level.
TEST(Scenario, UnknownFieldsRejectedAtEveryLevel) {
  auto error_of = [](const std::string& text) {
    try {
      (void)zo::Scenario::from_json_text(text);
    } catch (const zen::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(R"({"base": "reference", "walker": {"altitude_kmm": 1200}})").find("walker: unknown field 'altitude_kmm'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"base": "reference", "satellites": [{"plane": 0, "slot": 0, "altitude_km": 500, "incl": 3}]})")
                .find("satellite 0: unknown field 'incl'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"base": "reference", "servers": [{"type": "ground", "lat_deg": 1, "lon_deg": 2, "height": 3}]})")
                .find("unknown field 'height'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"base": "reference", "servers": [{"type": "satellite", "altitude_km": 20000, "lat_deg": 3}]})")
                .find("unknown field 'lat_deg'"),
            std::string::npos);
}

// `config --scenario X` prints the Walker block (editable), not the expanded satellites, and it
// loads back to the same constellation; extras after the Walker ones are listed.
TEST(Scenario, TemplateKeepsTheWalkerBlock) {
  const zo::Scenario ref = zo::Scenario::named("reference");
  const std::string text = ref.to_json_text();
  EXPECT_NE(text.find("\"walker\""), std::string::npos);
  EXPECT_EQ(text.find("\"satellites\""), std::string::npos) << text;
  EXPECT_LT(text.size(), 1200u) << text;
  const zo::Scenario mixed = zo::Scenario::from_json_text(R"({"base": "reference",
    "walker": {"total": 10, "planes": 2},
    "satellites": [{"plane": 2, "slot": 0, "altitude_km": 900, "inclination_deg": 97}]})");
  ASSERT_EQ(mixed.num_satellites(), 11);
  const zo::Scenario back = zo::Scenario::from_json_text(mixed.to_json_text());
  ASSERT_EQ(back.num_satellites(), 11);
  ASSERT_TRUE(back.walker.has_value());
  EXPECT_EQ(back.walker->total, 10);
  const zo::Geometry g1(mixed), g2(back);
  for (int k = 0; k < 11; ++k) EXPECT_LT((g1.sat_position(k, 777.0) - g2.sat_position(k, 777.0)).norm(), 1e-3) << k;
}
