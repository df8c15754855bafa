// Sparse parameter-server baseline (Parallax / BytePS style): the R rows are split into n contiguous
// near-equal key ranges, owner o serving range o. Push: alltoall of entry counts, alltoallv of COO
// (keys relative to the owner's range start, wire width from the largest range) to the range owner;
// the owner sums (rank order, one rounding). Pull: allgather of (result rows, pushed rows, encoding)
// then allgatherv of every owner's result as COO or as a range bitmap + values (PullEncoding::Auto
// picks the smaller per owner). Skew concentrates load on the owner of the hot range.
// See docs/algorithms.md, "sparse_ps".
#include <cstring>

#include "baseline_util.hpp"
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

class SparsePS final : public SparseAllreduce {
 public:
  SparsePS(Communicator& c, const TensorSpec& s, const SchemeOptions& o) : SparseAllreduce(c, s, o) {
    R_ = s.dense_len / s.row_width;
    wire_ = encode::wire_index_type(range(0));
  }
  const char* name() const override { return "sparse_ps"; }

 protected:
  void execute(const SparseView& in, SparseTensor* sparse_out, void* dense_out) override {
    const int n = comm_.size(), me = comm_.rank();
    const size_t rowb = spec_.row_width * dtype_size(spec_.dtype);
    const size_t isz = index_size(wire_), eb = isz + rowb;
    baseline::Local loc = baseline::coalesce_input(in, spec_);

    // Split the sorted local rows by owner range; keys become range-relative.
    std::vector<uint64_t> scount(n, 0), rcount(n, 0);
    std::vector<size_t> first(n + 1, 0);
    {
      size_t i = 0;
      for (int o = 0; o < n; ++o) {
        first[o] = i;
        while (i < loc.keys.size() && static_cast<uint64_t>(loc.keys[i]) < lo(o + 1)) ++i;
        scount[o] = i - first[o];
      }
      first[n] = i;
    }
    {
      Phase ph(*this, "counts");
      rcount = detail::alltoall_counts(comm_, scount);
    }
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t st = 0, rt = 0;
    for (int p = 0; p < n; ++p) {
      sc[p] = scount[p] * eb;
      sd[p] = st;
      st += sc[p];
      rc[p] = rcount[p] * eb;
      rd[p] = rt;
      rt += rc[p];
    }
    std::vector<uint8_t> sbuf(st), rbuf(rt);
    for (int o = 0; o < n; ++o) {
      std::vector<int64_t> rel(scount[o]);
      for (size_t k = 0; k < scount[o]; ++k) rel[k] = loc.keys[first[o] + k] - static_cast<int64_t>(lo(o));
      encode::coo_encode(rel.data(), loc.vals.data() + first[o] * rowb, scount[o], spec_.row_width, spec_.dtype, wire_,
                         sbuf.data() + sd[o]);
    }
    {
      Phase ph(*this, "push");
      comm_.alltoallv(sbuf.data(), sc.data(), sd.data(), rbuf.data(), rc.data(), rd.data());
    }
    sbuf.clear();
    sbuf.shrink_to_fit();

    // Owner sum over its range (stable sort: sources in rank order; one rounding).
    const uint64_t m = range(me);
    std::vector<int64_t> keys;
    std::vector<uint8_t> vals;
    uint64_t pushed = 0;
    for (int p = 0; p < n; ++p) {
      encode::coo_decode(rbuf.data() + rd[p], rc[p], m, spec_.row_width, spec_.dtype, wire_, keys, vals);
      pushed += rcount[p];
    }
    rbuf.clear();
    rbuf.shrink_to_fit();
    detail::sort_and_reduce(keys, vals, spec_.row_width, spec_.dtype);
    const uint64_t K = keys.size();
    const size_t bitmap_b = encode::bitmap_bytes(m);
    const bool use_bitmap =
        opt_.pull == PullEncoding::Bitmap || (opt_.pull == PullEncoding::Auto && bitmap_b < K * isz);

    OwnerMeta mine{K, pushed, use_bitmap ? 1u : 0u};
    std::vector<OwnerMeta> meta;
    {
      Phase ph(*this, "meta");
      meta = comm_.allgather_value(mine);
    }
    std::vector<size_t> pb(n), pd(n);
    size_t pt = 0;
    std::vector<uint64_t> pushed_load(n), result_load(n);
    int nbitmap = 0;
    for (int o = 0; o < n; ++o) {
      pb[o] = (meta[o].encoding ? encode::bitmap_bytes(range(o)) : meta[o].result_rows * isz) + meta[o].result_rows * rowb;
      pd[o] = pt;
      pt += pb[o];
      pushed_load[o] = meta[o].pushed_rows;
      result_load[o] = meta[o].result_rows;
      nbitmap += meta[o].encoding ? 1 : 0;
    }
    report_.push_imbalance = baseline::imbalance(pushed_load);
    report_.pull_imbalance = baseline::imbalance(result_load);
    report_.encoding = nbitmap == 0 ? "coo" : (nbitmap == n ? "bitmap" : "mixed");

    std::vector<uint8_t> msg(pb[me], 0);
    if (use_bitmap) {
      std::vector<uint64_t> pos(keys.begin(), keys.end());
      encode::bitmap_encode(pos.data(), pos.size(), m, msg.data());
      if (K) std::memcpy(msg.data() + bitmap_b, vals.data(), K * rowb);
    } else {
      encode::coo_encode(keys.data(), vals.data(), K, spec_.row_width, spec_.dtype, wire_, msg.data());
    }
    std::vector<uint8_t> all(pt);
    {
      Phase ph(*this, "pull");
      comm_.allgatherv(msg.data(), msg.size(), all.data(), pb.data(), pd.data());
    }

    // Decode: owners in range order, positions ascending -> globally sorted rows.
    if (dense_out) std::memset(dense_out, 0, spec_.dense_len * dtype_size(spec_.dtype));
    std::vector<int64_t> out_keys;
    std::vector<uint8_t> out_vals;
    for (int o = 0; o < n; ++o) {
      const uint8_t* p = all.data() + pd[o];
      const uint64_t K_o = meta[o].result_rows;
      std::vector<int64_t> rel;
      const uint8_t* v = nullptr;
      if (meta[o].encoding) {
        std::vector<uint64_t> pos;
        encode::bitmap_decode(p, range(o), pos);
        ZEN_CHECK_CODE(pos.size() == K_o, Result::InvalidUsage,
                       "rank " + std::to_string(me) + " sparse_ps pull: owner " + std::to_string(o) + " bitmap has " +
                           std::to_string(pos.size()) + " bits set but announced " + std::to_string(K_o) + " rows");
        rel.assign(pos.begin(), pos.end());
        v = p + encode::bitmap_bytes(range(o));
      } else {
        std::vector<uint8_t> ignored;
        std::vector<int64_t> k;
        // Keys only: decode the key part by treating the message as K_o entries.
        encode::coo_decode(p, K_o * eb, range(o) ? range(o) : 1, spec_.row_width, spec_.dtype, wire_, k, ignored);
        rel = std::move(k);
        v = p + K_o * isz;
      }
      for (size_t k = 0; k < rel.size(); ++k) {
        const int64_t g = rel[k] + static_cast<int64_t>(lo(o));
        if (dense_out) {
          std::memcpy(static_cast<uint8_t*>(dense_out) + static_cast<size_t>(g) * rowb, v + k * rowb, rowb);
        } else {
          out_keys.push_back(g);
          out_vals.insert(out_vals.end(), v + k * rowb, v + (k + 1) * rowb);
        }
      }
    }
    if (sparse_out) {
      sparse_out->indices = std::move(out_keys);
      sparse_out->values = std::move(out_vals);
    }
  }

 private:
  uint64_t lo(int o) const { return baseline::range_begin(R_, comm_.size(), o); }
  uint64_t range(int o) const { return lo(o + 1) - lo(o); }

  uint64_t R_ = 0;
  IndexType wire_ = IndexType::I32;
};

}  // namespace

std::unique_ptr<SparseAllreduce> make_sparse_ps(Communicator& c, const TensorSpec& s, const SchemeOptions& o) {
  return std::make_unique<SparsePS>(c, s, o);
}

}  // namespace zen
