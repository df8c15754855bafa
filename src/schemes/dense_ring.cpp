// Dense baseline: bandwidth-optimal ring reduce-scatter + ring allgather over Communicator::sendrecv
// (chunks split by ring_chunk_bytes). For a sparse result the support (union of the inputs) travels
// as an R-bit presence bitmap ring-ORed the same way. See docs/algorithms.md, "dense".
#include <cstring>

#include "baseline_util.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

class DenseRing final : public SparseAllreduce {
 public:
  DenseRing(Communicator& c, const TensorSpec& s, const SchemeOptions& o) : SparseAllreduce(c, s, o) {}
  const char* name() const override { return "dense"; }

 protected:
  void execute(const SparseView& in, SparseTensor* sparse_out, void* dense_out) override {
    dispatch_dtype(spec_.dtype, [&](auto tag) { run_typed<decltype(tag)>(in, sparse_out, dense_out); });
  }

 private:
  template <typename T>
  void run_typed(const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
    const uint64_t N = spec_.dense_len, R = N / spec_.row_width;
    report_.encoding = "dense";
    baseline::Local loc = baseline::coalesce_input(in, spec_);
    std::vector<uint8_t> scratch;
    uint8_t* buf = baseline::densify(loc, spec_, dense_out, scratch);
    {
      Phase ph(*this, "reduce_scatter");
      baseline::ring_reduce_scatter(
          comm_, buf, N, sizeof(T),
          [](uint8_t* d, const uint8_t* s, size_t k) {
            baseline::add_into(reinterpret_cast<T*>(d), reinterpret_cast<const T*>(s), k);
          },
          1);
    }
    {
      Phase ph(*this, "allgather");
      baseline::ring_allgather(comm_, buf, N, sizeof(T), 1);
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

std::unique_ptr<SparseAllreduce> make_dense_ring(Communicator& c, const TensorSpec& s, const SchemeOptions& o) {
  return std::make_unique<DenseRing>(c, s, o);
}

}  // namespace zen
