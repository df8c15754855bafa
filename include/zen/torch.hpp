#pragma once
/// @file
/// LibTorch adapter (component `torch`, built when find_package(Torch) succeeds; the core never
/// needs it): zen's sparse allreduce on the sparse COO gradients that `nn::Embedding(sparse=true)`
/// and `EmbeddingBag` produce, and a DDP-like helper that synchronizes every gradient of a module.
///
/// Layout handled: a sparse COO CPU tensor with one sparse dimension (indices `(1, k)` int64, values
/// `(k, d1, d2, ...)` of f32/f64/f16/bf16), uncoalesced as backward produced it. Its rows are the
/// first dimension: zen sees dense length N = numel of the full shape and row width D = numel / size(0).
/// The indices and values are read in place (no copy when they are contiguous, which backward gives).
/// Duplicate indices are summed, as coalesce() would.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/autograd/function.h>
#include <torch/torch.h>

#include "zen/comm/communicator.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen::libtorch {

/// zen's dtype of a tensor scalar type (f32, f64, f16, bf16); InvalidArgument naming `what` otherwise.
DType dtype_of(at::ScalarType t, const std::string& what);

/// The zen tensor spec of a tensor shape (rows = first dimension).
TensorSpec spec_of(const at::Tensor& t, const std::string& what);

/// A plan for tensors shaped like `like` (collective over comm: every rank must call it with the
/// same shape and dtype; a mismatch is an InvalidUsage error naming both ranks' shapes).
std::unique_ptr<SparseAllreduce> make_plan(Communicator& comm, const at::Tensor& like, const std::string& scheme,
                                           const SchemeOptions& opt = {});

/// Sum `grad` (sparse COO as above, CPU) over the ranks of `plan`'s communicator. Returns a
/// coalesced sparse tensor of the same shape, or a dense tensor when `dense_output` (rows absent
/// everywhere are zero). `what` names the tensor in errors (e.g. the parameter name).
at::Tensor allreduce_sparse(SparseAllreduce& plan, const at::Tensor& grad, bool dense_output = false,
                            const std::string& what = "tensor");

/// In-place sum (average when `average`) of a dense CPU tensor over `comm` with the backend's native
/// allreduce (MPI_Allreduce on the MPI backend).
void allreduce_dense(Communicator& comm, at::Tensor& t, bool average, const std::string& what = "tensor");

struct GradSyncOptions {
  std::string scheme = "balanced";  ///< zen scheme for sparse gradients (any make_scheme name, or "auto")
  SchemeOptions scheme_options;     ///< passed to every sparse plan (output.average is set from `average`)
  bool average = true;              ///< average over ranks (DDP's behaviour) instead of summing
  bool dense_output = false;        ///< sparse gradients come back dense instead of coalesced sparse
  size_t bucket_bytes = 25u << 20;  ///< dense gradients: bucket size of one allreduce (DDP's default)
  /// Start each sparse gradient's sync during backward, as soon as autograd has accumulated it (a
  /// post-hook on the parameter's AccumulateGrad node, as DDP's reducer does), so the sync overlaps
  /// the rest of backward; synchronize() then starts what is left and waits. Off: everything runs in
  /// synchronize(). Results are the same bits either way. Off by default: on the namespace cluster
  /// (4 ranks sharing 2 cores) train_embedding measured from 4.5 % slower to 2.6 % faster with it, no
  /// consistent gain (its sparse gradients are ready only at the very end of backward; docs/results.md,
  /// "Training overlaps its sync"), and with it every backward() feeds the next synchronize().
  bool overlap = false;
};

/// Time and traffic of the last synchronize() on this rank.
struct GradSyncStats {
  double seconds = 0;          ///< whole call
  double sparse_seconds = 0;   ///< zen sparse allreduces
  double dense_seconds = 0;    ///< bucketed dense allreduces
  int sparse_tensors = 0;      ///< gradients that went through zen
  int dense_tensors = 0;       ///< gradients that went through the dense buckets
  int dense_buckets = 0;       ///< dense allreduce calls
  int overlapped = 0;          ///< sparse syncs started during backward (overlap), before synchronize()
  int resynced = 0;            ///< sparse syncs run again because a gradient changed after its start
  uint64_t sent = 0, recv = 0; ///< bytes this rank sent / received (communicator counters)
};

