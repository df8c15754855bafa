// LibTorch adapter: sparse COO gradients through zen's schemes, dense ones through bucketed
// native allreduces (include/zen/torch.hpp).
#include "zen/torch.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

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

at::Tensor allreduce_sparse(SparseAllreduce& plan, const at::Tensor& grad_in, bool dense_output, const std::string& what) {
  const int rank = plan.comm().rank();
  const at::Tensor grad = normalize(grad_in);
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
  at::Tensor ind = grad._indices();
  at::Tensor val = grad._values();
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
  try {
    if (dense_output) {
      at::Tensor out = at::empty(grad.sizes(), grad.options().layout(at::kStrided));
      plan.run_dense(v, out.data_ptr());
      return out;
    }
    thread_local SparseTensor result;  // keeps its capacity across calls
    plan.run(v, result);
    const int64_t nnz = static_cast<int64_t>(result.nnz());
    at::Tensor oi = at::empty({1, nnz}, at::TensorOptions().dtype(at::kLong));
    std::vector<int64_t> vs = grad.sizes().vec();
    vs[0] = nnz;
    at::Tensor ov = at::empty(vs, val.options());
    if (nnz) {
      std::memcpy(oi.data_ptr<int64_t>(), result.indices.data(), static_cast<size_t>(nnz) * sizeof(int64_t));
      std::memcpy(ov.data_ptr(), result.values.data(), result.values.size());
    }
    // zen's result is sorted by row without duplicates: a coalesced tensor by construction.
    return at::_sparse_coo_tensor_unsafe(oi, ov, grad.sizes(), grad.options())._coalesced_(true);
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
    comm.allreduce(t.data_ptr(), static_cast<size_t>(t.numel()), dtype_of(t.scalar_type(), what));
  } catch (const Error& e) {
    if (e.code() != Result::RemoteError) comm.abort(e.what());
    throw;
  }
  if (average && comm.size() > 1) t.div_(comm.size());
}

GradSync::GradSync(Communicator& comm, ::torch::nn::Module& module, GradSyncOptions opt)
    : comm_(comm), opt_(std::move(opt)) {
  for (const auto& item : module.named_parameters(/*recurse=*/true))
    if (item.value().requires_grad()) params_.push_back(Param{item.key(), item.value(), nullptr});
  opt_.scheme_options.output.average = opt_.average;
}

std::string GradSync::scheme_of(const std::string& parameter) const {
  for (const auto& p : params_)
    if (p.name == parameter && p.plan) return p.plan->report().scheme;
  return "";
}

void GradSync::synchronize() {
  const double t0 = now_s();
  stats_ = GradSyncStats{};
  const TrafficStats before = comm_.stats();
  const int n = comm_.size(), rank = comm_.rank();
  const size_t P = params_.size();
  // 1. Agree on every parameter's kind (0 = no gradient, 1 = dense, 2 = sparse): one allgather of
  //    P bytes. Local layout errors are told to the peers before they wait in it.
  kinds_.assign(P, 0);
  for (size_t i = 0; i < P; ++i) {
    const at::Tensor g = normalize(params_[i].tensor.grad());
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
    kinds_[i] = g.is_sparse() ? 2 : 1;
  }
  all_kinds_.resize(P * static_cast<size_t>(n));
  if (P) comm_.allgather(kinds_.data(), P, all_kinds_.data());
  // 2. Sparse gradients through zen, one plan per parameter.
  const double ts = now_s();
  std::vector<size_t> dense;
  for (size_t i = 0; i < P; ++i) {
    int8_t agreed = 0;
    int sparse_rank = -1, dense_rank = -1;
    for (int q = 0; q < n; ++q) {
      const int8_t k = all_kinds_[static_cast<size_t>(q) * P + i];
      agreed = std::max(agreed, k);
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
    const std::string what = "parameter '" + p.name + "'";
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
  // 3. Dense gradients in buckets of one dtype and at most bucket_bytes (a larger tensor alone).
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
