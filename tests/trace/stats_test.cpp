#include <gtest/gtest.h>

#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "zen/error.hpp"
#include "zen/hash/hash.hpp"
#include "zen/trace/generators.hpp"
#include "zen/trace/stats.hpp"

namespace fs = std::filesystem;
using namespace zen::trace;

namespace {

TraceMeta meta_of(int64_t N, int ranks, int iters) {
  TraceMeta m;
  m.N = N;
  m.ranks = ranks;
  m.iterations = iters;
  return m;
}

std::string fresh_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("zen_trace_stats_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

}  // namespace

TEST(Stats, Summary) {
  const Summary s = summarize({4, 1, 3, 2, 5});
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.p10, 1.4);
  EXPECT_NEAR(s.stddev, std::sqrt(2.5), 1e-12);
}

TEST(Stats, HandComputedTwoRanks) {
  // items 16, two ranks, two parts [0,8) and [8,16).
  const TraceMeta m = meta_of(16, 2, 1);
  const std::vector<std::vector<std::vector<int64_t>>> sets = {{{3, 0, 1, 2, 2, 1}, {2, 3, 4, 5}}};  // dups once
  StatsConfig cfg;
  const TraceStats s = compute_stats(m, sets, cfg);
  ASSERT_EQ(s.density_per_rank.size(), 2u);
  EXPECT_DOUBLE_EQ(s.density_per_rank[0], 0.25);
  EXPECT_DOUBLE_EQ(s.density_per_rank[1], 0.25);
  ASSERT_EQ(s.overlaps.size(), 1u);
  EXPECT_DOUBLE_EQ(s.overlaps[0], 0.5);
  ASSERT_EQ(s.gamma.size(), 2u);
  EXPECT_DOUBLE_EQ(s.gamma[0], 1.0);
  EXPECT_DOUBLE_EQ(s.gamma[1], 1.5);
  EXPECT_DOUBLE_EQ(s.union_density, 6.0 / 16);
  EXPECT_DOUBLE_EQ(s.pull_skew_contiguous, 2.0);  // all 6 in part 0
  EXPECT_DOUBLE_EQ(s.push_skew_contiguous, 2.0);
  EXPECT_DOUBLE_EQ(s.first_part_share, 1.0);
  // Hash skew recomputed independently from the partitioner.
  const auto p = zen::Partitioner::make(16, 2, cfg.seed);
  int load[2] = {0, 0};
  for (int64_t i : {0, 1, 2, 3, 4, 5}) ++load[p.owner(i)];
  EXPECT_DOUBLE_EQ(s.pull_skew_hash, std::max(load[0], load[1]) * 2.0 / 6);
  EXPECT_DOUBLE_EQ(s.load_hash[0] + s.load_hash[1], 1.0);
}

TEST(Stats, PartsAndRankSubset) {
  const TraceMeta m = meta_of(100, 3, 2);
  std::vector<std::vector<std::vector<int64_t>>> sets(2);
  sets[0] = {{0, 1}, {0, 50}, {99}};
  sets[1] = {{0, 1}, {2, 3}, {98}};
  StatsConfig cfg;
  cfg.ranks = 2;
  cfg.parts = 4;
  const TraceStats s = compute_stats(m, sets, cfg);
  EXPECT_EQ(s.ranks, 2);
  EXPECT_EQ(s.parts, 4);
  EXPECT_EQ(s.load_contiguous.size(), 4u);
  // t0: union {0,1,50} gamma 1.5; overlap 0.5. t1: union {0,1,2,3} gamma 2; overlap 0.
  EXPECT_DOUBLE_EQ(s.gamma[1], 1.75);
  EXPECT_DOUBLE_EQ(s.overlap.mean, 0.25);
  // Pull skew t0: parts {2,0,1,0} of 3 -> 8/3; t1: all 4 in part 0 -> 4.
  EXPECT_DOUBLE_EQ(s.pull_skew_contiguous, (8.0 / 3 + 4.0) / 2);
  cfg.ranks = 4;
  EXPECT_THROW(compute_stats(m, sets, cfg), zen::Error);
  cfg.ranks = 0;
  sets[1][2] = {100};
  EXPECT_THROW(compute_stats(m, sets, cfg), zen::Error);
}

TEST(Stats, RowLevelTraceUsesRows) {
  // Row-level and element-level traces of the same corpus give the same densities and gamma.
  const Corpus c = load_corpus(std::string(ZEN_TEST_DATA_DIR) + "/corpus-tiny.txt");
  CorpusConfig cfg;
  cfg.ranks = 4;
  cfg.batch = 6;
  cfg.dim = 4;
  cfg.iterations = 2;
  const std::string e = fresh_dir("elem"), r = fresh_dir("row");
  generate_corpus(c, cfg, e, "tiny");
  cfg.row_level = true;
  generate_corpus(c, cfg, r, "tiny");
  const TraceStats se = compute_stats(e), sr = compute_stats(r);
  EXPECT_NEAR(se.density.mean, sr.density.mean, 1e-12);
  EXPECT_NEAR(se.overlap.mean, sr.overlap.mean, 1e-12);
  EXPECT_NEAR(se.gamma.back(), sr.gamma.back(), 1e-12);
  EXPECT_NEAR(se.pull_skew_contiguous, sr.pull_skew_contiguous, 0.05 * se.pull_skew_contiguous);
  // Text: frequent words sit at low rows, so the first contiguous range holds the most.
  EXPECT_GT(se.push_skew_contiguous, 1.5);
  fs::remove_all(e);
  fs::remove_all(r);
}

TEST(Stats, OutputsJsonTableAndPlots) {
  const std::string dir = fresh_dir("out"), out = fresh_dir("outdir");
  SyntheticConfig cfg;
  cfg.N = 5000;
  cfg.ranks = 4;
  cfg.iterations = 1;
  cfg.density = 0.05;
  cfg.gamma = 2;
  generate_synthetic(cfg, dir);
  const TraceStats s = compute_stats(dir);
  const auto j = stats_to_json(s);
  EXPECT_EQ(j["ranks_used"], 4);
  EXPECT_EQ(j["gamma"].size(), 4u);
  EXPECT_NEAR(j["gamma"][3]["gamma"].get<double>(), 2.0, 3 * 0.5 / 250);  // k = 250, f*k rounded
  EXPECT_DOUBLE_EQ(j["gamma"][3]["gamma"].get<double>(), s.gamma[3]);
  EXPECT_NE(stats_table(s).find("densification gamma_n"), std::string::npos);
  ::setenv("ZEN_GNUPLOT", "none", 1);
  EXPECT_TRUE(write_stats_outputs(s, out).empty());
  ::unsetenv("ZEN_GNUPLOT");
  EXPECT_TRUE(fs::exists(fs::path(out) / "stats.json"));
  EXPECT_TRUE(fs::exists(fs::path(out) / "gamma.dat"));
  if (fs::exists("/usr/bin/gnuplot")) {
    const auto pngs = write_stats_outputs(s, out);
    EXPECT_EQ(pngs.size(), 4u);
    for (const auto& p : pngs) EXPECT_GT(fs::file_size(p), 1000u) << p;
  }
  fs::remove_all(dir);
  fs::remove_all(out);
}
