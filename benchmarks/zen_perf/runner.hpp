#pragma once
// zen_perf's runner: the contenders of a run (zen plans, hier_<scheme> with its node groups, the raw
// MPI baselines) with their buffers and statistics, and the timing loop that calls them in turn.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "raw_baselines.hpp"
#include "zen/comm/communicator.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen_perf {

using zen::Communicator;
using zen::DType;
using zen::PhaseReport;
using zen::SchemeOptions;
using zen::SparseAllreduce;
using zen::SparseTensor;
using zen::SparseView;
using zen::TensorSpec;

/// The (intra-node, inter-node) communicators of the hierarchical runners (hier_<scheme>).
struct NodeGroups {
  std::unique_ptr<Communicator> intra, inter;
  int node_size = 1;
};

/// Node groups of `world`: "host" = the ranks sharing memory (MPI_Comm_split_type; under mpirun across
/// hosts, one host), otherwise that many consecutive ranks per node (any backend).
std::shared_ptr<NodeGroups> make_node_groups(Communicator& world, const std::string& how);

/// One timed contender: a zen plan or a raw-MPI baseline, with its output buffers and statistics.
struct Runner {
  std::string name;
  std::shared_ptr<NodeGroups> nodes;  // hier_<scheme>: declared before plan, so it outlives it
  std::unique_ptr<SparseAllreduce> plan;
#ifdef ZEN_HAVE_MPI
  std::unique_ptr<RawBaseline> raw;
#endif
  bool dense_only = false;  // mpi_allreduce: always the dense sum
  std::vector<uint8_t> dense;
  SparseTensor sparse;
  std::vector<double> times;
  uint64_t sent_sum = 0, recv_sum = 0, calls = 0, wrong = 0;
  double bound_sum = 0;  // SyncReport::bound_bytes summed over the timed calls
  double push = 1, pull = 1;
  std::string encoding;
  std::vector<PhaseReport> phases;  // this rank's phases: bytes of the last call, mean seconds and CPU seconds
  std::vector<double> phase_sum, phase_cpu_sum;
  std::vector<std::string> decisions;                 // auto: distinct explanations, in order
  std::vector<std::pair<std::string, uint64_t>> ran;  // auto: timed calls per scheme that ran
  // auto's decision calls (src/schemes/auto.cpp): the call that gathers the statistics (phase
  // auto_stats) and, when the model cannot separate the close candidates, every call up to the one
  // that ends their measurement. Counted apart from the steady state, warm-up and timed calls alike.
  bool deciding = false;  // the last call left auto exploring: the next one is a decision call too
  uint64_t decision_calls = 0, decision_timed = 0;
  double decision_s = 0;

  bool dense_result(bool dense_out) const { return dense_out || dense_only; }
  /// One call on this rank (the plan's or the baseline's).
  void call(const SparseView& in, bool dense_out);
  /// Adds the last call's report to the statistics (a timed call).
  void account();
  /// After every call (dt: its slowest-rank seconds): count it if it was one of auto's decision
  /// calls. Returns whether auto is still deciding. The same on every rank: auto's state is a
  /// function of allgathered numbers only. A fixed scheme never decides.
  bool note_decision(double dt, bool timed);
};

/// Schemes whose memory grows with N (an N-value buffer or accumulator): in `--scheme all` they are
/// skipped for tensors above 4 GiB (a trace of N = 2^33 held sparsely must still run); named
/// explicitly they run (and fail with a clear allocation error if the memory is not there).
bool dense_cost(const std::string& s);

/// The runners of `names` (from_all: --scheme all, which skips the dense-cost schemes above 4 GiB).
std::vector<Runner> make_runners(Communicator& comm, const std::vector<std::string>& names, const TensorSpec& spec,
                                 const SchemeOptions& opt, bool dense_out, bool from_all, const std::string& node_size);

/// One timed call on every rank; returns this call's max-over-ranks wall time (seconds).
double timed_call(Communicator& comm, Runner& rn, const SparseView& in, bool dense_out);

/// Time every runner on the inputs: round k calls every runner once on input k mod T (so the
/// schemes share the machine's conditions and their ratios are fair); the first `warmup` rounds are
/// not timed. With `settle`, an auto runner still deciding after them (gathering statistics,
/// measuring its candidates) gets further untimed calls, on the next inputs in turn, until it has
/// chosen: its timed calls are then its steady state, and its decision calls are counted apart.
struct Group {
  std::vector<Runner>* runners;
  const std::vector<SparseView>* views;
};
void time_runners(Communicator& comm, const std::vector<Group>& groups, bool dense_out, int warmup, int iters,
                  bool settle);

}  // namespace zen_perf
