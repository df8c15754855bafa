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
#include "owner_stage.hpp"
#include "plan_util.hpp"
#include "zen/encode/bitmap.hpp"
#include "zen/encode/elias_fano.hpp"
#include "zen/encode/coo.hpp"
#include "zen/error.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

struct OwnerMeta {
  uint64_t result_rows;
  uint64_t pushed_rows;
  uint64_t encoding;  // plan::kEncCoo / kEncBitmap / kEncEf
};

struct Workspace {
  plan::Coalescer co;
  std::vector<uint64_t> scount, rcount, pushed, results;
  std::vector<size_t> first, sb, sd, rb, rd, pb, pd;
  std::vector<uint8_t> senc, renc;  // push encoding per peer (sent / received)
  std::vector<size_t> sib, rib;     // index-part bytes of each push segment
  std::vector<uint8_t> sbuf, rbuf, all, rkeys;
  std::vector<const uint8_t*> rseg;  // start of each received push segment (the own one in sbuf)
  std::vector<plan::KV> kv;  // dense output: (row, value offset) of every result row
  plan::OwnerState owner;
  std::vector<plan::Segment> segs;
  std::vector<OwnerMeta> meta;
  OwnerMeta mine{};
};

class SparsePS final : public SparseAllreduce {
 public:
  ~SparsePS() override { quiesce(); }  // pending non-blocking calls finish before the members go
  SparsePS(Communicator& c, const TensorSpec& s, const SchemeOptions& o) : SparseAllreduce(c, s, o), ws_(std::make_shared<Workspace>()) {
    R_ = s.dense_len / s.row_width;
    wire_ = encode::wire_index_type(range(0));
    holder_ = ws_;
  }
  const char* name() const override { return "sparse_ps"; }

 protected:
  void execute(const SparseView& in, SparseTensor* sparse_out, void* dense_out) override {
    dispatch_dtype(spec_.dtype, [&](auto tag) { run_typed<decltype(tag)>(in, sparse_out, dense_out); });
  }

