#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "zen/error.hpp"
#include "zen/fl/fedavg.hpp"
#include "zen/fl/sparse_aggregate.hpp"

namespace zen::fl {
namespace {

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no exception>";
}

// K random models of dimension n (reference mean computed in long double).
struct Clients {
  std::vector<std::vector<float>> models;
  std::vector<double> sizes;
};

Clients random_clients(size_t K, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> sz(100, 2000);
  Clients c;
  for (size_t k = 0; k < K; ++k) {
    c.models.emplace_back(n);
    for (auto& v : c.models.back()) v = nd(rng);
    c.sizes.push_back(double(sz(rng)));
  }
  return c;
}

std::vector<float> reference_mean(const Clients& c, Weighting w) {
  const size_t n = c.models[0].size();
  std::vector<long double> s(n, 0.0L);
  long double W = 0;
  for (size_t k = 0; k < c.models.size(); ++k) {
    const long double d = fedavg_weight(w, size_t(c.sizes[k]));
    for (size_t i = 0; i < n; ++i) s[i] += d * c.models[k][i];
    W += d;
  }
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = float(s[i] / W);
  return out;
}

TEST(FedAvg, SmallWeightedExample) {
  // (1*[1,2] + 3*[3,4]) / 4 = [2.5, 3.5]; uniform: [2, 3].
  EXPECT_EQ(fedavg({{1, 2}, {3, 4}}, {1, 3}), (std::vector<float>{2.5f, 3.5f}));
  EXPECT_EQ(fedavg({{1, 2}, {3, 4}}, {1, 1}), (std::vector<float>{2.0f, 3.0f}));
  PartialAggregate a;
  a.add(std::vector<float>{1, 2}, 1, 7);
  a.add(std::vector<float>{3, 4}, 3, 2);
  EXPECT_EQ(a.weighted_sum, (std::vector<double>{10, 14}));
  EXPECT_EQ(a.weight, 4.0);
  EXPECT_EQ(a.members, (std::vector<int>{2, 7}));
  EXPECT_EQ(a.finalize(), (std::vector<float>{2.5f, 3.5f}));
}

TEST(FedAvg, WeightingOption) {
  EXPECT_EQ(fedavg_weight(Weighting::SampleCount, 1500), 1500.0);
  EXPECT_EQ(fedavg_weight(Weighting::Uniform, 1500), 1.0);
  EXPECT_EQ(parse_weighting("samples"), Weighting::SampleCount);
  EXPECT_EQ(parse_weighting("uniform"), Weighting::Uniform);
  EXPECT_STREQ(weighting_name(Weighting::Uniform), "uniform");
  EXPECT_THROW(parse_weighting("median"), Error);
}

class FedAvgWeighting : public ::testing::TestWithParam<Weighting> {};

TEST_P(FedAvgWeighting, DirectMatchesReference) {
  const Weighting w = GetParam();
  const Clients c = random_clients(40, 7850, 1);
  PartialAggregate a;
  for (size_t k = 0; k < 40; ++k) a.add(c.models[k], fedavg_weight(w, size_t(c.sizes[k])), int(k));
  const auto got = a.finalize();
  const auto ref = reference_mean(c, w);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-6f) << i;
  EXPECT_EQ(a.weight, w == Weighting::Uniform ? 40.0
                                              : std::accumulate(c.sizes.begin(), c.sizes.end(), 0.0));
}

// Merging partials in any grouping (orbits, ring chains, arbitrary merge order) equals the direct
// weighted mean.
TEST_P(FedAvgWeighting, AnyGroupingEqualsDirectMean) {
  const Weighting w = GetParam();
  const size_t K = 40, n = 7850;
  const Clients c = random_clients(K, n, 2);
  PartialAggregate direct;
  for (size_t k = 0; k < K; ++k) direct.add(c.models[k], fedavg_weight(w, size_t(c.sizes[k])), int(k));
  const auto want = direct.finalize();

  std::mt19937 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int> order(K);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const size_t groups = 1 + rng() % K;
    std::vector<PartialAggregate> parts(groups);
    for (size_t i = 0; i < K; ++i) {
      const int k = order[i];
      parts[i % groups].add(c.models[size_t(k)], fedavg_weight(w, size_t(c.sizes[size_t(k)])), k);
    }
    // Merge in random pairs until one remains (a random reduction tree).
    while (parts.size() > 1) {
      std::shuffle(parts.begin(), parts.end(), rng);
      parts[0].merge(parts.back());
      parts.pop_back();
    }
    const auto got = parts[0].finalize();
    ASSERT_EQ(parts[0].members.size(), K);
    EXPECT_TRUE(std::is_sorted(parts[0].members.begin(), parts[0].members.end()));
    EXPECT_NEAR(parts[0].weight, direct.weight, 1e-9 * direct.weight);
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 1e-6f) << "trial " << trial << " i " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Both, FedAvgWeighting,
                         ::testing::Values(Weighting::SampleCount, Weighting::Uniform),
                         [](const auto& info) { return std::string(weighting_name(info.param)); });

