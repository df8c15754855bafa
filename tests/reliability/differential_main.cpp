// zen_differential: randomized differential test of every scheme against an exact reference.
//   zen_differential --cases 10000                      # loopback, n drawn in 1..16 per case
//   mpirun -np 4 zen_differential --backend mpi --cases 300   # n = the MPI world size
// Prints one summary line "differential: backend=... cases=C failures=F seconds=S ..." and exits
// non-zero when any case fails (each failure prints the case description to reproduce it with
// --seed S --first ID --cases 1).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>

#include "differential.hpp"
#include "zen/comm/loopback.hpp"
#ifdef ZEN_HAVE_MPI
#include "zen/comm/mpi.hpp"
#endif

using namespace zen;
using namespace zen::difftest;

namespace {

struct Totals {
  uint64_t cases = 0, failures = 0, overflow_cases = 0, large_cases = 0, hierarchical = 0, fractional = 0;
  std::map<std::string, uint64_t> per_scheme;
};

void count(Totals& t, const Case& c) {
  ++t.cases;
  ++t.per_scheme[c.scheme];
  if (c.rows() > (uint64_t{1} << 20)) ++t.large_cases;
  if (c.hier_node > 0) ++t.hierarchical;
  if (c.fractional) ++t.fractional;
}

// The exact command that reruns one case.
std::string rerun(uint64_t seed, uint64_t id, int max_ranks, int mpi_ranks) {
  std::string cmd = mpi_ranks > 0 ? "mpirun -np " + std::to_string(mpi_ranks) + " zen_differential --backend mpi"
                                  : std::string("zen_differential");
  cmd += " --seed " + std::to_string(seed) + " --first " + std::to_string(id) + " --cases 1";
  if (mpi_ranks == 0 && max_ranks != 16) cmd += " --max-ranks " + std::to_string(max_ranks);
  return cmd;
}

bool run_loopback_case(const Case& c, Totals& t, int timeout_ms, bool verbose, uint64_t seed, int max_ranks) {
  if (verbose) std::cerr << "run " << c.describe() << std::endl;
  std::vector<std::vector<Output>> outs(static_cast<size_t>(c.n));
  auto errs = loopback::run_collect(
      c.n, [&](Communicator& comm) { outs[static_cast<size_t>(comm.rank())] = run_rank(c, comm); },
      Communicator::Ms(timeout_ms));
  for (int r = 0; r < c.n; ++r)
    if (errs[r]) {
      try {
        std::rethrow_exception(errs[r]);
      } catch (const std::exception& e) {
        std::cerr << "FAIL " << c.describe() << "\n  rank " << r << " threw: " << e.what()
                  << "\n  rerun: " << rerun(seed, c.id, max_ranks, 0) << "\n";
      }
      return false;
    }
  bool overflow = false;
  for (size_t it = 0; it < c.in.size(); ++it) {
    const auto ref = reference(c, static_cast<int>(it));
    const uint64_t h0 = output_hash(outs[0][it]);
    for (int r = 0; r < c.n; ++r) {
      overflow |= outs[r][it].serial_overflows > 0;
      std::string err = check_output(c, static_cast<int>(it), outs[r][it], ref);
      if (err.empty() && output_hash(outs[r][it]) != h0) err = "result bits differ from rank 0's";
      if (!err.empty()) {
        std::cerr << "FAIL " << c.describe() << "\n  iteration " << it << " rank " << r << ": " << err
                  << "\n  rerun: " << rerun(seed, c.id, max_ranks, 0) << "\n";
        return false;
      }
    }
  }
  if (overflow) ++t.overflow_cases;
  return true;
}

void print_totals(const char* backend, int ranks, const Totals& t, double secs, uint64_t seed) {
  std::printf("differential: backend=%s ranks=%s cases=%llu failures=%llu seconds=%.1f seed=%llu large_N_cases=%llu "
              "overflow_cases=%llu hierarchical_cases=%llu fractional_16bit_cases=%llu per_scheme:",
              backend, ranks > 0 ? std::to_string(ranks).c_str() : "1..16", static_cast<unsigned long long>(t.cases),
              static_cast<unsigned long long>(t.failures), secs, static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(t.large_cases), static_cast<unsigned long long>(t.overflow_cases),
              static_cast<unsigned long long>(t.hierarchical), static_cast<unsigned long long>(t.fractional));
  for (auto& [k, v] : t.per_scheme) std::printf(" %s=%llu", k.c_str(), static_cast<unsigned long long>(v));
  std::printf("\n");
  std::fflush(stdout);
}

#ifdef ZEN_HAVE_MPI
int run_mpi(int argc, char** argv, uint64_t seed, uint64_t first, uint64_t cases, int timeout_ms, bool verbose) {
  mpi::Environment env(&argc, &argv);
  auto comm = mpi::create(MPI_COMM_WORLD);
  comm->set_timeout(Communicator::Ms(timeout_ms));
  const int n = comm->size(), me = comm->rank();
  Totals t;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t id = first; id < first + cases; ++id) {
    Case c = make_case(seed, id, n);
    count(t, c);
    if (verbose && me == 0) std::cerr << "run " << c.describe() << std::endl;
    std::string err;
    bool overflow = false;
    // One hash per iteration on every rank, also on a rank whose case failed (0 then), so that the
    // exchange below always happens: a rank that fails mid-case never leaves the others waiting.
    std::vector<uint64_t> hashes(c.in.size(), 0);
    try {
      auto outs = run_rank(c, *comm);
      for (size_t it = 0; it < outs.size() && err.empty(); ++it) {
        overflow |= outs[it].serial_overflows > 0;
        err = check_output(c, static_cast<int>(it), outs[it], reference(c, static_cast<int>(it)));
        hashes[it] = output_hash(outs[it]);
      }
    } catch (const std::exception& e) {
      err = std::string("threw: ") + e.what();
    }
    std::vector<uint64_t> all(static_cast<size_t>(n));
    for (size_t it = 0; it < hashes.size(); ++it) {
      MPI_Allgather(&hashes[it], 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
      for (int p = 0; p < n && err.empty(); ++p)
        if (all[p] != hashes[it]) err = "iteration " + std::to_string(it) + ": result bits differ from rank " + std::to_string(p);
    }
    if (!err.empty()) {
      std::cerr << "FAIL " << c.describe() << "\n  rank " << me << ": " << err << "\n  rerun: " << rerun(seed, id, 16, n)
                << std::endl;
      ++t.failures;
    }
    if (overflow) ++t.overflow_cases;
    // A failure poisons the communicator on every rank: build a new one for the next case.
    int failed = comm->failed() ? 1 : 0, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
      comm.reset();
      comm = mpi::create(MPI_COMM_WORLD);
      comm->set_timeout(Communicator::Ms(timeout_ms));
    }
  }
  uint64_t fails = t.failures;
  MPI_Allreduce(&fails, &t.failures, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (me == 0) print_totals("mpi", n, t, secs, seed);
  comm.reset();
  return t.failures ? 1 : 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zen differential test: random cases vs an exact sparse reference"};
  uint64_t cases = 1000, seed = 20240611, first = 0;
  std::string backend = "loopback";
  int max_ranks = 16, timeout_ms = 60000;
  bool verbose = false, stop = false;
  std::string progress;
  app.add_option("--cases", cases, "number of cases");
  app.add_option("--seed", seed, "sweep seed");
  app.add_option("--first", first, "first case id (to reproduce one case)");
  app.add_option("--backend", backend, "loopback or mpi")->check(CLI::IsMember({"loopback", "mpi"}));
  app.add_option("--max-ranks", max_ranks, "loopback: largest rank count drawn")->check(CLI::Range(1, 64));
  app.add_option("--timeout-ms", timeout_ms, "communicator timeout");
  app.add_flag("--verbose", verbose, "print every case");
  app.add_flag("--stop-on-fail", stop, "stop at the first failing case");
  app.add_option("--progress", progress, "file that holds the id of the case being run (to resume after a crash)");
  CLI11_PARSE(app, argc, argv);

  if (backend == "mpi") {
#ifdef ZEN_HAVE_MPI
    return run_mpi(argc, argv, seed, first, cases, timeout_ms, verbose);
#else
    std::cerr << "zen_differential: built without MPI\n";
    return 2;
#endif
  }
  Totals t;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t id = first; id < first + cases; ++id) {
    Case c = make_case(seed, id, 0, max_ranks);
    count(t, c);
    if (!progress.empty()) {
      if (FILE* f = std::fopen(progress.c_str(), "w")) {
        std::fprintf(f, "%llu\n", static_cast<unsigned long long>(id));
        std::fclose(f);
      }
    }
    if (!run_loopback_case(c, t, timeout_ms, verbose, seed, max_ranks)) {
      ++t.failures;
      if (stop) break;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  print_totals("loopback", 0, t, secs, seed);
  return t.failures ? 1 : 0;
}
