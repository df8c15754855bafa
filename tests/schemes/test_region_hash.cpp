// Region hashing (the balanced scheme's push partitioner): no entry is lost to a race, to index
// 0, to duplicates or to a full serial region; segments match h0; and the balanced scheme stays exact
// when the regions are forced to overflow. The sort partition (its alternative for sorted pushes)
// gives the same partition with each owner's keys in position order.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <random>

#include "cases.hpp"
#include "zen/comm/loopback.hpp"
#include "zen/hash/region_hash.hpp"
#include "zen/hash/sort_partition.hpp"

using namespace zen;

namespace {

// Every distinct index appears exactly once, in the segment of its h0 owner, with its position and
// its smallest entry id as representative; every entry maps to its key; nothing is lost.
void expect_exact_partition(const std::vector<int64_t>& idx, const Partitioner& part, const HashPartition& hp) {
  ASSERT_GE(hp.offsets.size(), part.n_owners + 1u);
  ASSERT_EQ(hp.offsets[part.n_owners], hp.keys);
  std::map<int64_t, uint32_t> first;  // index -> smallest entry id
  for (size_t e = 0; e < idx.size(); ++e) first.emplace(idx[e], static_cast<uint32_t>(e));
  ASSERT_EQ(hp.keys, first.size());
  EXPECT_EQ(hp.duplicates, first.size() != idx.size());
  std::set<int64_t> seen;
  for (uint32_t p = 0; p < part.n_owners; ++p)
    for (size_t k = hp.offsets[p]; k < hp.offsets[p + 1]; ++k) {
      const uint32_t e = hp.rep[k];
      ASSERT_LT(e, idx.size());
      ASSERT_TRUE(seen.insert(idx[e]).second) << "index " << idx[e] << " placed twice";
      EXPECT_EQ(e, first.at(idx[e])) << "representative of index " << idx[e] << " is not its first entry";
      uint32_t o;
      uint64_t pos;
      part.locate(static_cast<uint64_t>(idx[e]), &o, &pos);
      ASSERT_EQ(o, p) << "entry " << e << " in the wrong owner segment";
      ASSERT_EQ(hp.pos[k], pos);
    }
  if (hp.duplicates) {
    for (size_t e = 0; e < idx.size(); ++e) ASSERT_EQ(idx[hp.rep[hp.key_of[e]]], idx[e]) << "entry " << e;
  }
  if (hp.sorted) {
    for (uint32_t p = 0; p < part.n_owners; ++p)
      for (size_t k = hp.offsets[p] + 1; k < hp.offsets[p + 1]; ++k) ASSERT_LT(hp.pos[k - 1], hp.pos[k]) << "owner " << p;
  } else {
    EXPECT_EQ(hp.parallel_placed + hp.serial_placed + hp.spilled, idx.size());
  }
}

SparseView view_of(const std::vector<int64_t>& idx, const std::vector<float>& val, uint64_t N) {
  SparseView v;
  v.dense_len = N;
  v.nnz = idx.size();
  v.indices = idx.data();
  v.values = val.data();
  return v;
}

TEST(RegionHash, ManyThreadsCollidingKeysLoseNothing) {
  const uint64_t N = 1000003;  // not divisible by any n used
  std::mt19937_64 g(11);
  std::vector<int64_t> idx(400000);
  for (auto& x : idx) x = static_cast<int64_t>(g() % 5000);  // heavy duplication: slots contended
  idx[0] = 0;
  idx[1] = static_cast<int64_t>(N - 1);
  std::vector<float> val(idx.size(), 1.0f);
  for (uint32_t n : {1u, 3u, 7u}) {
    auto part = Partitioner::make(N, n, 99);
    for (int threads : {1, 2, 8}) {
      RegionHashConfig cfg;
      cfg.threads = threads;
      HashPartition hp;
      region_hash_partition(view_of(idx, val, N), part, cfg, hp);
      SCOPED_TRACE("n=" + std::to_string(n) + " threads=" + std::to_string(threads));
      expect_exact_partition(idx, part, hp);
      EXPECT_LE(hp.keys, 5002u);  // equal keys met in the table: each pushed once
    }
  }
}

TEST(RegionHash, TinyRegionsSpillDistinctKeysWithoutLoss) {
  const uint64_t N = 1u << 20;
  std::mt19937_64 g(12);
  std::vector<int64_t> idx(60000);
  for (auto& x : idx) x = static_cast<int64_t>(g() % N);  // mostly distinct, some repeats
  std::vector<float> val(idx.size(), 1.0f);
  for (int threads : {1, 4}) {
    auto part = Partitioner::make(N, 5, 7);
    RegionHashConfig cfg;
    cfg.threads = threads;
    cfg.parallel_factor = 0.02;
    cfg.serial_fraction = 0.01;
    cfg.hash_functions = 1;
    HashPartition hp;
    region_hash_partition(view_of(idx, val, N), part, cfg, hp);
    expect_exact_partition(idx, part, hp);
    EXPECT_GT(hp.spilled, 0u);
    EXPECT_GT(hp.overflowed_owners, 0u);
  }
}

TEST(RegionHash, ReusedTableGivesTheSameAnswerWhateverTheThreads) {
  // One table object reused across calls of different sizes, pools of 1 and 4 threads: the keys,
  // positions and representatives per owner are the same sets every time.
  const uint64_t N = 300007;
  auto part = Partitioner::make(N, 4, 5);
  RegionHash table;
  detail::ThreadPool one(1), four(4);
  std::mt19937_64 g(3);
  for (int call = 0; call < 6; ++call) {
    std::vector<int64_t> idx(static_cast<size_t>(2000 + 30000 * (call % 3)));
    for (auto& x : idx) x = static_cast<int64_t>(g() % 20000);
    std::vector<float> val(idx.size(), 1.0f);
    HashPartition a, b;
    table.partition(view_of(idx, val, N), part, RegionHashConfig{}, &one, a);
    expect_exact_partition(idx, part, a);
    table.partition(view_of(idx, val, N), part, RegionHashConfig{}, &four, b);
    expect_exact_partition(idx, part, b);
    for (uint32_t p = 0; p < 4; ++p) {
      std::set<std::pair<uint64_t, uint32_t>> sa, sb;
      for (size_t k = a.offsets[p]; k < a.offsets[p + 1]; ++k) sa.insert({a.pos[k], a.rep[k]});
      for (size_t k = b.offsets[p]; k < b.offsets[p + 1]; ++k) sb.insert({b.pos[k], b.rep[k]});
      EXPECT_EQ(sa, sb) << "owner " << p << " call " << call;
    }
  }
}

TEST(RegionHash, OutOfRangeIndexIsAnErrorAndTheTableRecovers) {
  const uint64_t N = 100;
  auto part = Partitioner::make(N, 3, 1);
  RegionHash table;
  detail::ThreadPool pool(2);
  std::vector<int64_t> bad{5, 7, 100, 9};
  std::vector<float> val(4, 1.0f);
  HashPartition hp;
  try {
    table.partition(view_of(bad, val, N), part, RegionHashConfig{}, &pool, hp);
    ADD_FAILURE() << "index 100 of N = 100 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 100 at entry 2"), std::string::npos) << e.what();
  }
  std::vector<int64_t> good{5, 7, 99, 9, 5};
  val.resize(5, 1.0f);
  table.partition(view_of(good, val, N), part, RegionHashConfig{}, &pool, hp);
  expect_exact_partition(good, part, hp);
}

