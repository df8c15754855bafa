// Sparse parameter-server baseline (Parallax / BytePS style): the R rows are split into n contiguous
// near-equal key ranges, owner o serving range o. Push: alltoall of entry counts, alltoallv of COO or
// (sorted keys, IndexEncoding push rule) Elias-Fano / bitmap index parts
// + rows (keys relative to the range start, wire width from the largest range) to the range owner;
// the owner sums (rank order, one rounding). Pull: allgather of (result rows, pushed rows, encoding)
// then allgatherv of every owner's result as COO, a range bitmap or Elias-Fano + values (PullEncoding::Auto
// picks the smaller per owner). Skew concentrates load on the owner of the hot range.
// See docs/algorithms.md, "sparse_ps". A plan: its workspace only grows (no steady-state allocation).
#include <algorithm>
#include <cstring>

#include "baseline_util.hpp"
#include "owner_exchange.hpp"
#include "owner_stage.hpp"
#include "plan_util.hpp"
#include "scheme_row.hpp"
#include "zen/encode/bitmap.hpp"
#include "zen/encode/elias_fano.hpp"
#include "zen/encode/coo.hpp"
#include "zen/error.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

// The exchange's buffers (owner_exchange.hpp) and what only sparse_ps needs.
struct Workspace : plan::OwnerExchange {
  plan::Coalescer co;
  std::vector<size_t> first;  // first local (sorted) row of each owner's range
  std::vector<plan::KV> kv;   // dense output: (row, value offset) of every result row
};

using plan::StageCtx;

class SparsePS : public plan::Typed<SparsePS, Workspace, plan::OwnerExchangePlan> {
 public:
  SparsePS(Communicator& c, const TensorSpec& s, const SchemeOptions& o)
      : Typed(c, s, o), R_(s.dense_len / s.row_width) {
    // Partition policy: owner o holds the contiguous key range [lo(o), lo(o + 1)), position = row - lo(o).
    std::vector<uint64_t> sets(static_cast<size_t>(c.size()));
    for (size_t o = 0; o < sets.size(); ++o) sets[o] = range(static_cast<int>(o));
    set_owner_sets(std::move(sets));
  }
  static constexpr const char* kName = "sparse_ps";

 private:
  friend plan::Access;

  // One call, stage by stage (the shared stages: owner_exchange.hpp).
  template <typename T>
  void run_typed(const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
    const StageCtx c = stage_ctx(sizeof(T));
    // 1. Partition: the local rows, sorted and coalesced, split by owner range (the push counts).
    const plan::Coalesced loc = partition(c, in);
    // 2. Layout: exchange the counts, pick each segment's index code by the push rule, size buffers.
    layout_push(c);
    // 3. Encode: each owner's segment [index part][value rows] (keys relative to the range start).
    encode_push(c, loc);
    // 4. Push: alltoallv of the segments.
    push(c);
    // 5. Reduce: owner sum over its range, sources in rank order (one rounding).
    const uint64_t K = reduce<T>(c, false);
    // 6. Publish (K, pushed rows, pull encoding) and lay out the pull buffer.
    publish_meta(c, K);
    // 7. Write this owner's pull message in place.
    write_pull<T>(c);
    // 8. Pull: allgatherv of every owner's message, in place.
    pull(c);
    // 9. Decode: owners in range order, positions ascending -> globally sorted rows.
    decode(c, sparse_out, dense_out);
  }

  plan::Coalesced partition(const StageCtx& c, const SparseView& in) {
    Workspace& w = *ws_;
    const plan::Coalesced loc = w.co.run(in, spec_, true, &c.tp);  // sorted: owner ranges are contiguous
    w.scount.resize(c.un);
    w.first.resize(c.un + 1);
    size_t i = 0;
    for (int o = 0; o < c.n; ++o) {
      w.first[o] = i;
      i = static_cast<size_t>(std::lower_bound(loc.keys + i, loc.keys + loc.k, static_cast<int64_t>(lo(o + 1))) - loc.keys);
      w.scount[o] = i - w.first[o];
    }
    w.first[c.un] = i;
    return loc;
  }

  void encode_push(const StageCtx& c, const plan::Coalesced& loc) {
    Workspace& w = *ws_;
    Phase pe(*this, "encode");
    for (int o = 0; o < c.n; ++o) {
      uint8_t* seg = w.sbuf.data() + w.sdispl[o];
      const uint64_t base = lo(o);
      const int64_t* keys = loc.keys + w.first[o];
      wire::write_index_part(w.senc[o], seg, range(o), w.scount[o], c.isz,
                             [&](uint64_t k) { return static_cast<uint64_t>(keys[k]) - base; });
      if (w.scount[o]) std::memcpy(seg + w.sib[o], loc.rows + w.first[o] * c.rb, w.scount[o] * c.rb);
    }
  }

  void decode(const StageCtx& c, SparseTensor* sparse_out, void* dense_out) {
    Workspace& w = *ws_;
    Phase ph(*this, "decode");
    const uint64_t total = open_pulled(c);
    const size_t rb = c.rb;
    const uint8_t* all = w.all.data();
    if (sparse_out) sparse_out->resize(total);
    else if (spec_.dense_len) plan::parallel_zero(dense_out, spec_.dense_len * c.vs, &c.tp);
    if (!sparse_out) plan::grow(w.kv, total);
    for (int o = 0; o < c.n; ++o) {
      const uint8_t* msg = all + w.pdispl[o];
      const uint8_t bm = static_cast<uint8_t>(w.meta[o].encoding);
      const uint64_t Ko = w.meta[o].result_rows, base = lo(o), out_k = w.owner_base[o];
      if (sparse_out) {
        int64_t* oi = sparse_out->indices.data() + out_k;
        wire::for_positions(
            msg, bm, range(o), Ko, c.isz, [&](uint64_t q, uint64_t k) { oi[k] = static_cast<int64_t>(base + q); }, c.me, o,
            c.scheme);
        if (Ko) std::memcpy(sparse_out->values.data() + out_k * rb, all + w.val_off[o], Ko * rb);
      } else {
        // (row, offset of its values in the pull buffer), scattered below by fixed-width copies.
        plan::KV* kv = w.kv.data() + out_k;
        const uint64_t voff = w.val_off[o];
        wire::for_positions(
            msg, bm, range(o), Ko, c.isz, [&](uint64_t q, uint64_t k) { kv[k] = plan::KV{base + q, voff + k * rb}; }, c.me,
            o, c.scheme);
      }
    }
    if (!sparse_out) {
      auto* d = static_cast<uint8_t*>(dense_out);
      const plan::KV* kv = w.kv.data();
      c.tp.parallel_for(total, size_t{1} << 13, [&](size_t b, size_t e, int) { plan::scatter_rows(d, all, kv, b, e, rb); });
    }
  }

  uint64_t lo(int o) const { return baseline::range_begin(R_, comm_.size(), o); }
  uint64_t range(int o) const { return lo(o + 1) - lo(o); }

  uint64_t R_ = 0;
};

void sparse_ps_traffic(model::TrafficBuilder& b) { plan::owner_exchange_traffic(b, plan::Partition::KeyRange); }

double sparse_ps_work(const model::Problem& p, const model::Counts& c, size_t r) {
  return plan::owner_exchange_work(p, c, r, plan::Partition::KeyRange);
}

}  // namespace

namespace detail {
extern const SchemeRow sparse_ps_row{SparsePS::kName, plan::factory<SparsePS>, sparse_ps_traffic, sparse_ps_work, /*auto_position=*/3, detail::kSparse};
}  // namespace detail

}  // namespace zen
