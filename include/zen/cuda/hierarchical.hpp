#pragma once
// Hierarchical mode on the GPU (Zen §7), dense-gradient input: dense reduce-scatter inside the node,
// DeviceBalanced across nodes among the ranks with the same local index, dense allgather inside
// the node. Same chunking and summation order as the host mode (include/zen/schemes/hierarchical.hpp):
//   1. intra alltoallv: chunk j of the gradient (rows [lo_j, lo_{j+1}), no copy) -> local rank j;
//   2. the L chunks are summed in local-rank order (reduce_rank_order: accum_of<T>, rounded once);
//   3. DeviceBalanced::run_dense_from_dense on the node partial of chunk l over `inter`;
//   4. intra allgatherv of the chunk results straight into the dense output.
// The result equals the host hierarchical scheme run on each rank's non-zero rows (a row is present
// iff one of its values != 0; -0.0 counts as zero), bit for bit, with one exception: signed zeros.
// The device sums whole chunks, so absent rows contribute +0.0, and a node partial that is exactly
// zero is absent across nodes; where the host would return -0.0 (every present contribution -0.0)
// the device returns +0.0. Buffers are allocated once at construction.
#include <memory>

#include "zen/cuda/balanced.hpp"

namespace zen::cuda {

class DeviceHierarchical {
 public:
  /// `intra`: this rank's node in local-index order; `inter`: the ranks with this rank's local index in
  /// node order; both device communicators on the same stream as the caller's work. `lim` sizes the
  /// inner DeviceBalanced for one chunk (max_nnz = 0: the whole chunk, i.e. rows/L + 1).
  DeviceHierarchical(Communicator& intra, Communicator& inter, const TensorSpec& spec, const SchemeOptions& opt = {},
                     DeviceBalancedLimits lim = {});
  ~DeviceHierarchical();
  DeviceHierarchical(const DeviceHierarchical&) = delete;
  DeviceHierarchical& operator=(const DeviceHierarchical&) = delete;

  /// Sum the dense device gradients (N values each) of all ranks into d_out (N values, device).
  void run_dense_from_dense(const void* d_grad, void* d_out);
  /// Wait (with the communicators' timeout) and report device-side errors of the last call.
  void synchronize();
  /// Report of the inner (inter-node) DeviceBalanced call, plus the intra phases.
  const SyncReport& report() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zen::cuda
