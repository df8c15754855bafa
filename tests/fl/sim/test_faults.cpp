// Fault injection: failed satellites, failed ISLs and missed upload windows. The ring re-routes and
// the learner's server verifies sum D_k of every aggregate and that nobody is counted twice.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include <gtest/gtest.h>

#include "sim_test_util.hpp"
#include "zen/fl/fedavg.hpp"
#include "zen/fl/sim/learner.hpp"
#include "zen/fl/sim/loopback_runner.hpp"
#include "zen/orbit/visibility.hpp"

namespace zen::fl::sim {
namespace {

using test::events_of;
using test::reference;
using test::reference_plan;
using test::tiny_federation;
using test::tiny_test;
using test::tiny_train;


Schedule ring_with(const std::vector<Fault>& faults, int rounds = 2) {
  TimingConfig cfg;
  cfg.faults = faults;
  const TimingContext ctx(reference(), reference_plan(), cfg);
  return simulate_ring(ctx, rounds);
}

std::vector<int> without(std::vector<int> v, int x) {
  v.erase(std::remove(v.begin(), v.end(), x), v.end());
  return v;
}

/// The learner replays the schedule; its server throws on any sum-D_k mismatch or double count.
void replay(const Schedule& s, int ranks = 0) {
  const LearnResult r = run_loopback(s, tiny_federation(), tiny_test(), ranks);
  ASSERT_EQ(r.rows.size(), s.updates.size() + 1);
}

int sink_of(const Schedule& s, int plane, int round) {
  for (const Event* e : events_of(s, EventKind::Upload, round))
    if (e->orbit == plane) return e->from;
  return -1;
}

TEST(Faults, SatelliteDeadFromTheStartIsRoutedAround) {
  const Schedule s = ring_with({Fault::satellite(3, 0.0)});
  for (const UpdateRecord& u : s.updates) {
    EXPECT_EQ(u.members, without(test::all_clients(40), 3));
    EXPECT_EQ(u.ps_transfers, 10);           // the broken ring is one path: still one source + one sink
    EXPECT_EQ(u.isl_transfers, 5 * 14 - 2);  // plane 0 has 7 members: 2 x 6 hops
  }
  for (const Event& e : s.events) {
    EXPECT_NE(e.from, 3);
    EXPECT_NE(e.to, 3);
  }
  test::expect_uploads_partition_members(s);
  replay(s);
}

TEST(Faults, LinkDeadFromTheStartTurnsTheRingIntoAPath) {
  const Schedule s = ring_with({Fault::link(9, 10, 0.0)});
  for (const UpdateRecord& u : s.updates) {
    EXPECT_EQ(u.members, test::all_clients(40));
    EXPECT_EQ(u.ps_transfers, 10);
    EXPECT_EQ(u.isl_transfers, 70);
  }
  for (const Event& e : s.events)
    if (e.kind == EventKind::IslModel || e.kind == EventKind::IslAggregate) {
      EXPECT_FALSE((e.from == 9 && e.to == 10) || (e.from == 10 && e.to == 9)) << "event " << e.id;
    }
  replay(s);
}

// A ring that is not uniform: plane 0's slot-2 satellite is moved 40 degrees ahead, so slots 1 and 2
// are 85 degrees apart (no line of sight past the Earth at 2000 km) and slots 2 and 3 only 5. The
// blocked hop is handled like a cut link, and every hop takes the time of its own distance.
TEST(Faults, NonUniformRingBlockedHopIsRoutedAroundAndHopsUseTheirOwnDistance) {
  orbit::Scenario sc = reference();
  const std::vector<int> ring = sc.plane_members(0);
  sc.satellites[static_cast<std::size_t>(ring[2])].orbit.arg_lat_rad += 40.0 * M_PI / 180.0;
  ASSERT_FALSE(orbit::ring_info(sc, 0).uniform);
  orbit::PredictOptions o;
  o.horizon_s = reference_plan().horizon_s();
  const orbit::ContactPlan plan = orbit::ContactPlan::predict(sc, o);
  const TimingContext ctx(sc, plan, TimingConfig{});
  EXPECT_FALSE(ctx.link_alive(ring[1], ring[2], 0.0));
  EXPECT_FALSE(ctx.link_alive(ring[1], ring[2], 5000.0));
  EXPECT_TRUE(ctx.link_alive(ring[2], ring[3], 0.0));
  EXPECT_LT(ctx.isl_time(ring[2], ring[3], 0.0, ctx.model_bytes()), ctx.isl_time(ring[3], ring[4], 0.0, ctx.model_bytes()));
  const Schedule s = simulate_ring(ctx, 2);
  for (const UpdateRecord& u : s.updates) {
    EXPECT_EQ(u.members, test::all_clients(40));
    EXPECT_EQ(u.ps_transfers, 10);
    EXPECT_EQ(u.isl_transfers, 70);  // plane 0 is a path of 8: still 2 x 7 hops
  }
  for (const Event& e : s.events) {
    if (e.kind != EventKind::IslModel && e.kind != EventKind::IslAggregate) continue;
    EXPECT_FALSE((e.from == ring[1] && e.to == ring[2]) || (e.from == ring[2] && e.to == ring[1])) << "event " << e.id;
    EXPECT_NEAR(e.end_s - e.start_s, ctx.isl_time(e.from, e.to, e.start_s, e.bytes), 1e-12);
  }
  test::expect_uploads_partition_members(s);
  const LearnResult r = run_loopback(s, tiny_federation(), tiny_test());
  ASSERT_EQ(r.rows.size(), s.updates.size() + 1);
}

TEST(Faults, LinkFailingDuringAggregationReroutesTheOtherWay) {
  // Find the sink of plane 1 in round 1 and break the link its chain A uses next to it, just
  // after training (the partial aggregation phase).
  const Schedule clean = ring_with({}, 1);
  const int q = sink_of(clean, 1, 1);
  ASSERT_GE(q, 8);
  const auto& ring = reference().plane_members(1);
  const int qi = static_cast<int>(std::find(ring.begin(), ring.end(), q) - ring.begin());
  const int a = ring[(qi + 1) % 8], b = ring[(qi + 2) % 8];
  double t_fin = 0;
  for (const Event* e : events_of(clean, EventKind::Train, 1))
    if (e->from == b) t_fin = e->end_s;
  const Schedule s = ring_with({Fault::link(a, b, t_fin - 1.0)}, 1);
  const UpdateRecord& u = s.updates[0];
  EXPECT_EQ(u.members, test::all_clients(40));  // nothing lost
  EXPECT_EQ(u.ps_transfers, 10);
  EXPECT_GT(u.isl_transfers, 70);  // the detour took more hops
  EXPECT_FALSE(events_of(s, EventKind::IslAggregate, 1, /*failed=*/true).empty());
  EXPECT_GE(u.time_s, clean.updates[0].time_s);
  test::expect_uploads_partition_members(s);
  replay(s);
}

TEST(Faults, SatelliteFailingMidRoundLosesOnlyItsOwnUpdate) {
  // A satellite dies while training: the ring routes the aggregate around it and the server's
  // update holds everybody else exactly once.
  const Schedule clean = ring_with({}, 1);
  const int victim = 13;
  double t_start = 0;
  for (const Event* e : events_of(clean, EventKind::Train, 1))
    if (e->from == victim) t_start = e->start_s;
  const Schedule s = ring_with({Fault::satellite(victim, t_start + 30.0)}, 2);
  EXPECT_EQ(s.updates[0].members, without(test::all_clients(40), victim));
  EXPECT_EQ(s.updates[1].members, without(test::all_clients(40), victim));
  EXPECT_TRUE(std::count(s.skipped.begin(), s.skipped.end(), victim) >= 1);
  test::expect_uploads_partition_members(s);
  replay(s);
}

TEST(Faults, MissedUploadGoesToTheNextVisibleSink) {
  const Schedule clean = ring_with({}, 1);
  const int q = sink_of(clean, 2, 1);
  const Schedule s = ring_with({Fault::missed_upload(q, 0.0)}, 1);
  const UpdateRecord& u = s.updates[0];
  EXPECT_EQ(u.members, test::all_clients(40));
  EXPECT_EQ(u.ps_failed, 1);
  EXPECT_EQ(u.ps_transfers, 10);  // delivered ones
  const auto failed = events_of(s, EventKind::Upload, 1, true);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]->from, q);
  // Exactly one delivered upload of plane 2 with all its members, after the failed attempt.
  int delivered = 0;
  for (const Event* e : events_of(s, EventKind::Upload, 1))
    if (e->orbit == 2) {
      ++delivered;
      EXPECT_EQ(e->members, reference().plane_members(2));
      EXPECT_GE(e->start_s, failed[0]->end_s);
    }
  EXPECT_EQ(delivered, 1);
  replay(s);
}

