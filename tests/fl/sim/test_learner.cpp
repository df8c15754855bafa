// The learner: models move through the loopback communicator; aggregation is backend- and
// grouping-independent; transfers carry their simulated durations.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "../../test_inputs.hpp"
#include "sim_test_util.hpp"
#include "zen/fl/sim/experiment.hpp"
#include "zen/fl/sim/loopback_runner.hpp"
#include "zen/fl/sim/paper.hpp"
#include "zen/fl/sim/wire.hpp"
#include "zen/fl/sparse_aggregate.hpp"

namespace zen::fl::sim {
namespace {

using test::reference;
using test::reference_plan;
using test::tiny_federation;
using test::tiny_test;
using test::tiny_train;


TEST(Learner, RingAndBaselineGiveTheSynchronousFedAvgModel) {
  const TimingContext ctx(reference(), reference_plan(), TimingConfig{});
  const LearnResult b = run_loopback(simulate_baseline(ctx, 2), tiny_federation(), tiny_test());
  const LearnResult r = run_loopback(simulate_ring(ctx, 2), tiny_federation(), tiny_test());
  // Direct synchronous FedAvg with the learning core.
  Federation direct(tiny_train(), tiny_test(), tiny_federation().config());
  direct.run_round(1);
  direct.run_round(2);
  const auto& ref = direct.global().params();
  ASSERT_EQ(b.final_params.size(), ref.size());
  ASSERT_EQ(r.final_params.size(), ref.size());
  double db = 0, dr = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    db = std::max(db, static_cast<double>(std::abs(b.final_params[i] - ref[i])));
    dr = std::max(dr, static_cast<double>(std::abs(r.final_params[i] - ref[i])));
  }
  EXPECT_LT(db, 1e-6);
  EXPECT_LT(dr, 1e-6);
  EXPECT_EQ(b.rows.size(), 3u);
  EXPECT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.trainings, 80);
}

TEST(Learner, RankMultiplexingDoesNotChangeTheResult) {
  const TimingContext ctx(reference(), reference_plan(), TimingConfig{});
  const Schedule s = simulate_ring(ctx, 2);
  const LearnResult full = run_loopback(s, tiny_federation(), tiny_test(), 41);
  const LearnResult few = run_loopback(s, tiny_federation(), tiny_test(), 2);  // all satellites on rank 1
  const LearnResult one = run_loopback(s, tiny_federation(), tiny_test(), 1);
  EXPECT_EQ(full.final_params, few.final_params);
  EXPECT_EQ(full.final_params, one.final_params);
  EXPECT_EQ(one.comm_messages, 0u);  // everything on one rank: in-memory hand-over
  EXPECT_GT(few.comm_messages, 0u);
  EXPECT_EQ(few.comm_messages, 2u * 10);  // only the server links cross ranks: 2 rounds x 10 transfers
  EXPECT_LT(few.comm_messages, full.comm_messages);
}

TEST(Learner, EveryTransferTravelsThroughTheCommunicatorWithItsSimulatedDuration) {
  const TimingContext ctx(reference(), reference_plan(), TimingConfig{});
  const Schedule s = simulate_ring(ctx, 1);
  const LearnResult r = run_loopback(s, tiny_federation(), tiny_test());
  std::size_t transfers = 0;
  for (const Event& e : s.events) transfers += e.is_transfer() && !e.failed;
  ASSERT_EQ(r.transfers.size(), transfers);
  EXPECT_EQ(r.comm_messages, transfers);  // one message per transfer, 41 ranks
  const std::size_t model_bytes = tiny_federation().global().num_bytes();
  uint64_t charged = 0;
  for (const TransferLog& t : r.transfers) {
    const Event& e = s.events[static_cast<std::size_t>(t.event)];
    EXPECT_TRUE(t.via_comm);
    EXPECT_DOUBLE_EQ(t.end_s - t.start_s, e.end_s - e.start_s);
    EXPECT_EQ(t.bytes, e.bytes);  // what moved is what the timing charged
    charged += e.bytes;
    if (e.kind == EventKind::IslModel) {
      EXPECT_NEAR(t.end_s - t.start_s, ctx.isl_time(e.from, e.to, e.start_s, e.bytes), 1e-12);
      EXPECT_EQ(t.bytes, sizeof(TransferHeader) + model_bytes);
    }
    if (e.kind == EventKind::Download) {
      EXPECT_EQ(t.bytes, sizeof(TransferHeader) + model_bytes);
    }
    // An aggregate costs a model plus its weight and member list, not float64 sums.
    if (e.kind == EventKind::Upload) {
      EXPECT_EQ(t.bytes, sizeof(TransferHeader) + model_bytes + 32 + 4 * e.members.size());
    }
  }
  EXPECT_EQ(r.comm_bytes_sent, charged);
}

