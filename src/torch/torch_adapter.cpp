// LibTorch adapter: sparse COO gradients through zen's schemes, dense ones through bucketed
// native allreduces, and GradSync's overlap of sparse syncs with backward (include/zen/torch.hpp).
#include "zen/torch.hpp"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

#include "zen/error.hpp"

namespace zen::libtorch {

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string shape_str(at::IntArrayRef s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

// A zen error raised while handling `what`, with `what` in front (code kept).
[[noreturn]] void rethrow_named(const Error& e, const std::string& what) {
  throw Error(e.code(), what + ": " + e.what());
}

// Run the communicator collective `f` in its place among the calls of the communicator: behind the
// non-blocking calls pending on it (GradSync's overlapped syncs), or as an agreed call in agreed order
// (the same rule as the C API's collectives); at once when nothing is pending.
template <typename F>
void in_order(Communicator& c, F&& f) {
  const bool agreed = c.call_order() == CallOrder::Agreed && !c.on_call_thread();
  if (!agreed && !c.queue_busy()) {
    f();
    return;
  }
  const detail::CallKey key = agreed ? detail::CallKey{0, c.next_setup_index()} : detail::CallKey{};
  auto st = c.call_queue().submit([&f] { f(); }, key);
  detail::wait_state(*st);
  if (st->error) std::rethrow_exception(st->error);
}

// The sparse COO layout the adapter reads in place; InvalidArgument naming `what` otherwise.
void check_sparse_layout(const at::Tensor& g, const std::string& what, int rank) {
  const std::string where = "rank " + std::to_string(rank) + " " + what + ": ";
  ZEN_ENFORCE(g.defined(), where + "undefined tensor");
  ZEN_ENFORCE(g.is_sparse(), where + "expected a sparse COO tensor, got a " +
                                 (g.is_mkldnn() ? std::string("mkldnn") : std::string("strided (dense)")) +
                                 " one (dense tensors go through allreduce_dense / the dense buckets)");
  ZEN_ENFORCE(g.device().is_cpu(), where + "the tensor is on " + g.device().str() +
                                       "; this adapter takes CPU tensors (move it with .cpu(), or use zen's CUDA path)");
  ZEN_ENFORCE(g.sparse_dim() == 1, where + "sparse_dim is " + std::to_string(g.sparse_dim()) +
                                       "; the adapter handles one sparse dimension (rows, as nn::Embedding produces)");
  ZEN_ENFORCE(g._indices().scalar_type() == at::kLong, where + "indices must be int64");
}

// An empty sparse gradient with one sparse dimension, shaped like `like`.
at::Tensor empty_rows(const at::Tensor& like) {
  std::vector<int64_t> vs = like.sizes().vec();
  vs[0] = 0;
  const auto vopt = at::TensorOptions().dtype(like.scalar_type());
  return at::_sparse_coo_tensor_unsafe(at::empty({1, 0}, at::TensorOptions().dtype(at::kLong)), at::empty(vs, vopt),
                                       like.sizes(), vopt.layout(at::kSparse));
}

// A zeroed sparse gradient (Module::zero_grad() leaves sparse_dim = dim, nnz 0) is an empty one.
at::Tensor normalize(const at::Tensor& g) {
  if (g.defined() && g.is_sparse() && g.sparse_dim() != 1 && g._nnz() == 0 && g.dim() >= 1) return empty_rows(g);
  return g;
}

}  // namespace

DType dtype_of(at::ScalarType t, const std::string& what) {
  switch (t) {
    case at::kFloat: return DType::F32;
    case at::kDouble: return DType::F64;
    case at::kHalf: return DType::F16;
    case at::kBFloat16: return DType::BF16;
    default:
      ZEN_THROW(Result::InvalidArgument, what + ": dtype " + std::string(c10::toString(t)) +
                                             " is not supported (f32, f64, f16, bf16)");
  }
}

TensorSpec spec_of(const at::Tensor& t, const std::string& what) {
  ZEN_ENFORCE(t.dim() >= 1, what + ": a 0-dimensional tensor has no rows");
  TensorSpec s;
  s.dtype = dtype_of(t.scalar_type(), what);
  uint64_t row = 1;
  for (int64_t d = 1; d < t.dim(); ++d) row *= static_cast<uint64_t>(t.size(d));
  ZEN_ENFORCE(row >= 1 && row <= 0xFFFFFFFFull, what + ": row width " + std::to_string(row) + " outside [1, 2^32)");
  s.row_width = static_cast<uint32_t>(row);
  s.dense_len = static_cast<uint64_t>(t.size(0)) * row;
  return s;
}

std::unique_ptr<SparseAllreduce> make_plan(Communicator& comm, const at::Tensor& like, const std::string& scheme,
                                           const SchemeOptions& opt) {
  return make_scheme(scheme, comm, spec_of(like, "make_plan"), opt);
}

namespace {

// Does `grad` (normalized) have the layout the adapter reads and the plan's shape? (No side effect:
// the hook uses it to decide whether it may start; synchronize() reports the error.)
bool fits(const SparseAllreduce& plan, const at::Tensor& g) {
  if (!g.defined() || !g.is_sparse() || !g.device().is_cpu() || g.sparse_dim() != 1 ||
      g._indices().scalar_type() != at::kLong || g.dim() < 1)
    return false;
  const at::ScalarType st = g.scalar_type();
  if (st != at::kFloat && st != at::kDouble && st != at::kHalf && st != at::kBFloat16) return false;
  uint64_t row = 1;
  for (int64_t d = 1; d < g.dim(); ++d) row *= static_cast<uint64_t>(g.size(d));
  const TensorSpec& p = plan.spec();
  return static_cast<uint64_t>(g.size(0)) * row == p.dense_len && row == p.row_width &&
         dtype_of(st, "gradient") == p.dtype;
}

// Check `grad` (normalized) against the plan (on error: abort the communicator, so the peers already
// in the call fail at once, and throw) and return the view of its buffers, read in place; `ind` and
// `val` hold them.
SparseView view_of(SparseAllreduce& plan, const at::Tensor& grad, const std::string& what, at::Tensor& ind,
                   at::Tensor& val) {
  const int rank = plan.comm().rank();
  try {
    check_sparse_layout(grad, what, rank);
    const TensorSpec s = spec_of(grad, what);
    const TensorSpec& p = plan.spec();
    ZEN_ENFORCE(s.dense_len == p.dense_len && s.row_width == p.row_width && s.dtype == p.dtype,
                "rank " + std::to_string(rank) + " " + what + ": shape " + shape_str(grad.sizes()) + " " +
                    dtype_name(s.dtype) + " does not fit the plan (N=" + std::to_string(p.dense_len) +
                    ", D=" + std::to_string(p.row_width) + ", " + dtype_name(p.dtype) + ")");
  } catch (const Error& e) {
    plan.comm().abort(e.what());  // the peers are in the same call: tell them now, not at their timeout
    throw;
  }
  // Read backward's buffers in place: indices (1, k) int64 and values (k, ...), contiguous as produced.
  ind = grad._indices();
  val = grad._values();
  if (!ind.is_contiguous()) ind = ind.contiguous();
  if (!val.is_contiguous()) val = val.contiguous();
  SparseView v;
  v.dense_len = plan.spec().dense_len;
  v.row_width = plan.spec().row_width;
  v.dtype = plan.spec().dtype;
  v.nnz = static_cast<size_t>(ind.size(1));
  v.index_type = IndexType::I64;
  v.indices = ind.data_ptr<int64_t>();
  v.values = val.data_ptr();
  return v;
}

// zen's sorted result as a coalesced sparse tensor shaped like `grad`.
at::Tensor to_sparse_tensor(const SparseTensor& result, const at::Tensor& grad) {
  const int64_t nnz = static_cast<int64_t>(result.nnz());
  at::Tensor oi = at::empty({1, nnz}, at::TensorOptions().dtype(at::kLong));
  std::vector<int64_t> vs = grad.sizes().vec();
  vs[0] = nnz;
  const auto vopt = at::TensorOptions().dtype(grad.scalar_type());
  at::Tensor ov = at::empty(vs, vopt);
  if (nnz) {
    std::memcpy(oi.data_ptr<int64_t>(), result.indices.data(), static_cast<size_t>(nnz) * sizeof(int64_t));
    std::memcpy(ov.data_ptr(), result.values.data(), result.values.size());
  }
  // zen's result is sorted by row without duplicates: a coalesced tensor by construction.
  return at::_sparse_coo_tensor_unsafe(oi, ov, grad.sizes(), vopt.layout(at::kSparse))._coalesced_(true);
}

}  // namespace

at::Tensor allreduce_sparse(SparseAllreduce& plan, const at::Tensor& grad_in, bool dense_output, const std::string& what) {
  const at::Tensor grad = normalize(grad_in);
  at::Tensor ind, val;
  const SparseView v = view_of(plan, grad, what, ind, val);
  try {
    if (dense_output) {
      at::Tensor out = at::empty(grad.sizes(), grad.options().layout(at::kStrided));
      plan.run_dense(v, out.data_ptr());
      return out;
    }
    thread_local SparseTensor result;  // keeps its capacity across calls
    plan.run(v, result);
    return to_sparse_tensor(result, grad);
  } catch (const Error& e) {
    rethrow_named(e, what);
  }
}

void allreduce_dense(Communicator& comm, at::Tensor& t, bool average, const std::string& what) {
  const std::string where = "rank " + std::to_string(comm.rank()) + " " + what + ": ";
  try {
    ZEN_ENFORCE(t.defined() && !t.is_sparse(), where + "expected a dense (strided) tensor");
    ZEN_ENFORCE(t.device().is_cpu(), where + "the tensor is on " + t.device().str() + "; this adapter takes CPU tensors");
    ZEN_ENFORCE(t.is_contiguous(), where + "the tensor is not contiguous");
    in_order(comm, [&] { comm.allreduce(t.data_ptr(), static_cast<size_t>(t.numel()), dtype_of(t.scalar_type(), what)); });
  } catch (const Error& e) {
    if (e.code() != Result::RemoteError) comm.abort(e.what());
    throw;
  }
  if (average && comm.size() > 1) t.div_(comm.size());
}

// What the AccumulateGrad post-hooks reach: the GradSync while it lives (cleared by its destructor;
// a hook that outlives it, e.g. on a parameter kept elsewhere, then does nothing).
struct GradSync::HookState {
  std::mutex m;
  GradSync* owner = nullptr;
};

namespace {

// Post-hook of a parameter's AccumulateGrad node: runs once backward has accumulated the gradient.
class ReadyHook : public ::torch::autograd::FunctionPostHook {
 public:
  ReadyHook(std::shared_ptr<void> state, std::function<void()> fire) : state_(std::move(state)), fire_(std::move(fire)) {}
  ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& outputs,
                                              const ::torch::autograd::variable_list&) override {
    fire_();
    return outputs;
  }

