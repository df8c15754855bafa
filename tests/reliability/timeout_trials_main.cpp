// zen_timeout_trials: measure how fast a missing rank is detected, per trial.
//   zen_timeout_trials --backend loopback --ranks 4 --trials 20 --timeout-ms 1000
//   mpirun -np 4 zen_timeout_trials --backend mpi --trials 20 --timeout-ms 1000
// Trial i uses operation i mod 8 (recv, sendrecv, alltoallv, allgatherv, allgather, allreduce,
// broadcast, barrier) and missing rank (i mod (n-1)) + 1 ... n-1 (never rank 0, which prints).
// Prints one line per trial (slowest detecting rank, named or not) and a summary line; exits
// non-zero if any trial failed to name the missing rank or took 2x the timeout or more.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>

#include "timeout_trial.hpp"
#include "zen/comm/loopback.hpp"
#ifdef ZEN_HAVE_MPI
#include "zen/comm/mpi.hpp"
#endif

using namespace zen;

int main(int argc, char** argv) {
  CLI::App app{"zen timeout trials"};
  std::string backend = "loopback";
  int ranks = 4, trials = 20, timeout_ms = 1000;
  app.add_option("--backend", backend)->check(CLI::IsMember({"loopback", "mpi"}));
  app.add_option("--ranks", ranks, "loopback rank count")->check(CLI::Range(2, 64));
  app.add_option("--trials", trials);
  app.add_option("--timeout-ms", timeout_ms);
  CLI11_PARSE(app, argc, argv);
  const auto T = std::chrono::milliseconds(timeout_ms);
  const auto& ops = reltest::blocking_ops();
  int bad = 0, me = 0, n = ranks;
  double worst = 0, sum = 0;
  std::vector<double> lat;
#ifdef ZEN_HAVE_MPI
  std::unique_ptr<mpi::Environment> env;
  if (backend == "mpi") {
    env = std::make_unique<mpi::Environment>(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n < 2) {
      std::fprintf(stderr, "zen_timeout_trials: needs >= 2 MPI ranks\n");
      return 2;
    }
  }
#else
  if (backend == "mpi") {
    std::fprintf(stderr, "zen_timeout_trials: built without MPI\n");
    return 2;
  }
#endif
  for (int t = 0; t < trials; ++t) {
    const CommOp op = ops[static_cast<size_t>(t) % ops.size()];
    const int missing = 1 + t % (n - 1);
    std::vector<reltest::TrialResult> res(static_cast<size_t>(n));
    double slowest = 0;
    int named = 1;
    if (backend == "loopback") {
      loopback::run_collect(n, [&](Communicator& c) { res[c.rank()] = reltest::timeout_trial(c, op, missing); }, T);
      for (int r = 0; r < n; ++r) {
        if (r == missing) continue;
        slowest = std::max(slowest, res[r].ms);
        named &= res[r].named(r, missing, op) ? 1 : 0;
      }
    }
#ifdef ZEN_HAVE_MPI
    else {
      auto c = mpi::create(MPI_COMM_WORLD);
      c->set_timeout(T);
      auto r = reltest::timeout_trial(*c, op, missing);
      double ms = me == missing ? 0 : r.ms;
      int ok = me == missing ? 1 : (r.named(me, missing, op) ? 1 : 0);
      MPI_Allreduce(&ms, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      MPI_Allreduce(&ok, &named, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      if (!ok) std::fprintf(stderr, "rank %d trial %d: %s\n", me, t, r.what.c_str());
      MPI_Barrier(MPI_COMM_WORLD);
    }
#endif
    const bool ok = named && slowest < 2.0 * timeout_ms;
    bad += ok ? 0 : 1;
    worst = std::max(worst, slowest);
    sum += slowest;
    lat.push_back(slowest);
    if (me == 0)
      std::printf("trial %2d backend=%s n=%d op=%-10s missing=%d detect_ms=%.1f ratio=%.3f named=%s %s\n", t,
                  backend.c_str(), n, comm_op_name(op), missing, slowest, slowest / timeout_ms, named ? "yes" : "NO",
                  ok ? "ok" : "FAIL");
  }
  if (me == 0) {
    std::sort(lat.begin(), lat.end());
    std::printf("timeout-trials: backend=%s n=%d trials=%d timeout_ms=%d detect_ms min=%.1f median=%.1f mean=%.1f max=%.1f "
                "max_ratio=%.3f failures=%d\n",
                backend.c_str(), n, trials, timeout_ms, lat.empty() ? 0 : lat.front(), lat.empty() ? 0 : lat[lat.size() / 2],
                trials ? sum / trials : 0, worst, worst / timeout_ms, bad);
    std::fflush(stdout);
  }
  return bad ? 1 : 0;
}
