// OmniReduce baseline (Fei et al., SIGCOMM'21): block-sparse. The R rows are cut into blocks of
// BR = max(1, block_size / D) rows (block_size = 256 values by default); the NB = ceil(R / BR)
// blocks are split into n contiguous near-equal ranges, owner o aggregating range o. Push: every
// rank sends each owner the bitmap of its non-zero blocks in that range (1 = present; static size,
// first alltoallv), then the present blocks' values (second alltoallv, sizes known from the
// bitmaps). With a sparse result each block is preceded by a BR-bit row-presence mask so the support
// stays the union of the inputs (dense results skip the masks). Owners sum (rank order, one
// rounding) and every owner's result travels back with the same encoding by two allgathervs.
// See docs/algorithms.md, "omnireduce".
#include <cstring>

#include "baseline_util.hpp"
#include "plan_util.hpp"
#include "scheme_row.hpp"
#include "zen/error.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

class OmniReduce : public plan::Typed<OmniReduce> {
 public:
  OmniReduce(Communicator& c, const TensorSpec& s, const SchemeOptions& o) : Typed(c, s, o) {
    ZEN_ENFORCE(opt_.block_size >= 1, "rank " + std::to_string(c.rank()) + " omnireduce: block size " +
                                          std::to_string(opt_.block_size) + " must be >= 1");
    R_ = s.dense_len / s.row_width;
    BR_ = std::max<uint64_t>(1, opt_.block_size / s.row_width);
    NB_ = (R_ + BR_ - 1) / BR_;
  }
  static constexpr const char* kName = "omnireduce";

 private:
  friend plan::Access;

  uint64_t block_rows(uint64_t b) const { return std::min(BR_, R_ - b * BR_); }
  uint64_t blo(int o) const { return baseline::range_begin(NB_, comm_.size(), o); }
  size_t block_bytes(uint64_t b, bool masks, size_t rowb) const {
    const uint64_t k = block_rows(b);
    return static_cast<size_t>((masks ? (k + 7) / 8 : 0) + k * rowb);
  }
  // Payload bytes implied by a range bitmap of owner o.
  size_t payload_of(const uint8_t* bm, int o, bool masks, size_t rowb) const {
    size_t t = 0;
    for (uint64_t b = blo(o); b < blo(o + 1); ++b)
      if (baseline::get_bit(bm, b - blo(o))) t += block_bytes(b, masks, rowb);
    return t;
  }

