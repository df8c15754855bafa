// zen_perf: sparse allreduce benchmark with nccl-tests conventions (docs/algorithms.md, "zen_perf").
//
//   mpirun -np 4 build/bin/zen_perf -b 1M -e 64M -f 4 -d 0.01 --overlap 2 --scheme all -c 1
//   build/bin/zen_perf --threads 4 ...            (loopback: ranks are threads of one process)
//   build/bin/zen_perf --threads 4 --trace DIR    (replay a trace, docs/trace-format.md)
//
// Sizes (-b/-e) are dense tensor sizes in BYTES, as in nccl-tests (suffixes K, M, G = 2^10, 2^20,
// 2^30); the element count N is size / dtype size, rounded down to a multiple of the row width D.
// One row per (size, scheme): time = median over iterations of the max over ranks of the call's
// wall time; algbw = dense bytes / time; busbw = algbw * 2(n-1)/n (the allreduce convention);
// sent_B / recv_B = the most bytes any rank sent / received in one call; imbalance = max of the
// push and pull imbalance (max/mean over owners); #wrong = elements (over all ranks) that differ
// from a reference computed by a dense scatter-add of every rank's input (each rank regenerates
// all ranks' inputs from the seed, independent of the scheme code).
//
// The parts, as in Gloo's benchmark: options.cpp (command line), workload.cpp and reference.cpp (the
// inputs and the check), raw_baselines.cpp (the raw MPI contenders), runner.cpp (contenders and the
// timing rounds), bench.cpp (trace replay and size sweep), report.cpp (table, summary, JSON); this
// file starts the ranks (threads on loopback, or MPI) and ends the job on the first rank's error.
#include <cstdio>
#include <memory>
#include <mutex>
#include <vector>

#include "bench.hpp"
#include "options.hpp"
#include "report.hpp"
#include "zen/comm/loopback.hpp"
#include "zen/error.hpp"
#ifdef ZEN_HAVE_MPI
#include "zen/comm/mpi.hpp"
#endif

using namespace zen;
using namespace zen_perf;

int main(int argc, char** argv) {
  Config cfg;
  if (const int rc = parse_options(argc, argv, cfg); rc >= 0) return rc;

  try {
    if (cfg.threads > 0) {
      std::vector<Row> rows;
      std::mutex mu;
      loopback::run(
          cfg.threads,
          [&](Communicator& c) {
            auto r = run_bench(c, cfg);
            std::lock_guard<std::mutex> lk(mu);
            if (c.rank() == 0) {
              rows = r;
              finish(c, cfg, rows);
            }
          },
          Communicator::Ms(600000));
      uint64_t wrong = 0;
      for (const auto& r : rows) wrong += r.wrong;
      return wrong ? 2 : 0;
    }
#ifdef ZEN_HAVE_MPI
    mpi::Environment env(&argc, &argv);
    int rank = 0, rc = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::unique_ptr<Communicator> comm;
    try {
      comm = mpi::create(MPI_COMM_WORLD);
      comm->set_timeout(Communicator::Ms(cfg.timeout_ms));
      auto rows = run_bench(*comm, cfg);
      finish(*comm, cfg, rows);
      uint64_t wrong = 0;
      for (const auto& r : rows) wrong += r.wrong;
      rc = wrong ? 2 : 0;
      comm.reset();
    } catch (const std::exception& ex) {
      // One rank's error ends the job at once: print it, tell the peers (they may be waiting in a
      // zen call) and abort the job (they may also be outside any, e.g. reading their own records).
      std::fprintf(stderr, "zen_perf: rank %d: %s\n", rank, ex.what());
      std::fflush(stderr);
      if (comm) comm->abort(ex.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return rc;
#else
    cfg.threads = 1;
    std::vector<Row> rows;
    loopback::run(1, [&](Communicator& c) {
      rows = run_bench(c, cfg);
      finish(c, cfg, rows);
    });
    return 0;
#endif
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "zen_perf: %s\n", ex.what());
    return 1;
  }
}
