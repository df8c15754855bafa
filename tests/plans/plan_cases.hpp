#pragma once
// Steady-state allocation check shared by the loopback and MPI test binaries: a plan's calls 2..10
// (same input size, or smaller) allocate nothing and create no thread, on every rank and in its pool
// workers. Each process counts its own allocations (replaced operator new, alloc_counter.hpp) and
// thread creations (interposed pthread_create, thread_counter.hpp): under MPI every rank is a
// process of its own and counts for itself; on loopback the ranks are threads of one process.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "alloc_counter.hpp"
#include "thread_counter.hpp"
#include "zen/comm/communicator.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen::test {

/// Spin barrier over the ranks of one process (allocates nothing); for MPI runs with one rank per
/// process the communicator's own barrier is used instead (it allocates nothing either).
struct SpinBarrier {
  std::atomic<int> count{0}, gen{0};
  int n = 1;
  void wait() {
    const int g = gen.load();
    if (count.fetch_add(1) + 1 == n) {
      count.store(0);
      gen.fetch_add(1);
    } else {
      while (gen.load() == g) std::this_thread::yield();
    }
  }
};

struct AllocCase {
  std::string scheme;
  uint64_t rows;
  uint32_t D;
  DType dtype;
  bool dense_out;
  bool duplicates;
  int threads;
  /// Rows between a rank's entries: 5..7 (about 1/6 of the rows), or 1..2 for the large cases whose
  /// every parallel step gets more than one task (2^17+ entries, 1 MiB+ dense buffers).
  bool large = false;
};

/// Input of call `call` on rank r: the same rows each call (the first two calls also a superset),
/// values changing; with `duplicates` every third row repeats.
inline void make_alloc_input(const AllocCase& c, int r, int call, std::vector<int64_t>& idx, std::vector<uint8_t>& vals) {
  idx.clear();
  const uint64_t step = c.large ? 1 + static_cast<uint64_t>(r % 2) : 5 + static_cast<uint64_t>(r % 3);
  for (uint64_t row = static_cast<uint64_t>(r) % 5; row < c.rows; row += step) {
    if (call > 1 && row % 17 == 3) continue;  // later calls: a subset (smaller than the first)
    idx.push_back(static_cast<int64_t>(row));
    if (c.duplicates && row % 3 == 0) idx.push_back(static_cast<int64_t>(row));
  }
  const size_t vs = dtype_size(c.dtype);
  vals.assign(idx.size() * c.D * vs, 0);
  dispatch_dtype(c.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* v = reinterpret_cast<T*>(vals.data());
    for (size_t i = 0; i < idx.size() * c.D; ++i) v[i] = static_cast<T>(static_cast<float>((i + static_cast<size_t>(call)) % 7) - 3.0f);
  });
}

/// What calls 2..10 of one plan did in this process (all its threads).
struct SteadyState {
  uint64_t allocs = 0;
  uint64_t threads = 0;
};

/// Runs calls 1..10 of one plan on this rank; returns the allocations and thread creations counted
/// in this process during calls 2..10. `leader`: this rank switches the process-wide counter on and
/// off (loopback: rank 0 of the threads that share the process; MPI: every rank, its own process).
/// `sync` separates the warm-up from the counted calls on every rank.
template <typename Sync>
SteadyState count_steady_state(Communicator& comm, const AllocCase& c, bool leader, Sync&& sync) {
  SchemeOptions o;
  o.threads = c.threads;
  // hierarchical_sparse: nodes of two ranks where n is even (n = 4: two nodes, the inner balanced
  // between them), else one rank per node.
  if (c.scheme == "hierarchical_sparse") o.node_size = comm.size() % 2 == 0 ? 2 : 1;
  TensorSpec spec{c.rows * c.D, c.D, c.dtype};
  auto plan = make_scheme(c.scheme, comm, spec, o);
  std::vector<std::vector<int64_t>> idx(11);
  std::vector<std::vector<uint8_t>> vals(11);
  for (int call = 1; call <= 10; ++call) make_alloc_input(c, comm.rank(), call, idx[call], vals[call]);
  std::vector<uint8_t> dense(spec.dense_len * dtype_size(c.dtype));
  SparseTensor out;
  auto one = [&](int call) {
    SparseView v;
    v.dense_len = spec.dense_len;
    v.row_width = c.D;
    v.nnz = idx[call].size();
    v.indices = idx[call].data();
    v.dtype = c.dtype;
    v.values = vals[call].data();
    if (c.dense_out) plan->run_dense(v, dense.data());
    else plan->run(v, out);
  };
  one(1);
  sync();
  if (leader) {
    g_allocs.store(0);
    g_count_allocs.store(true);
  }
  sync();
  const uint64_t threads_before = threads_created();
  for (int call = 2; call <= 10; ++call) one(call);
  sync();
  SteadyState got;
  got.allocs = g_allocs.load();
  got.threads = threads_created() - threads_before;
  sync();
  if (leader) g_count_allocs.store(false);
  sync();
  return got;
}

/// Small inputs (one task per step: the single-thread paths) and large ones with two pool threads,
/// where every parallel step of every scheme runs on both (the workers must persist across calls).
inline std::vector<AllocCase> alloc_cases() {
  std::vector<AllocCase> v;
  for (const char* s : {"balanced", "allgather", "sparse_ps", "dense", "dense_native"})
    for (bool dense_out : {false, true})
      for (bool dups : {false, true}) {
        v.push_back({s, 4099, 1, DType::F32, dense_out, dups, 1});
        v.push_back({s, 1031, 16, DType::BF16, dense_out, dups, 2});
        v.push_back({s, (uint64_t{1} << 18) + 3, 1, DType::F32, dense_out, dups, 2, true});
      }
  // hierarchical_sparse: its inner balanced is covered above; the small inputs only (CI time).
  for (bool dense_out : {false, true})
    for (bool dups : {false, true}) {
      v.push_back({"hierarchical_sparse", 4099, 1, DType::F32, dense_out, dups, 1});
      v.push_back({"hierarchical_sparse", 1031, 16, DType::BF16, dense_out, dups, 2});
    }
  return v;
}

inline void PrintTo(const AllocCase& c, std::ostream* os);
inline std::string alloc_case_name(const AllocCase& c) {
  return c.scheme + (c.dense_out ? "_dense" : "_sparse") + (c.duplicates ? "_dups" : "") + "_" + dtype_name(c.dtype) +
         "_D" + std::to_string(c.D) + "_t" + std::to_string(c.threads) + (c.large ? "_large" : "");
}

inline void PrintTo(const AllocCase& c, std::ostream* os) { *os << alloc_case_name(c); }

}  // namespace zen::test
