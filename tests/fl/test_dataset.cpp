#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "fl_test_util.hpp"
#include "zen/error.hpp"
#include "zen/fl/dataset.hpp"
#include "zen/fl/rng.hpp"

namespace zen::fl {
namespace {

// Balanced synthetic labels: n_per_class samples of each class, interleaved.
std::vector<int32_t> balanced_labels(int classes, size_t n_per_class) {
  std::vector<int32_t> y(size_t(classes) * n_per_class);
  for (size_t i = 0; i < y.size(); ++i) y[i] = int32_t(i % size_t(classes));
  return y;
}

size_t total(const Partition& p) {
  size_t s = 0;
  for (const auto& c : p) s += c.size();
  return s;
}

// Mean over clients of the largest class share: 1/C for perfectly mixed, 1 for one class each.
double mean_max_share(const Partition& p, const std::vector<int32_t>& y, int classes) {
  const auto counts = partition_label_counts(p, y, classes);
  double s = 0;
  size_t used = 0;
  for (size_t k = 0; k < p.size(); ++k) {
    if (p[k].empty()) continue;
    s += double(*std::max_element(counts[k].begin(), counts[k].end())) / double(p[k].size());
    ++used;
  }
  return s / double(used);
}

TEST(Rng, StreamsAreSeparate) {
  std::set<uint64_t> seen;
  for (uint64_t master : {0ull, 1ull, 2ull}) {
    seen.insert(stream_seed(master, Stream::Split));
    seen.insert(stream_seed(master, Stream::Init));
    for (uint64_t c = 0; c < 40; ++c)
      for (uint64_t r = 0; r < 5; ++r) seen.insert(stream_seed(master, Stream::Shuffle, c, r));
  }
  EXPECT_EQ(seen.size(), 3u * (2 + 40 * 5));
  EXPECT_EQ(stream_seed(7, Stream::Init), stream_seed(7, Stream::Init));
  EXPECT_NE(stream_seed(7, Stream::Shuffle, 1, 2), stream_seed(7, Stream::Shuffle, 2, 1));
}

TEST(SplitIid, EverySampleExactlyOnceAndBalanced) {
  for (int K : {1, 7, 40}) {
    const size_t n = 1003;
    const Partition p = split_iid(n, K, 42);
    ASSERT_EQ(p.size(), size_t(K));
    EXPECT_NO_THROW(validate_partition(p, n));
    EXPECT_EQ(total(p), n);
    size_t lo = n, hi = 0;
    for (const auto& c : p) {
      lo = std::min(lo, c.size());
      hi = std::max(hi, c.size());
    }
    EXPECT_LE(hi - lo, 1u) << "K=" << K;
    EXPECT_EQ(lo, n / size_t(K));
  }
}

TEST(SplitIid, SeededAndShuffled) {
  const Partition a = split_iid(600, 6, 5), b = split_iid(600, 6, 5), c = split_iid(600, 6, 6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::vector<size_t> first(100);
  std::iota(first.begin(), first.end(), size_t(0));
  EXPECT_NE(a[0], first);  // not the identity order
  // Shards of 100 IID draws from 10 balanced classes hold most classes.
  const auto y = balanced_labels(10, 60);
  EXPECT_LT(mean_max_share(a, y, 10), 0.3);
  EXPECT_THROW(split_iid(10, 0, 1), Error);
}

TEST(SplitDirichlet, PerClientCoversExactlyOnceWithEqualSizes) {
  const auto y = balanced_labels(10, 600);  // 6000 samples
  for (double alpha : {0.05, 0.5, 100.0}) {
    const Partition p = split_dirichlet(y, 10, 40, alpha, 9, DirichletMode::PerClient);
    ASSERT_EQ(p.size(), 40u);
    EXPECT_NO_THROW(validate_partition(p, y.size())) << "alpha " << alpha;
    for (const auto& c : p) EXPECT_EQ(c.size(), 150u);
  }
}

TEST(SplitDirichlet, PerClassCoversExactlyOnce) {
  const auto y = balanced_labels(10, 600);
  for (double alpha : {0.05, 0.5, 100.0}) {
    const Partition p = split_dirichlet(y, 10, 40, alpha, 9, DirichletMode::PerClass);
    ASSERT_EQ(p.size(), 40u);
    EXPECT_NO_THROW(validate_partition(p, y.size())) << "alpha " << alpha;
  }
}

TEST(SplitLognormal, UnequalSizesEverySampleOnce) {
  const size_t n = 6000;
  const Partition p = split_iid_lognormal(n, 40, 1.0, 5);
  ASSERT_EQ(p.size(), 40u);
  EXPECT_NO_THROW(validate_partition(p, n));
  size_t lo = n, hi = 0, total = 0;
  for (const auto& c : p) {
    lo = std::min(lo, c.size());
    hi = std::max(hi, c.size());
    total += c.size();
  }
  EXPECT_EQ(total, n);
  EXPECT_GE(lo, 1u);
  EXPECT_GT(hi, 3 * lo) << "sigma = 1 should spread sizes by far more than 3x over 40 clients";
  // sigma = 0: split_iid's sizes (differ by at most one).
  const Partition q = split_iid_lognormal(n + 7, 40, 0.0, 5);
  for (const auto& c : q) EXPECT_TRUE(c.size() == (n + 7) / 40 || c.size() == (n + 7) / 40 + 1) << c.size();
  EXPECT_EQ(p, split_iid_lognormal(n, 40, 1.0, 5));
  EXPECT_NE(p, split_iid_lognormal(n, 40, 1.0, 6));
  EXPECT_THROW(split_iid_lognormal(10, 11, 1.0, 1), Error);
  EXPECT_THROW(split_iid_lognormal(10, 2, -1.0, 1), Error);
}

TEST(SplitByGroup, EachGroupSeesOnlyItsClasses) {
  const auto y = balanced_labels(10, 600);
  std::vector<int> group_of;
  for (int g = 0; g < 5; ++g)
    for (int j = 0; j < 8; ++j) group_of.push_back(g);
  const Partition p = split_by_group(y, 10, group_of, 2, 3);
  ASSERT_EQ(p.size(), 40u);
  EXPECT_NO_THROW(validate_partition(p, y.size()));
  const auto counts = partition_label_counts(p, y, 10);
  for (size_t k = 0; k < 40; ++k) {
    const int g = group_of[k];
    for (int c = 0; c < 10; ++c) {
      if (c / 2 != g) {
        EXPECT_EQ(counts[k][static_cast<size_t>(c)], 0u) << "client " << k << " class " << c;
      }
    }
    EXPECT_GT(p[k].size(), 0u);
  }
  // Fewer classes than needed to cover every label: the uncovered classes go to every client.
  const Partition q = split_by_group(y, 10, group_of, 1, 3);
  EXPECT_NO_THROW(validate_partition(q, y.size()));
  const auto qc = partition_label_counts(q, y, 10);
  size_t with_class9 = 0;
  for (size_t k = 0; k < 40; ++k) with_class9 += qc[k][9] > 0;
  EXPECT_EQ(with_class9, 40u);
  EXPECT_EQ(p, split_by_group(y, 10, group_of, 2, 3));
  EXPECT_THROW(split_by_group(y, 10, group_of, 0, 3), Error);
  EXPECT_THROW(split_by_group(y, 10, {0, -1}, 2, 3), Error);
}

TEST(SplitDirichlet, SmallAlphaSkewsLabels) {
  const auto y = balanced_labels(10, 600);
  for (auto mode : {DirichletMode::PerClient, DirichletMode::PerClass}) {
    const double skewed = mean_max_share(split_dirichlet(y, 10, 40, 0.1, 3, mode), y, 10);
    const double mixed = mean_max_share(split_dirichlet(y, 10, 40, 100.0, 3, mode), y, 10);
    EXPECT_GT(skewed, 0.5) << "mode " << int(mode) << " mixed " << mixed;
    EXPECT_LT(mixed, 0.3) << "mode " << int(mode) << " skewed " << skewed;
  }
}

TEST(SplitDirichlet, SeededAndValidated) {
  const auto& d = test::tiny_train();
  const Partition a = split_dirichlet(d.y, 10, 8, 0.5, 11);
  EXPECT_EQ(a, split_dirichlet(d.y, 10, 8, 0.5, 11));
  EXPECT_NE(a, split_dirichlet(d.y, 10, 8, 0.5, 12));
  EXPECT_NO_THROW(validate_partition(a, d.size()));
  EXPECT_THROW(split_dirichlet(d.y, 10, 8, 0.0, 1), Error);
  EXPECT_THROW(split_dirichlet(d.y, 10, 0, 0.5, 1), Error);
  EXPECT_THROW(split_dirichlet({0, 1, 10}, 10, 2, 0.5, 1), Error);
}

TEST(ValidatePartition, DetectsDuplicateMissingAndOutOfRange) {
  EXPECT_NO_THROW(validate_partition({{0, 2}, {1, 3}}, 4));
  try {
    validate_partition({{0, 2}, {1, 2}, {3}}, 4);
    ADD_FAILURE() << "duplicate not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sample 2 is assigned to client 0 and client 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(validate_partition({{0, 2}, {1}}, 4), Error);     // sample 3 missing
  EXPECT_THROW(validate_partition({{0, 2}, {1, 3, 4}}, 4), Error);  // 4 out of range
}

TEST(PartitionLabelCounts, CountsPerClient) {
  const std::vector<int32_t> y{0, 1, 1, 2, 2, 2};
  const auto c = partition_label_counts({{0, 3}, {1, 2, 4, 5}}, y, 3);
  EXPECT_EQ(c[0], (std::vector<size_t>{1, 0, 1}));
  EXPECT_EQ(c[1], (std::vector<size_t>{0, 2, 2}));
}

}  // namespace
}  // namespace zen::fl
