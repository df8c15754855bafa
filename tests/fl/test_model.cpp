#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "fl_test_util.hpp"
#include "zen/error.hpp"
#include "zen/fl/model.hpp"
#include "zen/fl/rng.hpp"
#include "zen/fl/train.hpp"

namespace zen::fl {
namespace {

using test::tiny_test;
using test::tiny_train;

TEST(Model, ParameterCounts) {
  EXPECT_EQ(LogisticRegression().num_params(), 7850u);
  EXPECT_EQ(LogisticRegression().num_bytes(), 7850u * 4u);
  EXPECT_EQ(Mlp().num_params(), 784u * 32u + 32u + 10u * 32u + 10u);
  EXPECT_EQ(Mlp(784, 64, 10).num_params(), 784u * 64u + 64u + 10u * 64u + 10u);
  EXPECT_EQ(make_model({"logreg", 784, 10, 32})->num_params(), 7850u);
  EXPECT_EQ(make_model({"mlp", 784, 10, 16})->name(), "mlp");
  EXPECT_THROW(make_model({"cnn", 784, 10, 32}), Error);
}

TEST(Model, ZeroModelHasLossLogC) {
  LogisticRegression m;
  const auto& d = tiny_train();
  EXPECT_NEAR(m.loss(d), std::log(10.0), 1e-6);
  Mlp mlp;
  EXPECT_NEAR(mlp.loss(d), std::log(10.0), 1e-6);
}

TEST(Model, LogRegLogitsAreAffine) {
  LogisticRegression m(4, 3);
  // W = [[1,0,0,0],[0,2,0,0],[0,0,0,-1]], b = [0.5, 0, 1]
  m.set_params(std::vector<float>{1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, -1, 0.5f, 0, 1});
  const float x[4] = {1, 2, 3, 4};
  RowMatrixXf z;
  m.logits(x, 1, z);
  ASSERT_EQ(z.rows(), 1);
  ASSERT_EQ(z.cols(), 3);
  EXPECT_FLOAT_EQ(z(0, 0), 1.5f);
  EXPECT_FLOAT_EQ(z(0, 1), 4.0f);
  EXPECT_FLOAT_EQ(z(0, 2), -3.0f);
  const int32_t y = 1;
  const double expect = std::log(std::exp(1.5) + std::exp(4.0) + std::exp(-3.0)) - 4.0;
  EXPECT_NEAR(m.loss(x, &y, 1), expect, 1e-6);
}

TEST(Model, SetParamsChecksSize) {
  LogisticRegression m;
  try {
    m.set_params(std::vector<float>(7849));
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("7850"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("7849"), std::string::npos);
  }
}

TEST(Model, InitIsSeeded) {
  for (const char* kind : {"logreg", "mlp"}) {
    auto a = make_model({kind, 784, 10, 32}), b = make_model({kind, 784, 10, 32});
    auto c = make_model({kind, 784, 10, 32});
    a->init(stream_seed(1, Stream::Init));
    b->init(stream_seed(1, Stream::Init));
    c->init(stream_seed(2, Stream::Init));
    EXPECT_EQ(a->params(), b->params()) << kind;
    EXPECT_NE(a->params(), c->params()) << kind;
  }
}

TEST(Model, FlatBytesRoundTrip) {
  Mlp a;
  a.init(3);
  std::vector<uint8_t> wire(a.num_bytes());
  std::memcpy(wire.data(), a.params().data(), wire.size());
  Mlp b;
  ASSERT_EQ(wire.size(), b.num_bytes());
  std::memcpy(b.params().data(), wire.data(), wire.size());
  EXPECT_EQ(a.predict(tiny_test()), b.predict(tiny_test()));
  EXPECT_EQ(a.loss(tiny_test()), b.loss(tiny_test()));
}

TEST(Model, AccuracyMatchesPredictions) {
  LogisticRegression m;
  m.init(5);
  train_local(m, tiny_train(), SgdConfig{}, 1);
  const auto pred = m.predict(tiny_test());
  size_t ok = 0;
  for (size_t i = 0; i < pred.size(); ++i) ok += pred[i] == tiny_test().y[i];
  EXPECT_DOUBLE_EQ(m.accuracy(tiny_test()), double(ok) / double(pred.size()));
  const auto ev = m.evaluate(tiny_test());
  EXPECT_DOUBLE_EQ(ev.accuracy, m.accuracy(tiny_test()));
  EXPECT_DOUBLE_EQ(ev.loss, m.loss(tiny_test()));
}

// Central finite differences of the mean batch loss against the analytic gradient.
class GradientCheck : public ::testing::TestWithParam<const char*> {};

TEST_P(GradientCheck, MatchesFiniteDifferences) {
  auto m = make_model({GetParam(), 784, 10, 16});
  m->init(17);
  const auto& d = tiny_train();
  // A few SGD steps first so that the check is not done at the symmetric starting point.
  train_local(*m, d, std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, SgdConfig{0.1f, 5, 2}, 4);
  const size_t B = 8;
  const float* x = d.row(20);
  const int32_t* y = d.y.data() + 20;
  std::vector<float> g(m->num_params());
  const double l0 = m->loss_and_grad(x, y, B, g.data());
  EXPECT_NEAR(l0, m->loss(x, y, B), 1e-6);

  auto& w = m->params();
  const float eps = 1e-2f;
  auto fd = [&](size_t j) {
    const float keep = w[j];
    w[j] = keep + eps;
    const double lp = m->loss(x, y, B);
    w[j] = keep - eps;
    const double lm = m->loss(x, y, B);
    w[j] = keep;
    return (lp - lm) / (2.0 * double(eps));
  };
  // The 20 largest-gradient coordinates plus 40 random ones (including biases).
  std::vector<size_t> idx(g.size());
  for (size_t j = 0; j < idx.size(); ++j) idx[j] = j;
  std::partial_sort(idx.begin(), idx.begin() + 20, idx.end(),
                    [&](size_t a, size_t b) { return std::abs(g[a]) > std::abs(g[b]); });
  idx.resize(20);
  std::mt19937 rng(3);
  for (int i = 0; i < 40; ++i) idx.push_back(std::uniform_int_distribution<size_t>(0, g.size() - 1)(rng));
  for (size_t j = g.size() - 10; j < g.size(); ++j) idx.push_back(j);  // output biases
  size_t checked_nonzero = 0;
  for (size_t j : idx) {
    const double num = fd(j);
    EXPECT_NEAR(g[j], num, 2e-3 + 2e-2 * std::abs(num)) << GetParam() << " param " << j;
    checked_nonzero += std::abs(g[j]) > 1e-3;
  }
  EXPECT_GE(checked_nonzero, 20u);

  // Directional derivative along a random unit direction.
  std::normal_distribution<float> nd;
  std::vector<float> dir(g.size());
  double norm = 0;
  for (auto& v : dir) {
    v = nd(rng);
    norm += double(v) * v;
  }
  double gd = 0;
  for (size_t j = 0; j < g.size(); ++j) gd += double(g[j]) * (dir[j] /= float(std::sqrt(norm)));
  const std::vector<float> keep = w;
  for (size_t j = 0; j < w.size(); ++j) w[j] = keep[j] + eps * dir[j];
  const double lp = m->loss(x, y, B);
  for (size_t j = 0; j < w.size(); ++j) w[j] = keep[j] - eps * dir[j];
  const double lm = m->loss(x, y, B);
  w = keep;
  EXPECT_NEAR(gd, (lp - lm) / (2.0 * double(eps)), 2e-3 + 2e-2 * std::abs(gd)) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Models, GradientCheck, ::testing::Values("logreg", "mlp"));

TEST(Model, RejectsBadLabelsAndShapes) {
  LogisticRegression m;
  const int32_t bad = 10;
  std::vector<float> g(m.num_params());
  EXPECT_THROW(m.loss_and_grad(tiny_train().row(0), &bad, 1, g.data()), Error);
  LogisticRegression small(100, 10);
  EXPECT_THROW(small.evaluate(tiny_train()), Error);
}

}  // namespace
}  // namespace zen::fl
