#pragma once
// Hierarchical mode on the device (Zen §7), dense-gradient input: dense reduce-scatter inside the
// node, DeviceBalanced across nodes among the ranks with the same local index, dense allgather
// inside the node. Same chunking and summation order as the host mode
// (include/zen/schemes/hierarchical.hpp):
//   1. intra alltoallv: chunk j of the gradient (rows [lo_j, lo_{j+1}), no copy) -> local rank j;
//   2. the L chunks are summed in local-rank order (reduce_rank_order: accum_of<T>, rounded once);
//   3. DeviceBalanced::run_dense_from_dense on the node partial of chunk l over `inter`;
//   4. intra allgatherv of the chunk results straight into the dense output.
// The result equals the host hierarchical scheme run on each rank's non-zero rows (a row is present
// iff one of its values != 0; -0.0 counts as zero), bit for bit, with one exception: signed zeros.
// The device sums whole chunks, so absent rows contribute +0.0, and a node partial that is exactly
// zero is absent across nodes; where the host would return -0.0 (every present contribution -0.0)
// the device returns +0.0. Buffers are allocated once at construction.
// Backend = the communicators' memory space, as for DeviceBalanced (host communicators run the
// device kernels on the CPU).
#include <memory>

#include "zen/cuda/balanced.hpp"

namespace zen::cuda {

class DeviceHierarchical final : public Plan {
 public:
  /// `intra`: this rank's node in local-index order; `inter`: the ranks with this rank's local index in
  /// node order; both of one memory space and (device) on the same stream as the caller's work.
  /// `lim` sizes the inner DeviceBalanced for one chunk (max_nnz = 0: the whole chunk). The plan's
  /// comm() is `intra`.
  DeviceHierarchical(Communicator& intra, Communicator& inter, const TensorSpec& spec, const SchemeOptions& opt = {},
                     DeviceBalancedLimits lim = {});
  ~DeviceHierarchical() override;
  DeviceHierarchical(const DeviceHierarchical&) = delete;
  DeviceHierarchical& operator=(const DeviceHierarchical&) = delete;

  const char* name() const override { return "hierarchical"; }
  /// Dense input is the only form: Unsupported (use run_dense_from_dense).
  void run_dense(const SparseView& in, void* d_out) override;
  /// Sum the dense gradients (N values each) of all ranks into d_out (N values).
  void run_dense_from_dense(const void* d_grad, void* d_out) override;
  /// Wait (with the communicators' timeout) and report device-side errors of the last call.
  void synchronize() override;

  struct Core;  // the backend's implementation (cuda/schemes/balanced_core.hpp)

 private:
  std::unique_ptr<Core> core_;
};

}  // namespace zen::cuda
