#pragma once
// zen_perf's report: one row per (trace or size, scheme) aggregated over the ranks, the table it is
// printed as (nccl-tests columns), the speed-up summary against the references in the run, and the
// JSON file (--json).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "options.hpp"
#include "runner.hpp"

namespace zen_perf {

/// One phase over the ranks (when every rank reported the same phases): means over the timed calls.
struct PhaseAcross {
  std::string name;
  double wall_max = 0;        // slowest rank's wall seconds
  double cpu_max = 0;         // largest rank's CPU seconds (0 without --phase-cpu)
  double cpu_sum = 0;         // CPU seconds of all ranks together
  uint64_t bytes_max = 0;     // busiest rank's max(sent, recv), last call
};

struct Row {
  std::string label;  // trace directory (trace replay)
  uint64_t size = 0, count = 0;
  std::string scheme;
  double density = 0, gamma = 0;
  double time_us = 0, time_min_us = 0, time_max_us = 0;
  double mean_us = 0;  // mean over the timed calls (with -w 0 --auto-settle 0: auto's decision calls included)
  double algbw = 0, busbw = 0;
  uint64_t sent = 0, recv = 0;
  double push_imb = 1, pull_imb = 1;
  std::string encoding;
  double bound_eff = 0;  // bytes sent over the information bound of what was sent, all ranks (0: not known)
  uint64_t wrong = 0;
  std::vector<PhaseReport> phases;  // rank 0: bytes of the last call, seconds averaged over the timed calls
  std::vector<PhaseAcross> phases_ranks;  // the same phases over all ranks (empty when the ranks' phases differ)
  std::vector<std::string> decisions;            // auto (rank 0): every distinct explanation, in order
  std::vector<std::pair<std::string, uint64_t>> ran;  // auto (rank 0): timed calls per scheme that ran
  uint64_t decision_calls = 0, decision_timed = 0;    // auto: its decision calls, and how many of them were timed
  double decision_s = 0;                              // auto: their slowest-rank seconds in all
};

/// The table's header (rank 0): the run's settings and what every column means.
void print_header(const Config& cfg, int n, const char* backend, double gamma, bool trace, int iters, uint32_t D);
/// One row of the table, and the auto / hierarchical notes under it.
void print_row(const Row& r, const char* type, bool explain);

/// A finished runner as a table row (aggregated over ranks).
Row finish_runner(Communicator& comm, Runner& rn, uint64_t N, DType dt, double dens, double gam);

/// Rank 0: the speed-up summary, the total #wrong and the --json file.
void finish(Communicator& comm, const Config& cfg, const std::vector<Row>& rows);

}  // namespace zen_perf