/// DDP in the small: after loss.backward(), synchronize() replaces every gradient of `module`'s
/// parameters (those with requires_grad) by its average (or sum) over the ranks of `comm`: sparse
/// gradients through zen (one plan per parameter, created at first use and reused), dense gradients
/// packed into as few dense allreduces as `bucket_bytes` allows. A parameter whose gradient is
/// undefined on some ranks (unused in their forward) counts as zero there. Collective: every rank
/// calls it after its backward. Errors name the parameter (and the rank); CUDA tensors, sparse
/// layouts other than the one above, and a parameter that is sparse on one rank and dense on another
/// are errors, never a crash or a hang.
///
/// Overlap (GradSyncOptions::overlap, off by default): a parameter whose gradient was sparse on every
/// rank that had one in the previous synchronize() is "armed": its sync is started (non-blocking
/// `start` of its plan) from a hook as soon as backward has accumulated its gradient, in an order all
/// ranks agreed on in the previous call (the order rank 0's gradients became ready), so every rank
/// starts the same calls in the same order whatever its own backward does. synchronize() starts the
/// armed syncs backward did not reach (an unused parameter: an empty gradient), waits, and checks the
/// kinds as above. A gradient that changes after its sync started (a second backward before
/// synchronize(), e.g. gradient accumulation) is synced again, on every rank, in synchronize(). The
/// first call of a GradSync (and the first after a parameter becomes sparse) runs without overlap.
/// Every backward between two synchronize() calls feeds the next one; destroy the GradSync (or turn
/// overlap off) to run backward without syncing.
class GradSync {
 public:
  GradSync(Communicator& comm, ::torch::nn::Module& module, GradSyncOptions opt = {});
  /// Removes the hooks; waits for syncs still in flight.
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;
  void synchronize();
  /// Sparse syncs started by backward since the last synchronize() (overlap); 0 when overlap is off.
  int started_in_backward() const { return started_; }
  const GradSyncStats& last() const { return stats_; }
  /// The scheme each sparse parameter's plan ran last (auto: the one it chose); empty for dense ones.
  std::string scheme_of(const std::string& parameter) const;

 private:
  struct Param {
    std::string name;
    at::Tensor tensor;
    std::unique_ptr<SparseAllreduce> plan;  // sparse gradients
    // Overlap: the sync in flight for this step (its input buffers and its output kept alive).
    Request req;
    at::Tensor in_ind, in_val, in_grad, out_dense;
    SparseTensor out_sparse;
    bool ready = false;     // backward accumulated the gradient this step (hook fired)
    bool started = false;   // its sync was started this step
    bool stale = false;     // the gradient changed after the start (fired again)
    uint16_t fired_at = 0;  // 1 + order in which the hook fired this step (0: did not)
    std::shared_ptr<::torch::autograd::Node> accumulator;
    uintptr_t hook_key = 0;
  };
  struct HookState;
  void on_ready(size_t i);  // backward accumulated parameter i's gradient
  void start_armed(size_t i, bool from_hook);
  void end_step();
  Communicator& comm_;
  GradSyncOptions opt_;
  std::vector<Param> params_;
  std::vector<uint8_t> kinds_, all_kinds_;  // per parameter: kind, stale, fired_at (2 bytes)
  std::vector<size_t> armed_;               // agreed start order of the armed parameters
  size_t cursor_ = 0;                       // armed_[0, cursor_) are started this step
  uint16_t fired_ = 0;
  int started_ = 0;
  std::shared_ptr<HookState> hook_state_;
  GradSyncStats stats_;
};

}  // namespace zen::libtorch