  template <typename T>
  void run_typed(const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
    using A = typename accum_of<T>::type;
    const int n = comm_.size(), me = comm_.rank();
    const size_t D = spec_.row_width, rowb = D * sizeof(T);
    const bool masks = sparse_out != nullptr;
    report_.encoding = "block";
    baseline::Local loc = baseline::coalesce_input(in, spec_);

    // Per owner: range bitmap (static size) and the present blocks' [mask][values].
    std::vector<size_t> bmb(n), bmd(n);
    size_t bmt = 0;
    for (int o = 0; o < n; ++o) {
      bmb[o] = static_cast<size_t>((blo(o + 1) - blo(o) + 7) / 8);
      bmd[o] = bmt;
      bmt += bmb[o];
    }
    // Received: every rank's bitmap of this rank's range, rank-major.
    std::vector<size_t> rbb(n, bmb[me]), rbd(n);
    for (int p = 0; p < n; ++p) rbd[p] = static_cast<size_t>(p) * bmb[me];
    std::vector<uint8_t> sbm(bmt, 0), rbm(static_cast<size_t>(n) * bmb[me], 0);
    std::vector<std::vector<uint8_t>> pay(n);
    {
      size_t i = 0;
      int o = 0;
      while (i < loc.keys.size()) {
        const uint64_t b = static_cast<uint64_t>(loc.keys[i]) / BR_;
        while (b >= blo(o + 1)) ++o;
        baseline::set_bit(sbm.data() + bmd[o], b - blo(o));
        const uint64_t k = block_rows(b), r0 = b * BR_;
        auto& p = pay[o];
        const size_t at = p.size();
        p.resize(at + block_bytes(b, masks, rowb), 0);
        uint8_t* mask = p.data() + at;
        uint8_t* vals = mask + (masks ? (k + 7) / 8 : 0);
        for (; i < loc.keys.size() && static_cast<uint64_t>(loc.keys[i]) < r0 + k; ++i) {
          const uint64_t j = static_cast<uint64_t>(loc.keys[i]) - r0;
          if (masks) baseline::set_bit(mask, j);
          std::memcpy(vals + j * rowb, loc.vals.data() + i * rowb, rowb);
        }
      }
    }
    {
      Phase ph(*this, "push_bitmap");
      comm_.alltoallv(sbm.data(), bmb.data(), bmd.data(), rbm.data(), rbb.data(), rbd.data());
    }
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t st = 0, rt = 0;
    for (int p = 0; p < n; ++p) {
      sc[p] = pay[p].size();
      sd[p] = st;
      st += sc[p];
      rc[p] = payload_of(rbm.data() + rbd[p], me, masks, rowb);
      rd[p] = rt;
      rt += rc[p];
    }
    std::vector<uint8_t> sbuf(st), rbuf(rt);
    for (int p = 0; p < n; ++p)
      if (sc[p]) std::memcpy(sbuf.data() + sd[p], pay[p].data(), sc[p]);
    pay.clear();
    {
      Phase ph(*this, "push");
      comm_.alltoallv(sbuf.data(), sc.data(), sd.data(), rbuf.data(), rc.data(), rd.data());
    }
    sbuf.clear();
    sbuf.shrink_to_fit();

    // Owner: sum its range, sources in rank order, one rounding.
    const uint64_t b0 = blo(me), b1 = blo(me + 1), nb = b1 - b0;
    const uint64_t row0 = b0 * BR_, nrows = b1 > b0 ? (std::min(R_, b1 * BR_) - row0) : 0;
    std::vector<A> acc(nrows * D, A(0));
    std::vector<uint8_t> present(static_cast<size_t>((nb + 7) / 8), 0), rowmask(static_cast<size_t>((nrows + 7) / 8), 0);
    uint64_t pushed = 0;
    for (int p = 0; p < n; ++p) {
      const uint8_t* bm = rbm.data() + rbd[p];
      const uint8_t* msg = rbuf.data() + rd[p];
      for (uint64_t j = 0; j < nb; ++j) {
        if (!baseline::get_bit(bm, j)) continue;
        ++pushed;
        baseline::set_bit(present.data(), j);
        const uint64_t b = b0 + j, k = block_rows(b), lr = b * BR_ - row0;
        if (masks) {
          for (uint64_t q = 0; q < k; ++q)
            if (baseline::get_bit(msg, q)) baseline::set_bit(rowmask.data(), lr + q);
          msg += (k + 7) / 8;
        }
        // Value rows follow a byte-sized mask, so they may be unaligned: copy each value out.
        A* a = &acc[lr * D];
        for (size_t e = 0; e < k * D; ++e) {
          T v;
          std::memcpy(static_cast<void*>(&v), msg + e * sizeof(T), sizeof(T));
          a[e] += static_cast<A>(v);
        }
        msg += k * rowb;
      }
    }
    rbuf.clear();
    rbuf.shrink_to_fit();

    // Pull 1: [pushed blocks (8 B)][range bitmap] from every owner (static sizes).
    std::vector<uint8_t> mine(8 + bmb[me], 0);
    std::memcpy(mine.data(), &pushed, 8);
    if (bmb[me]) std::memcpy(mine.data() + 8, present.data(), bmb[me]);
    std::vector<size_t> gb(n), gd(n);
    size_t gt = 0;
    for (int o = 0; o < n; ++o) {
      gb[o] = 8 + bmb[o];
      gd[o] = gt;
      gt += gb[o];
    }
    std::vector<uint8_t> gmeta(gt);
    {
      Phase ph(*this, "pull_bitmap");
      comm_.allgatherv(mine.data(), mine.size(), gmeta.data(), gb.data(), gd.data());
    }
    // Pull 2: every owner's present result blocks [mask][values].
    std::vector<size_t> vb(n), vd(n);
    size_t vt = 0;
    std::vector<uint64_t> pushed_load(n), result_load(n);
    for (int o = 0; o < n; ++o) {
      std::memcpy(&pushed_load[o], gmeta.data() + gd[o], 8);
      const uint8_t* bm = gmeta.data() + gd[o] + 8;
      uint64_t cnt = 0;
      for (uint64_t j = 0; j < blo(o + 1) - blo(o); ++j) cnt += baseline::get_bit(bm, j);
      result_load[o] = cnt;
      vb[o] = payload_of(bm, o, masks, rowb);
      vd[o] = vt;
      vt += vb[o];
    }
    report_.push_imbalance = baseline::imbalance(pushed_load);
    report_.pull_imbalance = baseline::imbalance(result_load);
    std::vector<uint8_t> res(vb[me]);
    {
      uint8_t* w = res.data();
      for (uint64_t j = 0; j < nb; ++j) {
        if (!baseline::get_bit(present.data(), j)) continue;
        const uint64_t b = b0 + j, k = block_rows(b), lr = b * BR_ - row0;
        if (masks) {
          for (uint64_t q = 0; q < k; ++q)
            if (baseline::get_bit(rowmask.data(), lr + q)) baseline::set_bit(w, q);
          w += (k + 7) / 8;
        }
        // Rows follow a byte-sized mask, so they may be unaligned: write each value with memcpy.
        for (size_t e = 0; e < k * D; ++e) {
          const T v = static_cast<T>(acc[lr * D + e]);
          std::memcpy(w + e * sizeof(T), static_cast<const void*>(&v), sizeof(T));
        }
        w += k * rowb;
      }
    }
    std::vector<uint8_t> all(vt);
    {
      Phase ph(*this, "pull");
      comm_.allgatherv(res.data(), res.size(), all.data(), vb.data(), vd.data());
    }

    // Decode: owners and blocks are in ascending row order.
    if (dense_out) std::memset(dense_out, 0, spec_.dense_len * sizeof(T));
    std::vector<int64_t> keys;
    std::vector<uint8_t> vals;
    for (int o = 0; o < n; ++o) {
      const uint8_t* bm = gmeta.data() + gd[o] + 8;
      const uint8_t* msg = all.data() + vd[o];
      for (uint64_t b = blo(o); b < blo(o + 1); ++b) {
        if (!baseline::get_bit(bm, b - blo(o))) continue;
        const uint64_t k = block_rows(b), r0 = b * BR_;
        const uint8_t* mask = msg;
        if (masks) msg += (k + 7) / 8;
        if (dense_out) {
          std::memcpy(static_cast<uint8_t*>(dense_out) + r0 * rowb, msg, k * rowb);
        } else {
          for (uint64_t q = 0; q < k; ++q)
            if (baseline::get_bit(mask, q)) {
              keys.push_back(static_cast<int64_t>(r0 + q));
              vals.insert(vals.end(), msg + q * rowb, msg + (q + 1) * rowb);
            }
        }
        msg += k * rowb;
      }
    }
    if (sparse_out) {
      sparse_out->indices = std::move(keys);
      sparse_out->values = std::move(vals);
    }
  }

