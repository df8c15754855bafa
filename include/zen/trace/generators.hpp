#pragma once
// Trace generators (docs/workloads.md): embedding gradients from text, synthetic sweeps, DGC top-k.
//
// The corpus and synthetic generators write value v for (rank r, iteration t, element e) as a small
// non-zero integer in {-8..-1, 1..8} from a seeded hash (value_at), so any sum over up to 2^20 ranks
// is exact in f32/f64 and sums over up to 16 ranks (|sum| <= 128) are exact in f16 and bf16 (whose
// final rounding of an integer <= 256 in magnitude is exact). The top-k generator emits other
// integers (see generate_topk).
#include <functional>
#include <cstdint>
#include <string>
#include <vector>

#include "zen/trace/trace.hpp"

namespace zen::trace {

/// The seeded value of element e for rank r at iteration t: an integer in {-8..-1, 1..8}.
int value_at(uint64_t seed, int r, int t, int64_t e);

// ---------------------------------------------------------------------------------------------
// Text corpus -> embedding gradients

/// A tokenized corpus: sentences of word ids, ids sorted by descending frequency (0 = most frequent,
/// ties broken by the word's byte order).
struct Corpus {
  std::vector<std::string> vocab;               ///< vocab[id] = word
  std::vector<int64_t> freq;                    ///< freq[id] = occurrences in the corpus
  std::vector<std::vector<int32_t>> sentences;  ///< non-empty sentences of ids
  int64_t tokens = 0;                           ///< total tokens
};

/// Split one line of text into lower-cased tokens: maximal runs of letters/digits (with inner
/// apostrophes and hyphens kept, e.g. "don't", "well-known") and single punctuation characters.
/// Bytes >= 0x80 (UTF-8) count as letters.
std::vector<std::string> tokenize(const std::string& line);

/// How a text is cut into sentences.
enum class SentenceSplit { Lines, Punctuation };

/// Load a plain-text file. Lines: every non-blank line is a sentence (the format scripts/fetch_corpus.sh
/// writes). Punctuation: the text is a token stream cut after '.', '!' and '?'.
/// max_vocab > 0 keeps the max_vocab - 1 most frequent words and maps the rest to one "<unk>" row
/// (the last row). Throws when the file cannot be read or holds no tokens.
Corpus load_corpus(const std::string& path, SentenceSplit split = SentenceSplit::Lines, int64_t max_vocab = 0);

/// Called after each generated iteration with (iterations done, total); tools show progress with it.
using IterationCallback = std::function<void(int, int)>;

struct CorpusConfig {
  int ranks = 16;          ///< n
  int batch = 256;         ///< B sentences per rank per iteration
  int64_t dim = 64;        ///< D embedding dimension
  int iterations = 4;      ///< T
  DType dtype = DType::F32;
  uint64_t seed = 1;       ///< sentence shuffle and values
  bool shuffle = true;     ///< shuffle the sentence order once per epoch (else corpus order)
  bool row_level = false;  ///< write row indices with row_width D (else element indices row*D + c)
  /// Uncoalesced: one row per token occurrence, as nn.Embedding(sparse=True) emits the gradient
  /// (a row repeats once per occurrence; each occurrence has its own values). Else one row per
  /// distinct token of the batch.
  bool occurrences = false;
  IterationCallback on_iteration;  ///< progress (optional)
};

/// Rank r at iteration t takes the B sentences at positions (t*n + r)*B + j, j < B, of the
/// (per-epoch shuffled) sentence order, modulo the corpus size. Its gradient touches every
/// embedding row of a word in the batch: indices are the distinct rows in order of first
/// occurrence (or their D elements row*D + c). N = |vocab| * D.
TraceMeta generate_corpus(const Corpus& corpus, const CorpusConfig& cfg, const std::string& out_dir,
                          const std::string& source_name);

// ---------------------------------------------------------------------------------------------
// Synthetic

struct SyntheticConfig {
  int64_t N = 1 << 20;     ///< dense length
  int ranks = 8;           ///< n
  int iterations = 4;      ///< T
  double density = 0.01;   ///< d: each rank holds k = round(d*N) distinct indices
  double gamma = 2.0;      ///< target densification gamma_n = |union| / k, 1 <= gamma <= n
  double zipf = 0.0;       ///< Zipf exponent s: index i is drawn with weight (i+1)^-s (0 = uniform)
  DType dtype = DType::F32;
  uint64_t seed = 1;
  IterationCallback on_iteration;  ///< progress (optional)
};

/// Realization of gamma: each iteration draws U = k*(f + n*(1-f)) distinct indices from [0, N) by
/// weighted sampling without replacement (weights (i+1)^-s), with f = (n - gamma)/(n - 1) (f = 1 when
/// n = 1). A random subset of f*k of them is shared by all ranks; the remaining (1-f)*k*n are split
/// into n disjoint private sets of (1-f)*k. So every rank holds k indices, the pairwise overlap
/// |I1 n I2|/k is f and gamma_m = f + m*(1-f), exact up to rounding f*k to an integer (|error| <=
/// (m-1)/(2k)). Indices in random order. Throws when gamma is outside [1, n] or U > N.
TraceMeta generate_synthetic(const SyntheticConfig& cfg, const std::string& out_dir);

// ---------------------------------------------------------------------------------------------
// DGC-style top-k of dense gradients

struct TopkConfig {
  int64_t N = 1 << 20;
  int ranks = 8;
  int iterations = 4;
  double ratio = 0.05;      ///< keep k = round(ratio * N) largest-magnitude entries per rank
  double correlation = 0.5; ///< rho: weight of the component shared by all ranks in each dense gradient
  double zipf = 0.0;        ///< amplitude profile (i+1)^-zipf/2 over the index space (0 = flat)
  bool residual = true;     ///< DGC error feedback: accumulate unsent gradient into the next iteration
  DType dtype = DType::F32;
  uint64_t seed = 1;
  std::string dense_dir;    ///< if set, read dense gradients `DIR/r<r>_t<t>.f32` (N little-endian f32 each)
                            ///< instead of synthesizing them
  IterationCallback on_iteration;  ///< progress (optional)
};

/// Dense gradient of rank r at iteration t, synthetic: g_i = round(8 * a_i * (rho*z_t,i + sqrt(1-rho^2)*e_r,t,i))
/// clamped to [-32, 32], with z (shared by all ranks), e (per rank) standard normal (seeded) and a_i the
/// amplitude profile. With residual, acc += g; the k largest |acc| (ties broken by a seeded index hash,
/// the same on every rank)
/// are emitted with value acc and zeroed (DGC error feedback); without residual acc = g. Synthetic
/// values are integers (|v| <= 32*T with residual), so f32/f64 sums are exact; 0-valued winners are
/// dropped (fewer than k can be emitted). Indices are written in descending order of |value|.
TraceMeta generate_topk(const TopkConfig& cfg, const std::string& out_dir);

}  // namespace zen::trace