// The learner's FedAsync server equals the rule applied by hand: each update trains the member
// from the global model of the version its cycle downloaded and mixes it in with the schedule's a_t.
TEST(Learner, FedAsyncMixingMatchesTheRuleByHand) {
  const TimingContext ctx(reference(), reference_plan(), TimingConfig{});
  const Schedule s = simulate_fedasync(ctx, 2);
  const LearnResult r = run_loopback(s, tiny_federation(), tiny_test(), 7);
  const Federation& fed = tiny_federation();
  std::vector<std::vector<float>> versions{fed.global().params()};
  for (const Event& su : s.events) {
    if (su.kind != EventKind::ServerUpdate) continue;
    int b = -1;
    for (const Event& e : s.events)
      if (e.kind == EventKind::Train && e.from == su.members[0] && e.round == su.round) b = e.version;
    ASSERT_GE(b, 0);
    const ClientUpdate u = fed.local_update(su.members[0], versions[static_cast<std::size_t>(b)], su.round);
    std::vector<float> w = versions.back();
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] = static_cast<float>((1.0 - su.mix) * w[i] + su.mix * static_cast<double>(u.params[i]));
    versions.push_back(std::move(w));
  }
  ASSERT_EQ(versions.size(), 81u);
  ASSERT_EQ(r.final_params.size(), versions.back().size());
  for (std::size_t i = 0; i < r.final_params.size(); ++i) ASSERT_NEAR(r.final_params[i], versions.back()[i], 1e-6) << i;
  EXPECT_EQ(r.rows.size(), 81u);
}

// Compressed updates: with k = N nothing is dropped, so the delta path gives the synchronous FedAvg
// model of the dense path (to float rounding); with small k the messages carry exactly k entries,
// cost what the timing charged, and the model still learns.
TEST(Learner, CompressedUpdatesThroughZensSparseEncodings) {
  TimingConfig cfg;
  const TimingContext dense(reference(), reference_plan(), cfg);
  const LearnResult want = run_loopback(simulate_ring(dense, 2), tiny_federation(), tiny_test());
  cfg.topk = 7850;
  const TimingContext full(reference(), reference_plan(), cfg);
  const Schedule sf = simulate_ring(full, 2);
  EXPECT_EQ(sf.topk, 7850u);
  const LearnResult got = run_loopback(sf, tiny_federation(), tiny_test());
  ASSERT_EQ(got.final_params.size(), want.final_params.size());
  for (std::size_t i = 0; i < got.final_params.size(); ++i) ASSERT_NEAR(got.final_params[i], want.final_params[i], 2e-6) << i;
  for (const std::size_t k : {std::size_t{785}, std::size_t{78}}) {
    cfg.topk = k;
    const TimingContext ctx(reference(), reference_plan(), cfg);
    for (const Schedule& s : {simulate_ring(ctx, 2), simulate_baseline(ctx, 1)}) {
      const LearnResult r = run_loopback(s, tiny_federation(), tiny_test());
      uint64_t charged = 0;
      for (const TransferLog& t : r.transfers) {
        const Event& e = s.events[static_cast<std::size_t>(t.event)];
        EXPECT_EQ(t.bytes, e.bytes);
        charged += e.bytes;
        if (e.kind == EventKind::Upload || e.kind == EventKind::IslAggregate) {
          EXPECT_EQ(t.bytes, sizeof(TransferHeader) + SparseAggregate::wire_bytes(7850, k, e.members.size()));
        }
      }
      EXPECT_EQ(r.comm_bytes_sent, charged);
      EXPECT_LT(r.rows.back().loss, r.rows.front().loss) << s.scheme << " k " << k;  // it learns
    }
    EXPECT_THROW(simulate_ring_async(ctx, 1), Error);
    EXPECT_THROW(simulate_fedasync(ctx, 1), Error);
  }
}

