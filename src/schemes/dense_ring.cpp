// Dense baseline: bandwidth-optimal ring reduce-scatter + ring allgather over Communicator::sendrecv
// (chunks split by ring_chunk_bytes), in the plan's own N-value buffer (copied to the caller's dense
// output at the end). For a sparse result the support (union of the inputs) travels as an R-bit
// presence bitmap ring-ORed the same way. See docs/algorithms.md, "dense". A plan: no steady-state
// allocation.
#include <cstring>

#include "baseline_util.hpp"
#include "plan_util.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

struct Workspace : plan::DenseWorkspace {
  baseline::RingScratch ring;
};

class DenseRing : public SparseAllreduce {
 public:
  DenseRing(Communicator& c, const TensorSpec& s, const SchemeOptions& o) : SparseAllreduce(c, s, o), ws_(std::make_shared<Workspace>()) {
    holder_ = ws_;
  }
  const char* name() const override { return "dense"; }

 protected:
  void execute(const SparseView& in, SparseTensor* sparse_out, void* dense_out) override {
    dispatch_dtype(spec_.dtype, [&](auto tag) { run_typed<decltype(tag)>(in, sparse_out, dense_out); });
  }

 private:
  template <typename T>
  void run_typed(const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
    Workspace& w = *ws_;
    detail::ThreadPool& tp = pool();
    const uint64_t N = spec_.dense_len, R = N / spec_.row_width;
    report_.encoding = "dense";
    const plan::Coalesced loc = w.co.run(in, spec_, false, &tp);
    uint8_t* buf = plan::grow(w.dense, N * sizeof(T));
    plan::densify(loc, spec_, buf, &tp);
    {
      Phase ph(*this, "reduce_scatter");
      baseline::ring_reduce_scatter(
          comm_, buf, N, sizeof(T),
          [](uint8_t* d, const uint8_t* s, size_t k) {
            baseline::add_into(reinterpret_cast<T*>(d), reinterpret_cast<const T*>(s), k);
          },
          1, w.ring);
    }
    {
      Phase ph(*this, "allgather");
      baseline::ring_allgather(comm_, buf, N, sizeof(T), 1, w.ring);
    }
    if (!sparse_out) {
      plan::parallel_copy(dense_out, buf, N * sizeof(T), &tp);
      return;
    }
    const size_t bmb = static_cast<size_t>((R + 7) / 8);
    uint8_t* bm = plan::grow(w.bm, bmb);
    if (bmb) std::memset(bm, 0, bmb);
    for (size_t i = 0; i < loc.k; ++i) baseline::set_bit(bm, static_cast<uint64_t>(loc.keys[i]));
    {
      Phase ph(*this, "support");
      baseline::ring_or(comm_, bm, bmb, 2, w.ring);
    }
    baseline::dense_with_support_to_sparse(buf, bm, spec_, *sparse_out);
  }

  std::shared_ptr<Workspace> ws_;
};

}  // namespace

std::unique_ptr<SparseAllreduce> make_dense_ring(Communicator& c, const TensorSpec& s, const SchemeOptions& o) {
  return plan::make_plan<DenseRing>(c, s, o);
}

}  // namespace zen
