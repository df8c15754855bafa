// zen_trace: generate and characterize sparse-gradient traces (docs/trace-format.md, docs/workloads.md).
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>

#include <CLI/CLI.hpp>

#include "common/progress.hpp"
#include "zen/error.hpp"
#include "zen/trace/generators.hpp"
#include "zen/trace/stats.hpp"
#include "zen/trace/trace.hpp"

namespace fs = std::filesystem;
using namespace zen::trace;

namespace {

uint64_t dir_bytes(const std::string& dir) {
  uint64_t b = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) b += e.file_size();
  return b;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void report(const std::string& what, const TraceMeta& m, const std::string& dir, double sec) {
  std::cout << what << ": wrote " << dir << "  N=" << m.N << " ranks=" << m.ranks << " iterations=" << m.iterations
            << " dtype=" << zen::dtype_name(m.dtype) << " row_width=" << m.row_width << "  "
            << dir_bytes(dir) / 1e6 << " MB in " << sec << " s\n";
}

const std::map<std::string, zen::DType> kDtypes = {
    {"f32", zen::DType::F32}, {"f64", zen::DType::F64}, {"f16", zen::DType::F16}, {"bf16", zen::DType::BF16}};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zen_trace: sparse-gradient traces (generate: corpus, synthetic, topk; check: validate; "
               "characterize: stats)"};
  app.require_subcommand(1);

  // corpus
  auto* corpus = app.add_subcommand("corpus", "embedding-gradient trace from a plain-text corpus");
  std::string text, out;
  CorpusConfig cc;
  std::string split = "lines";
  int64_t max_vocab = 0;
  bool no_shuffle = false;
  zen::DType cdtype = zen::DType::F32;
  corpus->add_option("--text", text, "plain-text corpus (scripts/fetch_corpus.sh prints the Brown corpus path)")
      ->required()
      ->check(CLI::ExistingFile);
  corpus->add_option("-o,--out", out, "output trace directory")->required();
  corpus->add_option("-n,--ranks", cc.ranks, "ranks n")->capture_default_str();
  corpus->add_option("-B,--batch", cc.batch, "sentences per rank per iteration")->capture_default_str();
  corpus->add_option("-D,--dim", cc.dim, "embedding dimension")->capture_default_str();
  corpus->add_option("-T,--iterations", cc.iterations, "iterations")->capture_default_str();
  corpus->add_option_function<std::string>("--dtype", [&](const std::string& v) { cdtype = kDtypes.at(v); }, "value type (default f32)")
      ->check(CLI::IsMember({"f32", "f64", "f16", "bf16"}));
  corpus->add_option("--seed", cc.seed, "seed for sentence shuffle and values")->capture_default_str();
  corpus->add_flag("--no-shuffle", no_shuffle, "take sentences in corpus order");
  corpus->add_flag("--row-level", cc.row_level, "write row indices with row_width D (smaller trace)");
  corpus->add_flag("--occurrences", cc.occurrences,
                   "uncoalesced: one row per token occurrence (as nn.Embedding(sparse=True) emits it), not one per distinct token");
  corpus->add_option("--split", split, "sentence split: lines (one per non-blank line) or punct")
      ->check(CLI::IsMember({"lines", "punct"}))
      ->capture_default_str();
  corpus->add_option("--max-vocab", max_vocab, "cap the vocabulary; rarer words share one <unk> row (0 = no cap)");

  // synthetic
  auto* syn = app.add_subcommand("synthetic", "synthetic trace with controlled density, gamma and Zipf skew");
  SyntheticConfig sc;
  std::string sout;
  syn->add_option("-o,--out", sout, "output trace directory")->required();
  syn->add_option("-N,--size", sc.N, "dense length")->capture_default_str();
  syn->add_option("-n,--ranks", sc.ranks, "ranks")->capture_default_str();
  syn->add_option("-T,--iterations", sc.iterations, "iterations")->capture_default_str();
  syn->add_option("-d,--density", sc.density, "local density")->capture_default_str();
  syn->add_option("-g,--gamma", sc.gamma, "densification gamma_n in [1, n]")->capture_default_str();
  syn->add_option("-s,--zipf", sc.zipf, "Zipf exponent of the index distribution (0 = uniform)")->capture_default_str();
  syn->add_option_function<std::string>("--dtype", [&](const std::string& v) { sc.dtype = kDtypes.at(v); }, "value type (default f32)")
      ->check(CLI::IsMember({"f32", "f64", "f16", "bf16"}));
  syn->add_option("--seed", sc.seed, "seed")->capture_default_str();