 private:
  std::shared_ptr<void> state_;
  std::function<void()> fire_;
};

}  // namespace

GradSync::GradSync(Communicator& comm, ::torch::nn::Module& module, GradSyncOptions opt)
    : comm_(comm), opt_(std::move(opt)), hook_state_(std::make_shared<HookState>()) {
  for (const auto& item : module.named_parameters(/*recurse=*/true))
    if (item.value().requires_grad()) {
      Param p;
      p.name = item.key();
      p.tensor = item.value();
      params_.push_back(std::move(p));
    }
  opt_.scheme_options.output.average = opt_.average;
  hook_state_->owner = this;
  if (!opt_.overlap) return;
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& p = params_[i];
    if (!p.tensor.is_leaf()) continue;  // no accumulator: synced in synchronize() only
    p.accumulator = ::torch::autograd::impl::grad_accumulator(p.tensor);
    if (!p.accumulator) continue;
    std::weak_ptr<HookState> w = hook_state_;
    p.hook_key = p.accumulator->add_post_hook(std::make_unique<ReadyHook>(hook_state_, [w, i] {
      const auto st = w.lock();
      if (!st) return;
      std::lock_guard<std::mutex> lk(st->m);
      if (st->owner) st->owner->on_ready(i);
    }));
  }
}