 private:
  template <typename T>
  void run_typed(const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
    Workspace& w = *ws_;
    detail::ThreadPool& tp = pool();
    const int n = comm_.size(), me = comm_.rank();
    const size_t un = static_cast<size_t>(n);
    const size_t D = spec_.row_width, vs = sizeof(T), rowb = D * vs;
    const size_t isz = index_size(wire_);
    const plan::Coalesced loc = w.co.run(in, spec_, true, &tp);  // sorted: owner ranges are contiguous

    // Split the sorted local rows by owner range.
    w.scount.resize(un);
    w.rcount.resize(un);
    w.first.resize(un + 1);
    {
      size_t i = 0;
      for (int o = 0; o < n; ++o) {
        w.first[o] = i;
        i = static_cast<size_t>(std::lower_bound(loc.keys + i, loc.keys + loc.k, static_cast<int64_t>(lo(o + 1))) - loc.keys);
        w.scount[o] = i - w.first[o];
      }
      w.first[un] = i;
    }
    {
      Phase ph(*this, "counts");
      comm_.alltoall(w.scount.data(), sizeof(uint64_t), w.rcount.data());
    }
    w.sb.resize(un);
    w.sd.resize(un);
    w.rb.resize(un);
    w.rd.resize(un);
    w.senc.resize(un);
    w.renc.resize(un);
    w.sib.resize(un);
    w.rib.resize(un);
    size_t st = 0, rt = 0;
    double bound = 0;
    for (int p = 0; p < n; ++p) {
      // Keys are sorted already: the push rule picks COO / bitmap / Elias-Fano (own segment: COO).
      w.senc[p] = p == me ? plan::kEncCoo : plan::pick_push_encoding(opt_.push, range(p), w.scount[p], isz, rowb);
      w.renc[p] = p == me ? plan::kEncCoo : plan::pick_push_encoding(opt_.push, range(me), w.rcount[p], isz, rowb);
      w.sib[p] = plan::index_part_bytes(w.senc[p], range(p), w.scount[p], isz);
      w.rib[p] = plan::index_part_bytes(w.renc[p], range(me), w.rcount[p], isz);
      w.sd[p] = st;
      st += w.sib[p] + w.scount[p] * rowb;
      w.sb[p] = p == me ? 0 : w.sib[p] + w.scount[p] * rowb;
      w.rd[p] = rt;
      w.rb[p] = p == me ? 0 : w.rib[p] + w.rcount[p] * rowb;
      rt += w.rb[p];
      if (p != me) bound += static_cast<double>(w.scount[p] * rowb) + encode::log2_binomial(range(p), w.scount[p]) / 8.0;
    }
    report_.push_encoding = plan::encodings_name(w.senc.data(), n, me);
    uint8_t* sbuf = plan::grow(w.sbuf, st);
    uint8_t* rbuf = plan::grow(w.rbuf, rt);
    for (int o = 0; o < n; ++o) {
      uint8_t* seg = sbuf + w.sd[o];
      const uint64_t base = lo(o);
      const int64_t* keys = loc.keys + w.first[o];
      plan::write_index_part(w.senc[o], seg, range(o), w.scount[o], isz,
                             [&](uint64_t k) { return static_cast<uint64_t>(keys[k]) - base; });
      if (w.scount[o]) std::memcpy(seg + w.sib[o], loc.rows + w.first[o] * rowb, w.scount[o] * rowb);
    }
    {
      Phase ph(*this, "push");
      comm_.alltoallv(sbuf, w.sb.data(), w.sd.data(), rbuf, w.rb.data(), w.rd.data());
    }

    // Owner sum over its range (sources in rank order; one rounding).
    const uint64_t m = range(me);
    uint64_t pushed = 0;
    w.segs.resize(un);
    w.rseg.resize(un);
    for (int p = 0; p < n; ++p) {
      w.rseg[p] = p == me ? sbuf + w.sd[me] : rbuf + w.rd[p];
      pushed += w.rcount[p];
    }
    plan::received_segments(n, me, w.rseg.data(), w.rcount.data(), w.renc.data(), w.rib.data(), m, isz, w.rkeys,
                            w.segs.data(), "sparse_ps");
    const uint64_t K = plan::owner_accumulate<T>(w.owner, w.segs.data(), n, isz, D, m, tp, me, "sparse_ps");
    const uint8_t enc = plan::pick_encoding(opt_.pull, m, K, isz);
    w.mine = OwnerMeta{K, pushed, enc};
    bound += static_cast<double>(n - 1) * (static_cast<double>(K * rowb) + encode::log2_binomial(m, K) / 8.0);
    report_.bound_bytes = bound;
    w.meta.resize(un);
    {
      Phase ph(*this, "meta");
      comm_.allgather(&w.mine, sizeof(OwnerMeta), w.meta.data());
    }
    w.pb.resize(un);
    w.pd.resize(un);
    w.pushed.resize(un);
    w.results.resize(un);
    size_t pt = 0;
    bool same = true;
    for (int o = 0; o < n; ++o) {
      const uint8_t eo = static_cast<uint8_t>(std::min<uint64_t>(w.meta[o].encoding, 255));
      w.pb[o] = plan::index_part_bytes(eo, range(o), w.meta[o].result_rows, isz) + w.meta[o].result_rows * rowb;
      w.pd[o] = pt;
      pt += w.pb[o];
      w.pushed[o] = w.meta[o].pushed_rows;
      w.results[o] = w.meta[o].result_rows;
      same = same && w.meta[o].encoding == w.meta[0].encoding;
    }
    report_.push_imbalance = baseline::imbalance(w.pushed);
    report_.pull_imbalance = baseline::imbalance(w.results);
    report_.encoding = same ? plan::encoding_name(static_cast<uint8_t>(w.meta[0].encoding)) : "mixed";
    report_.global_rows = 0;
    for (int o = 0; o < n; ++o) report_.global_rows += w.meta[o].result_rows;
    uint8_t* all = plan::grow(w.all, pt);
    plan::owner_write<T>(w.owner, isz, D, enc, all + w.pd[me], tp);
    {
      Phase ph(*this, "pull");
      comm_.allgatherv(all + w.pd[me], w.pb[me], all, w.pb.data(), w.pd.data());
    }

    // Decode: owners in range order, positions ascending -> globally sorted rows.
    uint64_t total = 0;
    for (int o = 0; o < n; ++o) {
      const uint8_t eo = static_cast<uint8_t>(std::min<uint64_t>(w.meta[o].encoding, 255));
      plan::check_pull_message(all + w.pd[o], eo, range(o), w.meta[o].result_rows, isz, me, o, "sparse_ps");
      total += w.meta[o].result_rows;
    }
    report_.result_nnz = total;
    if (sparse_out) sparse_out->resize(total);
    else if (spec_.dense_len) plan::parallel_zero(dense_out, spec_.dense_len * vs, &tp);
    if (!sparse_out) plan::grow(w.kv, total);
    uint64_t out_k = 0;
    for (int o = 0; o < n; ++o) {
      const uint8_t* msg = all + w.pd[o];
      const uint8_t bm = static_cast<uint8_t>(w.meta[o].encoding);
      const uint64_t Ko = w.meta[o].result_rows, base = lo(o);
      const uint8_t* v = msg + plan::index_part_bytes(bm, range(o), Ko, isz);
      if (sparse_out) {
        int64_t* oi = sparse_out->indices.data() + out_k;
        plan::for_positions(
            msg, bm, range(o), Ko, isz, [&](uint64_t q, uint64_t k) { oi[k] = static_cast<int64_t>(base + q); }, me, o,
            "sparse_ps");
        if (Ko) std::memcpy(sparse_out->values.data() + out_k * rowb, v, Ko * rowb);
      } else {
        // (row, offset of its values in the pull buffer), scattered below by fixed-width copies.
        plan::KV* kv = w.kv.data() + out_k;
        const uint64_t voff = static_cast<uint64_t>(v - all);
        plan::for_positions(
            msg, bm, range(o), Ko, isz, [&](uint64_t q, uint64_t k) { kv[k] = plan::KV{base + q, voff + k * rowb}; }, me, o,
            "sparse_ps");
      }
      out_k += Ko;
    }
    if (!sparse_out) {
      auto* d = static_cast<uint8_t*>(dense_out);
      const plan::KV* kv = w.kv.data();
      tp.parallel_for(total, size_t{1} << 13, [&](size_t b, size_t e, int) { plan::scatter_rows(d, all, kv, b, e, rowb); });
    }
  }

  uint64_t lo(int o) const { return baseline::range_begin(R_, comm_.size(), o); }
  uint64_t range(int o) const { return lo(o + 1) - lo(o); }

  uint64_t R_ = 0;
  IndexType wire_ = IndexType::I32;
  std::shared_ptr<Workspace> ws_;
};

}  // namespace

std::unique_ptr<SparseAllreduce> make_sparse_ps(Communicator& c, const TensorSpec& s, const SchemeOptions& o) {
  return std::make_unique<SparsePS>(c, s, o);
}

}  // namespace zen
