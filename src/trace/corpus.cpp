// Text corpus loading and embedding-gradient trace generation.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <unordered_map>

#include "trace_internal.hpp"
#include "zen/error.hpp"
#include "zen/hash/hash.hpp"
#include "zen/trace/generators.hpp"

namespace zen::trace {

int value_at(uint64_t seed, int r, int t, int64_t e) {
  const uint64_t k = hash64(static_cast<uint64_t>(r) * 0x100000001b3ULL + static_cast<uint64_t>(t), seed);
  const uint64_t h = hash64(static_cast<uint64_t>(e), k);
  const int v = static_cast<int>(h >> 60);  // 0..15
  return v < 8 ? -(v + 1) : v - 7;
}

namespace {

bool is_word_byte(unsigned char c) { return std::isalnum(c) || c >= 0x80; }

}  // namespace

std::vector<std::string> tokenize(const std::string& line) {
  std::vector<std::string> out;
  const size_t n = line.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(line[i]);
    if (std::isspace(c) || c < 0x20) {
      ++i;
      continue;
    }
    if (is_word_byte(c)) {
      std::string w;
      while (i < n) {
        const unsigned char d = static_cast<unsigned char>(line[i]);
        if (is_word_byte(d)) {
          w.push_back(static_cast<char>(d < 0x80 ? std::tolower(d) : d));
          ++i;
        } else if ((d == '\'' || d == '-') && i + 1 < n && is_word_byte(static_cast<unsigned char>(line[i + 1]))) {
          w.push_back(static_cast<char>(d));  // inner apostrophe or hyphen
          ++i;
        } else {
          break;
        }
      }
      out.push_back(std::move(w));
    } else {
      out.emplace_back(1, static_cast<char>(c));
      ++i;
    }
  }
  return out;
}

Corpus load_corpus(const std::string& path, SentenceSplit split, int64_t max_vocab) {
  std::ifstream in(path);
  ZEN_CHECK_CODE(in.good(), Result::InvalidArgument, "cannot open corpus text '" + path + "'");
  ZEN_ENFORCE(max_vocab == 0 || max_vocab >= 2,
              "max_vocab must be 0 (unlimited) or >= 2, got " + std::to_string(max_vocab));
  std::vector<std::vector<std::string>> sents;
  std::vector<std::string> cur;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> toks = tokenize(line);
    if (split == SentenceSplit::Lines) {
      if (!toks.empty()) sents.push_back(std::move(toks));
    } else {
      for (auto& tk : toks) {
        const bool end = tk == "." || tk == "!" || tk == "?";
        cur.push_back(std::move(tk));
        if (end) {
          sents.push_back(std::move(cur));
          cur.clear();
        }
      }
    }
  }
  if (!cur.empty()) sents.push_back(std::move(cur));
  ZEN_ENFORCE(!sents.empty(), "corpus text '" + path + "' holds no tokens");

  std::unordered_map<std::string, int64_t> counts;
  int64_t tokens = 0;
  for (const auto& s : sents)
    for (const auto& w : s) {
      ++counts[w];
      ++tokens;
    }
  std::vector<std::pair<std::string, int64_t>> words(counts.begin(), counts.end());
  std::sort(words.begin(), words.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });

  Corpus c;
  c.tokens = tokens;
  const bool cap = max_vocab > 0 && static_cast<int64_t>(words.size()) > max_vocab;
  const size_t kept = cap ? static_cast<size_t>(max_vocab - 1) : words.size();
  std::unordered_map<std::string, int32_t> id;
  id.reserve(words.size() * 2);
  for (size_t i = 0; i < kept; ++i) {
    id.emplace(words[i].first, static_cast<int32_t>(i));
    c.vocab.push_back(words[i].first);
    c.freq.push_back(words[i].second);
  }
  if (cap) {
    int64_t rest = 0;
    for (size_t i = kept; i < words.size(); ++i) rest += words[i].second;
    c.vocab.push_back("<unk>");
    c.freq.push_back(rest);
  }
  const int32_t unk = static_cast<int32_t>(c.vocab.size() - 1);
  c.sentences.reserve(sents.size());
  for (const auto& s : sents) {
    std::vector<int32_t> ids;
    ids.reserve(s.size());
    for (const auto& w : s) {
      auto it = id.find(w);
      ids.push_back(it == id.end() ? unk : it->second);
    }
    c.sentences.push_back(std::move(ids));
  }
  return c;
}