TEST(Learner, AsyncStalenessWeightedMeanIsApplied) {
  const TimingContext ctx(reference(), reference_plan(), TimingConfig{});
  const Schedule s = simulate_ring_async(ctx, 2);
  const LearnResult r = run_loopback(s, tiny_federation(), tiny_test(), 6);
  ASSERT_EQ(r.rows.size(), 11u);
  for (std::size_t i = 1; i < r.rows.size(); ++i) {
    EXPECT_EQ(r.rows[i].version, static_cast<int>(i));
    EXPECT_GE(r.rows[i].time_s, r.rows[i - 1].time_s);
    EXPECT_TRUE(std::isfinite(r.rows[i].loss));
  }
}

// The CLI's non-IID splits reach the federation: per-orbit classes, per-class Dirichlet and
// log-normal sizes (so weighting by sample count matters), and bad values are errors.
TEST(Experiment, NonIidSplitsReachTheFederation) {
  auto make = [](const std::string& split) {
    ExperimentConfig cfg;
    cfg.data_dir = ZEN_FL_TINY_DIR;
    cfg.rounds = 1;
    cfg.learn = loopback_runner();
    cfg.split = split;
    return std::make_unique<Experiment>(cfg);
  };
  {
    auto ex = make("orbit:2");
    const auto& fed = ex->federation();
    EXPECT_EQ(fed.config().split, "groups");
    const auto& sc = ex->scenario();
    const Dataset train = load_fashion_mnist(ZEN_FL_TINY_DIR, "train");
    const auto counts = partition_label_counts(fed.partition(), train.y, 10);
    for (int k = 0; k < sc.num_satellites(); ++k) {
      for (int c = 0; c < 10; ++c) {
        if (c / 2 != sc.satellites[static_cast<size_t>(k)].plane % 5) {
          EXPECT_EQ(counts[static_cast<size_t>(k)][static_cast<size_t>(c)], 0u) << "satellite " << k << " class " << c;
        }
      }
    }
  }
  for (const char* split : {"lognormal:1", "dirichlet-class:0.3"}) {
    auto ex = make(split);
    const auto& fed = ex->federation();
    size_t lo = SIZE_MAX, hi = 0;
    for (int k = 0; k < ex->scenario().num_satellites(); ++k) {
      lo = std::min(lo, fed.client_samples(k));
      hi = std::max(hi, fed.client_samples(k));
    }
    EXPECT_GT(hi, lo) << split << ": sizes should differ";
  }
  EXPECT_EQ(make("dirichlet-class:0.3")->federation().config().dirichlet_mode, DirichletMode::PerClass);
  EXPECT_THROW(make("orbit:x"), Error);
  EXPECT_THROW(make("orbit:0"), Error);
  EXPECT_THROW(make("iid:3"), Error);
  EXPECT_THROW(make("lognormal:-1"), Error);
  EXPECT_THROW(make("zipf"), Error);
  // Several servers (here two ground stations) replace the scenario's one.
  ExperimentConfig cfg;
  cfg.data_dir = ZEN_FL_TINY_DIR;
  cfg.learn = loopback_runner();
  cfg.servers = {"bremen", "oslo=59.9,10.7"};
  Experiment two(cfg);
  ASSERT_EQ(two.scenario().servers.size(), 2u);
  EXPECT_EQ(two.scenario().servers[1].name, "oslo");
}

