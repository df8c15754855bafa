// Dense baseline through the backend's native allreduce (MPI_Allreduce, ncclAllReduce, loopback).
// For a sparse result the support travels as an R-bit presence bitmap ring-ORed over sendrecv
// (the native allreduce has no OR on bytes). See docs/algorithms.md, "dense_native".
#include <cstring>

#include "baseline_util.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

class DenseNative final : public SparseAllreduce {
 public:
  DenseNative(Communicator& c, const TensorSpec& s, const SchemeOptions& o) : SparseAllreduce(c, s, o) {}
  const char* name() const override { return "dense_native"; }

 protected:
  void execute(const SparseView& in, SparseTensor* sparse_out, void* dense_out) override {
    const uint64_t N = spec_.dense_len, R = N / spec_.row_width;
    report_.encoding = "dense";
    baseline::Local loc = baseline::coalesce_input(in, spec_);
    std::vector<uint8_t> scratch;
    uint8_t* buf = baseline::densify(loc, spec_, dense_out, scratch);
    {
      Phase ph(*this, "allreduce");
      if (comm_.size() > 1) comm_.allreduce(buf, N, spec_.dtype, ReduceOp::Sum);
    }
    if (!sparse_out) return;
    std::vector<uint8_t> bm((R + 7) / 8, 0);
    for (int64_t k : loc.keys) baseline::set_bit(bm.data(), static_cast<uint64_t>(k));
    {
      Phase ph(*this, "support");
      baseline::ring_or(comm_, bm.data(), bm.size(), 2);
    }
    baseline::dense_with_support_to_sparse(buf, bm.data(), spec_, *sparse_out);
  }
};

}  // namespace

std::unique_ptr<SparseAllreduce> make_dense_native(Communicator& c, const TensorSpec& s, const SchemeOptions& o) {
  return std::make_unique<DenseNative>(c, s, o);
}

}  // namespace zen