TraceMeta generate_corpus(const Corpus& corpus, const CorpusConfig& cfg, const std::string& out_dir,
                          const std::string& source_name) {
  ZEN_ENFORCE(cfg.ranks > 0, "corpus: ranks must be positive, got " + std::to_string(cfg.ranks));
  ZEN_ENFORCE(cfg.batch > 0, "corpus: batch must be positive, got " + std::to_string(cfg.batch));
  ZEN_ENFORCE(cfg.dim > 0, "corpus: dim must be positive, got " + std::to_string(cfg.dim));
  ZEN_ENFORCE(cfg.iterations > 0, "corpus: iterations must be positive, got " + std::to_string(cfg.iterations));
  ZEN_ENFORCE(!corpus.sentences.empty() && !corpus.vocab.empty(), "corpus: empty corpus");
  const int64_t V = static_cast<int64_t>(corpus.vocab.size());
  const int64_t D = cfg.dim;
  const uint64_t S = corpus.sentences.size();

  TraceMeta meta;
  meta.N = V * D;
  meta.ranks = cfg.ranks;
  meta.iterations = cfg.iterations;
  meta.dtype = cfg.dtype;
  meta.row_width = cfg.row_level ? D : 1;
  meta.source = "zen_trace corpus: text=" + source_name + " sentences=" + std::to_string(S) +
                " tokens=" + std::to_string(corpus.tokens) + " vocab=" + std::to_string(V) +
                " n=" + std::to_string(cfg.ranks) + " B=" + std::to_string(cfg.batch) + " D=" + std::to_string(D) +
                " shuffle=" + (cfg.shuffle ? "1" : "0") + " seed=" + std::to_string(cfg.seed) +
                (cfg.occurrences ? " rows=occurrences" : "") +
                " values=int{-8..8}\\0";
  write_meta(out_dir, meta);

  std::map<uint64_t, std::vector<uint64_t>> perms;  // epoch -> sentence order
  auto sentence_at = [&](uint64_t pos) -> const std::vector<int32_t>& {
    const uint64_t epoch = pos / S, off = pos % S;
    if (!cfg.shuffle) return corpus.sentences[off];
    auto it = perms.find(epoch);
    if (it == perms.end()) it = perms.emplace(epoch, detail::seeded_permutation(S, hash64(epoch, cfg.seed))).first;
    return corpus.sentences[it->second[off]];
  };

  std::vector<uint8_t> seen(static_cast<size_t>(V));
  std::vector<int64_t> rows, idx;
  std::vector<double> vals;
  for (int t = 0; t < cfg.iterations; ++t) {
    for (int r = 0; r < cfg.ranks; ++r) {
      rows.clear();
      const uint64_t base = (static_cast<uint64_t>(t) * cfg.ranks + r) * static_cast<uint64_t>(cfg.batch);
      for (int j = 0; j < cfg.batch; ++j) {
        for (int32_t w : sentence_at(base + j)) {
          if (cfg.occurrences) {
            rows.push_back(w);
          } else if (!seen[w]) {
            seen[w] = 1;
            rows.push_back(w);
          }
        }
      }
      for (int64_t w : rows) seen[w] = 0;
      vals.resize(rows.size() * D);
      // Occurrence k of the batch draws its own values (keyed by its position in the batch).
      for (size_t i = 0; i < rows.size(); ++i)
        for (int64_t c = 0; c < D; ++c)
          vals[i * D + c] = value_at(cfg.seed, r, t, cfg.occurrences ? static_cast<int64_t>(i) * D + c : rows[i] * D + c);
      const std::vector<uint8_t> raw = values_from_double(vals, cfg.dtype);
      if (cfg.row_level) {
        write_rank_iter(out_dir, meta, r, t, rows.data(), rows.size(), raw.data());
      } else {
        idx.resize(rows.size() * D);
        for (size_t i = 0; i < rows.size(); ++i)
          for (int64_t c = 0; c < D; ++c) idx[i * D + c] = rows[i] * D + c;
        write_rank_iter(out_dir, meta, r, t, idx.data(), idx.size(), raw.data());
      }
    }
    if (cfg.on_iteration) cfg.on_iteration(t + 1, cfg.iterations);
  }
  return meta;
}

}  // namespace zen::trace
