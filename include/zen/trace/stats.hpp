#pragma once
// Characterization of a trace (docs/workloads.md): density, pairwise overlap, densification gamma(k),
// and skew under contiguous vs h0 (zen::Partitioner) partitioning. All measures are on items: rows
// when the trace has row_width D > 1 (densities are the same as on elements), else elements.
// Duplicate indices inside one record are counted once.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zen/trace/trace.hpp"

namespace zen::trace {

struct StatsConfig {
  int ranks = 0;           ///< use the first n ranks (0 = all)
  int parts = 0;           ///< partitions for the skew ratio (0 = ranks used)
  uint64_t seed = 0x5eed;  ///< h0 seed
  int max_iterations = 0;  ///< use the first T iterations (0 = all)
  int hist_bins = 20;      ///< overlap histogram bins over [hist_lo, hist_hi] (the data range widened to tenths)
};

struct Summary {
  double mean = 0, stddev = 0, min = 0, p10 = 0, median = 0, p90 = 0, max = 0;
  size_t count = 0;
};
Summary summarize(std::vector<double> v);

struct TraceStats {
  TraceMeta meta;
  int ranks = 0, iterations = 0, parts = 0;
  uint64_t seed = 0;
  std::vector<double> density_per_rank;      ///< mean over iterations of |I_r| / items
  std::vector<double> density_per_iteration; ///< mean over ranks
  Summary density;                           ///< over all (rank, iteration)
  std::vector<double> overlaps;              ///< |I_a n I_b| / min(|I_a|,|I_b|), all pairs a<b, all iterations
  Summary overlap;
  std::vector<double> overlap_hist;          ///< fraction of pairs per bin over [hist_lo, hist_hi]
  double hist_lo = 0, hist_hi = 1;
  std::vector<double> gamma;                 ///< gamma[k-1] = |I_0 u .. u I_{k-1}| / mean_{r<k} |I_r|, mean over t
  double union_density = 0;                  ///< |union of all ranks| / items, mean over t
  /// Skew ratio s = max_i load_i * parts / total. Push: each rank's own set, mean over ranks and iterations.
  /// Pull: the union of all ranks. Contiguous: part i = [i*items/parts, (i+1)*items/parts).
  double push_skew_contiguous = 0, push_skew_hash = 0, pull_skew_contiguous = 0, pull_skew_hash = 0;
  std::vector<double> load_contiguous;       ///< share of union non-zeros per contiguous part (mean over t)
  std::vector<double> load_hash;             ///< share per h0 owner
  double first_part_share = 0;               ///< load_contiguous[0]
  double push_first_part_share = 0;          ///< share of a rank's own non-zeros in contiguous part 0 (mean)
};

/// Compute the statistics of the trace in dir. Reads index files only.
TraceStats compute_stats(const std::string& dir, const StatsConfig& cfg = {});
/// The same from in-memory index sets: sets[t][r] = indices of rank r at iteration t (any order,
/// duplicates allowed), over [0, items).
TraceStats compute_stats(const TraceMeta& meta, const std::vector<std::vector<std::vector<int64_t>>>& sets,
                         const StatsConfig& cfg = {});

nlohmann::json stats_to_json(const TraceStats& s);
/// Human-readable table.
std::string stats_table(const TraceStats& s);

/// The gnuplot executable: $ZEN_GNUPLOT ("" or "none" disables plots), else gnuplot on PATH or
/// /usr/bin/gnuplot; "" when there is none.
std::string find_gnuplot();

/// Write stats.json, stats.txt, plot data files and, when gnuplot is found (on PATH or at
/// /usr/bin/gnuplot), PNG plots into out_dir. Returns the PNG paths written (empty with a warning on
/// stderr when gnuplot is absent or fails).
std::vector<std::string> write_stats_outputs(const TraceStats& s, const std::string& out_dir);

}  // namespace zen::trace
