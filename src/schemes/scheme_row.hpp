#pragma once
// One row per scheme (private): the scheme's name, its factory, its traffic model (what the cost
// model replays), the rows it touches (the model's compute term), whether and in which order `auto`
// considers it, and its device support. Each scheme file defines its row (`const SchemeRow&
// <scheme>_row()`); the registry (scheme.cpp), the cost model (cost_model.cpp) and auto (auto.cpp)
// read the one table of rows (scheme_table()) and know no scheme by name.
//
// The consistency NCCL's algorithm registry can only warn about is structural here: the factory,
// the traffic model and the work model are `Required<>` members, built only from a function (never
// null) and with no default, so a row without one of them does not compile; the table checks the
// rest (a name, unique names, unique auto positions) when it is built and when a scheme is
// registered at run time (register_scheme, e.g. an example scheme defined in a test).
//
// The traffic model writes, on a TrafficBuilder, the bytes per rank per phase of one call: the
// phases are the scheme's own (report().phases), listed also when they carry no bytes.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../comm/ring_chunk.hpp"
#include "zen/comm/communicator.hpp"
#include "zen/hash/hash.hpp"
#include "zen/model/cost_model.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen::model {

/// Width of a COO key over a key space (4 bytes up to 2^31 keys, else 8).
inline uint64_t key_width(uint64_t key_space) { return key_space <= (uint64_t{1} << 31) ? 4 : 8; }

/// The hashed split of R rows into the L chunks of a node (hierarchical_sparse): chunk = owner,
/// position = the row's place in it; its own seed, so it is independent of balanced's h0.
inline Partitioner node_chunks(uint64_t R, int L, uint64_t seed) {
  return Partitioner::make(R, static_cast<uint32_t>(L), seed ^ 0x6e6f64655f636875ULL);
}

/// Start of part o when `total` items are split in n contiguous parts (the ring chunk split).
inline uint64_t part_begin(uint64_t total, int n, int o) {
  const uint64_t uo = static_cast<uint64_t>(o), un = static_cast<uint64_t>(n);
  return uo * (total / un) + std::min<uint64_t>(uo, total % un);
}

/// What a traffic model writes on: the problem, its counts, the sizes every model uses, and the
/// phases (phase() hands out references that stay valid: the phases never reallocate).
class TrafficBuilder {
 public:
  TrafficBuilder(const Problem& problem, const Counts& counts, Traffic& traffic)
      : p(problem), c(counts), t(traffic), n(problem.n), un(static_cast<size_t>(problem.n)), R(problem.rows),
        D(problem.D), vs(dtype_size(problem.dtype)), N(problem.N()), Rb((problem.rows + 7) / 8),
        lg(n > 1 ? std::ceil(std::log2(static_cast<double>(n))) : 0.0), nm1(n - 1), one(n > 1 ? 1.0 : 0.0) {
    t.phases.reserve(72);  // SparCML: log2 n + 2 <= 66 phases
  }
  const Problem& p;
  const Counts& c;
  Traffic& t;
  const int n;
  const size_t un;
  const uint64_t R, D, vs, N, Rb;  // rows, row width, value size, N = R * D, R bits in bytes
  const double lg, nm1, one;       // ceil(log2 n), n - 1, (n > 1)

  /// A new phase (rounds: dependent message rounds; messages: those the busiest rank sends).
  // Rounds and messages of the collective algorithms assumed (docs/cost-model.md): rings are
  // sequential (one round per step); fixed-size allgathers / alltoalls of small records take log2 n
  // rounds (recursive doubling, Bruck); personalized exchanges (alltoallv, allgatherv) post their
  // n - 1 messages at once (one round).
  PhaseTraffic& phase(const char* name, double rounds, double messages) {
    t.phases.push_back(PhaseTraffic{name, std::vector<uint64_t>(un, 0), std::vector<uint64_t>(un, 0), rounds, messages});
    return t.phases.back();
  }
  /// A ring reduce-scatter (and allgather with two_passes) of `count` items of `elem` bytes.
  void ring(PhaseTraffic& ph, uint64_t count, uint64_t elem, bool two_passes) const {
    if (n == 1) return;
    const uint64_t S = count * elem;
    for (int r = 0; r < n; ++r) {
      const auto ur = static_cast<size_t>(r);
      ph.sent[ur] += S - ring_chunk_bytes(count, elem, n, r);
      ph.recv[ur] += S - ring_chunk_bytes(count, elem, n, (r + n - 1) % n);
      if (two_passes) {
        ph.sent[ur] += S - ring_chunk_bytes(count, elem, n, (r + 1) % n);
        ph.recv[ur] += S - ring_chunk_bytes(count, elem, n, r);
      }
    }
  }
};

}  // namespace zen::model

namespace zen::detail {

/// A function a row cannot be without: made only from a function, so it is never null.
template <typename F>
class Required {
 public:
  constexpr Required(F& f) noexcept : f_(&f) {}  // NOLINT: implicit, rows name the function
  Required(std::nullptr_t) = delete;
  template <typename... A>
  decltype(auto) operator()(A&&... a) const {
    return f_(std::forward<A>(a)...);
  }

 private:
  F* f_;
};

using MakeFn = std::unique_ptr<SparseAllreduce>(Communicator&, const TensorSpec&, const SchemeOptions&);
/// Writes the bytes per rank per phase of one call (docs/algorithms.md); throws InvalidArgument
/// when the Counts lack what the scheme needs.
using TrafficFn = void(model::TrafficBuilder&);
/// Rows the scheme touches on rank r (hashing/coalescing the input, owner sums, the decode).
using WorkFn = double(const model::Problem&, const model::Counts&, size_t r);

/// What a scheme row says besides its functions.
enum SchemeTraits : unsigned {
  kSparse = 0,
  kDense = 1u << 0,            ///< a dense allreduce: auto's dense fallback compares against it
  kNeedsBlockCounts = 1u << 1, ///< its model needs Counts' exact block sets (auto skips it on a sample)
  kDevicePlan = 1u << 2,       ///< zen::cuda::make_device_plan has a device plan of it
  kNodes = 1u << 3,            ///< needs several nodes of several ranks: auto considers it only then
};

/// Position of a scheme `auto` considers only when SchemeOptions::autotune.candidates names it.
constexpr int kNotAuto = INT_MAX;

struct SchemeRow {
  const char* name;
  Required<MakeFn> make;
  Required<TrafficFn> traffic;
  Required<WorkFn> work;
  /// Position in auto's default candidates (0 first; ties of the model and of the dense fallback
  /// go to the lower position), or kNotAuto.
  int auto_position;
  unsigned traits;
  bool has(SchemeTraits t) const { return (traits & t) != 0; }
};

/// The rows, in the registry's order (scheme_names()).
const std::vector<SchemeRow>& scheme_table();
/// The row of `name`, or nullptr.
const SchemeRow* find_scheme(const std::string& name);
/// Adds a scheme from outside the library's table (same checks as the table's rows: a name that is
/// not empty, not "auto" and not taken; an auto position not taken). Call it before any plan is
/// made (it is not synchronized with make_scheme on other threads).
void register_scheme(const SchemeRow& row);
/// Auto's default candidates: the rows with an auto position, in that order.
std::vector<std::string> auto_candidates();

}  // namespace zen::detail
