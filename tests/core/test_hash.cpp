#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "zen/hash/hash.hpp"

using zen::Partitioner;

class PartitionerTest : public ::testing::TestWithParam<std::tuple<uint64_t, uint32_t>> {};

TEST_P(PartitionerTest, BijectionOwnersPositionsInverse) {
  auto [N, n] = GetParam();
  auto p = Partitioner::make(N, n, 0x1234);
  std::vector<uint64_t> sizes(n, 0);
  std::vector<std::vector<char>> seen(n);
  for (uint32_t i = 0; i < n; ++i) seen[i].assign(p.owner_size(i), 0);
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; ++i) total += p.owner_size(i);
  ASSERT_EQ(total, N) << "owner sizes must cover [0, N) exactly";
  for (uint64_t x = 0; x < N; ++x) {
    uint32_t o;
    uint64_t pos;
    p.locate(x, &o, &pos);
    ASSERT_LT(o, n);
    ASSERT_EQ(o, p.owner(x));
    ASSERT_LT(pos, p.owner_size(o)) << "x=" << x;
    ASSERT_EQ(seen[o][pos], 0) << "two indices share owner " << o << " position " << pos;
    seen[o][pos] = 1;
    ASSERT_EQ(p.index_at(o, pos), x);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, PartitionerTest,
                         ::testing::Combine(::testing::Values(1u, 2u, 31u, 1000u, 4099u, (1u << 16) + 3),
                                            ::testing::Values(1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 16u)));

TEST(Partitioner, EmptyAndHugeRanges) {
  auto p0 = Partitioner::make(0, 4, 1);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(p0.owner_size(i), 0u);
  // N = 2^63: sample indices, check the inverse (no table needed).
  const uint64_t N = 1ULL << 63;
  auto p = Partitioner::make(N, 7, 99);
  uint64_t total = 0;
  for (uint32_t i = 0; i < 7; ++i) total += p.owner_size(i);
  EXPECT_EQ(total, N);
  for (uint64_t x : std::vector<uint64_t>{0ULL, 1ULL, N - 1, N / 2, (1ULL << 31) + 5, (1ULL << 34) - 1}) {
    uint32_t o;
    uint64_t pos;
    p.locate(x, &o, &pos);
    EXPECT_EQ(p.index_at(o, pos), x);
  }
}

TEST(Partitioner, SeedChangesAssignmentAndBalances) {
  const uint64_t N = 1 << 18;
  auto a = Partitioner::make(N, 8, 1), b = Partitioner::make(N, 8, 2);
  uint64_t diff = 0;
  for (uint64_t x = 0; x < 4096; ++x) diff += a.owner(x) != b.owner(x);
  EXPECT_GT(diff, 3000u);
  // A skewed (contiguous, low-index) support spreads evenly over owners.
  std::vector<uint64_t> load(8, 0);
  for (uint64_t x = 0; x < N / 16; ++x) load[a.owner(x)]++;
  uint64_t mx = *std::max_element(load.begin(), load.end());
  EXPECT_LT(static_cast<double>(mx) * 8 / (N / 16), 1.05);
}