TEST(Experiment, TinyEndToEndWritesCsvAndPlot) {
  ExperimentConfig cfg;
  cfg.data_dir = ZEN_FL_TINY_DIR;
  cfg.rounds = 2;
  cfg.learn = loopback_runner();
  cfg.model = "mlp";
  cfg.hidden = 8;
  cfg.split = "dirichlet:0.5";
  cfg.train_time = "measured";
  cfg.train_scale = 1000.0;
  Experiment ex(cfg);
  ASSERT_EQ(ex.timing().train_s_per_sat.size(), 40u);
  for (double t : ex.timing().train_s_per_sat) EXPECT_GT(t, 0.0);
  RunResult b = ex.run("baseline", "ka");
  RunResult r = ex.run("ring", "s");
  EXPECT_DOUBLE_EQ(b.ps_transfers_per_round, 80.0);
  EXPECT_DOUBLE_EQ(r.ps_transfers_per_round, 10.0);
  EXPECT_NE(r.summary().find("scheme=ring"), std::string::npos);
  const std::string dir = ::testing::TempDir() + "zen_flsim_e2e";
  write_csv(dir + "-x.csv", r);
  std::ifstream f(dir + "-x.csv");
  std::string header;
  std::getline(f, header);
  EXPECT_EQ(header, "time_s,round,accuracy,loss,ps_transfers,ps_bits,isl_transfers,isl_bits");
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    std::filesystem::create_directories(dir);
    write_csv(dir + "/baseline-ka.csv", b);
    write_csv(dir + "/ring-s.csv", r);
    write_plot(dir, {&b, &r}, "test");
    EXPECT_TRUE(std::filesystem::exists(dir + "/accuracy.png"));
  }
}

// The payload columns of the CSV are the bytes the communicator moved: with one rank per actor every
// transfer crosses ranks, so sum(ps_bits + isl_bits) over the rows = 8 x the traffic of all ranks.
TEST(Experiment, CsvPayloadBitsEqualTheBytesTheCommunicatorMoved) {
  ExperimentConfig cfg;
  cfg.data_dir = ZEN_FL_TINY_DIR;
  cfg.rounds = 2;
  cfg.learn = loopback_runner(41);
  Experiment ex(cfg);
  for (const std::string scheme : {"baseline", "baseline-deadline", "fedasync", "ring", "ring-async", "ring-top"}) {
    const bool top = scheme == "ring-top";  // compressed updates, 1 % of the parameters per aggregate
    const RunResult r = top ? ex.run("ring", "ka", 0.01) : ex.run(scheme, "ka");
    const std::string path = ::testing::TempDir() + "zen_flsim_bits_" + scheme + ".csv";
    write_csv(path, r);
    std::ifstream f(path);
    std::string line;
    std::getline(f, line);
    double ps = 0, isl = 0;
    int rows = 0;
    while (std::getline(f, line)) {
      std::vector<std::string> col;
      std::stringstream ss(line);
      for (std::string c; std::getline(ss, c, ',');) col.push_back(c);
      ASSERT_EQ(col.size(), 8u) << line;
      ps += std::stod(col[5]);
      isl += std::stod(col[7]);
      ++rows;
    }
    EXPECT_EQ(rows, static_cast<int>(r.schedule.updates.size()) + 1) << scheme;
    EXPECT_GT(ps, 0) << scheme;
    if (scheme.rfind("ring", 0) == 0) {
      EXPECT_GT(isl, 0) << scheme;
    }
    uint64_t after_last = 0;  // transfers still in flight at the last update (ring-async) are not in a row
    for (const Event& e : r.schedule.events)
      if (e.is_transfer() && !e.failed && e.end_s > r.schedule.end_time_s()) after_last += e.bytes;
    EXPECT_EQ(ps + isl + 8.0 * static_cast<double>(after_last), 8.0 * static_cast<double>(r.learn.comm_bytes_sent))
        << scheme;
  }
}

