// Sweeps (zen/fl/sim/sweep.hpp): grid expansion, point scenarios, contact plans shared per
// constellation (a station subset's windows equal a direct prediction), CSV round trip and resume.
#include <cstdio>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "zen/error.hpp"
#include "zen/fl/sim/sweep.hpp"
#include "zen/orbit/contact.hpp"

namespace zen::fl::sim {
namespace {

SweepSettings settings() {
  SweepSettings s;
  s.stations = orbit::read_ground_stations(ZEN_STATIONS_CSV);
  s.stations_source = "landsat13";
  return s;
}

TEST(Sweep, GridExpandsToTheCartesianProductInOrder) {
  SweepGrid g;
  g.planes = {1, 2, 3};
  g.sats_per_plane = {1, 4};
  g.stations = {"1", "13", "meo"};
  g.scheme = {"baseline", "fedbuff"};
  const auto pts = expand(g);
  ASSERT_EQ(pts.size(), 36u);
  std::set<std::string> keys;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    EXPECT_EQ(pts[i].index, i);
    keys.insert(pts[i].key());
    EXPECT_LT(pts[i].phasing, pts[i].planes);  // F = 1 taken modulo P
  }
  EXPECT_EQ(keys.size(), 36u);
  EXPECT_EQ(pts[0].scheme, "baseline");  // scheme fastest, planes slowest
  EXPECT_EQ(pts[1].scheme, "fedbuff");
  EXPECT_EQ(pts[35].planes, 3);
  EXPECT_EQ(pts[0].phasing, 0);
  EXPECT_EQ(pts[12].planes, 2);
  EXPECT_EQ(pts[12].phasing, 1);
  for (auto bad : {&SweepGrid::stations, &SweepGrid::scheme, &SweepGrid::preset, &SweepGrid::compute,
                   &SweepGrid::split, &SweepGrid::pattern}) {
    SweepGrid b;
    (b.*bad) = {"nonsense"};
    EXPECT_THROW(expand(b), Error);
  }
  SweepGrid e;
  e.planes.clear();
  EXPECT_THROW(expand(e), Error);
}

TEST(Sweep, PointScenarioIsTheWalkerConstellationWithTheFirstStations) {
  const SweepSettings s = settings();
  ASSERT_EQ(s.stations.size(), 13u);
  EXPECT_EQ(s.stations[0].name, "Sioux_Falls");
  EXPECT_DOUBLE_EQ(s.stations[12].station.lat_deg, 17.4);
  SweepPoint p;
  p.planes = 4;
  p.sats_per_plane = 5;
  p.phasing = 1;
  p.stations = "5";
  const orbit::Scenario sc = sweep_scenario(p, s);
  EXPECT_EQ(sc.num_satellites(), 20);
  EXPECT_EQ(sc.planes, 4);
  ASSERT_EQ(sc.servers.size(), 5u);
  EXPECT_EQ(sc.servers[4].name, "Tromso");
  EXPECT_EQ(sc.walker->pattern, orbit::WalkerPattern::Star);
  p.stations = "14";
  EXPECT_THROW(sweep_scenario(p, s), Error);
  p.stations = "meo";
  EXPECT_EQ(sweep_scenario(p, s).servers.at(0).name, "meo");
}

// Windows are per satellite-station pair: the subset plan filtered from the largest station set is
// the plan predicted directly for the subset, and one prediction serves every subset.
TEST(Sweep, SharedPlansFilterTheLargestStationSet) {
  const SweepSettings s = settings();
  SharedPlans plans(s, 13);
  SweepPoint p;
  p.planes = 2;
  p.sats_per_plane = 3;
  for (const char* n : {"13", "1", "5"}) {
    p.stations = n;
    const orbit::Scenario sc = sweep_scenario(p, s);
    const auto shared = plans.plan(p, sc, 86400.0);
    orbit::PredictOptions o;
    o.horizon_s = 86400.0;
    const orbit::ContactPlan direct = orbit::ContactPlan::predict(sc, o);
    ASSERT_EQ(shared->num_satellites(), direct.num_satellites());
    for (int k = 0; k < direct.num_satellites(); ++k) {
      ASSERT_EQ(shared->windows(k).size(), direct.windows(k).size()) << n << " stations, satellite " << k;
      for (std::size_t i = 0; i < direct.windows(k).size(); ++i) {
        EXPECT_EQ(shared->windows(k)[i].peer, direct.windows(k)[i].peer);
        EXPECT_DOUBLE_EQ(shared->windows(k)[i].start_s, direct.windows(k)[i].start_s);
        EXPECT_DOUBLE_EQ(shared->windows(k)[i].end_s, direct.windows(k)[i].end_s);
      }
    }
  }
  EXPECT_EQ(plans.predictions(), 1u);
  p.stations = "5";
  plans.plan(p, sweep_scenario(p, s), 2 * 86400.0);  // a longer horizon: predicted again
  EXPECT_EQ(plans.predictions(), 2u);
}

TEST(Sweep, CsvRoundTripAndTornLastLine) {
  SweepRow r;
  r.point.planes = 3;
  r.point.sats_per_plane = 2;
  r.point.stations = "9";
  r.point.scheme = "fedprox";
  r.settings = "model=logreg;rounds=20";
  r.rounds = 20;
  r.updates = 20;
  r.time_to_target_s = 1234.5;
  r.rounds_to_target = 3;
  r.final_accuracy = 0.75;
  r.server_transfers = 400;
  r.staleness_max = 0;
  SweepRow e = r;
  e.point.scheme = "ring";
  e.status = "error: blocked, by the Earth";  // commas are replaced
  e.time_to_target_s = -1;
  e.rounds_to_target = -1;
  const std::string path = ::testing::TempDir() + "zen_sweep_rows.csv";
  {
    std::ofstream f(path);
    f << sweep_csv_header() << "\n" << sweep_csv_row(r) << "\n" << sweep_csv_row(e) << "\n" << "17,P=1;S=1";
  }
  const auto rows = read_sweep_csv(path);
  ASSERT_EQ(rows.size(), 2u);  // the torn line of an interrupted run is not a finished point
  EXPECT_EQ(rows[0].point.key(), r.point.key());
  EXPECT_EQ(rows[0].time_to_target_s, 1234.5);
  EXPECT_EQ(rows[0].rounds_to_target, 3);
  EXPECT_EQ(rows[0].settings, r.settings);
  EXPECT_EQ(rows[1].status, "error: blocked  by the Earth");
  EXPECT_EQ(rows[1].time_to_target_s, -1);
  EXPECT_TRUE(read_sweep_csv(path + ".missing").empty());
  {
    std::ofstream f(path);
    f << "a,b\n";
  }
  EXPECT_THROW(read_sweep_csv(path), Error);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace zen::fl::sim
