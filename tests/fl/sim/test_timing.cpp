// Timing simulator: baseline / ring / ring-async on the reference scenario, against the rules of
// orbit-fl.md §5-§6 recomputed independently here.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <gtest/gtest.h>

#include "sim_test_util.hpp"
#include "zen/orbit/visibility.hpp"

namespace zen::fl::sim {
namespace {

using test::events_of;
using test::reference;
using test::reference_plan;

TEST(Timing, EveryTransferIsChargedTheBytesItPutsOnTheLink) {
  const TimingContext ctx(reference(), reference_plan(), TimingConfig{});
  // 7850 float32 parameters behind the 32-byte transfer header; an aggregate adds its own 32-byte
  // header, 4 bytes per member and sends the mean as float32.
  EXPECT_EQ(ctx.model_bytes(), 32u + 4u * 7850u);
  EXPECT_EQ(ctx.aggregate_bytes(1), 32u + 32u + 4u + 4u * 7850u);
  EXPECT_EQ(ctx.aggregate_bytes(8), 32u + 32u + 32u + 4u * 7850u);
  for (const std::string scheme : {"baseline", "ring", "ring-async"}) {
    const Schedule s = simulate(scheme, ctx, 2);
    for (const Event& e : s.events) {
      if (e.kind == EventKind::Download || e.kind == EventKind::IslModel) { EXPECT_EQ(e.bytes, ctx.model_bytes()); }
      else if (e.is_transfer()) EXPECT_EQ(e.bytes, ctx.aggregate_bytes(e.members.size())) << scheme << " " << e.id;
      else EXPECT_EQ(e.bytes, 0u);
    }
  }
}

TEST(Timing, LinkTimesUseTheDistanceOfEachTransfer) {
  const TimingContext ctx(reference(), reference_plan(), TimingConfig{});
  const auto ka = orbit::LinkPreset::ka();
  // ISL at the 6406.9 km chord: ~251 kbit at ~231.5 Mb/s plus d/c ~ 22.5 ms, the same at any time on
  // a uniform ring (the distance is taken at the transfer).
  const std::vector<int>& ring = ctx.ring(0);
  const double chord = orbit::ring_chord(reference().satellites[ring[0]].orbit.radius_m(), 8);
  const double bits = 8.0 * static_cast<double>(ctx.model_bytes());
  for (double t : {0.0, 1234.5, 40000.0}) {
    EXPECT_NEAR(ctx.isl_time(ring[0], ring[1], t, ctx.model_bytes()), orbit::transfer_time_s(ka, bits, chord), 1e-9);
    EXPECT_NEAR(ctx.isl_time(ring[7], ring[0], t, ctx.model_bytes()), orbit::transfer_time_s(ka, bits, chord), 1e-9);
  }
  EXPECT_NEAR(ctx.isl_time(ring[0], ring[1], 0.0, ctx.model_bytes()), 0.0225, 0.0005);
  // Server links: the rate over the distance the transfer sees, not the worst case of the horizon.
  int shorter = 0;
  for (int k = 0; k < 40; ++k) {
    for (double t : {0.0, 5000.0, 20000.0}) {
      const auto c = ctx.try_contact(k, t, ctx.model_bytes());
      ASSERT_TRUE(c);
      const auto& w = reference_plan().windows(k)[c->window_index];
      const double d0 = ctx.geometry().distance(k, w.peer, c->start_s);
      EXPECT_NEAR(c->completion_s - c->start_s, orbit::transfer_time_s(ka, bits, d0), 1e-4) << k << " " << t;
      EXPECT_LE(c->completion_s - c->start_s, orbit::transfer_time_s(ka, bits, w.max_dist_m) + 1e-9);
      EXPECT_LT(c->completion_s - c->start_s, 0.13);  // at most the 31020 km tangent distance (~125 ms)
      shorter += c->completion_s - c->start_s <
                 orbit::transfer_time_s(ka, bits, reference_plan().max_distance(k)) - 1e-3;
    }
  }
  EXPECT_GT(shorter, 0);
}

TEST(ComputeModel, TrainingTimeIsTheWorkOverTheThroughput) {
  ComputeModel m;
  m.flops_per_s = 2e9;
  const std::vector<std::size_t> samples{1500, 3000, 0, 7};
  const auto t = compute_train_times(m, samples, 2, 7850);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(train_flops_per_sample(7850), 6.0 * 7850);
  EXPECT_DOUBLE_EQ(t[0], 1500.0 * 2 * 6 * 7850 / 2e9);  // 0.07065 s
  EXPECT_DOUBLE_EQ(t[1], 2 * t[0]);
  EXPECT_EQ(t[2], 0.0);
  // A spread draws each satellite's share of the throughput from [1 - s, 1 + s], seeded.
  m.spread = 0.5;
  const std::vector<std::size_t> many(200, 1000);
  const auto a = compute_train_times(m, many, 1, 100);
  const double nominal = 1000.0 * 6 * 100 / 2e9;
  double lo = 1e300, hi = 0;
  for (double x : a) {
    EXPECT_GE(x, nominal / 1.5 * (1 - 1e-12));
    EXPECT_LE(x, nominal / 0.5 * (1 + 1e-12));
    lo = std::min(lo, x), hi = std::max(hi, x);
  }
  EXPECT_GT(hi / lo, 2.0);  // the spread is used
  EXPECT_EQ(a, compute_train_times(m, many, 1, 100));
  m.seed = 2;
  EXPECT_NE(a, compute_train_times(m, many, 1, 100));
  m.spread = 1.0;
  EXPECT_THROW(compute_train_times(m, many, 1, 100), Error);
  m.spread = 0;
  m.flops_per_s = 0;
  EXPECT_THROW(compute_train_times(m, many, 1, 100), Error);
  m.flops_per_s = 1e9;
  EXPECT_THROW(compute_train_times(m, many, 0, 100), Error);
}

TEST(Baseline, EightyServerTransfersPerRoundAndTheEfcRule) {
  const TimingContext ctx(reference(), reference_plan(), TimingConfig{});
  const Schedule s = simulate_baseline(ctx, 3);
  ASSERT_EQ(s.updates.size(), 3u);
  double T0 = 0.0;
  for (const UpdateRecord& u : s.updates) {
    EXPECT_EQ(u.ps_transfers, 80);
    EXPECT_EQ(u.isl_transfers, 0);
    EXPECT_EQ(u.members, test::all_clients(40));
    // Every satellite: download at its first feasible contact after T0, upload at the next one
    // after training; the round ends at the last upload plus the server's aggregation time.
    double last = 0.0;
    for (int k = 0; k < 40; ++k) {
      const auto dl = ctx.try_contact(k, T0, ctx.model_bytes());
      ASSERT_TRUE(dl);
      const auto up = ctx.try_contact(k, dl->completion_s + 60.0, ctx.aggregate_bytes(1));
      ASSERT_TRUE(up);
      last = std::max(last, up->completion_s);
      bool found_dl = false, found_up = false;
      for (const Event& e : s.events) {
        if (e.round != u.round) continue;
        if (e.kind == EventKind::Download && e.to == k) found_dl = std::abs(e.end_s - dl->completion_s) < 1e-9;
        if (e.kind == EventKind::Upload && e.from == k) found_up = std::abs(e.end_s - up->completion_s) < 1e-9;
      }
      EXPECT_TRUE(found_dl && found_up) << "satellite " << k << " round " << u.round;
    }
    EXPECT_NEAR(u.time_s, last + 0.15e-3, 1e-9);
    T0 = u.time_s;
  }
  // The reference estimate is ~2118 s per round (limb-crossing dominated).
  EXPECT_GT(s.mean_update_interval_s(), 1500.0);
  EXPECT_LT(s.mean_update_interval_s(), 3000.0);
}

/// Independent implementation of one orbit's ring round (fault-free), orbit-fl.md §6.
double reference_ring_orbit(const TimingContext& ctx, int plane, double T0, int* sink_out) {
  const std::vector<int>& ring = ctx.ring(plane);
  const int S = static_cast<int>(ring.size());
  const auto src = ctx.efc(ring, T0, ctx.model_bytes());
  EXPECT_TRUE(src);
  const int si = static_cast<int>(std::find(ring.begin(), ring.end(), src->sat) - ring.begin());
  // A uniform ring: every hop has the same length; the time depends on what it carries.
  const double chord = orbit::ring_chord(reference().satellites[ring[0]].orbit.radius_m(), S);
  auto hop = [&](uint64_t bytes) { return orbit::transfer_time_s(ctx.config().isl_link, 8.0 * bytes, chord); };
  const double tI = hop(ctx.model_bytes()), tA = ctx.config().isl_agg_s;
  std::vector<double> fin(S);
  for (int j = 0; j < S; ++j) fin[j] = src->completion_s + tI * orbit::ring_hops(j, si, S) + 60.0;
  const int m = S / 2;
  double best = std::numeric_limits<double>::infinity();
  for (int q = 0; q < S; ++q) {
    auto chain = [&](std::vector<int> nodes) {  // far end first
      double a = -1;  // node i sends the aggregate of i + 1 clients
      for (std::size_t i = 0; i < nodes.size(); ++i)
        a = i == 0 ? fin[nodes[i]] : std::max(fin[nodes[i]], a + hop(ctx.aggregate_bytes(i))) + tA;
      return nodes.empty() ? -std::numeric_limits<double>::infinity() : a + hop(ctx.aggregate_bytes(nodes.size()));
    };
    std::vector<int> A, B;
    for (int k = m; k >= 1; --k) A.push_back((q + k) % S);
    for (int k = S - 1 - m; k >= 1; --k) B.push_back(((q - k) % S + S) % S);
    const double ready = std::max({fin[q], chain(A), chain(B)}) + ctx.config().sink_choice_s;
    const auto c = ctx.try_contact(ring[q], ready, ctx.aggregate_bytes(S));
    EXPECT_TRUE(c);
    if (c->completion_s < best) {
      best = c->completion_s;
      *sink_out = ring[q];
    } else if (c->completion_s == best) {
      *sink_out = -1;  // tie: the tie-break (longest remaining window) decides
    }
  }
  return best;
}

TEST(Ring, TenServerTransfersPerRoundAndTheTwoChainRule) {
  const TimingContext ctx(reference(), reference_plan(), TimingConfig{});
  const Schedule s = simulate_ring(ctx, 3);
  ASSERT_EQ(s.updates.size(), 3u);
  double T0 = 0.0;
  for (const UpdateRecord& u : s.updates) {
    EXPECT_EQ(u.ps_transfers, 10);      // 2P
    EXPECT_EQ(u.isl_transfers, 5 * 14); // 2(S-1) per orbit
    EXPECT_EQ(u.ps_failed, 0);
    EXPECT_EQ(u.members, test::all_clients(40));
    double last = 0.0;
    for (int p = 0; p < 5; ++p) {
      int sink = -1;
      const double done = reference_ring_orbit(ctx, p, T0, &sink);
      last = std::max(last, done);
      const auto ups = events_of(s, EventKind::Upload, u.round);
      const auto it = std::find_if(ups.begin(), ups.end(), [&](const Event* e) { return e->orbit == p; });
      ASSERT_NE(it, ups.end());
      if (sink >= 0) {
        EXPECT_EQ((*it)->from, sink) << "plane " << p << " round " << u.round;
      }
      EXPECT_NEAR((*it)->end_s, done, 1e-9);
      EXPECT_EQ((*it)->members, ctx.ring(p));
    }
    EXPECT_NEAR(u.time_s, last + 0.15e-3, 1e-9);
    T0 = u.time_s;
  }
  test::expect_uploads_partition_members(s);
}

TEST(Ring, SpeedUpOverBaselineWithKaIsBetween20And40) {
  const TimingContext ctx(reference(), reference_plan(), TimingConfig{});
  const Schedule b = simulate_baseline(ctx, 10);
  const Schedule r = simulate_ring(ctx, 10);
  const double speedup = b.mean_update_interval_s() / r.mean_update_interval_s();
  EXPECT_GT(speedup, 20.0);
  EXPECT_LT(speedup, 40.0);
  // The ring round is about t_ps + hops * t_isl + 60 s + hops * t_isl + t_ps when windows are open.
  EXPECT_GT(r.mean_update_interval_s(), 60.0);
  EXPECT_LT(r.mean_update_interval_s(), 70.0);
}

TEST(Ring, SPresetIsSlowerButStillFaster) {
  TimingConfig cfg;
  cfg.set_links("s", reference());
  const TimingContext ctx(reference(), reference_plan(), cfg);
  EXPECT_NEAR(ctx.isl_time(ctx.ring(0)[0], ctx.ring(0)[1], 0.0, ctx.model_bytes()), 1.44, 0.05);  // orbit-fl.md §3
  const Schedule b = simulate_baseline(ctx, 4);
  const Schedule r = simulate_ring(ctx, 4);
  EXPECT_GT(r.mean_update_interval_s(), 60.0 + 2 * 4 * 1.4);
  EXPECT_GT(b.mean_update_interval_s() / r.mean_update_interval_s(), 5.0);
  for (const auto& u : r.updates) EXPECT_EQ(u.ps_transfers, 10);
}

// --preset scenario: the scenario's own link budgets drive the timing; a budget that cannot carry
// the ISL chord is refused with the numbers.
TEST(Ring, ScenarioLinkBudgetsDriveTheTiming) {
  orbit::Scenario sc = reference();
  orbit::LinkPreset isl = orbit::LinkPreset::ka();
  isl.rate_model = orbit::RateModel::DvbS2;
  isl.gain_tx = isl.gain_rx = orbit::from_db(35.0);  // +2.9 dB each end: the 6407 km chord gets ~1.6 dB
  orbit::LinkPreset server = orbit::LinkPreset::ka();
  sc.isl_link = isl;
  sc.server_link = server;
  TimingConfig cfg;
  cfg.set_links("scenario", sc);
  const TimingContext ctx(sc, reference_plan(), cfg);
  const std::vector<int>& ring = ctx.ring(0);
  const double chord = orbit::ring_chord(sc.satellites[ring[0]].orbit.radius_m(), 8);
  EXPECT_STREQ(orbit::dvbs2_modcod(isl, chord)->name, "QPSK 1/2");
  EXPECT_NEAR(ctx.isl_time(ring[0], ring[1], 0.0, ctx.model_bytes()),
              8.0 * ctx.model_bytes() / (500e6 / 1.2 * 0.988858) + chord / 3e8, 1e-9);
  const Schedule s = simulate_ring(ctx, 1);
  EXPECT_EQ(s.updates.at(0).members, test::all_clients(40));
  sc.isl_link->gain_tx = sc.isl_link->gain_rx = 1633.0;  // -4.2 dB: below every MODCOD
  cfg.set_links("scenario", sc);
  const TimingContext dead(sc, reference_plan(), cfg);  // the schemes without ISLs still run
  EXPECT_THROW(simulate_ring(dead, 1), Error);
  EXPECT_THROW(simulate_ring_async(dead, 1), Error);
  EXPECT_EQ(simulate_baseline(dead, 1).updates.size(), 1u);
  EXPECT_THROW(cfg.set_links("scenario", reference()), Error);  // no budget in the scenario
}

// The deadline baseline: exactly the satellites whose own download-train-upload cycle completes by
// T0 + deadline take part; the others sit the round out without a transfer.
TEST(BaselineDeadline, StragglersSitTheRoundOut) {
  TimingConfig cfg;
  cfg.round_deadline_s = 900.0;
  const TimingContext ctx(reference(), reference_plan(), cfg);
  const Schedule s = simulate_baseline_deadline(ctx, 3);
  ASSERT_EQ(s.updates.size(), 3u);
  double T0 = 0.0;
  int dropped = 0;
  for (const UpdateRecord& u : s.updates) {
    std::vector<int> expect;
    double last = T0;
    for (int k = 0; k < 40; ++k) {
      const auto dl = ctx.try_contact(k, T0, ctx.model_bytes());
      const auto up = ctx.try_contact(k, dl->completion_s + 60.0, ctx.aggregate_bytes(1));
      if (up->completion_s <= T0 + 900.0) {
        expect.push_back(k);
        last = std::max(last, up->completion_s);
      }
    }
    EXPECT_EQ(u.members, expect) << "round " << u.round;
    EXPECT_EQ(u.ps_transfers, 2 * static_cast<int>(expect.size()));
    EXPECT_NEAR(u.time_s, last + 0.15e-3, 1e-9);
    EXPECT_LE(u.time_s, T0 + 900.0 + 0.15e-3);
    for (const Event& e : s.events)
      if (e.round == u.round && e.is_transfer()) {
        const int sat = e.from == kServer ? e.to : e.from;
        EXPECT_TRUE(std::binary_search(expect.begin(), expect.end(), sat)) << "straggler " << sat << " transferred";
      }
    dropped += 40 - static_cast<int>(expect.size());
    T0 = u.time_s;
  }
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(static_cast<int>(s.skipped.size()), dropped);
  // A deadline nobody misses is the plain baseline.
  cfg.round_deadline_s = 1e9;
  const TimingContext loose(reference(), reference_plan(), cfg);
  const Schedule b = simulate_baseline(loose, 2), d = simulate_baseline_deadline(loose, 2);
  ASSERT_EQ(b.events.size(), d.events.size());
  for (std::size_t i = 0; i < b.events.size(); ++i) EXPECT_EQ(b.events[i].end_s, d.events[i].end_s);
  cfg.round_deadline_s = 0.0;
  EXPECT_THROW(simulate_baseline_deadline(TimingContext(reference(), reference_plan(), cfg), 1), Error);
  cfg.round_deadline_s = 1.0;  // nobody can make it
  EXPECT_THROW(simulate_baseline_deadline(TimingContext(reference(), reference_plan(), cfg), 1), Error);
}

// FedAsync: every satellite cycles on its own; one update per arrival with a_t = alpha (1 + tau)^-a,
// tau = updates since the version the cycle downloaded.
TEST(FedAsync, EveryArrivalIsOneStalenessWeightedUpdate) {
  TimingConfig cfg;
  cfg.fedasync_mixing = 0.6;
  cfg.staleness_exponent = 0.5;
  const TimingContext ctx(reference(), reference_plan(), cfg);
  const Schedule s = simulate_fedasync(ctx, 3);
  ASSERT_EQ(s.updates.size(), 120u);  // 3 cycles x 40 satellites
  std::map<int, int> cycles;
  for (std::size_t i = 0; i < s.updates.size(); ++i) {
    const UpdateRecord& u = s.updates[i];
    ASSERT_EQ(u.members.size(), 1u);
    ++cycles[u.members[0]];
    if (i) {
      EXPECT_GE(u.time_s, s.updates[i - 1].time_s);
    }
  }
  for (int k = 0; k < 40; ++k) EXPECT_EQ(cycles[k], 3) << k;
  std::vector<double> times;
  for (const auto& u : s.updates) times.push_back(u.time_s);
  for (const Event& su : s.events) {
    if (su.kind != EventKind::ServerUpdate) continue;
    // The member's download of the same cycle: its version is the base b.
    const Event* dl = nullptr;
    for (const Event& e : s.events)
      if (e.kind == EventKind::Download && e.to == su.members[0] && e.round == su.round) dl = &e;
    ASSERT_NE(dl, nullptr);
    const int b = static_cast<int>(std::upper_bound(times.begin(), times.end(), dl->start_s) - times.begin());
    EXPECT_EQ(dl->version, b);
    EXPECT_NEAR(su.mix, 0.6 / std::sqrt(1.0 + (su.version - 1 - b)), 1e-12) << su.version;
  }
  // Per satellite: download, train, upload, then the next download after that upload.
  for (int k = 0; k < 40; ++k) {
    double t = 0.0;
    for (const Event& e : s.events) {
      if (!e.is_transfer() && e.kind != EventKind::Train) continue;
      if (e.from != k && e.to != k) continue;
      EXPECT_GE(e.start_s, t - 1e-12) << "satellite " << k << " event " << e.id;
      t = e.end_s;
    }
  }
  cfg.fedasync_mixing = 0.0;
  EXPECT_THROW(simulate_fedasync(TimingContext(reference(), reference_plan(), cfg), 1), Error);
}

TEST(Ring, EventsAreCausalPerSatellite) {
  const TimingContext ctx(reference(), reference_plan(), TimingConfig{});
  const Schedule s = simulate_ring(ctx, 2);
  // Every satellite receives the model before training, trains before sending its aggregate.
  std::map<std::pair<int, int>, double> got_model, trained;
  for (const Event& e : s.events) {
    if ((e.kind == EventKind::Download || e.kind == EventKind::IslModel)) got_model[std::make_pair(e.to, e.round)] = e.end_s;
    if (e.kind == EventKind::Train) trained[{e.from, e.round}] = e.end_s;
  }
  for (const Event& e : s.events) {
    if (e.kind == EventKind::Train) {
      ASSERT_TRUE(got_model.count({e.from, e.round}));
      EXPECT_LE((got_model[{e.from, e.round}]), e.start_s);
    }
    if (e.kind == EventKind::IslAggregate || e.kind == EventKind::Upload) {
      for (int m : e.members) {
        EXPECT_LE((trained[{m, e.round}]), e.start_s);
      }
    }
  }
  for (std::size_t i = 0; i < s.events.size(); ++i) {
    EXPECT_EQ(s.events[i].id, static_cast<int>(i));
    if (i) {
      EXPECT_LE(s.events[i - 1].start_s, s.events[i].start_s);
    }
  }
}

TEST(RingAsync, OneUpdatePerOrbitReportWithStalenessWeights) {
  TimingConfig cfg;
  cfg.staleness_exponent = 0.5;
  const TimingContext ctx(reference(), reference_plan(), cfg);
  const Schedule s = simulate_ring_async(ctx, 3);
  ASSERT_EQ(s.updates.size(), 15u);
  std::map<int, int> per_orbit;
  double prev = 0.0;
  for (const UpdateRecord& u : s.updates) {
    EXPECT_GE(u.time_s, prev);
    prev = u.time_s;
    ++per_orbit[u.orbit];
    EXPECT_EQ(u.members, ctx.ring(u.orbit));
  }
  for (int p = 0; p < 5; ++p) EXPECT_EQ(per_orbit[p], 3);
  const auto su = events_of(s, EventKind::ServerUpdate);
  ASSERT_EQ(su.size(), 15u);
  // The first update holds one fresh pair (weight 1); later ones weight older pairs less.
  ASSERT_EQ(su[0]->orbit_weights.size(), 1u);
  EXPECT_DOUBLE_EQ(su[0]->orbit_weights[0].second, 1.0);
  for (const Event* e : su) {
    for (const auto& [orbit, w] : e->orbit_weights) {
      EXPECT_GT(w, 0.0);
      EXPECT_LE(w, 1.0);
      EXPECT_GE(orbit, 0);
      EXPECT_LT(orbit, 5);
    }
  }
  const Event* last = su.back();
  EXPECT_EQ(last->orbit_weights.size(), 5u);
  // Downloads carry the version current at their start.
  for (const Event& e : s.events) {
    if (e.kind != EventKind::Download) continue;
    int v = 0;
    for (const UpdateRecord& u : s.updates) v += u.time_s <= e.start_s;
    EXPECT_EQ(e.version, v);
  }
}

TEST(GroundStation, BremenAndNorthPoleServersWork) {
  for (const std::string name : {"bremen", "northpole"}) {
    const orbit::Scenario sc = orbit::Scenario::named(name);
    orbit::PredictOptions o;
    o.horizon_s = 3.0 * 86400.0;
    const orbit::ContactPlan plan = orbit::ContactPlan::predict(sc, o);
    const TimingContext ctx(sc, plan, TimingConfig{});
    const Schedule b = simulate_baseline(ctx, 1);
    const Schedule r = simulate_ring(ctx, 2);
    EXPECT_EQ(b.updates[0].ps_transfers, 80) << name;
    for (const auto& u : r.updates) EXPECT_EQ(u.ps_transfers, 10) << name;
    EXPECT_GT(b.mean_update_interval_s(), r.mean_update_interval_s()) << name;
  }
}

TEST(Starlink, SchedulesScaleToAMegaConstellationWithAGroundStation) {
  const orbit::Scenario sc = orbit::Scenario::named("starlink");  // 1584 = 72 x 22, Bremen
  orbit::PredictOptions o;
  o.horizon_s = 4.0 * 86400.0;
  const orbit::ContactPlan plan = orbit::ContactPlan::predict(sc, o);
  TimingConfig cfg;
  cfg.model_params = 25450;
  const TimingContext ctx(sc, plan, cfg);
  const Schedule r = simulate_ring(ctx, 2);
  for (const auto& u : r.updates) {
    EXPECT_EQ(u.ps_transfers, 2 * 72);
    EXPECT_EQ(u.isl_transfers, 72 * 2 * 21);
    EXPECT_EQ(u.members.size(), 1584u);
  }
  const Schedule b = simulate_baseline(ctx, 1);
  EXPECT_EQ(b.updates[0].ps_transfers, 2 * 1584);
  EXPECT_GT(b.mean_update_interval_s(), r.mean_update_interval_s());
}

TEST(Timing, HorizonExceededIsReported) {
  orbit::PredictOptions o;
  o.horizon_s = 3000.0;
  const orbit::ContactPlan plan = orbit::ContactPlan::predict(reference(), o);
  const TimingContext ctx(reference(), plan, TimingConfig{});
  EXPECT_THROW(simulate_baseline(ctx, 5), HorizonExceeded);
}

TEST(Timing, ParsesFaults) {
  const Fault a = parse_fault("sat:3@120.5");
  EXPECT_EQ(a.kind, Fault::Kind::Satellite);
  EXPECT_EQ(a.sat, 3);
  EXPECT_DOUBLE_EQ(a.time_s, 120.5);
  const Fault b = parse_fault("link:8-9@0");
  EXPECT_EQ(b.kind, Fault::Kind::Link);
  EXPECT_EQ(b.sat2, 9);
  EXPECT_EQ(parse_fault("miss:7@10").kind, Fault::Kind::MissedUpload);
  EXPECT_THROW(parse_fault("sat:x@1"), zen::Error);
  EXPECT_THROW(parse_fault("boom:1@1"), zen::Error);
  TimingConfig cfg;
  cfg.faults = {Fault::link(0, 5, 0.0)};  // not ring neighbours
  EXPECT_THROW(TimingContext(reference(), reference_plan(), cfg), zen::Error);
}

}  // namespace
}  // namespace zen::fl::sim
