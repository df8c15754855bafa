#pragma once
// Balanced Parallelism on the GPU: the CPU scheme's algorithm and wire format (src/schemes/balanced.cpp)
// with device kernels (zen/cuda/kernels.hpp) over a device communicator (zen/cuda/comm.hpp).
// Results are bit-identical to the CPU scheme for coalesced inputs (and for any input whose sums
// are exact): each owner sums, per position, the contributions in source-rank order (first
// assigned, then added in accum_of<T>, rounded once); the result support is the union of the input
// supports; pull encoding per owner: hash bitmap iff bitmap_bytes(|I_i|) < K_i * isz (Auto).
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

struct DeviceBalancedLimits {
  size_t max_nnz = 0;        ///< largest local nnz (rows) per call on this rank
  size_t recv_capacity = 0;  ///< largest number of entries this rank may receive in the push (0: n * max_nnz)
  size_t pull_rows = 0;      ///< largest result support over all owners, in rows (0: min(N/D, n * max_nnz))
};

class DeviceBalanced {
 public:
  /// Workspace bytes for `n` ranks (CUB-style size query; no device work).
  static size_t workspace_bytes(const TensorSpec& spec, int n, const SchemeOptions& opt, const DeviceBalancedLimits& lim);

  /// Collective setup on `comm` (memory_space() Device): agrees on rank 0's h0 seed and checks the
  /// spec on every rank (synchronizes). `d_workspace` of `workspace_bytes` bytes, or null to allocate.
  DeviceBalanced(Communicator& comm, const TensorSpec& spec, const SchemeOptions& opt, const DeviceBalancedLimits& lim,
                 void* d_workspace = nullptr, size_t workspace_bytes = 0);
  ~DeviceBalanced();
  DeviceBalanced(const DeviceBalanced&) = delete;
  DeviceBalanced& operator=(const DeviceBalanced&) = delete;

  /// Sum a device sparse tensor (indices/values in device memory; N, D, dtype of the spec) over all
  /// ranks into `d_out` (N values of the spec's dtype, device memory, overwritten).
  void run_dense(const SparseView& in, void* d_out);
  /// Same for a dense device gradient (N values): rows holding a value != 0 are the input entries.
  void run_dense_from_dense(const void* d_grad, void* d_out);

  /// Wait for the enqueued work (with the communicator's timeout) and report device-side errors.
  void synchronize();

  const SyncReport& report() const;
  const TensorSpec& spec() const;
  Communicator& comm();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zen::cuda