GradSync::~GradSync() {
  {
    std::lock_guard<std::mutex> lk(hook_state_->m);
    hook_state_->owner = nullptr;
  }
  for (auto& p : params_)
    if (p.accumulator) p.accumulator->del_post_hook(p.hook_key);
  for (auto& p : params_)
    if (p.req.valid()) {
      try {
        p.req.wait();
      } catch (const Error&) {  // already reported to every rank (the communicator is poisoned)
      }
    }
}

std::string GradSync::scheme_of(const std::string& parameter) const {
  for (const auto& p : params_)
    if (p.name == parameter && p.plan) return p.plan->report().scheme;
  return "";
}

void GradSync::on_ready(size_t i) {
  Param& p = params_[i];
  if (p.ready) {  // accumulated again after its sync started (several backwards): synchronize() reruns it
    p.stale = p.stale || p.started;
    return;
  }
  p.ready = true;
  if (fired_ < 0xFFFF) p.fired_at = ++fired_;
  // Start the armed syncs in the agreed order, as far as backward has produced them.
  while (cursor_ < armed_.size()) {
    Param& q = params_[armed_[cursor_]];
    if (!q.ready || !fits(*q.plan, normalize(q.tensor.grad()))) break;  // synchronize() handles a misfit
    start_armed(armed_[cursor_], true);
    ++cursor_;
  }
}