TEST(RegionHash, IndexZeroAndTinyRegionsAndEmpty) {
  const uint64_t N = 64;
  std::vector<int64_t> idx{0, 0, 63, 1, 0, 17};
  std::vector<float> val(idx.size(), 1.0f);
  auto part = Partitioner::make(N, 5, 3);
  RegionHashConfig cfg;
  cfg.parallel_factor = 0.0;  // floor capacity only
  cfg.serial_fraction = 0.0;
  HashPartition hp;
  region_hash_partition(view_of(idx, val, N), part, cfg, hp);
  expect_exact_partition(idx, part, hp);
  std::vector<int64_t> none;
  region_hash_partition(view_of(none, val, N), part, cfg, hp);
  EXPECT_EQ(hp.keys, 0u);
}

TEST(RegionHash, DefaultSizingKeepsSerialShareNearPaper) {
  const uint64_t N = 1ULL << 24;
  std::mt19937_64 g(5);
  std::vector<int64_t> idx;
  std::vector<char> used(N, 0);
  while (idx.size() < 100000) {
    int64_t x = static_cast<int64_t>(g() % N);
    if (!used[x]) {
      used[x] = 1;
      idx.push_back(x);
    }
  }
  std::vector<float> val(idx.size(), 1.0f);
  auto part = Partitioner::make(N, 16, 1);
  HashPartition hp;
  region_hash_partition(view_of(idx, val, N), part, RegionHashConfig{}, hp);
  expect_exact_partition(idx, part, hp);
  const double serial = static_cast<double>(hp.serial_placed + hp.spilled) / static_cast<double>(idx.size());
  EXPECT_GT(serial, 0.01);  // Zen §4 [est]: 2.9 % at r1 = 2 nnz, k = 3
  EXPECT_LT(serial, 0.06);
  EXPECT_EQ(hp.spilled, 0u);  // r2 = r1/10 has ample headroom at the default sizes
  // Push balance (Thm 2): owner loads within a few percent of the mean.
  std::vector<uint64_t> load(16);
  for (uint32_t p = 0; p < 16; ++p) load[p] = hp.count(p);
  const double mean = static_cast<double>(idx.size()) / 16.0;  // no duplicates: keys == entries
  EXPECT_EQ(hp.keys, idx.size());
  EXPECT_LT(static_cast<double>(*std::max_element(load.begin(), load.end())) / mean, 1.1);
}

