// zen_mpi_nb_faults: failures while non-blocking calls are pending (docs/reliability.md, "Failures
// during non-blocking calls"). Every rank keeps --pending requests in flight on two plans (balanced
// with sparse output, allgather with dense output), alternating, checking every result exactly and
// starting a new request whenever one completes, until --seconds pass or a request fails. The test
// scripts kill a rank (mpi_nb_faults_test.sh: SIGKILL; cluster_test.sh: a host's link taken down;
// mpi_signal_test.sh: SIGINT / SIGTERM to mpirun) once every rank has printed
//   zen_mpi_nb_faults: rank R pid P running
// When a request fails, the rank completes every other pending request (each must fail too), starts
// one more call (it must fail at once) and destroys the plans and the communicator, then prints
//   zen_mpi_nb_faults: rank R on HOST: pending K, failed F, first at E1 last at E2 (epoch ms), named V in N/F,
//   later call failed in L ms, destroy D ms: FIRST ERROR
// and leaves without MPI_Finalize (exit 4; a peer is gone). --victim V: the rank expected to be named.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "zen/comm/mpi.hpp"
#include "zen/schemes/scheme.hpp"

namespace {
using namespace zen;
int64_t epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
double since_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Rank r holds rows r, r + 7n, r + 14n, ... and row 0, every value r + 1 (exact sums).
struct Input {
  std::vector<int64_t> idx;
  std::vector<float> val;
  SparseView view;
};
Input make_input(uint64_t rows, uint32_t D, int r, int n) {
  Input in;
  in.idx.push_back(0);
  for (uint64_t x = static_cast<uint64_t>(r) + 1; x < rows; x += 7 * static_cast<uint64_t>(n)) in.idx.push_back(static_cast<int64_t>(x));
  in.val.assign(in.idx.size() * D, static_cast<float>(r + 1));
  in.view.dense_len = rows * D;
  in.view.row_width = D;
  in.view.nnz = in.idx.size();
  in.view.indices = in.idx.data();
  in.view.values = in.val.data();
  return in;
}

// One request in flight: which plan, its output and the Request.
struct Slot {
  int plan = 0;
  SparseTensor sparse;
  std::vector<float> dense;
  Request req;
};

// Row 0 of every result is the sum of every rank's r + 1; each other row of rank q's set holds q + 1.
bool correct(const Slot& s, int n, uint32_t D) {
  const float all = static_cast<float>(n) * static_cast<float>(n + 1) / 2;
  if (s.plan == 0) return s.sparse.nnz() > 1 && s.sparse.indices[0] == 0 && s.sparse.vals<float>()[0] == all;
  return !s.dense.empty() && s.dense[0] == all && s.dense[D] == 1.0f;  // row 1 belongs to rank 0
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zen: faults while non-blocking calls are pending"};
  int64_t timeout_ms = 1000;
  double seconds = 60;
  uint64_t rows = 200000;
  uint32_t width = 4;
  int pending = 4, victim = -1;
  app.add_option("--timeout-ms", timeout_ms, "communicator timeout")->capture_default_str();
  app.add_option("--seconds", seconds, "stop after this long without a fault")->capture_default_str();
  app.add_option("--rows", rows, "rows of the tensors")->capture_default_str();
  app.add_option("--width", width, "values per row")->capture_default_str();
  app.add_option("--pending", pending, "requests kept in flight (>= 3), alternating between the two plans")
      ->check(CLI::Range(3, 64))
      ->capture_default_str();
  app.add_option("--victim", victim, "the rank the errors must name (-1: not checked)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  mpi::Environment env(&argc, &argv);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  int rank = -1, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  auto c = mpi::create(MPI_COMM_WORLD);
  c->set_timeout(Communicator::Ms(timeout_ms));
  const TensorSpec spec{rows * width, width, DType::F32};
  std::unique_ptr<SparseAllreduce> plans[2] = {make_scheme("balanced", *c, spec), make_scheme("allgather", *c, spec)};
  const Input in = make_input(rows, width, rank, n);
  c->barrier();
  std::printf("zen_mpi_nb_faults: rank %d pid %d running (%d ranks, %d pending on 2 plans)\n", rank, static_cast<int>(getpid()),
              n, pending);
  std::fflush(stdout);

  std::deque<std::unique_ptr<Slot>> q;  // oldest first
  int next_plan = 0;
  auto start = [&] {
    auto s = std::make_unique<Slot>();
    s->plan = next_plan;
    next_plan ^= 1;
    if (s->plan == 0) s->req = plans[0]->start(in.view, s->sparse);
    else {
      s->dense.assign(spec.dense_len, -1.0f);
      s->req = plans[1]->start_dense(in.view, s->dense.data());
    }
    q.push_back(std::move(s));
  };
  const auto t_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  long calls = 0;
  std::string first;
  int in_flight = 0, failed = 0, named = 0;
  int64_t first_at = 0, last_at = 0;
  auto names_victim = [&](const std::string& m) {
    const std::string v = std::to_string(victim);
    return m.find("rank(s) " + v + " did not take part") != std::string::npos || m.find("peer " + v + ":") != std::string::npos ||
           m.find("rank " + v + " failed") != std::string::npos || m.find("rank " + v + " aborted") != std::string::npos;
  };
  try {
    while (std::chrono::steady_clock::now() < t_end) {
      while (static_cast<int>(q.size()) < pending) start();
      std::unique_ptr<Slot> s = std::move(q.front());
      q.pop_front();
      try {
        s->req.wait();
      } catch (const std::exception& e) {
        // A request failed: this one and every other pending one must fail; record each.
        in_flight = static_cast<int>(q.size()) + 1;
        first = e.what();
        first_at = last_at = epoch_ms();
        failed = 1;
        named += names_victim(first);
        for (auto& o : q) {
          try {
            o->req.wait();
          } catch (const std::exception& e2) {
            ++failed;
            last_at = epoch_ms();
            named += names_victim(e2.what());
          }
        }
        q.clear();
        break;
      }
      if (!correct(*s, n, width)) {
        std::printf("zen_mpi_nb_faults: rank %d: WRONG result at call %ld (plan %d)\n", rank, calls, s->plan);
        std::fflush(stdout);
        std::_Exit(3);
      }
      ++calls;
    }
  } catch (const std::exception& e) {  // a start() that failed at once (the communicator already failed)
    first = e.what();
    first_at = last_at = epoch_ms();
  }
  if (first.empty()) {
    if (rank == 0) std::printf("zen_mpi_nb_faults: %ld calls, no fault\n", calls);
    q.clear();
    plans[0].reset();
    plans[1].reset();
    c.reset();
    return 0;
  }
  // Later calls fail at once; destroying the plans and the communicator is bounded.
  auto t0 = std::chrono::steady_clock::now();
  double later_ms = -1;
  try {
    SparseTensor out;
    plans[0]->run(in.view, out);
  } catch (const std::exception&) {
    later_ms = since_ms(t0);
  }
  t0 = std::chrono::steady_clock::now();
  plans[0].reset();
  plans[1].reset();
  c.reset();
  const double destroy_ms = since_ms(t0);
  std::printf("zen_mpi_nb_faults: rank %d on %s: pending %d, failed %d, first at %lld last at %lld (epoch ms), named %d in "
              "%d/%d, later call failed in %.1f ms, destroy %.0f ms, %ld calls before: %s\n",
              rank, host, in_flight, failed, static_cast<long long>(first_at), static_cast<long long>(last_at), victim, named,
              failed, later_ms, destroy_ms, calls, first.c_str());
  std::fflush(stdout);
  std::_Exit(4);
}