TEST(Faults, BaselineRetriesAMissedUploadAndSkipsDeadSatellites) {
  TimingConfig cfg;
  cfg.faults = {Fault::missed_upload(5, 0.0), Fault::satellite(20, 0.0)};
  const TimingContext ctx(reference(), reference_plan(), cfg);
  const Schedule s = simulate_baseline(ctx, 2);
  EXPECT_EQ(s.updates[0].members, without(test::all_clients(40), 20));
  EXPECT_EQ(s.updates[0].ps_transfers, 78);
  EXPECT_EQ(s.updates[0].ps_failed, 1);
  EXPECT_EQ(s.updates[1].ps_failed, 0);
  const auto failed = events_of(s, EventKind::Upload, 1, true);
  ASSERT_EQ(failed.size(), 1u);
  for (const Event* e : events_of(s, EventKind::Upload, 1))
    if (e->from == 5) {
      EXPECT_GT(e->start_s, failed[0]->end_s);
    }
  replay(s);
}

TEST(Faults, RingAsyncSurvivesFaults) {
  TimingConfig cfg;
  cfg.faults = {Fault::satellite(3, 0.0), Fault::link(17, 18, 100.0), Fault::missed_upload(30, 50.0)};
  const TimingContext ctx(reference(), reference_plan(), cfg);
  const Schedule s = simulate_ring_async(ctx, 2);
  ASSERT_EQ(s.updates.size(), 10u);
  for (const auto& u : s.updates) EXPECT_EQ(std::count(u.members.begin(), u.members.end(), 3), 0);
  replay(s, 5);
}