TEST(SortPartition, ExactSortedWithDuplicatesIndexZeroAndLastEveryOwnerCountAndThreads) {
  std::mt19937_64 g(5);
  for (uint32_t n = 1; n <= 8; ++n)
    for (uint64_t N : {uint64_t{1}, uint64_t{7}, uint64_t{1000003}}) {
      std::vector<int64_t> idx;
      for (int i = 0; i < 30000; ++i) idx.push_back(static_cast<int64_t>(g() % 3 ? g() % N : g() % (N < 50 ? N : 50)));
      idx.push_back(0);
      idx.push_back(static_cast<int64_t>(N - 1));
      std::vector<float> val(idx.size(), 1.0f);
      const Partitioner part = Partitioner::make(N, n, 9);
      ASSERT_TRUE(SortPartition::fits(part));
      for (int threads : {1, 3}) {
        SCOPED_TRACE("n=" + std::to_string(n) + " N=" + std::to_string(N) + " threads=" + std::to_string(threads));
        detail::ThreadPool pool(threads);
        SortPartition sp;
        HashPartition hp;
        sp.partition(view_of(idx, val, N), part, &pool, hp);
        EXPECT_TRUE(hp.sorted);
        expect_exact_partition(idx, part, hp);
        // Reused: a smaller call with distinct keys (no duplicates), then nothing.
        const std::vector<int64_t> small{static_cast<int64_t>(N - 1), 0};
        sp.partition(view_of(small, val, N), part, &pool, hp);
        expect_exact_partition(N > 1 ? small : std::vector<int64_t>{0, 0}, part, hp);
        sp.partition(view_of({}, val, N), part, &pool, hp);
        EXPECT_EQ(hp.keys, 0u);
      }
    }
}

TEST(SortPartition, OutOfRangeIndexNamesTheEntryAndTooManyRowsAreRefused) {
  const Partitioner part = Partitioner::make(1000, 3, 1);
  const std::vector<int64_t> idx{5, 999, 1000, 7};
  const std::vector<float> val(idx.size(), 1.0f);
  SortPartition sp;
  HashPartition hp;
  detail::ThreadPool pool(2);
  try {
    sp.partition(view_of(idx, val, 1000), part, &pool, hp);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Result::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("index 1000 at entry 2 is outside [0, 1000)"), std::string::npos) << e.what();
  }
  const Partitioner huge = Partitioner::make(uint64_t{1} << 40, 4, 1);
  EXPECT_FALSE(SortPartition::fits(huge));
  EXPECT_THROW(sp.partition(view_of({}, val, uint64_t{1} << 40), huge, &pool, hp), Error);
}

TEST(BalancedOverflow, ForcedSerialOverflowStaysExactAndIsReported) {
  for (int n : {1, 3, 4}) {
    test::Case c = test::make_case(test::case_kinds().front(), n, 0);
    // Many distinct keys (each twice) so the tiny regions overflow, and make them tiny.
    for (int r = 0; r < n; ++r)
      for (int k = 0; k < 600; ++k) {
        c.idx[r].push_back(static_cast<int64_t>(k % 311));
        for (uint32_t d = 0; d < c.D; ++d) c.val[r].push_back(static_cast<double>((k % 5) - 2));
      }
    c.opt.parallel_factor = 0.01;
    c.opt.serial_fraction = 0.01;
    c.opt.push = IndexEncoding::Coo;  // COO pushes: the hash table partitions (no sort partition)
    const test::Reference ref = test::reference(c);
    std::vector<uint64_t> overflows(n);
    loopback::run(n, [&](Communicator& comm) {
      SyncReport rep;
      test::check_case(comm, "balanced", c, ref, &rep);
      overflows[comm.rank()] = rep.serial_overflows;
    });
    uint64_t total = 0;
    for (auto o : overflows) total += o;
    EXPECT_GT(total, 0u) << "n=" << n << ": the forced configuration must overflow somewhere";
  }
}

}  // namespace