// Start armed parameter i's sync: its gradient (from the hook), or an empty one when backward did not
// produce one here or it does not fit (synchronize() reports that after the kinds are agreed).
void GradSync::start_armed(size_t i, bool from_hook) {
  Param& p = params_[i];
  at::Tensor g = normalize(p.tensor.grad());
  // No gradient here, or a dense one (the kinds exchange then reports the mix): an empty gradient
  // keeps the calls in step. A sparse one that does not fit the plan is an error (view_of below).
  if (!g.defined() || !g.is_sparse()) g = empty_rows(p.tensor);
  p.in_grad = g;
  const SparseView v = view_of(*p.plan, g, "parameter '" + p.name + "'", p.in_ind, p.in_val);
  try {
    if (opt_.dense_output) {
      p.out_dense = at::empty(p.tensor.sizes(), at::TensorOptions().dtype(p.tensor.scalar_type()));
      p.req = p.plan->start_dense(v, p.out_dense.data_ptr());
    } else {
      p.req = p.plan->start(v, p.out_sparse);
    }
  } catch (const Error& e) {
    rethrow_named(e, "parameter '" + p.name + "'");
  }
  p.started = true;
  if (from_hook) ++started_;
}

void GradSync::end_step() {
  for (auto& p : params_)
    if (p.req.valid()) {  // left by an error: the call must be over before its buffers go
      try {
        p.req.wait();
      } catch (const Error&) {  // already reported to every rank (the communicator is poisoned)
      }
    }
  for (auto& p : params_) {
    p.ready = p.started = p.stale = false;
    p.fired_at = 0;
    p.in_ind = p.in_val = p.in_grad = p.out_dense = at::Tensor();
  }
  cursor_ = 0;
  fired_ = 0;
  started_ = 0;
}

