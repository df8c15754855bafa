#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "zen/error.hpp"
#include "zen/trace/generators.hpp"
#include "zen/trace/stats.hpp"

namespace fs = std::filesystem;
using namespace zen::trace;
using zen::DType;

namespace {

const std::string kTiny = std::string(ZEN_TEST_DATA_DIR) + "/corpus-tiny.txt";

std::string fresh_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("zen_trace_gen_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

std::vector<uint8_t> file_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST(Tokenize, WordsPunctuationAndCase) {
  EXPECT_EQ(tokenize("Don't forget the well-known Fountain."),
            (std::vector<std::string>{"don't", "forget", "the", "well-known", "fountain", "."}));
  EXPECT_EQ(tokenize("  Hello,\tWorld!  -- 42 "),
            (std::vector<std::string>{"hello", ",", "world", "!", "-", "-", "42"}));
  EXPECT_EQ(tokenize("'quoted' end-"), (std::vector<std::string>{"'", "quoted", "'", "end", "-"}));
  EXPECT_TRUE(tokenize("   ").empty());
}

TEST(Corpus, LoadsTinyTextSortedByFrequency) {
  const Corpus c = load_corpus(kTiny);
  EXPECT_EQ(c.sentences.size(), 60u);  // one sentence per non-blank line
  ASSERT_EQ(c.vocab.size(), c.freq.size());
  EXPECT_EQ(c.vocab[0], "the");
  int64_t total = 0;
  for (size_t i = 0; i < c.freq.size(); ++i) {
    total += c.freq[i];
    if (i > 0) {
      EXPECT_GE(c.freq[i - 1], c.freq[i]) << "row " << i;
      if (c.freq[i - 1] == c.freq[i]) {
        EXPECT_LT(c.vocab[i - 1], c.vocab[i]) << "tie order at row " << i;
      }
    }
  }
  EXPECT_EQ(total, c.tokens);
  int64_t counted = 0;
  std::vector<int64_t> f(c.vocab.size(), 0);
  for (const auto& s : c.sentences)
    for (int32_t w : s) {
      ASSERT_GE(w, 0);
      ASSERT_LT(w, static_cast<int32_t>(c.vocab.size()));
      ++f[w];
      ++counted;
    }
  EXPECT_EQ(counted, c.tokens);
  EXPECT_EQ(f, c.freq);
  // Every word appears lower-cased.
  for (const auto& w : c.vocab)
    for (char ch : w) EXPECT_FALSE(ch >= 'A' && ch <= 'Z') << w;
}

TEST(Corpus, PunctuationSplitAndVocabCap) {
  const Corpus c = load_corpus(kTiny, SentenceSplit::Punctuation);
  EXPECT_EQ(c.sentences.size(), 61u);  // one line holds a '?' and a '!'
  const Corpus capped = load_corpus(kTiny, SentenceSplit::Lines, 50);
  ASSERT_EQ(capped.vocab.size(), 50u);
  EXPECT_EQ(capped.vocab.back(), "<unk>");
  const Corpus full = load_corpus(kTiny);
  int64_t rest = 0;
  for (size_t i = 49; i < full.freq.size(); ++i) rest += full.freq[i];
  EXPECT_EQ(capped.freq.back(), rest);
  EXPECT_THROW(load_corpus(kTiny + ".missing"), zen::Error);
}

TEST(Corpus, ValuesAreSmallNonzeroIntegers) {
  std::set<int> seen;
  for (int64_t e = 0; e < 2000; ++e) {
    const int v = value_at(7, 3, 1, e);
    EXPECT_TRUE(v >= -8 && v <= 8 && v != 0) << v;
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 16u);
  EXPECT_NE(value_at(7, 3, 1, 5) * 100 + value_at(7, 3, 1, 6), value_at(8, 3, 1, 5) * 100 + value_at(8, 3, 1, 6));
}

TEST(Corpus, TraceHoldsTheBatchRows) {
  const Corpus c = load_corpus(kTiny);
  const std::string dir = fresh_dir("corpus");
  CorpusConfig cfg;
  cfg.ranks = 3;
  cfg.batch = 8;  // 3*8*3 = 72 sentences > 60: wraps around
  cfg.dim = 5;
  cfg.iterations = 3;
  cfg.shuffle = false;
  cfg.seed = 11;
  const TraceMeta m = generate_corpus(c, cfg, dir, "tiny");
  const TraceMeta r = read_meta(dir);
  EXPECT_EQ(r.N, static_cast<int64_t>(c.vocab.size()) * 5);
  EXPECT_EQ(r.ranks, 3);
  EXPECT_EQ(r.iterations, 3);
  EXPECT_EQ(r.row_width, 1);
  EXPECT_EQ(m.N, r.N);
  const size_t S = c.sentences.size();
  for (int t = 0; t < 3; ++t)
    for (int rk = 0; rk < 3; ++rk) {
      std::vector<int64_t> rows;
      for (int j = 0; j < 8; ++j) {
        const size_t s = ((static_cast<size_t>(t) * 3 + rk) * 8 + j) % S;
        for (int32_t w : c.sentences[s])
          if (std::find(rows.begin(), rows.end(), w) == rows.end()) rows.push_back(w);
      }
      const RankIter ri = read_rank_iter(dir, r, rk, t);
      ASSERT_EQ(ri.count(), rows.size() * 5);
      const auto v = values_to_double(ri, r);
      for (size_t i = 0; i < rows.size(); ++i)
        for (int col = 0; col < 5; ++col) {
          EXPECT_EQ(ri.idx[i * 5 + col], rows[i] * 5 + col);
          EXPECT_EQ(v[i * 5 + col], value_at(11, rk, t, rows[i] * 5 + col));
        }
    }
  fs::remove_all(dir);
}

TEST(Corpus, RowLevelExpandsToElementLevelAndShuffleIsSeeded) {
  const Corpus c = load_corpus(kTiny);
  CorpusConfig cfg;
  cfg.ranks = 2;
  cfg.batch = 5;
  cfg.dim = 3;
  cfg.iterations = 2;
  cfg.dtype = DType::F16;
  const std::string a = fresh_dir("elem"), b = fresh_dir("row"), a2 = fresh_dir("elem2"), s2 = fresh_dir("seed2");
  generate_corpus(c, cfg, a, "tiny");
  generate_corpus(c, cfg, a2, "tiny");
  cfg.row_level = true;
  generate_corpus(c, cfg, b, "tiny");
  cfg.row_level = false;
  cfg.seed = 2;
  generate_corpus(c, cfg, s2, "tiny");
  const TraceMeta ma = read_meta(a), mb = read_meta(b);
  EXPECT_EQ(mb.row_width, 3);
  EXPECT_EQ(mb.N, ma.N);
  bool differs = false;
  for (int t = 0; t < 2; ++t)
    for (int r = 0; r < 2; ++r) {
      const RankIter ea = read_rank_iter(a, ma, r, t);
      const RankIter eb = expand_rows(read_rank_iter(b, mb, r, t), mb);
      EXPECT_EQ(ea.idx, eb.idx);
      EXPECT_EQ(ea.values, eb.values);
      EXPECT_EQ(file_bytes(idx_path(a, r, t)), file_bytes(idx_path(a2, r, t)));  // deterministic
      differs |= file_bytes(idx_path(a, r, t)) != file_bytes(idx_path(s2, r, t));
    }
  EXPECT_TRUE(differs) << "a different seed must shuffle differently";
  for (const auto& d : {a, b, a2, s2}) fs::remove_all(d);
}

TEST(Synthetic, StatsConfirmDensityGammaAndOverlap) {
  struct Case { int n; double gamma; };
  for (const Case cs : {Case{8, 3.0}, Case{8, 1.0}, Case{8, 8.0}, Case{5, 2.5}}) {
    const std::string dir = fresh_dir("syn");
    SyntheticConfig cfg;
    cfg.N = 200000;
    cfg.ranks = cs.n;
    cfg.iterations = 2;
    cfg.density = 0.01;
    cfg.gamma = cs.gamma;
    cfg.seed = 5;
    generate_synthetic(cfg, dir);
    const TraceStats s = compute_stats(dir);
    const double f = (cs.n - cs.gamma) / (cs.n - 1);
    const double k = 0.01 * cfg.N;                   // 2000 indices per rank
    const double tol_f = 0.5 / k + 1e-12;            // f*k is rounded to an integer
    EXPECT_NEAR(s.density.mean, 0.01, 1e-12);
    EXPECT_NEAR(s.gamma.back(), cs.gamma, (cs.n - 1) * tol_f) << "n " << cs.n << " gamma " << cs.gamma;
    EXPECT_NEAR(s.overlap.mean, f, tol_f);
    EXPECT_NEAR(s.overlap.min, s.overlap.max, 1e-12);  // every pair shares exactly the pool
    for (int m = 1; m <= cs.n; ++m) EXPECT_NEAR(s.gamma[m - 1], f + m * (1 - f), m * tol_f) << "m " << m;
    const RankIter ri = read_rank_iter(dir, read_meta(dir), 0, 1);
    const auto v = values_to_double(ri, read_meta(dir));
    for (double x : v) EXPECT_TRUE(x != 0 && std::fabs(x) <= 8 && x == std::round(x));
    fs::remove_all(dir);
  }
}

TEST(Synthetic, ZipfSkewsContiguousRangesButNotHash) {
  const std::string u = fresh_dir("uniform"), z = fresh_dir("zipf");
  SyntheticConfig cfg;
  cfg.N = 100000;
  cfg.ranks = 8;
  cfg.iterations = 1;
  cfg.density = 0.02;
  cfg.gamma = 4;
  generate_synthetic(cfg, u);
  cfg.zipf = 1.1;
  generate_synthetic(cfg, z);
  const TraceStats su = compute_stats(u), sz = compute_stats(z);
  EXPECT_LT(su.pull_skew_contiguous, 1.2);
  EXPECT_GT(sz.pull_skew_contiguous, 3.0);
  EXPECT_GT(sz.push_skew_contiguous, 3.0);
  EXPECT_LT(sz.pull_skew_hash, 1.2);
  EXPECT_LT(sz.push_skew_hash, 1.25);
  EXPECT_NEAR(sz.gamma.back(), 4.0, 1e-3);  // skew does not change gamma
  fs::remove_all(u);
  fs::remove_all(z);
}

TEST(Synthetic, RejectsImpossibleTargets) {
  SyntheticConfig cfg;
  cfg.N = 1000;
  cfg.ranks = 4;
  cfg.gamma = 5;
  EXPECT_THROW(generate_synthetic(cfg, fresh_dir("bad")), zen::Error);
  cfg.gamma = 0.5;
  EXPECT_THROW(generate_synthetic(cfg, fresh_dir("bad")), zen::Error);
  cfg.gamma = 4;
  cfg.density = 0.5;  // union would need 2000 > N indices
  EXPECT_THROW(generate_synthetic(cfg, fresh_dir("bad")), zen::Error);
  fs::remove_all(fresh_dir("bad"));
}

TEST(Topk, PicksLargestMagnitudesOfGivenDenseGradients) {
  const std::string dense = fresh_dir("dense"), dir = fresh_dir("topk");
  fs::create_directories(dense);
  const int64_t N = 1000;
  std::vector<std::vector<float>> g(2, std::vector<float>(N));
  for (int r = 0; r < 2; ++r) {
    for (int64_t i = 0; i < N; ++i) g[r][i] = static_cast<float>(((i * 37 + r * 11) % 101) - 50) / 4.0f;
    std::ofstream o(dense + "/r" + std::to_string(r) + "_t0.f32", std::ios::binary);
    o.write(reinterpret_cast<const char*>(g[r].data()), N * 4);
  }
  TopkConfig cfg;
  cfg.N = N;
  cfg.ranks = 2;
  cfg.iterations = 1;
  cfg.ratio = 0.05;
  cfg.residual = false;
  cfg.dense_dir = dense;
  generate_topk(cfg, dir);
  const TraceMeta m = read_meta(dir);
  for (int r = 0; r < 2; ++r) {
    const RankIter ri = read_rank_iter(dir, m, r, 0);
    ASSERT_EQ(ri.count(), 50u);
    const auto v = values_to_double(ri, m);
    float minsel = 1e30f;
    for (size_t j = 0; j < ri.count(); ++j) {
      EXPECT_EQ(v[j], g[r][ri.idx[j]]);
      minsel = std::min(minsel, std::fabs(g[r][ri.idx[j]]));
    }
    const std::set<int64_t> sel(ri.idx.begin(), ri.idx.end());
    EXPECT_EQ(sel.size(), 50u);
    for (int64_t i = 0; i < N; ++i)
      if (!sel.count(i)) {
        EXPECT_LE(std::fabs(g[r][i]), minsel) << i;
      }
  }
  fs::remove_all(dense);
  fs::remove_all(dir);
}

TEST(Topk, CorrelationControlsOverlapAndResidualCarriesMass) {
  const std::string same = fresh_dir("same"), indep = fresh_dir("indep"), res = fresh_dir("res");
  TopkConfig cfg;
  cfg.N = 20000;
  cfg.ranks = 4;
  cfg.iterations = 2;
  cfg.ratio = 0.02;
  cfg.correlation = 1.0;
  cfg.residual = false;
  generate_topk(cfg, same);
  cfg.correlation = 0.0;
  generate_topk(cfg, indep);
  cfg.residual = true;
  generate_topk(cfg, res);
  const TraceStats ss = compute_stats(same), si = compute_stats(indep);
  EXPECT_NEAR(ss.overlap.mean, 1.0, 1e-12);
  EXPECT_NEAR(ss.gamma.back(), 1.0, 1e-12);
  EXPECT_LT(si.overlap.mean, 0.3);
  EXPECT_GT(si.gamma.back(), 3.0);
  // With error feedback, second-iteration values include carried residual: some |v| exceed one step's clamp.
  const TraceMeta m = read_meta(res);
  const auto v = values_to_double(read_rank_iter(res, m, 0, 1), m);
  double mx = 0;
  for (double x : v) {
    EXPECT_EQ(x, std::round(x));
    mx = std::max(mx, std::fabs(x));
  }
  const auto v0 = values_to_double(read_rank_iter(indep, m, 0, 1), m);
  double mx0 = 0;
  for (double x : v0) mx0 = std::max(mx0, std::fabs(x));
  EXPECT_GT(mx, mx0);
  for (const auto& d : {same, indep, res}) fs::remove_all(d);
}
