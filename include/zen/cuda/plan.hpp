#pragma once
// The device plans by name, for callers that hold a zen::Plan (the C API dispatches once through it):
// "balanced" is DeviceBalanced on `comm`; "hierarchical" (or "hier_balanced") is DeviceHierarchical
// on the node communicators DevicePlanOptions::intra / inter. The backend follows the
// communicators' memory space (zen/cuda/balanced.hpp).
#include <memory>
#include <string>

#include "zen/cuda/balanced.hpp"
#include "zen/cuda/hierarchical.hpp"

namespace zen::cuda {

struct DevicePlanOptions {
  DeviceBalancedLimits limits;   ///< balanced: max_nnz = 0 means every row; hierarchical: per chunk
  Communicator* intra = nullptr;  ///< hierarchical: this rank's node, local-index order
  Communicator* inter = nullptr;  ///< hierarchical: the ranks with this rank's local index, node order
};

/// Throws Unsupported naming the rank and the backend for other names, for output options
/// (average / accumulate are host-plan options) and, in builds without CUDA, for device memory.
std::unique_ptr<Plan> make_device_plan(const std::string& name, Communicator& comm, const TensorSpec& spec,
                                       const SchemeOptions& opt, const DevicePlanOptions& dopt = {});

}  // namespace zen::cuda
