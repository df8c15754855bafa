// zen_mpi_oom: out of memory in the middle of a call (docs/reliability.md, "Out of memory mid-call").
// Every rank sets up a communicator and one plan per scheme and runs a small call (exact); then the
// victim rank limits its own memory and every rank starts a large call (full density) that the victim
// cannot allocate. Checks, per scheme (a fresh communicator each):
//   - the victim's call fails with a clear allocation error (SystemError "workspace allocation failed"
//     naming the rank), every peer's with RemoteError naming the victim;
//   - the communicator is poisoned: a later call fails at once on every rank;
//   - nothing is written into the caller's output: the dense buffer keeps its fill pattern and the
//     sparse tensor stays empty, on every rank;
// and then lifts the limit, destroys everything and finalizes MPI normally (so LeakSanitizer, in the
// sanitizer build, reports what the failed calls left behind).
// --limit as: the victim lowers RLIMIT_AS to its current address space plus --margin-mb (the setup
//             succeeded under no limit; the large call needs more). Not with ASan (its shadow memory).
// --limit new: the victim's operator new refuses any single allocation above --margin-mb (the form
//             the sanitizer build uses; every C++ container goes through it).
// Prints "zen_mpi_oom: rank R scheme S: ok|BAD ..." per rank and scheme; exit 0 when every check held.
#include <CLI/CLI.hpp>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "zen/comm/mpi.hpp"
#include "zen/schemes/scheme.hpp"

namespace {
std::atomic<size_t> g_new_cap{0};  // 0: no cap
}  // namespace

// operator new with an optional cap on one allocation (armed on the victim only).
void* operator new(size_t n) {
  const size_t cap = g_new_cap.load(std::memory_order_relaxed);
  if (cap != 0 && n > cap) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The whole unaligned family is replaced, so every new / delete pair meets (ASan checks the pairing).
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return operator new(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {
using namespace zen;

long long vm_size_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7));
  return -1;
}

// Rank r holds every row (full density); row x's value is r + 1 + x % 5 (exact sums).
struct Input {
  std::vector<int64_t> idx;
  std::vector<float> val;
  SparseView view;
};
void fill(Input& in, uint64_t rows, uint32_t D, int r, uint64_t nnz) {
  in.idx.resize(nnz);
  in.val.resize(nnz * D);
  for (uint64_t k = 0; k < nnz; ++k) {
    const uint64_t x = nnz == rows ? k : (k * 7919 + static_cast<uint64_t>(r)) % rows;
    in.idx[k] = static_cast<int64_t>(x);
    for (uint32_t j = 0; j < D; ++j) in.val[k * D + j] = static_cast<float>(r + 1 + x % 5);
  }
  in.view.dense_len = rows * D;
  in.view.row_width = D;
  in.view.nnz = nnz;
  in.view.indices = in.idx.data();
  in.view.values = in.val.data();
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zen: out of memory mid-call"};
  int victim = 1;
  uint64_t rows = 2'000'000;
  uint32_t width = 4;
  double margin_mb = 16;
  std::string limit = "as";
  std::vector<std::string> schemes = {"balanced", "allgather", "sparse_ps", "sparcml", "omnireduce"};
  app.add_option("--victim", victim, "the rank that runs out of memory")->capture_default_str();
  app.add_option("--rows", rows, "rows of the tensor (every rank holds all of them in the large call)")->capture_default_str();
  app.add_option("--width", width, "values per row")->capture_default_str();
  app.add_option("--margin-mb", margin_mb, "memory the victim may still take (MB)")->capture_default_str();
  app.add_option("--limit", limit, "as: RLIMIT_AS; new: a cap on one operator new")->check(CLI::IsMember({"as", "new"}));
  app.add_option("--schemes", schemes, "schemes, one communicator each")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  mpi::Environment env(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const bool me = rank == victim;
  const TensorSpec spec{rows * width, width, DType::F32};
  const size_t margin = static_cast<size_t>(margin_mb * 1e6);
  // Every buffer the caller owns exists before the limit: the inputs and both outputs.
  Input small, large;
  fill(small, rows, width, rank, 1000);
  fill(large, rows, width, rank, rows);
  std::vector<float> dense(spec.dense_len);
  int bad = 0;
  for (const std::string& name : schemes) {
    std::string why;
    auto c = mpi::create(MPI_COMM_WORLD);
    c->set_timeout(Communicator::Ms(10000));
    auto plan = make_scheme(name, *c, spec);
    SparseTensor out;
    plan->run(small.view, out);  // setup and a small call succeed
    if (out.nnz() == 0) why += " the small call returned nothing;";
    out = SparseTensor{};
    out.indices.reserve(1);  // the tensor the large call must leave empty
    std::fill(dense.begin(), dense.end(), -7.0f);
    rlimit old{};
    getrlimit(RLIMIT_AS, &old);
    if (me) {
      if (limit == "as") {
        rlimit lim = old;
        lim.rlim_cur = static_cast<rlim_t>(vm_size_kib()) * 1024 + margin;
        if (setrlimit(RLIMIT_AS, &lim) != 0) why += " setrlimit failed;";
      } else {
        g_new_cap = margin;
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // Sparse output for the first half of the schemes' calls, dense for the other: both, per scheme.
    const bool dense_out = (&name - schemes.data()) % 2 == 1;
    std::string err;
    try {
      if (dense_out) plan->run_dense(large.view, dense.data());
      else plan->run(large.view, out);
      why += " the large call succeeded (raise --rows or lower --margin-mb);";
    } catch (const Error& e) {
      err = e.what();
    }
    g_new_cap = 0;
    if (me) setrlimit(RLIMIT_AS, &old);
    const std::string v = std::to_string(victim);
    if (!err.empty()) {
      if (me && (err.find("workspace allocation failed") == std::string::npos || err.find("rank " + v) == std::string::npos))
        why += " the victim's error is not a clear allocation error: " + err + ";";
      if (!me && err.find("rank " + v + " abort") == std::string::npos && err.find("rank " + v + " failed") == std::string::npos)
        why += " the error does not name rank " + v + ": " + err + ";";
    }
    // Nothing written into the caller's output.
    if (dense_out) {
      for (size_t i = 0; i < dense.size(); ++i)
        if (dense[i] != -7.0f) {
          why += " the dense output was written (element " + std::to_string(i) + ");";
          break;
        }
    } else if (out.nnz() != 0) {
      why += " the sparse output has " + std::to_string(out.nnz()) + " rows;";
    }
    // Poisoned: a later call fails at once.
    try {
      SparseTensor o2;
      plan->run(small.view, o2);
      why += " a later call succeeded;";
    } catch (const Error& e) {
      if (std::strstr(e.what(), "already failed") == nullptr && std::strstr(e.what(), "refuses") == nullptr)
        why += std::string(" a later call failed differently: ") + e.what() + ";";
    }
    plan.reset();
    c.reset();
    std::printf("zen_mpi_oom: rank %d scheme %s (%s output): %s%s | %s\n", rank, name.c_str(), dense_out ? "dense" : "sparse",
                why.empty() ? "ok" : "BAD", why.c_str(), err.c_str());
    std::fflush(stdout);
    bad += !why.empty();
  }
  int all = 0;
  MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("zen_mpi_oom: %s (%d failed checks over %d ranks)\n", all ? "FAIL" : "PASS", all, n);
  return all ? 1 : 0;
}
