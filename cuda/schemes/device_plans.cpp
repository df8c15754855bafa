// The device plans' public classes (DeviceBalanced, DeviceHierarchical, make_device_plan) and their
// Host cores: the backend is chosen once, from the communicator's memory space.
#include <string>

#include "../../src/schemes/scheme_row.hpp"  // which schemes have a device plan: the row flag kDevicePlan
#include "balanced_impl.hpp"
#include "hierarchical_impl.hpp"
#include "zen/cuda/plan.hpp"

namespace zen::cuda {
namespace detail {

std::unique_ptr<DeviceBalanced::Core> make_balanced_core(Host, Communicator& comm, const TensorSpec& spec,
                                                         const SchemeOptions& opt, const DeviceBalancedLimits& lim,
                                                         SyncReport& report, void* ws, size_t ws_bytes) {
  return std::make_unique<BalancedImpl<Host>>(comm, spec, opt, lim, report, ws, ws_bytes);
}
size_t balanced_workspace(Host, const TensorSpec& spec, int n, const SchemeOptions& opt, const DeviceBalancedLimits& lim) {
  return workspace_for<Host>(spec, n, opt, lim);
}
std::unique_ptr<DeviceHierarchical::Core> make_hierarchical_core(Host, Communicator& intra, Communicator& inter,
                                                                 const TensorSpec& spec, const SchemeOptions& opt,
                                                                 const DeviceBalancedLimits& lim, SyncReport& report) {
  return std::make_unique<HierarchicalImpl<Host>>(intra, inter, spec, opt, lim, report);
}

}  // namespace detail

// ---- DeviceBalanced ----
size_t DeviceBalanced::workspace_bytes(const TensorSpec& spec, int n, const SchemeOptions& opt,
                                       const DeviceBalancedLimits& lim, MemSpace space) {
  return space == MemSpace::Device ? detail::balanced_workspace(Gpu{}, spec, n, opt, lim)
                                   : detail::balanced_workspace(Host{}, spec, n, opt, lim);
}

DeviceBalanced::DeviceBalanced(Communicator& comm, const TensorSpec& spec, const SchemeOptions& opt,
                               const DeviceBalancedLimits& lim, void* d_workspace, size_t workspace_bytes)
    : Plan(comm, spec) {
  core_ = comm.memory_space() == MemSpace::Device
              ? detail::make_balanced_core(Gpu{}, comm, spec, opt, lim, report_, d_workspace, workspace_bytes)
              : detail::make_balanced_core(Host{}, comm, spec, opt, lim, report_, d_workspace, workspace_bytes);
}

DeviceBalanced::~DeviceBalanced() {
  if (core_) core_->quiesce();
}

void DeviceBalanced::run_dense(const SparseView& in, void* d_out) {
  const std::string w = "rank " + std::to_string(comm_.rank()) + " balanced(device): ";
  ZEN_ENFORCE(in.space == comm_.memory_space(),
              w + "input is not in the communicator's memory space (SparseView::space)");
  ZEN_ENFORCE(in.dense_len == spec_.dense_len && in.row_width == spec_.row_width && in.dtype == spec_.dtype,
              w + "input N=" + std::to_string(in.dense_len) + " D=" + std::to_string(in.row_width) + " dtype=" +
                  dtype_name(in.dtype) + " differs from the scheme's N=" + std::to_string(spec_.dense_len) + " D=" +
                  std::to_string(spec_.row_width) + " dtype=" + dtype_name(spec_.dtype));
  const uint64_t rows = spec_.dense_len / spec_.row_width;
  ZEN_ENFORCE(in.index_type == IndexType::I64 || rows <= (uint64_t{1} << 31),
              w + "int32 indices need N/D <= 2^31, got " + std::to_string(rows));
  report_.clear();
  const double t0 = detail::now_s();
  core_->run(in.indices, in.index_type, in.nnz, in.values, nullptr, d_out);
  report_.seconds = detail::now_s() - t0;
}

void DeviceBalanced::run_dense_from_dense(const void* d_grad, void* d_out) {
  report_.clear();
  const double t0 = detail::now_s();
  core_->run_dense_from_dense(d_grad, d_out);
  report_.seconds = detail::now_s() - t0;
}

void DeviceBalanced::synchronize() { core_->synchronize(); }
const DeviceBalancedLimits& DeviceBalanced::limits() const { return core_->limits(); }

// ---- DeviceHierarchical ----
DeviceHierarchical::DeviceHierarchical(Communicator& intra, Communicator& inter, const TensorSpec& spec,
                                       const SchemeOptions& opt, DeviceBalancedLimits lim)
    : Plan(intra, spec) {
  core_ = intra.memory_space() == MemSpace::Device
              ? detail::make_hierarchical_core(Gpu{}, intra, inter, spec, opt, lim, report_)
              : detail::make_hierarchical_core(Host{}, intra, inter, spec, opt, lim, report_);
}
DeviceHierarchical::~DeviceHierarchical() = default;

void DeviceHierarchical::run_dense(const SparseView&, void*) {
  ZEN_THROW(Result::Unsupported, "rank " + std::to_string(comm_.rank()) +
                                     " hierarchical(device): the device hierarchical plan takes dense gradients "
                                     "(run_dense_from_dense)");
}
void DeviceHierarchical::run_dense_from_dense(const void* d_grad, void* d_out) { core_->run_dense_from_dense(d_grad, d_out); }
void DeviceHierarchical::synchronize() { core_->synchronize(); }

// ---- by name ----
namespace {
using DeviceMakeFn = std::unique_ptr<Plan>(Communicator&, const TensorSpec&, const SchemeOptions&, DeviceBalancedLimits,
                                           const std::string& where);
std::unique_ptr<Plan> make_balanced(Communicator& comm, const TensorSpec& spec, const SchemeOptions& opt,
                                    DeviceBalancedLimits lim, const std::string& where) {
  ZEN_ENFORCE(spec.row_width >= 1, where + "row width must be >= 1");
  if (lim.max_nnz == 0) lim.max_nnz = static_cast<size_t>(spec.dense_len / spec.row_width);
  return std::make_unique<DeviceBalanced>(comm, spec, opt, lim);
}
// How the device path builds the plan of a scheme whose row (src/schemes/scheme_row.hpp) carries
// kDevicePlan. Whether a scheme has a device plan is that row flag alone: a name without it is
// refused below before this table is read, and a flagged row missing here is a bug that
// make_device_plan reports (tests/device/test_device_plans.cpp checks every row both ways).
struct DeviceFactory {
  const char* name;
  DeviceMakeFn* make;
};
constexpr DeviceFactory kDeviceFactories[] = {{"balanced", &make_balanced}};

// The schemes whose row says they have a device plan, for messages.
std::string device_rows() {
  std::string s;
  for (const auto& r : ::zen::detail::scheme_table())
    if (r.has(::zen::detail::kDevicePlan)) s += std::string(s.empty() ? "" : ", ") + r.name;
  return s;
}
}  // namespace

std::unique_ptr<Plan> make_device_plan(const std::string& name, Communicator& comm, const TensorSpec& spec,
                                       const SchemeOptions& opt, const DevicePlanOptions& dopt) {
  const std::string where = "make_device_plan: rank " + std::to_string(comm.rank()) + " (" + comm.backend_name() + "): ";
  ZEN_CHECK_CODE(!opt.output.average && !opt.output.accumulate, Result::Unsupported,
                 where + "average/accumulate are host-plan options");
  DeviceBalancedLimits lim = dopt.limits;
  // The two-level scheme is no registry row (on the host it is make_hierarchical): its device plan
  // runs balanced's device plan within and across nodes.
  if (name == "hierarchical" || name == "hier_balanced") {
    const auto* inner = ::zen::detail::find_scheme("balanced");
    ZEN_CHECK_CODE(inner && inner->has(::zen::detail::kDevicePlan), Result::Unsupported,
                   where + "the device hierarchical plan runs balanced, whose row has no device plan");
    ZEN_ENFORCE(dopt.intra && dopt.inter, where + "the device hierarchical plan needs the intra and inter "
                                                  "communicators (of the node and of the local index)");
    return std::make_unique<DeviceHierarchical>(*dopt.intra, *dopt.inter, spec, opt, lim);
  }
  const auto* row = ::zen::detail::find_scheme(name);
  if (!row || !row->has(::zen::detail::kDevicePlan))
    ZEN_THROW(Result::Unsupported, where + "scheme '" + name + "' has no device implementation (device: " + device_rows() +
                                       ", hierarchical)");
  for (const auto& f : kDeviceFactories)
    if (name == f.name) return f.make(comm, spec, opt, lim, where);
  ZEN_THROW(Result::InternalError, where + "scheme '" + name +
                                       "': its registry row says it has a device plan (kDevicePlan), but the device "
                                       "path builds none (cuda/schemes/device_plans.cpp)");
}

}  // namespace zen::cuda