TEST(FedAvg, GroupingIsExactOnDyadicValues) {
  // Small integer weights and dyadic values: every partial sum is exact, so grouping cannot matter.
  std::vector<std::vector<float>> models;
  for (int k = 0; k < 8; ++k) models.push_back({float(k) * 0.25f, float(8 - k) * 0.5f, 1.0f});
  const std::vector<double> D{1, 2, 3, 4, 5, 6, 7, 8};
  const auto direct = fedavg(models, D);
  PartialAggregate ring_a, ring_b, ring_c;
  for (int k : {0, 5, 2}) ring_a.add(models[size_t(k)], D[size_t(k)], k);
  for (int k : {7, 1}) ring_b.add(models[size_t(k)], D[size_t(k)], k);
  for (int k : {3, 6, 4}) ring_c.add(models[size_t(k)], D[size_t(k)], k);
  PartialAggregate ps;
  ps.merge(ring_c);
  ps.merge(ring_a);
  ps.merge(ring_b);
  EXPECT_EQ(ps.finalize(), direct);
  EXPECT_EQ(ps.members, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(ps.weight, 36.0);
}

TEST(PartialAggregate, DetectsClientCountedTwice) {
  PartialAggregate a, b;
  a.add(std::vector<float>{1, 1}, 10, 3);
  a.add(std::vector<float>{2, 2}, 10, 5);
  const std::string dup = message_of([&] { a.add(std::vector<float>{1, 1}, 10, 3); });
  EXPECT_NE(dup.find("client 3 is already counted"), std::string::npos) << dup;
  EXPECT_EQ(a.weight, 20.0);  // the failed add left the aggregate untouched
  EXPECT_EQ(a.members, (std::vector<int>{3, 5}));

  b.add(std::vector<float>{0, 0}, 1, 4);
  b.add(std::vector<float>{0, 0}, 1, 5);
  const std::string m = message_of([&] { a.merge(b); });
  EXPECT_NE(m.find("client 5 would be counted twice"), std::string::npos) << m;
  EXPECT_EQ(a.members, (std::vector<int>{3, 5}));
  EXPECT_EQ(a.weighted_sum, (std::vector<double>{30, 30}));
  EXPECT_THROW(a.merge(a), Error);
}

TEST(PartialAggregate, EmptyAndInvalidInput) {
  PartialAggregate a;
  EXPECT_TRUE(a.empty());
  EXPECT_THROW(a.finalize(), Error);
  PartialAggregate none;
  a.add(std::vector<float>{1, 2, 3}, 2, 0);
  a.merge(none);  // no-op
  EXPECT_EQ(a.members.size(), 1u);
  none.merge(a);  // into an empty one: copy
  EXPECT_EQ(none.finalize(), (std::vector<float>{1, 2, 3}));
  EXPECT_THROW(a.add(std::vector<float>{1, 2}, 2, 1), Error);     // dimension
  EXPECT_THROW(a.add(std::vector<float>{1, 2, 3}, 0, 1), Error);  // weight 0
  EXPECT_THROW(a.add(std::vector<float>{1, 2, 3}, -1, 1), Error);
  EXPECT_THROW(a.add(std::vector<float>{1, 2, 3}, NAN, 1), Error);
  PartialAggregate other;
  other.add(std::vector<float>{1, 2}, 1, 9);
  EXPECT_THROW(a.merge(other), Error);
  EXPECT_TRUE(a.contains(0));
  EXPECT_FALSE(a.contains(9));
  a.clear();
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.dim(), 0u);
}