void GradSync::synchronize() {
  const double t0 = now_s();
  stats_ = GradSyncStats{};
  stats_.overlapped = started_;
  const TrafficStats before = comm_.stats();
  const int n = comm_.size(), rank = comm_.rank();
  const size_t P = params_.size();
  std::unique_lock<std::mutex> hooks(hook_state_->m);  // no hook runs while the step is settled
  struct EndStep {
    GradSync* s;
    ~EndStep() { s->end_step(); }
  } end_step_guard{this};
  // 1. Every parameter's kind (0 = no gradient, 1 = dense, 2 = sparse). Local layout errors are told
  //    to the peers before they wait in the calls below.
  constexpr size_t W = 4;  // bytes per parameter: kind, stale, fired_at (little end first)
  kinds_.assign(P * W, 0);
  for (size_t i = 0; i < P; ++i) {
    const at::Tensor g = normalize(params_[i].tensor.grad());
    kinds_[i * W + 1] = params_[i].stale ? 1 : 0;
    kinds_[i * W + 2] = static_cast<uint8_t>(params_[i].fired_at & 0xFF);
    kinds_[i * W + 3] = static_cast<uint8_t>(params_[i].fired_at >> 8);
    if (!g.defined()) continue;
    const std::string what = "rank " + std::to_string(rank) + " parameter '" + params_[i].name + "'";
    if (!g.device().is_cpu() || (g.is_sparse() && g.sparse_dim() != 1) || (!g.is_sparse() && g.layout() != at::kStrided)) {
      const std::string m = what + ": gradient (" + c10::str(g.layout()) + ", sparse_dim " +
                            std::to_string(g.is_sparse() ? g.sparse_dim() : 0) + ") " +
                            (!g.device().is_cpu() ? "on " + g.device().str() + " (this adapter takes CPU tensors)"
                                                  : "has a layout the adapter does not handle (sparse COO with one "
                                                    "sparse dimension, or strided)");
      comm_.abort(m);
      ZEN_THROW(Result::InvalidArgument, m);
    }
    kinds_[i * W] = g.is_sparse() ? 2 : 1;
  }
  // 2. Overlap: start the armed syncs backward did not start (same order on every rank) and collect
  //    them; then agree on the kinds (on this thread: nothing is pending any more).
  const double ts = now_s();
  for (; cursor_ < armed_.size(); ++cursor_) start_armed(armed_[cursor_], false);
  for (size_t i : armed_) {
    Param& p = params_[i];
    try {
      p.req.wait();
    } catch (const Error& e) {
      rethrow_named(e, "parameter '" + p.name + "'");
    }
  }
  all_kinds_.resize(P * W * static_cast<size_t>(n));
  if (P) in_order(comm_, [&] { comm_.allgather(kinds_.data(), P * W, all_kinds_.data()); });
  // 3. Per parameter: the agreed kind; armed results go in, other sparse gradients through zen now.
  //    (An error from here on is thrown on every rank alike; the next call then starts unarmed.)
  std::vector<size_t> dense;
  std::vector<bool> is_armed(P, false);
  for (size_t i : armed_) is_armed[i] = true;
  armed_.clear();
  std::vector<std::pair<uint32_t, size_t>> next;  // (rank 0's ready order, parameter) of the next armed set
  for (size_t i = 0; i < P; ++i) {
    int8_t agreed = 0;
    bool stale = false;
    int sparse_rank = -1, dense_rank = -1;
    for (int q = 0; q < n; ++q) {
      const uint8_t* e = &all_kinds_[(static_cast<size_t>(q) * P + i) * W];
      const int8_t k = static_cast<int8_t>(e[0]);
      agreed = std::max(agreed, k);
      stale = stale || e[1];
      if (k == 2 && sparse_rank < 0) sparse_rank = q;
      if (k == 1 && dense_rank < 0) dense_rank = q;
    }
    Param& p = params_[i];
    if (sparse_rank >= 0 && dense_rank >= 0)  // the same on every rank: no abort needed
      ZEN_THROW(Result::InvalidUsage, "rank " + std::to_string(rank) + " parameter '" + p.name +
                                          "': the gradient is sparse on rank " + std::to_string(sparse_rank) +
                                          " but dense on rank " + std::to_string(dense_rank));
    if (agreed == 1) dense.push_back(i);
    if (agreed != 2) continue;
    const uint32_t first = all_kinds_[i * W + 2] | (static_cast<uint32_t>(all_kinds_[i * W + 3]) << 8);
    next.emplace_back(first ? first : 0x10000u + static_cast<uint32_t>(i), i);
    const std::string what = "parameter '" + p.name + "'";
    if (is_armed[i] && !stale) {
      p.tensor.mutable_grad() = opt_.dense_output ? p.out_dense : to_sparse_tensor(p.out_sparse, p.tensor);
      ++stats_.sparse_tensors;
      continue;
    }
    if (is_armed[i]) ++stats_.resynced;
    at::Tensor g = normalize(p.tensor.grad());
    if (!g.defined()) g = empty_rows(p.tensor);  // unused on this rank: an empty sparse gradient
    if (!p.plan) {
      try {
        p.plan = make_plan(comm_, p.tensor, opt_.scheme, opt_.scheme_options);
      } catch (const Error& e) {
        rethrow_named(e, what);
      }
    }
    p.tensor.mutable_grad() = allreduce_sparse(*p.plan, g, opt_.dense_output, what);
    ++stats_.sparse_tensors;
  }
  stats_.sparse_seconds = now_s() - ts;
  // The next step's armed set: sparse on every rank that had a gradient, started in rank 0's order.
  if (opt_.overlap) {
    std::sort(next.begin(), next.end());
    for (const auto& e : next) armed_.push_back(e.second);
  }
  // 4. Dense gradients in buckets of one dtype and at most bucket_bytes (a larger tensor alone).
  const double td = now_s();
  size_t k = 0;
  while (k < dense.size()) {
    const at::ScalarType st = params_[dense[k]].tensor.scalar_type();
    const size_t es = static_cast<size_t>(c10::elementSize(st));
    size_t end = k, bytes = 0;
    while (end < dense.size() && params_[dense[end]].tensor.scalar_type() == st &&
           (end == k || bytes + static_cast<size_t>(params_[dense[end]].tensor.numel()) * es <= opt_.bucket_bytes)) {
      bytes += static_cast<size_t>(params_[dense[end]].tensor.numel()) * es;
      ++end;
    }
    at::Tensor flat = at::empty({static_cast<int64_t>(bytes / es)}, at::TensorOptions().dtype(st));
    int64_t off = 0;
    for (size_t j = k; j < end; ++j) {
      Param& p = params_[dense[j]];
      const int64_t m = p.tensor.numel();
      const at::Tensor& g = p.tensor.grad();
      if (g.defined()) flat.narrow(0, off, m).copy_(g.reshape({-1}));
      else flat.narrow(0, off, m).zero_();  // unused on this rank
      off += m;
    }
    allreduce_dense(comm_, flat, opt_.average, "dense bucket of '" + params_[dense[k]].name + "'");
    off = 0;
    for (size_t j = k; j < end; ++j) {
      Param& p = params_[dense[j]];
      const int64_t m = p.tensor.numel();
      if (!p.tensor.grad().defined()) p.tensor.mutable_grad() = at::zeros_like(p.tensor);
      p.tensor.mutable_grad().copy_(flat.narrow(0, off, m).view(p.tensor.sizes()));
      off += m;
    }
    stats_.dense_tensors += static_cast<int>(end - k);
    ++stats_.dense_buckets;
    k = end;
  }
  stats_.dense_seconds = now_s() - td;
  const TrafficStats d = comm_.stats() - before;
  stats_.sent = d.total_sent();
  stats_.recv = d.total_recv();
  stats_.seconds = now_s() - t0;
}

}  // namespace zen::libtorch
