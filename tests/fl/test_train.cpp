// Local training (minibatch SGD, FedProx's proximal term) and the Federation's rounds on the tiny sample.
#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "fl_test_util.hpp"
#include "zen/error.hpp"
#include "zen/fl/fedavg.hpp"
#include "zen/fl/federation.hpp"
#include "zen/fl/rng.hpp"
#include "zen/fl/train.hpp"

namespace zen::fl {
namespace {

using test::tiny_test;
using test::tiny_train;

TEST(TrainLocal, LossDecreases) {
  for (const char* kind : {"logreg", "mlp"}) {
    auto m = make_model({kind, 784, 10, 32});
    m->init(stream_seed(1, Stream::Init));
    double prev = m->loss(tiny_train());
    for (int e = 0; e < 3; ++e) {
      train_local(*m, tiny_train(), SgdConfig{}, stream_seed(1, Stream::Shuffle, 0, uint64_t(e)));
      const double now = m->loss(tiny_train());
      EXPECT_LT(now, prev) << kind << " epoch " << e;
      prev = now;
    }
    EXPECT_LT(prev, 1.0) << kind;
  }
}

TEST(TrainLocal, AccuracyAboveChanceOnTinyTest) {
  for (const char* kind : {"logreg", "mlp"}) {
    auto m = make_model({kind, 784, 10, 32});
    m->init(stream_seed(1, Stream::Init));
    const double before = m->accuracy(tiny_test());
    train_local(*m, tiny_train(), SgdConfig{0.1f, 10, 10}, 7);
    const double after = m->accuracy(tiny_test());
    EXPECT_GT(after, 0.5) << kind << " (chance is 0.1, before training " << before << ")";
    EXPECT_GT(after, before + 0.2) << kind;
  }
}

TEST(TrainLocal, DeterministicGivenSeed) {
  for (const char* kind : {"logreg", "mlp"}) {
    auto a = make_model({kind, 784, 10, 32});
    a->init(9);
    auto b = a->clone(), c = a->clone();
    train_local(*a, tiny_train(), SgdConfig{0.1f, 10, 2}, 123);
    train_local(*b, tiny_train(), SgdConfig{0.1f, 10, 2}, 123);
    train_local(*c, tiny_train(), SgdConfig{0.1f, 10, 2}, 124);
    EXPECT_EQ(a->params(), b->params()) << kind;
    EXPECT_NE(a->params(), c->params()) << kind;
  }
}

TEST(TrainLocal, StepsSamplesAndTiming) {
  LogisticRegression m;
  TrainStats s = train_local(m, tiny_train(), SgdConfig{0.1f, 10, 2}, 1);
  EXPECT_EQ(s.samples, 200u);
  EXPECT_EQ(s.steps, 40u);
  EXPECT_GT(s.wall_seconds, 0.0);
  EXPECT_GT(s.mean_loss, 0.0);
  s = train_local(m, tiny_train(), SgdConfig{0.1f, 30, 1}, 1);  // 6 full batches + one of 20
  EXPECT_EQ(s.steps, 7u);
  const std::vector<float> before = m.params();
  s = train_local(m, tiny_train(), SgdConfig{0.1f, 10, 0}, 1);
  EXPECT_EQ(s.steps, 0u);
  EXPECT_EQ(m.params(), before);
}

TEST(TrainLocal, SubsetOnlyUsesItsSamples) {
  // Training on indices {i} must equal training on the materialized subset with the same order.
  const std::vector<size_t> idx{5, 17, 42};
  LogisticRegression a, b;
  a.init(2);
  b.set_params(a.params());
  train_local(a, tiny_train(), idx, SgdConfig{0.1f, 3, 1}, 1);   // one batch: order irrelevant
  train_local(b, tiny_train().subset(idx), SgdConfig{0.1f, 3, 1}, 99);
  for (size_t j = 0; j < a.num_params(); ++j) ASSERT_NEAR(a.params()[j], b.params()[j], 1e-6f) << j;
}

// FedProx: each step is w <- w - lr (grad + mu (w - w_0)) with w_0 the starting model; the first step
// equals plain SGD (w = w_0), the next ones are pulled back toward w_0. Recomputed here by hand from
// loss_and_grad on the same permutation (Rng(seed), std::shuffle, as train_local documents).
TEST(TrainLocal, ProximalTermMatchesTheRuleByHand) {
  const std::vector<size_t> idx{3, 8, 11, 20, 31, 40, 52, 77};
  const float lr = 0.1f, mu = 0.5f;
  LogisticRegression m;
  m.init(4);
  const std::vector<float> w0 = m.params();
  // By hand: batches of 4, one epoch.
  std::vector<size_t> order(idx);
  Rng rng(5);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<float> w = w0, grad(w.size()), xb(4 * 784);
  std::vector<int32_t> yb(4);
  LogisticRegression h;
  for (size_t b = 0; b < order.size(); b += 4) {
    for (size_t i = 0; i < 4; ++i) {
      std::copy_n(tiny_train().row(order[b + i]), 784, xb.data() + i * 784);
      yb[i] = tiny_train().y[order[b + i]];
    }
    h.set_params(w);
    h.loss_and_grad(xb.data(), yb.data(), 4, grad.data());
    for (size_t j = 0; j < w.size(); ++j) w[j] -= lr * (grad[j] + mu * (w[j] - w0[j]));
  }
  SgdConfig cfg{lr, 4, 1};
  cfg.prox_mu = mu;
  train_local(m, tiny_train(), idx, cfg, 5);
  for (size_t j = 0; j < w.size(); ++j) ASSERT_EQ(m.params()[j], w[j]) << j;
  // The term pulls toward w_0: the FedProx model stays closer to it than plain SGD's.
  LogisticRegression plain;
  plain.set_params(w0);
  train_local(plain, tiny_train(), idx, SgdConfig{lr, 4, 1}, 5);
  double dp = 0, dx = 0;
  for (size_t j = 0; j < w.size(); ++j) {
    dp += std::pow(double(m.params()[j]) - w0[j], 2);
    dx += std::pow(double(plain.params()[j]) - w0[j], 2);
  }
  EXPECT_LT(dp, dx);
  cfg.prox_mu = -1.0f;
  EXPECT_THROW(train_local(m, tiny_train(), idx, cfg, 5), Error);
}

TEST(TrainLocal, RejectsBadInput) {
  LogisticRegression m;
  EXPECT_THROW(train_local(m, tiny_train(), std::vector<size_t>{}, SgdConfig{}, 1), Error);
  EXPECT_THROW(train_local(m, tiny_train(), std::vector<size_t>{200}, SgdConfig{}, 1), Error);
  EXPECT_THROW(train_local(m, tiny_train(), SgdConfig{0.1f, 0, 1}, 1), Error);
  LogisticRegression wrong(10, 10);
  EXPECT_THROW(train_local(wrong, tiny_train(), SgdConfig{}, 1), Error);
}

FederationConfig tiny_config(const std::string& split) {
  FederationConfig cfg;
  cfg.num_clients = 4;
  cfg.split = split;
  cfg.alpha = 0.5;
  cfg.seed = 3;
  return cfg;
}

// sample_limit splits only the first n samples; LocalOptions overrides epochs and mu per call.
TEST(Federation, SampleLimitAndLocalOptions) {
  FederationConfig cfg = tiny_config("iid");
  cfg.sample_limit = 40;
  Federation fed(tiny_train(), tiny_test(), cfg);
  size_t total = 0;
  for (int k = 0; k < 4; ++k) {
    total += fed.client_samples(k);
    for (size_t i : fed.partition()[size_t(k)]) EXPECT_LT(i, 40u);
  }
  EXPECT_EQ(total, 40u);
  const std::vector<float> start = fed.global().params();
  const ClientUpdate two = fed.local_update(1, start, 3, LocalOptions{2, -1.0f});
  EXPECT_EQ(two.stats.steps, 2u);  // 10 samples, batch 10, two epochs
  LogisticRegression m;
  m.set_params(start);
  SgdConfig sgd = cfg.sgd;
  sgd.epochs = 2;
  sgd.prox_mu = 0.3f;
  train_local(m, tiny_train(), fed.partition()[1], sgd, stream_seed(cfg.seed, Stream::Shuffle, 1, 3));
  EXPECT_EQ(fed.local_update(1, start, 3, LocalOptions{2, 0.3f}).params, m.params());
  cfg.sample_limit = 201;
  EXPECT_THROW(Federation(tiny_train(), tiny_test(), cfg), Error);
}

TEST(Federation, RoundEqualsManualPartialAggregation) {
  Federation fed(tiny_train(), tiny_test(), tiny_config("dirichlet"));
  const std::vector<float> start = fed.global().params();
  // Manual: two "orbits" {0,1} and {2,3} aggregated separately, then merged at the server.
  PartialAggregate orbit_a, orbit_b;
  for (int k : {0, 1}) {
    const ClientUpdate u = fed.local_update(k, start, 1);
    orbit_a.add(u.params, u.weight, k);
  }
  for (int k : {3, 2}) {
    const ClientUpdate u = fed.local_update(k, start, 1);
    orbit_b.add(u.params, u.weight, k);
  }
  orbit_b.merge(orbit_a);
  const std::vector<float> manual = orbit_b.finalize();

  const RoundStats rs = fed.run_round(1);
  EXPECT_EQ(rs.participants, 4u);
  ASSERT_EQ(fed.global().params().size(), manual.size());
  for (size_t j = 0; j < manual.size(); ++j)
    ASSERT_NEAR(fed.global().params()[j], manual[j], 1e-6f) << j;
  double wsum = 0;
  for (int k = 0; k < 4; ++k) wsum += fed.client_weight(k);
  EXPECT_DOUBLE_EQ(wsum, 200.0);
}

TEST(Federation, FedAvgRoundsLearnOnTinyData) {
  Federation fed(tiny_train(), tiny_test(), tiny_config("iid"));
  const double before = fed.evaluate().accuracy;
  const double loss0 = fed.global().loss(tiny_train());  // training loss of the global model
  RoundStats rs;
  for (int r = 1; r <= 5; ++r) rs = fed.run_round(r);
  // Single rounds may wiggle (SGD noise); five rounds must more than halve the loss from log(10).
  EXPECT_LT(fed.global().loss(tiny_train()), 0.5 * loss0);
  EXPECT_EQ(rs.round, 5);
  EXPECT_EQ(rs.participants, 4u);
  EXPECT_GT(rs.train_wall_seconds, 0.0);
  EXPECT_LE(rs.max_train_seconds, rs.train_wall_seconds);
  EXPECT_GT(fed.evaluate().accuracy, 0.5) << "before " << before;
  for (int k = 0; k < 4; ++k) EXPECT_EQ(fed.client_samples(k), 50u);
  EXPECT_THROW(fed.local_update(4, fed.global().params(), 1), Error);
}

TEST(Federation, SameSeedSameRun) {
  Federation a(tiny_train(), tiny_test(), tiny_config("iid"));
  Federation b(tiny_train(), tiny_test(), tiny_config("iid"));
  a.run_round(1);
  b.run_round(1);
  EXPECT_EQ(a.global().params(), b.global().params());
  EXPECT_EQ(a.partition(), b.partition());
  auto cfg = tiny_config("iid");
  cfg.split = "per-orbit";
  EXPECT_THROW(Federation(tiny_train(), tiny_test(), cfg), Error);
}

}  // namespace
}  // namespace zen::fl
