#pragma once
// Scheme auto's decision cache (SchemeOptions::Auto::cache; docs/cost-model.md, "Remembered
// decisions"): a text file of what earlier jobs chose, so that a later job with the same situation
// starts with that choice instead of a decision in its first call (what NCCL's tuner plugins and
// FFTW's wisdom do for their choices).
//
// One line per entry, appended with one write(2) of the whole line by the rank it belongs to:
//   zen-auto-cache 1 KEY SCHEME SECONDS ROWS CHECK
// KEY: 16 hex digits, FNV-1a of the rank's situation (Auto's cache_key: zen's version, host, rank,
// communicator and node sizes, tensor shape and type, output form, input size class, options);
// SCHEME: the scheme chosen; SECONDS: its warm time then (the slowest rank's); ROWS: the size every
// rank learned in its calls then (SyncReport::global_rows, 0 when it reports none); CHECK: 16 hex
// digits, FNV-1a of the line before it. A line that does not parse or whose check fails (a torn
// write, an edit) is skipped; for a key read twice the later line counts.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace zen::detail {

struct CachedChoice {
  std::string scheme;
  double seconds = 0;  ///< the chosen scheme's warm time (slowest rank) when it was chosen
  uint64_t rows = 0;   ///< SyncReport::global_rows of its calls then (0: none reported)
  /// What the ranks compare to agree on a choice: FNV-1a of the scheme's name, never 0. Their entries
  /// may come from different decisions (a rank whose input size class changed between them kept the
  /// older one), so times and sizes may differ while the choice is the same.
  uint64_t scheme_code() const;
};

class DecisionCache {
 public:
  /// Reads `path` (a file that does not exist holds no entries).
  explicit DecisionCache(std::string path);
  const std::string& path() const { return path_; }
  /// The entry of `key`, or null.
  const CachedChoice* find(uint64_t key) const;
  /// Appends an entry for `key` (and keeps it for find). Returns "" or what failed (errno's text).
  std::string add(uint64_t key, const CachedChoice& c);
  /// Lines read and skipped (not an entry, or a failed check) when the file was read.
  size_t skipped() const { return skipped_; }
  /// One entry's line, with its newline (what add writes).
  static std::string line(uint64_t key, const CachedChoice& c);

 private:
  std::string path_;
  std::map<uint64_t, CachedChoice> entries_;
  size_t skipped_ = 0;
};

}  // namespace zen::detail