// ---- the final model equals FedAvg computed directly over the surviving clients ----

/// Plain synchronous FedAvg without any schedule: every round, each client not in `dead` trains
/// from the previous global model and the new global model is their D_k-weighted mean.
std::vector<float> direct_fedavg(int rounds, const std::set<int>& dead) {
  const Federation& fed = tiny_federation();
  std::vector<float> w = fed.global().params();
  for (int r = 1; r <= rounds; ++r) {
    std::vector<std::vector<float>> models;
    std::vector<double> weights;
    for (int k = 0; k < fed.num_clients(); ++k)
      if (dead.count(k) == 0) {
        models.push_back(fed.local_update(k, w, r).params);
        weights.push_back(fed.client_weight(k));
      }
    w = fedavg(models, weights);
  }
  return w;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

/// Replays the schedule with real models and compares its final model with direct FedAvg over the
/// survivors. The aggregation grouping differs (ring chains, per-orbit partials), so the two agree
/// up to rounding of the double sums carried through local training; the model that also
/// averages the dead clients' updates must be far outside that tolerance, or the check proves
/// nothing.
void expect_fedavg_over_survivors(const Schedule& s, const std::set<int>& dead) {
  const int rounds = static_cast<int>(s.updates.size());
  for (const UpdateRecord& u : s.updates) {
    for (int d : dead) EXPECT_EQ(std::count(u.members.begin(), u.members.end(), d), 0) << "round " << u.round;
  }
  const LearnResult r = run_loopback(s, tiny_federation(), tiny_test(), 6);
  const std::vector<float> want = direct_fedavg(rounds, dead);
  const float err = max_abs_diff(r.final_params, want);
  constexpr float kTol = 1e-6f;  // measured: 0 (the double sums round to the same floats)
  EXPECT_LE(err, kTol) << s.scheme << ": final model differs from FedAvg over the survivors";
  std::printf("%s: max |final - direct FedAvg| = %.3g\n", s.scheme.c_str(), static_cast<double>(err));
  if (!dead.empty()) {
    const std::vector<float> with_dead = direct_fedavg(rounds, {});
    EXPECT_GT(max_abs_diff(with_dead, want), 100 * kTol) << "the dead clients' updates would be indistinguishable";
  }
}

TEST(Faults, FedAsyncAndDeadlineBaselineSurviveFaults) {
  TimingConfig cfg;
  cfg.faults = {Fault::satellite(5, 3000.0), Fault::missed_upload(12, 0.0)};
  cfg.round_deadline_s = 1500.0;
  const TimingContext ctx(reference(), reference_plan(), cfg);
  for (const std::string scheme : {"fedasync", "baseline-deadline"}) {
    const Schedule s = simulate(scheme, ctx, 3);
    for (const Event& e : s.events)
      if (e.from == 5 || e.to == 5) {
        EXPECT_LT(e.start_s, 3000.0) << scheme << " event " << e.id;
      }
    int failed = 0;
    for (const Event& e : s.events) failed += e.failed && e.from == 12;
    EXPECT_LE(failed, 1) << scheme;
    replay(s, 5);
  }
}

TEST(FaultsFinalModel, DeadSatelliteRing) {
  expect_fedavg_over_survivors(ring_with({Fault::satellite(3, 0.0)}), {3});
}

TEST(FaultsFinalModel, SatelliteFailingMidRoundRing) {
  const Schedule clean = ring_with({}, 1);
  const int victim = 13;
  double t_start = 0;
  for (const Event* e : events_of(clean, EventKind::Train, 1))
    if (e->from == victim) t_start = e->start_s;
  expect_fedavg_over_survivors(ring_with({Fault::satellite(victim, t_start + 30.0)}), {victim});
}

TEST(FaultsFinalModel, BrokenLinkAndMissedUploadLoseNobody) {
  expect_fedavg_over_survivors(ring_with({Fault::link(9, 10, 0.0), Fault::missed_upload(5, 0.0)}), {});
}

TEST(FaultsFinalModel, BaselineWithDeadSatelliteAndMissedUpload) {
  TimingConfig cfg;
  cfg.faults = {Fault::missed_upload(5, 0.0), Fault::satellite(20, 0.0)};
  const TimingContext ctx(reference(), reference_plan(), cfg);
  expect_fedavg_over_survivors(simulate_baseline(ctx, 2), {20});
}

// ---- the server's checks must catch a bad schedule ----

std::string error_of(const Schedule& s) {
  try {
    run_loopback(s, tiny_federation(), tiny_test());
  } catch (const zen::Error& e) {
    return e.what();
  }
  return "";
}

TEST(ServerChecks, DuplicateDeliveryIsRejected) {
  Schedule s = ring_with({}, 1);
  // Make the sink of plane 0 upload a second time the same members (a duplicate message).
  const Event* up = nullptr;
  for (const Event* e : events_of(s, EventKind::Upload, 1))
    if (e->orbit == 0) up = e;
  ASSERT_NE(up, nullptr);
  Event dup = *up;
  s.events.push_back(dup);
  std::stable_sort(s.events.begin(), s.events.end(), [](const Event& a, const Event& b) { return a.start_s < b.start_s; });
  for (std::size_t i = 0; i < s.events.size(); ++i) s.events[i].id = static_cast<int>(i);
  const std::string msg = error_of(s);
  EXPECT_NE(msg.find("holds 0 of the 8 clients"), std::string::npos) << msg;
}

TEST(ServerChecks, MissingClientIsRejected) {
  Schedule s = ring_with({}, 1);
  // Claim an extra client in the server update that no aggregate carries.
  for (Event& e : s.events)
    if (e.kind == EventKind::Upload && e.orbit == 4) {
      e.failed = true;  // plane 4's upload never arrives, yet the update lists its members
    }
  const std::string msg = error_of(s);
  EXPECT_NE(msg.find("received 32 clients, scheduled 40"), std::string::npos) << msg;
}

}  // namespace
}  // namespace zen::fl::sim