// --train-time work: every satellite's time is its shard's work over the throughput (unequal shards
// give unequal times), and the sweep shows the speed-up growing as training gets faster.
TEST(Experiment, WorkBasedTrainingTimesAndTheComputeSweep) {
  ExperimentConfig cfg;
  cfg.data_dir = ZEN_FL_TINY_DIR;
  cfg.rounds = 2;
  cfg.learn = loopback_runner();
  cfg.split = "lognormal:1.0";
  cfg.train_time = "work";
  cfg.onboard_gflops = 0.5;
  cfg.epochs = 3;
  Experiment ex(cfg);
  const auto& t = ex.timing().train_s_per_sat;
  ASSERT_EQ(t.size(), 40u);
  const double n = static_cast<double>(ex.federation().global().num_params());
  double lo = 1e300, hi = 0;
  for (int k = 0; k < 40; ++k) {
    EXPECT_DOUBLE_EQ(t[k], ex.federation().client_samples(k) * 3.0 * 6.0 * n / 0.5e9) << k;
    lo = std::min(lo, t[k]), hi = std::max(hi, t[k]);
  }
  EXPECT_GT(hi, lo);
  const auto rows = ex.compute_sweep({"baseline", "ring"}, "ka", {1e-5, 1e-3, 1.0}, 2);
  ASSERT_EQ(rows.size(), 3u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].round_s.size(), 2u);
    EXPECT_GE(rows[i].round_s[1], rows[i].max_train_s);  // a round holds the slowest training
    if (i) {
      EXPECT_LE(rows[i].round_s[1], rows[i - 1].round_s[1]);
      EXPECT_GT(rows[i].round_s[0] / rows[i].round_s[1], rows[i - 1].round_s[0] / rows[i - 1].round_s[1]);
    }
  }
  cfg.train_time = "fast";
  EXPECT_THROW(Experiment bad(cfg), Error);
}

// The paper's named scenario: its settings, its published figures, and a run on its link budget.
TEST(Experiment, Razmi2022SetupRunsOnItsOwnLinkBudget) {
  EXPECT_EQ(paper_setup("reference"), nullptr);
  const PaperSetup* p = paper_setup("razmi2022");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->speedup, 29.0);
  EXPECT_EQ(p->ps_traffic_reduction, 8.0);
  EXPECT_FALSE(p->stated.empty());
  EXPECT_FALSE(p->chosen.empty());
  ExperimentConfig cfg;
  cfg.lr = 0.5;
  apply_paper_setup(*p, cfg);
  EXPECT_EQ(cfg.scenario, "razmi2022");
  EXPECT_NEAR(cfg.lr, 0.1, 1e-7);  // a float field
  EXPECT_EQ(cfg.batch, 10);
  EXPECT_EQ(cfg.epochs, 1);
  EXPECT_EQ(cfg.model, "logreg");
  EXPECT_EQ(cfg.train_time, "60");
  cfg.data_dir = ZEN_FL_TINY_DIR;
  cfg.rounds = 1;
  cfg.learn = loopback_runner();
  Experiment ex(cfg);
  const RunResult r = ex.run("ring", "scenario");
  EXPECT_EQ(r.ps_transfers_per_round, 10.0);
  EXPECT_NEAR(r.mean_round_s, 60.3, 0.5);
}

TEST(Experiment, RealFashionMnistReachesEightyPercentUnderBothSchemes) {
  if (!std::filesystem::exists(default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    ZEN_SKIP_WITHOUT_INPUT("Fashion-MNIST not installed (Debian dataset-fashion-mnist)");
  ExperimentConfig cfg;
  cfg.rounds = 5;
  cfg.learn = loopback_runner();
  Experiment ex(cfg);
  for (const std::string scheme : {"baseline", "ring"}) {
    const RunResult r = ex.run(scheme, "ka");
    EXPECT_GE(r.final_accuracy, 0.80) << scheme;
  }
}

TEST(Experiment, TooFewSamplesForTheConstellationIsAnError) {
  ExperimentConfig cfg;
  cfg.scenario = "starlink";  // 1584 clients
  cfg.data_dir = ZEN_FL_TINY_DIR;  // 200 images
  EXPECT_THROW(Experiment{cfg}, zen::Error);
}

}  // namespace
}  // namespace zen::fl::sim
