// Sparse parameter-server baseline (Parallax / BytePS style): the R rows are split into n contiguous
// near-equal key ranges, owner o serving range o. Push: alltoall of entry counts, alltoallv of COO
// (keys relative to the owner's range start, wire width from the largest range) to the range owner;
// the owner sums (rank order, one rounding). Pull: allgather of (result rows, pushed rows, encoding)
// then allgatherv of every owner's result as COO or as a range bitmap + values (PullEncoding::Auto
// picks the smaller per owner). Skew concentrates load on the owner of the hot range.
// See docs/algorithms.md, "sparse_ps". A plan: its workspace only grows (no steady-state allocation).
#include <algorithm>
#include <cstring>

#include "baseline_util.hpp"
#include "owner_stage.hpp"
#include "plan_util.hpp"
#include "zen/encode/bitmap.hpp"
#include "zen/encode/coo.hpp"
#include "zen/error.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

struct OwnerMeta {
  uint64_t result_rows;
  uint64_t pushed_rows;
  uint64_t encoding;  // 0 = COO, 1 = range bitmap
};

struct Workspace {
  plan::Coalescer co;
  std::vector<uint64_t> scount, rcount, pushed, results;
  std::vector<size_t> first, sb, sd, rb, rd, pb, pd;
  std::vector<uint8_t> sbuf, rbuf, all;
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
    const size_t isz = index_size(wire_), eb = isz + rowb;
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
    size_t st = 0, rt = 0;
    for (int p = 0; p < n; ++p) {
      w.sd[p] = st;
      st += w.scount[p] * eb;
      w.sb[p] = p == me ? 0 : w.scount[p] * eb;
      w.rd[p] = rt;
      w.rb[p] = p == me ? 0 : w.rcount[p] * eb;
      rt += w.rb[p];
    }
    uint8_t* sbuf = plan::grow(w.sbuf, st);
    uint8_t* rbuf = plan::grow(w.rbuf, rt);
    for (int o = 0; o < n; ++o) {
      uint8_t* seg = sbuf + w.sd[o];
      const uint64_t base = lo(o);
      for (size_t k = 0; k < w.scount[o]; ++k) plan::store_key(seg, k, isz, static_cast<uint64_t>(loc.keys[w.first[o] + k]) - base);
      if (w.scount[o]) std::memcpy(seg + w.scount[o] * isz, loc.rows + w.first[o] * rowb, w.scount[o] * rowb);
    }
    {
      Phase ph(*this, "push");
      comm_.alltoallv(sbuf, w.sb.data(), w.sd.data(), rbuf, w.rb.data(), w.rd.data());
    }

    // Owner sum over its range (sources in rank order; one rounding).
    const uint64_t m = range(me);
    uint64_t pushed = 0;
    w.segs.resize(un);
    for (int p = 0; p < n; ++p) {
      w.segs[p] = plan::Segment{p == me ? sbuf + w.sd[me] : rbuf + w.rd[p], w.rcount[p]};
      pushed += w.rcount[p];
    }
    const uint64_t K = plan::owner_accumulate<T>(w.owner, w.segs.data(), n, isz, D, m, tp, me, "sparse_ps");
    const size_t bitmap_b = encode::bitmap_bytes(m);
    const bool use_bitmap = opt_.pull == PullEncoding::Bitmap || (opt_.pull == PullEncoding::Auto && bitmap_b < K * isz);

    w.mine = OwnerMeta{K, pushed, use_bitmap ? 1u : 0u};
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
    int nbitmap = 0;
    for (int o = 0; o < n; ++o) {
      w.pb[o] = (w.meta[o].encoding ? encode::bitmap_bytes(range(o)) : w.meta[o].result_rows * isz) + w.meta[o].result_rows * rowb;
      w.pd[o] = pt;
      pt += w.pb[o];
      w.pushed[o] = w.meta[o].pushed_rows;
      w.results[o] = w.meta[o].result_rows;
      nbitmap += w.meta[o].encoding ? 1 : 0;
    }
    report_.push_imbalance = baseline::imbalance(w.pushed);
    report_.pull_imbalance = baseline::imbalance(w.results);
    report_.encoding = nbitmap == 0 ? "coo" : (nbitmap == n ? "bitmap" : "mixed");
    report_.global_rows = 0;
    for (int o = 0; o < n; ++o) report_.global_rows += w.meta[o].result_rows;
    uint8_t* all = plan::grow(w.all, pt);
    plan::owner_write<T>(w.owner, isz, D, use_bitmap, all + w.pd[me], tp);
    {
      Phase ph(*this, "pull");
      comm_.allgatherv(all + w.pd[me], w.pb[me], all, w.pb.data(), w.pd.data());
    }

    // Decode: owners in range order, positions ascending -> globally sorted rows.
    uint64_t total = 0;
    for (int o = 0; o < n; ++o) {
      const bool bm = w.meta[o].encoding != 0;
      plan::check_pull_message(all + w.pd[o], bm, range(o), w.meta[o].result_rows, isz, me, o, "sparse_ps");
      total += w.meta[o].result_rows;
    }
    report_.result_nnz = total;
    if (sparse_out) sparse_out->resize(total);
    else if (spec_.dense_len) plan::parallel_zero(dense_out, spec_.dense_len * vs, &tp);
    uint64_t out_k = 0;
    for (int o = 0; o < n; ++o) {
      const uint8_t* msg = all + w.pd[o];
      const bool bm = w.meta[o].encoding != 0;
      const uint64_t Ko = w.meta[o].result_rows, base = lo(o);
      const uint8_t* v = msg + (bm ? encode::bitmap_bytes(range(o)) : Ko * isz);
      if (sparse_out) {
        int64_t* oi = sparse_out->indices.data() + out_k;
        plan::for_positions(msg, bm, range(o), Ko, isz, [&](uint64_t q, uint64_t k) { oi[k] = static_cast<int64_t>(base + q); });
        if (Ko) std::memcpy(sparse_out->values.data() + out_k * rowb, v, Ko * rowb);
      } else {
        auto* d = static_cast<uint8_t*>(dense_out);
        plan::for_positions(msg, bm, range(o), Ko, isz,
                            [&](uint64_t q, uint64_t k) { std::memcpy(d + (base + q) * rowb, v + k * rowb, rowb); });
      }
      out_k += Ko;
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
