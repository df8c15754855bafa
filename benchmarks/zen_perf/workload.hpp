#pragma once
// zen_perf's workload: every rank's synthetic input (deterministic from seed and rank, so any rank can
// regenerate any other's), the SparseView a plan is called on, and the reference the results are
// checked against (the dense sum of all ranks' inputs, held sparsely).
#include <cstdint>
#include <vector>

#include "zen/schemes/scheme.hpp"
#include "zen/tensor.hpp"

namespace zen_perf {

using zen::DType;
using zen::IndexType;
using zen::SparseTensor;
using zen::SparseView;

struct Workload {
  std::vector<int64_t> idx;
  std::vector<uint8_t> vals;
};

/// Rank r's input. Rows split into classes by a seeded hash: a shared pool (fraction wp of the rows)
/// and one private class per rank (wq each), wp = f / gamma, wq = (1 - f) / gamma with
/// f = (n - gamma) / (n - 1), so that k = d * R rows per rank (f * k from the pool, drawn with a
/// seed common to all ranks, and (1 - f) * k private) give a union of about gamma * k rows.
/// Rows are drawn with Zipf(skew) over the row index (low rows hot); once draws stop finding free
/// rows the rest of the class is filled uniformly by a scan. Values: {-4..-1, 1..4}, exact in every
/// dtype for sums over up to 64 ranks.
Workload generate(uint64_t R, uint32_t D, DType dt, double d, double gamma, double skew, int n, int r, uint64_t seed);

/// The view of `w` a plan is called on; `i32` holds the indices when `it` is I32.
SparseView make_view(const Workload& w, uint64_t N, uint32_t D, DType dt, IndexType it, std::vector<int32_t>& i32);

/// Reference: the sum (double) of every rank's input in rank order over the union support, held
/// sparsely (rows ascending, D sums and D sums of magnitudes each): memory in the non-zeros only,
/// so traces with N = 2^33 and more are checked.
struct Reference {
  std::vector<uint64_t> rows;        // union support, ascending
  std::vector<double> sum, sum_abs;  // rows.size() * D
  uint64_t union_rows = 0;
};

Reference build_reference(const std::vector<Workload>& all, uint32_t D, DType dt);

/// Count wrong elements of a result. exact: bitwise equal to the reference rounded to the dtype;
/// otherwise within eps * (n + 1) * sum|x| (traces with arbitrary values, any summation order).
/// A dense result is walked once (zeros expected outside the support); a sparse one is merged with
/// the reference rows, so it costs O(nnz) memory and time.
uint64_t count_wrong(const Reference& ref, const void* dense, const SparseTensor* sparse, uint64_t N, uint32_t D,
                     DType dt, bool exact, int n);

}  // namespace zen_perf
