// zen_cluster_fault: runs Balanced Parallelism sparse allreduces in a loop (real scheme traffic, so a
// fault lands in the middle of a collective) until --seconds have passed or a call fails. Every
// call's result is checked against the exact sum. On failure each rank prints one line
//   zen_cluster_fault: rank R on HOST failed at EPOCH_MS (MS ms after its last completed call): WHAT
// and leaves without MPI_Finalize (exit 4), so the job ends even while a host is unreachable.
// Before the loop rank 0 prints "zen_cluster_fault: running" (the test injects the fault after it).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "zen/comm/mpi.hpp"
#include "zen/schemes/scheme.hpp"

namespace {
int64_t epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zen cluster fault test: sparse allreduces in a loop until a fault"};
  int64_t timeout_ms = 2000;
  double seconds = 60;
  uint64_t rows = 1 << 20;
  uint32_t width = 16;
  app.add_option("--timeout-ms", timeout_ms, "communicator timeout")->capture_default_str();
  app.add_option("--seconds", seconds, "stop after this long without a fault")->capture_default_str();
  app.add_option("--rows", rows, "rows of the tensor")->capture_default_str();
  app.add_option("--width", width, "values per row")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  zen::mpi::Environment env(&argc, &argv);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int64_t last_ok = epoch_ms();
  try {
    auto c = zen::mpi::create(MPI_COMM_WORLD);
    c->set_timeout(std::chrono::milliseconds(timeout_ms));
    const int n = c->size();
    const zen::TensorSpec spec{rows * width, width, zen::DType::F32};
    auto plan = zen::make_scheme("balanced", *c, spec);
    // Rank r holds rows r, r + n, r + 2n, ... (every 7th) and row 0; value = rank + 1 at every element.
    std::vector<int64_t> idx;
    std::vector<float> val;
    idx.push_back(0);
    for (uint64_t x = static_cast<uint64_t>(rank) + 1; x < rows; x += 7 * static_cast<uint64_t>(n)) idx.push_back(static_cast<int64_t>(x));
    val.assign(idx.size() * width, static_cast<float>(rank + 1));
    zen::SparseView in;
    in.dense_len = spec.dense_len;
    in.row_width = width;
    in.nnz = idx.size();
    in.indices = idx.data();
    in.values = val.data();
    zen::SparseTensor out;
    c->barrier();
    if (rank == 0) {
      std::printf("zen_cluster_fault: running (%d ranks)\n", n);
      std::fflush(stdout);
    }
    const int64_t end = epoch_ms() + static_cast<int64_t>(seconds * 1000);
    long calls = 0;
    while (epoch_ms() < end) {
      try {
        plan->run(in, out);
      } catch (const std::exception& e) {
        // Reported where the error reaches the rank (leaving the scope would first destroy the
        // communicator, whose closing exchange waits up to the timeout for the unreachable peer).
        const int64_t now = epoch_ms();
        std::printf("zen_cluster_fault: rank %d on %s failed at %lld (%lld ms after its last completed call): %s\n",
                    rank, host, static_cast<long long>(now), static_cast<long long>(now - last_ok), e.what());
        std::fflush(stdout);
        std::_Exit(4);
      }
      // Row 0: every rank's rank + 1; the others: only their owner's.
      const float all = static_cast<float>(n) * static_cast<float>(n + 1) / 2;
      if (out.nnz() == 0 || out.indices[0] != 0 || out.vals<float>()[0] != all)
        ZEN_THROW(zen::Result::InternalError, "wrong result at call " + std::to_string(calls));
      ++calls;
      last_ok = epoch_ms();
    }
    if (rank == 0) std::printf("zen_cluster_fault: %ld calls, no fault\n", calls);
    plan.reset();
    c.reset();
  } catch (const std::exception& e) {
    const int64_t now = epoch_ms();
    std::printf("zen_cluster_fault: rank %d on %s failed at %lld (%lld ms after its last completed call): %s\n", rank,
                host, static_cast<long long>(now), static_cast<long long>(now - last_ok), e.what());
    std::fflush(stdout);
    std::_Exit(4);
  }
  return 0;
}
