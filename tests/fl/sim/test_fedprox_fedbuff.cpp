// FedProx and FedBuff adapted to contact windows (first-C idle client selection, epochs until the
// next contact, buffered staleness-weighted deltas), and compressed downloads: each against its rule
// recomputed here by hand from the contact plan and the learning core.
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "sim_test_util.hpp"
#include "zen/fl/sim/loopback_runner.hpp"
#include "zen/fl/sim/timing.hpp"
#include "zen/fl/sim/wire.hpp"
#include "zen/fl/sparse_aggregate.hpp"

namespace zen::fl::sim {
namespace {

using test::reference;
using test::reference_plan;
using test::tiny_federation;
using test::tiny_test;

/// The C satellites whose download after t completes first (EFC order), by hand.
std::vector<int> first_c_by_hand(const TimingContext& ctx, double t, int C) {
  std::vector<orbit::Contact> all;
  for (int k = 0; k < ctx.num_satellites(); ++k)
    if (auto c = ctx.try_contact(k, t, ctx.model_bytes())) all.push_back(*c);
  std::sort(all.begin(), all.end(), [](const orbit::Contact& a, const orbit::Contact& b) {
    if (a.completion_s != b.completion_s) return a.completion_s < b.completion_s;
    if (a.remaining_s() != b.remaining_s()) return a.remaining_s() > b.remaining_s();
    return a.sat < b.sat;
  });
  std::vector<int> out;
  for (int i = 0; i < C; ++i) out.push_back(all[static_cast<std::size_t>(i)].sat);
  std::sort(out.begin(), out.end());
  return out;
}

TimingConfig selection(int C) {
  TimingConfig c;
  c.clients_per_round = C;
  return c;
}

// Space-ified FedAvg / FedProx: a round takes the first C idle satellites in contact after its start
// and waits for all of them (2C server transfers); FedProx clients train as many epochs as fit
// before their next pass, within [1, prox_max_epochs].
TEST(FedProx, FirstIdleClientsAndEpochsUntilTheNextContact) {
  TimingConfig cfg = selection(10);
  cfg.train_s = 1500.0;  // per epoch: the epoch count depends on the gap to the next pass
  cfg.prox_max_epochs = 8;
  const TimingContext ctx(reference(), reference_plan(), cfg);
  for (const char* scheme : {"baseline", "fedprox"}) {
    const Schedule s = simulate(scheme, ctx, 3);
    ASSERT_EQ(s.updates.size(), 3u);
    double T0 = 0.0;
    std::map<int, int> epoch_counts;
    for (const UpdateRecord& u : s.updates) {
      EXPECT_EQ(u.members, first_c_by_hand(ctx, T0, 10)) << scheme << " round " << u.round;
      EXPECT_EQ(u.ps_transfers, 20) << scheme;
      double last = 0.0;
      for (int k : u.members) {
        const auto dl = ctx.try_contact(k, T0, ctx.model_bytes());
        ASSERT_TRUE(dl);
        int epochs = 1;
        if (std::string(scheme) == "fedprox") {
          double next = -1;
          for (const orbit::Window& w : ctx.plan().windows(k))
            if (w.start_s > dl->window_end_s) {
              next = w.start_s;
              break;
            }
          ASSERT_GT(next, 0);
          epochs = static_cast<int>(std::clamp(std::floor((next - dl->completion_s) / 1500.0), 1.0, 8.0));
        }
        const auto up = ctx.try_contact(k, dl->completion_s + 1500.0 * epochs, ctx.aggregate_bytes(1));
        ASSERT_TRUE(up);
        last = std::max(last, up->completion_s);
        for (const Event& e : s.events)
          if (e.round == u.round && e.kind == EventKind::Train && e.from == k) {
            EXPECT_EQ(std::max(e.epochs, 1), epochs) << scheme << " satellite " << k;
            EXPECT_NEAR(e.end_s - e.start_s, 1500.0 * epochs, 1e-9);
            ++epoch_counts[epochs];
          }
      }
      EXPECT_NEAR(u.time_s, last + 0.15e-3, 1e-9) << scheme;
      T0 = u.time_s;
    }
    if (std::string(scheme) == "fedprox") {
      EXPECT_EQ(s.prox_mu, 0.01f);
      EXPECT_GE(epoch_counts.size(), 2u) << "the epoch rule should give different counts on this plan";
    }
  }
}

// The learner's FedProx rounds equal synchronous rounds computed here with the learning core: the
// scheduled members train from the global model with mu and their scheduled epochs, then FedAvg.
TEST(FedProx, LearnerEqualsTheRoundsByHand) {
  TimingConfig cfg = selection(10);
  cfg.train_s = 600.0;
  cfg.prox_max_epochs = 3;
  cfg.prox_mu = 0.2;
  const TimingContext ctx(reference(), reference_plan(), cfg);
  const Schedule s = simulate_fedprox(ctx, 2);
  const LearnResult r = run_loopback(s, tiny_federation(), tiny_test(), 3);
  const Federation& fed = tiny_federation();
  std::vector<float> w = fed.global().params();
  for (const UpdateRecord& u : s.updates) {
    PartialAggregate agg;
    for (int k : u.members) {
      int epochs = 0;
      for (const Event& e : s.events)
        if (e.kind == EventKind::Train && e.from == k && e.round == u.round) epochs = e.epochs;
      ASSERT_GE(epochs, 1);
      const ClientUpdate cu = fed.local_update(k, w, u.round, LocalOptions{epochs, 0.2f});
      agg.add(cu.params, cu.weight, k);
    }
    w = agg.finalize();
  }
  ASSERT_EQ(r.final_params.size(), w.size());
  for (std::size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(r.final_params[i], w[i], 1e-6) << i;
  // mu matters: without it the model differs.
  TimingConfig plain = cfg;
  plain.prox_mu = 0.0;
  const LearnResult r0 = run_loopback(simulate_fedprox(TimingContext(reference(), reference_plan(), plain), 2),
                                      tiny_federation(), tiny_test(), 3);
  EXPECT_NE(r0.final_params, r.final_params);
}

// FedBuff: at most C satellites train at once, each cycle downloads the version current at its
// start, and the server applies w <- w + server_lr sum_i (1 + tau_i)^-a delta_i / K after every K
// arrivals. The learner's final model equals this rule applied by hand with the learning core.
TEST(FedBuff, BufferedStalenessWeightedDeltasByHand) {
  TimingConfig cfg = selection(8);
  cfg.buffer_size = 3;
  cfg.server_lr = 0.7;
  const TimingContext ctx(reference(), reference_plan(), cfg);
  const Schedule s = simulate_fedbuff(ctx, 6);
  ASSERT_EQ(s.updates.size(), 6u);
  // Arrivals (delivered uploads) in time order: update u takes arrivals 3(u-1) .. 3u-1.
  std::vector<const Event*> ups;
  for (const Event& e : s.events)
    if (e.kind == EventKind::Upload && !e.failed) ups.push_back(&e);
  std::stable_sort(ups.begin(), ups.end(), [](const Event* a, const Event* b) {
    return a->end_s != b->end_s ? a->end_s < b->end_s : a->from < b->from;
  });
  ASSERT_EQ(ups.size(), 18u);
  // Concurrency: at no time more than C = 8 cycles between download start and upload end.
  for (const Event* a : ups) {
    int open = 0;
    for (const Event* b : ups) {
      double dl = 0;
      for (const Event& e : s.events)
        if (e.kind == EventKind::Download && e.to == b->from && e.round == b->round) dl = e.start_s;
      if (dl <= a->end_s && b->end_s > a->end_s) ++open;
    }
    EXPECT_LE(open, 8);
  }
  // Every delivered transfer belongs to one of the 18 cycles: one download and one upload each
  // (a row counts the transfers that ended since the previous update, so downloads of a cycle can
  // fall in an earlier row than its upload).
  int ps = 0;
  for (const UpdateRecord& u : s.updates) ps += u.ps_transfers;
  EXPECT_EQ(ps, 36);
  const Federation& fed = tiny_federation();
  std::vector<std::vector<float>> versions{fed.global().params()};
  bool stale = false;
  for (std::size_t u = 0; u < s.updates.size(); ++u) {
    const UpdateRecord& rec = s.updates[u];
    EXPECT_NEAR(rec.time_s, ups[3 * u + 2]->end_s + 0.15e-3, 1e-9);
    std::vector<double> sum(versions.back().size(), 0.0);
    for (std::size_t i = 0; i < 3; ++i) {
      const Event& up = *ups[3 * u + i];
      int b = -1;
      for (const Event& e : s.events)
        if (e.kind == EventKind::Train && e.from == up.from && e.round == up.round) b = e.version;
      ASSERT_GE(b, 0);
      const int tau = static_cast<int>(u) - b;
      EXPECT_EQ(rec.staleness[i], tau);
      stale = stale || tau > 0;
      const double sw = std::pow(1.0 + tau, -0.5);
      const ClientUpdate cu = fed.local_update(up.from, versions[static_cast<std::size_t>(b)], up.round);
      for (std::size_t j = 0; j < sum.size(); ++j)
        sum[j] += sw * static_cast<double>(cu.params[j] - versions[static_cast<std::size_t>(b)][j]);
    }
    std::vector<float> w = versions.back();
    for (std::size_t j = 0; j < w.size(); ++j) w[j] = static_cast<float>(w[j] + 0.7 * sum[j] / 3.0);
    versions.push_back(std::move(w));
  }
  EXPECT_TRUE(stale) << "no stale delta: the test would not see the staleness weights";
  const LearnResult r = run_loopback(s, tiny_federation(), tiny_test(), 5);
  ASSERT_EQ(r.final_params.size(), versions.back().size());
  for (std::size_t j = 0; j < r.final_params.size(); ++j) ASSERT_NEAR(r.final_params[j], versions.back()[j], 1e-6) << j;
  EXPECT_EQ(r.rows.size(), 7u);
  // The buffer is clamped to the concurrency; compressed uploads are refused.
  TimingConfig big = selection(2);
  big.buffer_size = 10;
  EXPECT_EQ(simulate_fedbuff(TimingContext(reference(), reference_plan(), big), 2).updates[0].members.size(), 2u);
  big.topk = 100;
  EXPECT_THROW(simulate_fedbuff(TimingContext(reference(), reference_plan(), big), 1), Error);
}

// Compressed downloads: with k = N the receivers reconstruct the model the server / relay holds, so
// the run equals the dense one (float rounding); with 10 % and 1 % every model transfer carries
// exactly k entries, is charged what it moves, and the server traffic falls.
TEST(CompressedDownloads, KEqualsNReproducesDenseAndSmallKSavesTraffic) {
  const auto run = [](const char* scheme, std::size_t k_down, std::size_t k_up) {
    TimingConfig cfg;
    cfg.download_topk = k_down;
    cfg.topk = k_up;
    const TimingContext ctx(reference(), reference_plan(), cfg);
    Schedule s = simulate(scheme, ctx, 3);  // three rounds: a pair's third message shows a broken mirror
    LearnResult r = run_loopback(s, tiny_federation(), tiny_test(), 4);
    return std::make_pair(std::move(s), std::move(r));
  };
  for (const char* scheme : {"baseline", "ring", "fedbuff"}) {
    const auto dense = run(scheme, 0, 0);
    const auto full = run(scheme, 7850, 0);
    ASSERT_EQ(full.second.final_params.size(), dense.second.final_params.size());
    for (std::size_t i = 0; i < dense.second.final_params.size(); ++i)
      ASSERT_NEAR(full.second.final_params[i], dense.second.final_params[i], 2e-6) << scheme << " " << i;
    double dense_ps = 0;
    for (const UpdateRecord& u : dense.first.updates) dense_ps += u.ps_bits;
    double prev = dense_ps;
    for (const std::size_t k : {std::size_t{785}, std::size_t{79}}) {
      const auto c = run(scheme, k, 0);
      uint64_t charged = 0;
      for (const TransferLog& t : c.second.transfers) {
        const Event& e = c.first.events[static_cast<std::size_t>(t.event)];
        EXPECT_EQ(t.bytes, e.bytes);
        if (t.via_comm) charged += e.bytes;
        if (e.kind == EventKind::Download || e.kind == EventKind::IslModel) {
          EXPECT_EQ(t.bytes, sizeof(TransferHeader) + SparseAggregate::wire_bytes(7850, k, 0));
        }
      }
      EXPECT_EQ(c.second.comm_bytes_sent, charged) << scheme;
      double ps = 0;
      for (const UpdateRecord& u : c.first.updates) ps += u.ps_bits;
      EXPECT_LT(ps, prev) << scheme << " k " << k;  // less server traffic as k falls
      prev = ps;
      EXPECT_LT(c.second.rows.back().loss, c.second.rows.front().loss) << scheme << " k " << k;  // it learns
    }
  }
  // Both directions compressed at k = N: still the dense model.
  const auto both = run("ring", 7850, 7850);
  const auto dense = run("ring", 0, 0);
  for (std::size_t i = 0; i < dense.second.final_params.size(); ++i)
    ASSERT_NEAR(both.second.final_params[i], dense.second.final_params[i], 4e-6) << i;
}

}  // namespace
}  // namespace zen::fl::sim