TEST(PartialAggregate, BytesRoundTrip) {
  PartialAggregate a;
  a.add(std::vector<float>{1.5f, -2, 3}, 1500, 12);
  a.add(std::vector<float>{0.25f, 4, -1}, 700, 3);
  const auto bytes = a.to_bytes();
  // Header, two int32 members, the mean as float32 (what a model costs).
  EXPECT_EQ(bytes.size(), 32u + 2 * 4 + 3 * 4);
  EXPECT_EQ(bytes.size(), PartialAggregate::wire_bytes(3, 2));
  const PartialAggregate b = PartialAggregate::from_bytes(bytes);
  EXPECT_EQ(b.weight, a.weight);
  EXPECT_EQ(b.members, a.members);
  EXPECT_EQ(b.finalize(), a.finalize());  // the float32 mean survives exactly
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(b.weighted_sum[i], a.weighted_sum[i], 1e-6 * std::abs(a.weighted_sum[i]));
  auto cut = bytes;
  cut.pop_back();
  EXPECT_THROW(PartialAggregate::from_bytes(cut), Error);
  auto bad = bytes;
  bad[0] ^= 1;
  EXPECT_THROW(PartialAggregate::from_bytes(bad), Error);
  const PartialAggregate e = PartialAggregate::from_bytes(PartialAggregate{}.to_bytes());
  EXPECT_TRUE(e.empty());
}

}  // namespace
}  // namespace zen::fl

namespace zen::fl {
namespace {

TEST(SparseAggregate, TopKWithErrorFeedbackKeepsWhatItDidNotSend) {
  std::vector<double> acc{0.5, -3.0, 2.0, 0.1, -2.0, 7.25, 0.0, 1e-9};
  const std::vector<double> before = acc;
  SparseAggregate a = topk_extract(acc, 3, 12.0, {4, 9});
  EXPECT_EQ(a.positions, (std::vector<uint64_t>{1, 2, 5}));  // |-3|, |2| (ties with |-2|: lower index), |7.25|
  EXPECT_EQ(a.values, (std::vector<float>{-3.0f, 2.0f, 7.25f}));
  for (std::size_t i = 0; i < acc.size(); ++i) {
    double sent = 0;
    for (std::size_t j = 0; j < a.positions.size(); ++j)
      if (a.positions[j] == i) sent = a.values[j];
    EXPECT_EQ(acc[i] + sent, before[i]) << i;  // exact: the float rounding stays in the residual
  }
  // A value that is not a float leaves its rounding error behind.
  std::vector<double> one{0.1};
  const SparseAggregate b = topk_extract(one, 5, 1.0, {0});
  ASSERT_EQ(b.positions.size(), 1u);
  EXPECT_EQ(one[0] + static_cast<double>(b.values[0]), 0.1);
  EXPECT_NE(one[0], 0.0);
}

TEST(SparseAggregate, WireRoundTripWithEliasFanoOrBitmapAndItsSize) {
  for (const std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{78}, std::size_t{785}, std::size_t{7000}, std::size_t{7850}}) {
    std::vector<double> acc(7850);
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = std::sin(0.37 * static_cast<double>(i)) * (1.0 + i % 7);
    const SparseAggregate a = topk_extract(acc, k, 3000.0, {1, 5, 17});
    const auto bytes = a.to_bytes();
    EXPECT_EQ(bytes.size(), SparseAggregate::wire_bytes(7850, k, 3)) << k;
    const SparseAggregate b = SparseAggregate::from_bytes(bytes);
    EXPECT_EQ(b.positions, a.positions) << k;
    EXPECT_EQ(b.values, a.values) << k;
    EXPECT_EQ(b.weight, 3000.0);
    EXPECT_EQ(b.members, (std::vector<int>{1, 5, 17}));
    // Elias-Fano for few entries, the bitmap (N/8 bytes) once it is smaller.
    if (k == 78) { EXPECT_LT(bytes.size(), 48 + 12 + 78 * 4 + 7850 / 8); }
    if (k == 7000) { EXPECT_EQ(bytes.size(), 48u + 12 + (7850 + 7) / 8 + 7000 * 4); }
    auto cut = bytes;
    cut.pop_back();
    EXPECT_THROW(SparseAggregate::from_bytes(cut), Error);
    auto bad_k = bytes;  // a header that does not match the size
    bad_k[16] ^= 1;
    EXPECT_THROW(SparseAggregate::from_bytes(bad_k), Error) << k;
    auto bad_enc = bytes;  // the other index encoding than (dim, k) selects
    bad_enc[32] ^= 1;
    EXPECT_THROW(SparseAggregate::from_bytes(bad_enc), Error) << k;
  }
  std::vector<double> dense(10, 1.0);
  SparseAggregate s;
  s.dim = 10;
  s.positions = {0, 9};
  s.values = {2.5f, -1.0f};
  s.add_to(dense);
  EXPECT_EQ(dense[0], 3.5);
  EXPECT_EQ(dense[9], 0.0);
  std::vector<double> wrong(9);
  EXPECT_THROW(s.add_to(wrong), Error);
}

}  // namespace
}  // namespace zen::fl
