// AGsparse baseline (PyTorch-Gloo sparse allreduce, Horovod IndexedSlices): allgather of the
// per-rank entry counts, allgatherv of every rank's coalesced COO (wire index width from N/D),
// then every rank sorts and sums all n contributions locally (rank order, one rounding).
// See docs/algorithms.md, "allgather".
#include <cstring>

#include "baseline_util.hpp"
#include "zen/encode/coo.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

class Allgather final : public SparseAllreduce {
 public:
  Allgather(Communicator& c, const TensorSpec& s, const SchemeOptions& o)
      : SparseAllreduce(c, s, o), wire_(encode::wire_index_type(s.dense_len / s.row_width)) {}
  const char* name() const override { return "allgather"; }

 protected:
  void execute(const SparseView& in, SparseTensor* sparse_out, void* dense_out) override {
    const int n = comm_.size();
    const uint64_t R = spec_.dense_len / spec_.row_width;
    report_.encoding = "coo";
    baseline::Local loc = baseline::coalesce_input(in, spec_);
    const uint64_t mine = loc.keys.size();
    std::vector<uint64_t> counts;
    {
      Phase ph(*this, "counts");
      counts = comm_.allgather_value(mine);
    }
    std::vector<size_t> bytes(n), displ(n);
    size_t total = 0;
    for (int p = 0; p < n; ++p) {
      bytes[p] = encode::coo_bytes(counts[p], spec_.row_width, spec_.dtype, wire_);
      displ[p] = total;
      total += bytes[p];
    }
    std::vector<uint8_t> msg(bytes[comm_.rank()]);
    encode::coo_encode(loc.keys.data(), loc.vals.data(), mine, spec_.row_width, spec_.dtype, wire_, msg.data());
    std::vector<uint8_t> all(total);
    {
      Phase ph(*this, "allgatherv");
      comm_.allgatherv(msg.data(), msg.size(), all.data(), bytes.data(), displ.data());
    }
    std::vector<int64_t> keys;
    std::vector<uint8_t> vals;
    keys.reserve(total);
    for (int p = 0; p < n; ++p)
      encode::coo_decode(all.data() + displ[p], bytes[p], R, spec_.row_width, spec_.dtype, wire_, keys, vals);
    all.clear();
    all.shrink_to_fit();
    if (sparse_out) {
      detail::write_sparse_result(std::move(keys), std::move(vals), spec_, *sparse_out);
    } else {
      SparseTensor t(spec_.dense_len, spec_.dtype, spec_.row_width);
      detail::write_sparse_result(std::move(keys), std::move(vals), spec_, t);
      detail::sparse_to_dense(t, dense_out);
    }
  }

 private:
  IndexType wire_;
};

}  // namespace

std::unique_ptr<SparseAllreduce> make_allgather(Communicator& c, const TensorSpec& s, const SchemeOptions& o) {
  return std::make_unique<Allgather>(c, s, o);
}

}  // namespace zen
