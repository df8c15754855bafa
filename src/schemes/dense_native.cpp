// Dense baseline through the backend's native allreduce (MPI_Allreduce, ncclAllReduce, loopback).
// Dense output: the local rows are written into the caller's buffer and reduced there in place (one
// native allreduce, as a user's own MPI_Allreduce would). Sparse output: the same in the plan's
// buffer, and the support travels as an R-bit presence bitmap ORed by a native allreduce (MPI_BOR on
// bytes). See docs/algorithms.md, "dense_native". A plan: no steady-state
// allocation.
#include <cstring>

#include "baseline_util.hpp"
#include "plan_util.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

struct Workspace : plan::DenseWorkspace {};

class DenseNative final : public SparseAllreduce {
 public:
  ~DenseNative() override { quiesce(); }  // pending non-blocking calls finish before the members go
  DenseNative(Communicator& c, const TensorSpec& s, const SchemeOptions& o)
      : SparseAllreduce(c, s, o), ws_(std::make_shared<Workspace>()) {
    holder_ = ws_;
  }
  const char* name() const override { return "dense_native"; }

 protected:
  void execute(const SparseView& in, SparseTensor* sparse_out, void* dense_out) override {
    Workspace& w = *ws_;
    detail::ThreadPool& tp = pool();
    const uint64_t N = spec_.dense_len, R = N / spec_.row_width;
    const size_t vs = dtype_size(spec_.dtype);
    report_.encoding = "dense";
    const plan::Coalesced loc = w.co.run(in, spec_, false, &tp);
    if (!sparse_out) {
      auto* buf = static_cast<uint8_t*>(dense_out);
      plan::densify(loc, spec_, buf, &tp);
      Phase ph(*this, "allreduce");
      // The caller's buffer, not the plan's: the backend keeps caller memory safe on failure itself.
      Communicator::OwnerScope caller(comm_, nullptr);
      if (comm_.size() > 1 && N) comm_.allreduce(buf, N, spec_.dtype, ReduceOp::Sum);
      return;
    }
    uint8_t* buf = plan::grow(w.dense, N * vs);
    plan::densify(loc, spec_, buf, &tp);
    {
      Phase ph(*this, "allreduce");
      if (comm_.size() > 1 && N) comm_.allreduce(buf, N, spec_.dtype, ReduceOp::Sum);
    }
    const size_t bmb = static_cast<size_t>((R + 7) / 8);
    uint8_t* bm = plan::grow(w.bm, bmb);
    if (bmb) std::memset(bm, 0, bmb);
    for (size_t i = 0; i < loc.k; ++i) baseline::set_bit(bm, static_cast<uint64_t>(loc.keys[i]));
    {
      Phase ph(*this, "support");
      if (comm_.size() > 1) comm_.allreduce_or(bm, bmb);
    }
    baseline::dense_with_support_to_sparse(buf, bm, spec_, *sparse_out);
  }

 private:
  std::shared_ptr<Workspace> ws_;
};

}  // namespace

std::unique_ptr<SparseAllreduce> make_dense_native(Communicator& c, const TensorSpec& s, const SchemeOptions& o) {
  return std::make_unique<DenseNative>(c, s, o);
}

}  // namespace zen
