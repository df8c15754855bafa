#pragma once
// Balanced Parallelism on the device: the CPU scheme's algorithm and wire format
// (src/schemes/balanced.cpp) with the device kernels (zen/cuda/kernels.hpp) over a communicator.
// Results are bit-identical to the CPU scheme for coalesced inputs (and for any input whose sums
// are exact): each owner sums, per position, the contributions in source-rank order (first
// assigned, then added in accum_of<T>, rounded once); the result support is the union of the input
// supports; pull encoding per owner: hash bitmap iff bitmap_bytes(|I_i|) < K_i * isz (Auto).
//
// Backend = the communicator's memory space: a device communicator (NCCL, device loopback) runs the
// kernels on the GPU (Kernels<Gpu>, CUDA builds); a host communicator (loopback, MPI) runs the same
// kernel bodies on the CPU over host memory (Kernels<Host>, every build), which is how CI checks
// the device path without a GPU (docs/gpu.md, "The kernels on the CPU").
//
// Stream-ordered on comm.stream(). The host synchronizes (zen::cuda::stream_wait, with the
// communicator's timeout) exactly three times per call, each time for counts it must know to size
// the next transfer: (1) entries per destination after hashing + the received counts, (2) the
// owner's result count K after aggregation, (3) every owner's (K_i, encoding) before the pull.
// The decode + scatter into the output is left enqueued: call synchronize() (or the stream) before
// reading the output; errors found by decode kernels are reported by synchronize() or at the next
// call's first synchronization.
//
// Memory: one workspace sized by workspace_bytes() (CUB-style two-phase: query, allocate once,
// pass it in, or let the constructor allocate it); nothing is allocated per call.
#include <memory>

#include "zen/comm/communicator.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen::cuda {

/// Capacities of a device plan. The constructor agrees on them across ranks (one allgather at
/// setup): recv_capacity and pull_rows become the largest value any rank asks for, where 0 asks for
/// the default computed from every rank's max_nnz, so that no rank (e.g. the one with the fewest
/// rows) sizes a buffer smaller than what its peers can send it.
struct DeviceBalancedLimits {
  size_t max_nnz = 0;        ///< largest local nnz (rows) per call on this rank
  /// Largest number of entries one rank may receive in the push (0: the sum of all ranks' max_nnz).
  size_t recv_capacity = 0;
  /// Largest result support, in rows, summed over all owners (0: min(N/D, the sum of all ranks' max_nnz)).
  size_t pull_rows = 0;
};

class DeviceBalanced final : public Plan {
 public:
  /// Workspace bytes for `n` ranks on the backend of `space` (Device: the GPU; Host: the kernels on
  /// the CPU), when no rank's max_nnz exceeds lim.max_nnz and the agreed recv_capacity / pull_rows
  /// are lim's (or their defaults for n ranks of lim.max_nnz). CUB-style size query; no device work.
  static size_t workspace_bytes(const TensorSpec& spec, int n, const SchemeOptions& opt, const DeviceBalancedLimits& lim,
                                MemSpace space = MemSpace::Device);

  /// Collective setup on `comm`: agrees on rank 0's h0 seed and on the limits, checks the spec on
  /// every rank (synchronizes). `d_workspace` of at least workspace_bytes() for the agreed limits
  /// (checked), or null to allocate it.
  DeviceBalanced(Communicator& comm, const TensorSpec& spec, const SchemeOptions& opt, const DeviceBalancedLimits& lim,
                 void* d_workspace = nullptr, size_t workspace_bytes = 0);
  ~DeviceBalanced() override;
  DeviceBalanced(const DeviceBalanced&) = delete;
  DeviceBalanced& operator=(const DeviceBalanced&) = delete;

  const char* name() const override { return "balanced"; }
  /// Sum a sparse tensor (indices/values in the backend's memory, SparseView::space = the
  /// communicator's memory space; N, D, dtype of the spec) over all ranks into `d_out` (N values of
  /// the spec's dtype, overwritten).
  void run_dense(const SparseView& in, void* d_out) override;
  /// Same for a dense gradient (N values): rows holding a value != 0 are the input entries.
  void run_dense_from_dense(const void* d_grad, void* d_out) override;
  /// Wait for the enqueued work (with the communicator's timeout) and report device-side errors.
  void synchronize() override;

  /// The limits as agreed by all ranks at setup.
  const DeviceBalancedLimits& limits() const;

  struct Core;  // the backend's implementation (cuda/schemes/balanced_core.hpp)

 private:
  std::unique_ptr<Core> core_;
};

}  // namespace zen::cuda
