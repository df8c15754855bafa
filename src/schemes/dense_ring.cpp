// Dense baseline: bandwidth-optimal ring reduce-scatter + ring allgather over Communicator::sendrecv
// (chunks split by ring_chunk_bytes), in the plan's own N-value buffer (copied to the caller's dense
// output at the end). For a sparse result the support (union of the inputs) travels as an R-bit
// presence bitmap ring-ORed the same way. See docs/algorithms.md, "dense". A plan: no steady-state
// allocation.
#include <cstring>

#include "baseline_util.hpp"
#include "plan_util.hpp"
#include "scheme_row.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

struct Workspace : plan::DenseWorkspace {
  baseline::RingScratch ring;
};

class DenseRing : public plan::Typed<DenseRing, Workspace> {
 public:
  DenseRing(Communicator& c, const TensorSpec& s, const SchemeOptions& o) : Typed(c, s, o) {}
  static constexpr const char* kName = "dense";

 private:
  friend plan::Access;

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

};

void dense_ring_traffic(model::TrafficBuilder& b) {
  const int n = b.n;
  const uint64_t N = b.N, vs = b.vs;
  b.t.encoding = "dense";
  if (n > 1) {
    const uint64_t S = N * vs;
    model::PhaseTraffic& rs = b.phase("reduce_scatter", b.nm1, b.nm1);
    for (int r = 0; r < n; ++r) {
      rs.sent[static_cast<size_t>(r)] = S - ring_chunk_bytes(N, vs, n, r);
      rs.recv[static_cast<size_t>(r)] = S - ring_chunk_bytes(N, vs, n, (r + n - 1) % n);
    }
    model::PhaseTraffic& ag = b.phase("allgather", b.nm1, b.nm1);
    for (int r = 0; r < n; ++r) {
      ag.sent[static_cast<size_t>(r)] = S - ring_chunk_bytes(N, vs, n, (r + 1) % n);
      ag.recv[static_cast<size_t>(r)] = S - ring_chunk_bytes(N, vs, n, r);
    }
  } else {
    b.phase("reduce_scatter", 0, 0);
    b.phase("allgather", 0, 0);
  }
  if (b.p.sparse_out) b.ring(b.phase("support", 2 * b.nm1, 2 * b.nm1), b.Rb, 1, true);
}

double dense_work(const model::Problem& p, const model::Counts& c, size_t r) {
  return static_cast<double>(c.k[r]) + static_cast<double>(p.rows);  // densify + reduce every row
}

}  // namespace

namespace detail {
extern const SchemeRow dense_ring_row{DenseRing::kName, plan::factory<DenseRing>, dense_ring_traffic, dense_work, /*auto_position=*/detail::kNotAuto, detail::kDense};
}  // namespace detail

}  // namespace zen