  uint64_t R_ = 0, BR_ = 1, NB_ = 0;
};

void omnireduce_traffic(model::TrafficBuilder& b) {
  const auto& p = b.p;
  const auto& c = b.c;
  const int n = b.n;
  const uint64_t D = b.D, vs = b.vs, R = b.R;
  ZEN_ENFORCE(c.has_omnireduce(), "cost model: OmniReduce needs the exact block sets (sample stride 1)");
  b.t.encoding = "block";
  const uint64_t BR = std::max<uint64_t>(1, p.opt.block_size / D), NB = (R + BR - 1) / BR;
  auto mbytes = [&](int o) { return (model::part_begin(NB, n, o + 1) - model::part_begin(NB, n, o) + 7) / 8; };
  auto vbytes = [&](uint64_t rows, uint64_t mask) { return (p.sparse_out ? mask : 0) + rows * D * vs; };
  model::PhaseTraffic& pb = b.phase("push_bitmap", b.one, b.nm1);
  model::PhaseTraffic& pu = b.phase("push", b.one, b.nm1);
  model::PhaseTraffic& lb = b.phase("pull_bitmap", b.one, b.nm1);
  model::PhaseTraffic& pl = b.phase("pull", b.one, b.nm1);
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<size_t>(r);
    for (int o = 0; o < n; ++o) {
      if (o == r) continue;
      const auto uo = static_cast<size_t>(o);
      pb.sent[ur] += mbytes(o);
      pb.recv[ur] += mbytes(r);
      lb.sent[ur] += 8 + mbytes(r);
      lb.recv[ur] += 8 + mbytes(o);
      pl.sent[ur] += vbytes(c.om_V_rows[ur], c.om_V_mask[ur]);
      pl.recv[ur] += vbytes(c.om_V_rows[uo], c.om_V_mask[uo]);
      const uint64_t x = vbytes(c.om_rows[ur][uo], c.om_mask[ur][uo]);
      pu.sent[ur] += x;
      pu.recv[uo] += x;
    }
  }
}

double omnireduce_work(const model::Problem& p, const model::Counts& c, size_t r) {
  const auto un = static_cast<size_t>(p.n);
  double w = static_cast<double>(c.k[r]);
  if (c.has_omnireduce()) {
    for (size_t q = 0; q < un; ++q) w += static_cast<double>(c.om_rows[q][r]);
    for (size_t o = 0; o < un; ++o) w += static_cast<double>(c.om_V_rows[o]);
  }
  return w;
}

}  // namespace

namespace detail {
extern const SchemeRow omnireduce_row{OmniReduce::kName, plan::factory<OmniReduce>, omnireduce_traffic, omnireduce_work, /*auto_position=*/4, detail::kNeedsBlockCounts};
}  // namespace detail

}  // namespace zen