  // topk
  auto* topk = app.add_subcommand("topk", "DGC-style top-k sparsification of dense gradients");
  TopkConfig tc;
  std::string tout;
  bool no_residual = false;
  topk->add_option("-o,--out", tout, "output trace directory")->required();
  topk->add_option("-N,--size", tc.N, "dense length")->capture_default_str();
  topk->add_option("-n,--ranks", tc.ranks, "ranks")->capture_default_str();
  topk->add_option("-T,--iterations", tc.iterations, "iterations")->capture_default_str();
  topk->add_option("-r,--ratio", tc.ratio, "fraction kept per rank")->capture_default_str();
  topk->add_option("--correlation", tc.correlation, "weight of the shared gradient component")->capture_default_str();
  topk->add_option("-s,--zipf", tc.zipf, "amplitude profile exponent (0 = flat)")->capture_default_str();
  topk->add_flag("--no-residual", no_residual, "no error feedback (plain top-k of each gradient)");
  topk->add_option("--dense", tc.dense_dir, "read dense gradients DIR/r<r>_t<t>.f32 (N little-endian f32)");
  topk->add_option_function<std::string>("--dtype", [&](const std::string& v) { tc.dtype = kDtypes.at(v); }, "value type (default f32)")
      ->check(CLI::IsMember({"f32", "f64", "f16", "bf16"}));
  topk->add_option("--seed", tc.seed, "seed")->capture_default_str();

  // validate
  auto* val = app.add_subcommand("validate", "read every file of a trace and check sizes, ranges and dtype");
  std::string vdir;
  val->add_option("dir", vdir, "trace directory")->required();

  // stats
  auto* st = app.add_subcommand("stats", "characterize a trace: density, overlap, gamma(k), skew");
  std::string sdir, sod;
  StatsConfig stc;
  bool json_only = false;
  st->add_option("dir", sdir, "trace directory")->required();
  st->add_option("-o,--out", sod, "output directory for stats.json, stats.txt, *.dat, *.png (default DIR/stats)");
  st->add_option("-n,--ranks", stc.ranks, "use the first n ranks (0 = all)")->capture_default_str();
  st->add_option("-p,--parts", stc.parts, "partitions for the skew ratio (0 = n)")->capture_default_str();
  st->add_option("-T,--iterations", stc.max_iterations, "use the first T iterations (0 = all)")->capture_default_str();
  st->add_option("--seed", stc.seed, "h0 seed")->capture_default_str();
  st->add_option("--bins", stc.hist_bins, "overlap histogram bins")->capture_default_str();
  st->add_flag("--json", json_only, "print JSON instead of the table");

  CLI11_PARSE(app, argc, argv);

  try {
    const auto t0 = std::chrono::steady_clock::now();
    zen::tools::Progress progress("zen_trace", 0);
    const auto show = [&progress](int done, int total) {
      progress.set_total(static_cast<uint64_t>(total));
      progress.update(static_cast<uint64_t>(done), "iterations");
    };
    cc.on_iteration = sc.on_iteration = tc.on_iteration = show;
    if (*corpus) {
      cc.shuffle = !no_shuffle;
      cc.dtype = cdtype;
      const Corpus c = load_corpus(text, split == "lines" ? SentenceSplit::Lines : SentenceSplit::Punctuation, max_vocab);
      std::cout << "corpus: " << text << ": " << c.sentences.size() << " sentences, " << c.tokens << " tokens, vocab "
                << c.vocab.size() << " (loaded in " << seconds_since(t0) << " s)\n";
      const TraceMeta m = generate_corpus(c, cc, out, fs::path(text).filename().string());
      progress.finish();
      report("corpus", m, out, seconds_since(t0));
    } else if (*syn) {
      const TraceMeta m = generate_synthetic(sc, sout);
      progress.finish();
      report("synthetic", m, sout, seconds_since(t0));
    } else if (*topk) {
      tc.residual = !no_residual;
      const TraceMeta m = generate_topk(tc, tout);
      progress.finish();
      report("topk", m, tout, seconds_since(t0));
    } else if (*val) {
      const TraceMeta m = read_meta(vdir);
      size_t entries = 0;
      for (int t = 0; t < m.iterations; ++t)
        for (int r = 0; r < m.ranks; ++r) entries += read_rank_iter(vdir, m, r, t).count();
      std::cout << "valid trace: " << vdir << "  N=" << m.N << " ranks=" << m.ranks << " iterations=" << m.iterations
                << " dtype=" << zen::dtype_name(m.dtype) << " row_width=" << m.row_width << " entries=" << entries
                << "\n";
    } else if (*st) {
      const TraceStats s = compute_stats(sdir, stc);
      const double tstat = seconds_since(t0);
      const std::string od = sod.empty() ? (fs::path(sdir) / "stats").string() : sod;
      const auto pngs = write_stats_outputs(s, od);
      if (json_only) {
        std::cout << stats_to_json(s).dump(2) << "\n";
      } else {
        std::cout << stats_table(s) << "\nwrote " << od << "/stats.json, stats.txt";
        for (const auto& p : pngs) std::cout << ", " << fs::path(p).filename().string();
        std::cout << "\nstats in " << tstat << " s, total " << seconds_since(t0) << " s\n";
      }
    }
  } catch (const zen::Error& e) {
    std::cerr << "zen_trace: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "zen_trace: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
