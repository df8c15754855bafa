// zen_mpi_first_calls: the first calls of one MPI allgatherv form in a new process (issue 31, item 1;
// docs/results.md, "One process per scheme"). zen's MPI backend runs its collectives non-blocking
// (MPI_Iallgatherv, or MPI_Isend/MPI_Irecv all at once or in n-1 pairwise steps) so that a timeout or a peer's abort can end the wait;
// a user's code calls the blocking MPI_Allgatherv. This program times one of the three forms, for
// CALLS calls of BYTES bytes per rank, in a process of its own (the first calls are what differs),
// and prints rank 0's view of the slowest rank's time per call:
//   mpirun -np N zen_mpi_first_calls --form allgatherv|iallgatherv|p2p|pairwise|switch [--bytes B] [--calls C] [--per-call]
// Alternate the forms, a new process each: for r in 1 2 3; do for f in allgatherv iallgatherv p2p;
// do mpirun -np 4 build/bin/zen_mpi_first_calls --form $f; done; done (and pairwise)
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {
constexpr int kSwitchAfter = 5;
const std::string kPairwise = "pairwise", kNative = "iallgatherv";
}  // namespace

int main(int argc, char** argv) {
  std::string form = "allgatherv";
  long long bytes = 86000;
  int calls = 20;
  CLI::App app{"zen_mpi_first_calls: the first calls of one MPI allgatherv form in a new process"};
  app.add_option("--form", form, "allgatherv (blocking), iallgatherv (+ MPI_Wait), p2p (every MPI_Irecv/MPI_Isend, one MPI_Waitall), "
                 "pairwise (n-1 steps of one of each), switch (pairwise for the first 5 calls, then iallgatherv)")
      ->check(CLI::IsMember({"allgatherv", "iallgatherv", "p2p", "pairwise", "switch"}));
  bool per_call = false;
  app.add_flag("--per-call", per_call, "also print every call's time (us)");
  app.add_option("--bytes", bytes, "bytes per rank")->check(CLI::Range(1LL, 1LL << 30));
  app.add_option("--calls", calls, "calls timed")->check(CLI::Range(1, 1 << 20));
  CLI11_PARSE(app, argc, argv);

  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const size_t b = static_cast<size_t>(bytes);
  std::vector<char> send(b, static_cast<char>(rank + 1)), recv(b * static_cast<size_t>(n));
  std::vector<int> counts(static_cast<size_t>(n), static_cast<int>(b)), displs(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) displs[static_cast<size_t>(p)] = static_cast<int>(b * static_cast<size_t>(p));
  std::vector<MPI_Request> rq;
  std::vector<double> slowest;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int c = 0; c < calls; ++c) {
    const double t0 = MPI_Wtime();
    const std::string& fm = form != "switch" ? form : c < kSwitchAfter ? kPairwise : kNative;
    if (fm == "allgatherv") {
      MPI_Allgatherv(send.data(), static_cast<int>(b), MPI_BYTE, recv.data(), counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD);
    } else if (fm == "iallgatherv") {
      MPI_Request q;
      MPI_Iallgatherv(send.data(), static_cast<int>(b), MPI_BYTE, recv.data(), counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD, &q);
      MPI_Wait(&q, MPI_STATUS_IGNORE);
    } else if (fm == "pairwise") {  // n-1 steps: in step k send to rank + k, receive from rank - k
      for (int k = 1; k < n; ++k) {
        const int src = (rank - k + n) % n, dst = (rank + k) % n;
        MPI_Request q[2];
        MPI_Irecv(recv.data() + displs[static_cast<size_t>(src)], static_cast<int>(b), MPI_BYTE, src, 7, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(send.data(), static_cast<int>(b), MPI_BYTE, dst, 7, MPI_COMM_WORLD, &q[1]);
        MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
      }
      std::memcpy(recv.data() + displs[static_cast<size_t>(rank)], send.data(), b);
    } else {
      rq.assign(2 * static_cast<size_t>(n - 1), MPI_REQUEST_NULL);
      for (int k = 1; k < n; ++k) {
        const int src = (rank - k + n) % n;
        MPI_Irecv(recv.data() + displs[static_cast<size_t>(src)], static_cast<int>(b), MPI_BYTE, src, 7, MPI_COMM_WORLD, &rq[static_cast<size_t>(k - 1)]);
      }
      for (int k = 1; k < n; ++k)
        MPI_Isend(send.data(), static_cast<int>(b), MPI_BYTE, (rank + k) % n, 7, MPI_COMM_WORLD, &rq[static_cast<size_t>(n - 2 + k)]);
      std::memcpy(recv.data() + displs[static_cast<size_t>(rank)], send.data(), b);
      MPI_Waitall(static_cast<int>(rq.size()), rq.data(), MPI_STATUSES_IGNORE);
    }
    double t = MPI_Wtime() - t0, mx = 0;
    MPI_Reduce(&t, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    slowest.push_back(mx);
  }
  // Every block arrived: rank p's bytes are p + 1.
  long long wrong = 0;
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < b; ++i) wrong += recv[b * static_cast<size_t>(p) + i] != static_cast<char>(p + 1);
  long long all_wrong = 0;
  MPI_Reduce(&wrong, &all_wrong, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0 && per_call) {
    std::printf("per call (us):");
    for (double t : slowest) std::printf(" %.0f", t * 1e6);
    std::printf("\n");
  }
  if (rank == 0) {
    double sum = 0;
    for (double t : slowest) sum += t;
    std::printf("form %s ranks %d bytes %lld calls %d: call 1 %.0f us", form.c_str(), n, bytes, calls, slowest[0] * 1e6);
    for (int c = 1; c < calls && c < 3; ++c) std::printf(", call %d %.0f us", c + 1, slowest[static_cast<size_t>(c)] * 1e6);
    std::printf(", call %d %.0f us, mean %.0f us, #wrong %lld\n", calls, slowest.back() * 1e6, sum / calls * 1e6, all_wrong);
  }
  MPI_Finalize();
  return all_wrong == 0 ? 0 : 2;
}
