#pragma once
// The options shared by zen_orbit's fl and compare subcommands (orbit-aware federated learning,
// zen::fl::sim, docs/fl-orbit.md): the experiment's settings, the learner's backend (loopback threads
// or MPI), and the outputs (CSV, transfers, the accuracy plot).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/progress.hpp"
#include "lists.hpp"
#include "zen/fl/sim/experiment.hpp"
#ifdef ZEN_HAVE_MPI
#include "zen/comm/mpi.hpp"
#endif

namespace zen_orbit_cli {

namespace zs = zen::fl::sim;

struct FlArgs {
  zs::ExperimentConfig cfg;
  std::string schemes;
  std::string presets;
  std::string out;
  std::vector<std::string> faults;
  bool transfers = false;
  std::string backend = "loopback";
  int ranks = 0;     // loopback ranks
  std::vector<double> sweep_gflops;  // compare: timing-only sweep of the on-board throughput
  std::vector<double> topk{1.0};     // compare: top-k fractions of the compressed updates
  std::vector<double> topk_down{1.0};  // compare: top-k fractions of the compressed downloads (zipped with topk)
  bool root = true;  // this process prints (rank 0 under --backend mpi)
};

// --backend mpi: the learner runs with one MPI process per communicator rank (server on rank 0,
// satellites multiplexed over the others); every process simulates the same schedule and only
// rank 0 prints and writes files. Run it under mpirun.
struct BackendScope {
#ifdef ZEN_HAVE_MPI
  std::unique_ptr<zen::mpi::Environment> env;
  std::unique_ptr<zen::Communicator> comm;
#endif
  explicit BackendScope(FlArgs& a);
};

/// Registers the options fl and compare share on a subcommand.
void add_fl_options(CLI::App* app, FlArgs& a);

/// The experiment's configuration with the --fault list parsed into it.
zs::ExperimentConfig finish_config(FlArgs& a);

/// One run done: a progress step and the run's summary line on stdout.
void report_run(zen::tools::Progress& p, const zs::RunResult& r, const std::string& what);

/// After the runs: --out (every run's CSV, transfers with --transfers, the accuracy plot) and the wall
/// time since t0 (the data load apart).
void finish_runs(const FlArgs& a, const std::vector<zs::RunResult>& runs, const std::string& title,
                 const zs::Experiment& ex, std::chrono::steady_clock::time_point t0);

// Progress on stderr (terminal only; tools/common/progress.hpp): one step per run, phases named.
void attach_progress(FlArgs& a, zen::tools::Progress& p);

}  // namespace zen_orbit_cli
