#pragma once
// Internal: the backend side of zen::cuda::DeviceBalanced and DeviceHierarchical. The public classes
// check arguments and hold a Core; BalancedImpl<B> / HierarchicalImpl<B> (balanced_impl.hpp,
// hierarchical_impl.hpp) implement it once for both backends. The Host core is built in every
// configuration (device_plans.cpp), the Gpu core in CUDA builds (device_plans_gpu.cpp; CPU builds
// link stubs that report Unsupported, absent.cpp).
#include <memory>

#include "zen/cuda/balanced.hpp"
#include "zen/cuda/hierarchical.hpp"
#include "zen/cuda/kernels.hpp"

namespace zen::cuda {

struct DeviceBalanced::Core {
  virtual ~Core() = default;
  /// One call: `nnz` entries (indices of type `it`, value rows `values`, row of entry e =
  /// value_row ? value_row[e] : e), result into d_out (N values).
  virtual void run(const void* indices, IndexType it, size_t nnz, const void* values, const int64_t* value_row,
                   void* d_out) = 0;
  virtual void run_dense_from_dense(const void* d_grad, void* d_out) = 0;
  virtual void synchronize() = 0;
  virtual const DeviceBalancedLimits& limits() const = 0;
  /// Called by the destructor of the public class: wait for the stream, never throw.
  virtual void quiesce() noexcept = 0;
};

struct DeviceHierarchical::Core {
  virtual ~Core() = default;
  virtual void run_dense_from_dense(const void* d_grad, void* d_out) = 0;
  virtual void synchronize() = 0;
};

namespace detail {

/// The backend's balanced core; `report` is the public plan's report (filled by every call).
std::unique_ptr<DeviceBalanced::Core> make_balanced_core(Host, Communicator& comm, const TensorSpec& spec,
                                                         const SchemeOptions& opt, const DeviceBalancedLimits& lim,
                                                         SyncReport& report, void* ws, size_t ws_bytes);
std::unique_ptr<DeviceBalanced::Core> make_balanced_core(Gpu, Communicator& comm, const TensorSpec& spec,
                                                         const SchemeOptions& opt, const DeviceBalancedLimits& lim,
                                                         SyncReport& report, void* ws, size_t ws_bytes);
size_t balanced_workspace(Host, const TensorSpec& spec, int n, const SchemeOptions& opt, const DeviceBalancedLimits& lim);
size_t balanced_workspace(Gpu, const TensorSpec& spec, int n, const SchemeOptions& opt, const DeviceBalancedLimits& lim);

std::unique_ptr<DeviceHierarchical::Core> make_hierarchical_core(Host, Communicator& intra, Communicator& inter,
                                                                 const TensorSpec& spec, const SchemeOptions& opt,
                                                                 const DeviceBalancedLimits& lim, SyncReport& report);
std::unique_ptr<DeviceHierarchical::Core> make_hierarchical_core(Gpu, Communicator& intra, Communicator& inter,
                                                                 const TensorSpec& spec, const SchemeOptions& opt,
                                                                 const DeviceBalancedLimits& lim, SyncReport& report);

}  // namespace detail
}  // namespace zen::cuda
