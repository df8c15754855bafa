// Scheme "hierarchical_sparse": the hierarchical mode with a sparse step inside the node, for CPU
// nodes whose ranks share one network link (docs/algorithms.md, "hierarchical_sparse").
//
// n = H nodes x L ranks (SchemeOptions::node_size, 0: the communicator's ranks_on_node(); consecutive
// ranks form a node). The R rows are split into L hashed chunks (chunk j = the rows x with
// pi'(x) mod L == j, position pi'(x) div L; pi' the seeded bijection of zen/hash/hash.hpp under
// model::node_chunks' seed, so a skewed tensor spreads evenly over the node's ranks; with L = 1 the
// one chunk's positions are the rows). On rank r = g * L + l:
//   split       coalesce the input (duplicates summed in input order), cut it into the L chunks;
//   node_counts alltoall of the per-chunk row counts inside the node;
//   node_push   alltoallv inside the node: chunk j's rows (COO of chunk positions) -> local rank j;
//   inter       balanced over the H ranks with local index l (one per node) on chunk l: its input is
//               the node's L contributions (duplicates across them summed by balanced's partition),
//               so each node pushes its chunk union once and pulls the chunk's result once;
//   node_sizes  allgather of the chunk results' row counts inside the node;
//   node_pull   allgatherv inside the node of every chunk's result (index part by the pull rule of
//               src/encode/wire.hpp: COO, bitmap or Elias-Fano over the chunk, then the rows);
//   decode      positions -> rows (pi'^-1), scattered (dense output) or sorted (sparse output).
// Only `inter` crosses hosts. Each host sends the node's union of each chunk and receives each
// chunk's result once, where flat balanced sends and receives them once per rank of the host.
// The result is computed once by balanced's owner and copied everywhere: identical bits on every
// rank (the sum order: node order of node partials, each the sum of its ranks' rows in local-rank
// order; 16-bit values are rounded once per node partial and once at the owner).
//
// A plan: every buffer lives in a workspace that only grows and the inner balanced plan is one too,
// so steady-state calls allocate nothing.
#include <algorithm>
#include <cstring>
#include <memory>

#include "owner_exchange.hpp"
#include "plan_util.hpp"
#include "scheme_row.hpp"
#include "zen/error.hpp"
#include "zen/schemes/hierarchical.hpp"

namespace zen {
namespace {

using wire::load_as;

struct Workspace {
  plan::Coalescer co;
  std::vector<uint64_t> ent_pos;         // per coalesced row: its chunk position and chunk
  std::vector<uint32_t> ent_chunk;
  std::vector<uint64_t> scnt, rcnt;      // node_counts: rows to / from each local rank
  std::vector<size_t> sb, sd, rb, rd;    // node_push byte counts and offsets
  std::vector<uint8_t> sbuf, rbuf;
  std::vector<size_t> fill;              // write cursor per chunk
  std::vector<int64_t> in_keys;          // the inner input: the node's rows of this rank's chunk
  std::vector<uint8_t> in_vals;
  SparseTensor chunk;                    // the inner result (chunk positions, ascending)
  std::vector<uint64_t> sizes;           // node_sizes: result rows of every chunk
  std::vector<uint8_t> encs;
  std::vector<size_t> gb, gd, vo;        // node_pull byte counts, offsets, value offsets
  std::vector<uint8_t> gbuf;
  std::vector<plan::KV> kv, kv_tmp;      // sparse output: (row, value offset) sorted by row
  plan::RadixSort sorter;
};

int resolve_node_size(Communicator& c, const SchemeOptions& o) {
  return o.node_size > 0 ? o.node_size : std::max(1, c.ranks_on_node());
}

class HierarchicalSparse : public plan::Typed<HierarchicalSparse, Workspace> {
 public:
  HierarchicalSparse(Communicator& c, const TensorSpec& s, const SchemeOptions& o)
      : Typed(c, s, o), L_(resolve_node_size(c, o)) {
    const int n = c.size(), me = c.rank();
    const std::string where = "rank " + std::to_string(me) + " sparse allreduce setup (hierarchical_sparse): ";
    // Every rank must see the same node size (an MPI job with unequal hosts does not).
    const auto all = c.allgather_value(static_cast<int64_t>(L_));
    for (int p = 0; p < n; ++p)
      ZEN_CHECK_CODE(all[static_cast<size_t>(p)] == L_, Result::InvalidUsage,
                     where + "rank " + std::to_string(p) + " has node size " + std::to_string(all[static_cast<size_t>(p)]) +
                         ", this rank " + std::to_string(L_) + " (every node must hold the same number of consecutive ranks)");
    ZEN_CHECK_CODE(n % L_ == 0, Result::InvalidUsage,
                   where + "node size " + std::to_string(L_) + " does not divide the rank count " + std::to_string(n));
    const uint64_t R = rows();
    chunks_ = model::node_chunks(R, L_, opt_.seed);
    m0_ = chunks_.owner_size(0);
    isz_ = model::key_width(m0_);
    comms_ = split_nodes(c, L_);
    const int l = comms_.intra->rank();
    const uint64_t ml = chunks_.owner_size(static_cast<uint32_t>(l));
    if (ml > 0) {  // every rank of the inter group has local index l: all make it, or none
      SchemeOptions io = opt_;
      io.validate = false;                    // positions are in range by construction
      io.duplicates = DuplicatePolicy::Sum;   // the node's ranks share rows
      inner_ = make_scheme("balanced", *comms_.inter, TensorSpec{ml * s.row_width, s.row_width, s.dtype}, io);
    }
  }
  static constexpr const char* kName = "hierarchical_sparse";

 private:
  friend plan::Access;

  uint64_t rows() const { return spec_.dense_len / spec_.row_width; }
  uint64_t chunk_size(int j) const { return chunks_.owner_size(static_cast<uint32_t>(j)); }

  template <typename T>
  void run_typed(const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
    Workspace& w = *ws_;
    detail::ThreadPool& tp = pool();
    Communicator& intra = *comms_.intra;
    const int L = L_, l = intra.rank(), me = comm_.rank();
    const size_t uL = static_cast<size_t>(L), D = spec_.row_width, rbytes = D * sizeof(T), isz = isz_;

    // split: coalesced rows -> (chunk, position); counts per chunk.
    plan::Coalesced loc;
    {
      Phase ph(*this, "split");
      loc = w.co.run(in, spec_, false, &tp);
      w.scnt.assign(uL, 0);
      uint32_t* ch = plan::grow(w.ent_chunk, loc.k);
      uint64_t* pos = plan::grow(w.ent_pos, loc.k);
      if (L == 1) {  // one chunk, positions = rows (what the model assumes too)
        for (size_t i = 0; i < loc.k; ++i) ch[i] = 0, pos[i] = static_cast<uint64_t>(loc.keys[i]);
        w.scnt[0] = loc.k;
      } else {
        for (size_t i = 0; i < loc.k; ++i) {
          chunks_.locate(static_cast<uint64_t>(loc.keys[i]), &ch[i], &pos[i]);
          ++w.scnt[ch[i]];
        }
      }
    }
    w.rcnt.resize(uL);
    {
      Phase ph(*this, "node_counts");
      intra.alltoall(w.scnt.data(), sizeof(uint64_t), w.rcnt.data());
    }
    // node_push: per local rank j, [scnt[j] keys of isz bytes][scnt[j] rows].
    w.sb.resize(uL);
    w.sd.resize(uL);
    w.rb.resize(uL);
    w.rd.resize(uL);
    w.fill.resize(uL);
    size_t stot = 0, rtot = 0;
    uint64_t nin = 0;
    for (size_t j = 0; j < uL; ++j) {
      w.sb[j] = static_cast<size_t>(w.scnt[j]) * (isz + rbytes);
      w.sd[j] = stot;
      stot += w.sb[j];
      w.rb[j] = static_cast<size_t>(w.rcnt[j]) * (isz + rbytes);
      w.rd[j] = rtot;
      rtot += w.rb[j];
      nin += w.rcnt[j];
      w.fill[j] = 0;
    }
    uint8_t* sbuf = plan::grow(w.sbuf, stot);
    uint8_t* rbuf = plan::grow(w.rbuf, rtot);
    {
      const uint32_t* ch = w.ent_chunk.data();
      const uint64_t* pos = w.ent_pos.data();
      for (size_t i = 0; i < loc.k; ++i) {
        const size_t j = ch[i], f = w.fill[j]++;
        uint8_t* msg = sbuf + w.sd[j];
        wire::store_key(msg, f, isz, pos[i]);
        std::memcpy(msg + static_cast<size_t>(w.scnt[j]) * isz + f * rbytes, loc.rows + i * rbytes, rbytes);
      }
    }
    {
      Phase ph(*this, "node_push");
      intra.alltoallv(sbuf, w.sb.data(), w.sd.data(), rbuf, w.rb.data(), w.rd.data());
    }

    // inter: balanced among the nodes on this rank's chunk, the node's rows in local-rank order.
    const uint64_t ml = chunk_size(l);
    int64_t* keys = plan::grow(w.in_keys, nin);
    uint8_t* vals = plan::grow(w.in_vals, nin * rbytes);
    {
      size_t o = 0;
      for (size_t j = 0; j < uL; ++j) {
        const uint8_t* msg = rbuf + w.rd[j];
        const size_t cnt = static_cast<size_t>(w.rcnt[j]);
        for (size_t e = 0; e < cnt; ++e) {
          const uint64_t q = wire::load_key(msg, e, isz);
          if (q >= ml)
            ZEN_THROW(Result::InvalidUsage, "rank " + std::to_string(me) + " hierarchical_sparse node_push: peer " +
                                                std::to_string(me - l + static_cast<int>(j)) + " sent chunk position " +
                                                std::to_string(q) + " outside [0, " + std::to_string(ml) + ")");
          keys[o + e] = static_cast<int64_t>(q);
        }
        if (cnt) std::memcpy(vals + o * rbytes, msg + cnt * isz, cnt * rbytes);
        o += cnt;
      }
    }
    SparseTensor& part = w.chunk;
    {
      Phase ph(*this, "inter");
      if (inner_) {
        SparseView v;
        v.dense_len = ml * D;
        v.row_width = spec_.row_width;
        v.dtype = spec_.dtype;
        v.nnz = nin;
        v.index_type = IndexType::I64;
        v.indices = keys;
        v.values = vals;
        inner_->run(v, part);
        const SyncReport& ir = inner_->report();
        report_.push_imbalance = ir.push_imbalance;
        report_.pull_imbalance = ir.pull_imbalance;
        report_.serial_overflows = ir.serial_overflows;
        report_.push_encoding = ir.push_encoding;
      } else {
        part.resize(0);
      }
    }

    // node_sizes + node_pull: every chunk's result to every rank of the node.
    const uint64_t K = part.nnz();
    w.sizes.resize(uL);
    {
      Phase ph(*this, "node_sizes");
      intra.allgather(&K, sizeof(uint64_t), w.sizes.data());
    }
    w.encs.resize(uL);
    w.gb.resize(uL);
    w.gd.resize(uL);
    w.vo.resize(uL);
    size_t gtot = 0;
    uint64_t total = 0;
    for (size_t j = 0; j < uL; ++j) {
      const uint64_t mj = chunk_size(static_cast<int>(j)), Kj = w.sizes[j];
      ZEN_CHECK_CODE(Kj <= mj, Result::InvalidUsage,
                     "rank " + std::to_string(me) + " hierarchical_sparse node_sizes: peer " +
                         std::to_string(me - l + static_cast<int>(j)) + " announced " + std::to_string(Kj) +
                         " result rows in a chunk of " + std::to_string(mj));
      w.encs[j] = wire::pick_encoding(IndexEncoding::Auto, mj, Kj, isz);
      const size_t ib = wire::index_part_bytes(w.encs[j], mj, Kj, isz);
      w.gb[j] = ib + static_cast<size_t>(Kj) * rbytes;
      w.gd[j] = gtot;
      w.vo[j] = gtot + ib;
      gtot += w.gb[j];
      total += Kj;
    }
    uint8_t* gbuf = plan::grow(w.gbuf, gtot);
    {
      const int64_t* pi = part.indices.data();
      wire::write_index_part(w.encs[static_cast<size_t>(l)], gbuf + w.gd[static_cast<size_t>(l)], ml, K, isz,
                             [&](uint64_t j) { return static_cast<uint64_t>(pi[j]); });
      if (K) std::memcpy(gbuf + w.vo[static_cast<size_t>(l)], part.values.data(), static_cast<size_t>(K) * rbytes);
    }
    {
      Phase ph(*this, "node_pull");
      intra.allgatherv(gbuf + w.gd[static_cast<size_t>(l)], w.gb[static_cast<size_t>(l)], gbuf, w.gb.data(), w.gd.data());
    }
    report_.result_nnz = total;
    report_.global_rows = total;
    report_.encoding = wire::encodings_name(w.encs.data(), L, -1);  // the node_pull index parts

    // decode: chunk positions -> rows.
    Phase ph(*this, "decode");
    for (size_t j = 0; j < uL; ++j)
      wire::check_pull_message(gbuf + w.gd[j], w.encs[j], chunk_size(static_cast<int>(j)), w.sizes[j], isz, me,
                               me - l + static_cast<int>(j), kName);
    auto each_row = [&](auto&& f) {  // f(row, byte offset of its values in gbuf)
      for (size_t j = 0; j < uL; ++j)
        wire::for_positions(
            gbuf + w.gd[j], w.encs[j], chunk_size(static_cast<int>(j)), w.sizes[j], isz,
            [&](uint64_t q, uint64_t k) { f(L == 1 ? q : chunks_.index_at(static_cast<uint32_t>(j), q), w.vo[j] + k * rbytes); }, me,
            me - l + static_cast<int>(j), kName);
    };
    if (!sparse_out) {
      auto* d = static_cast<uint8_t*>(dense_out);
      if (spec_.dense_len) plan::parallel_zero(d, spec_.dense_len * sizeof(T), &tp);
      each_row([&](uint64_t row, size_t off) { std::memcpy(d + row * rbytes, gbuf + off, rbytes); });
      return;
    }
    plan::KV* kv = plan::grow(w.kv, total);
    size_t o = 0;
    each_row([&](uint64_t row, size_t off) { kv[o++] = plan::KV{row, off}; });
    w.sorter.sort(w.kv, w.kv_tmp, total, plan::bits_for(rows()), &tp);
    kv = w.kv.data();
    sparse_out->resize(total);
    for (size_t i = 0; i < total; ++i) {
      sparse_out->indices[i] = static_cast<int64_t>(kv[i].key);
      std::memcpy(sparse_out->values.data() + i * rbytes, gbuf + kv[i].val, rbytes);
    }
  }

  int L_;
  Partitioner chunks_;
  uint64_t m0_ = 0;
  size_t isz_ = 4;
  NodeComms comms_;
  std::unique_ptr<SparseAllreduce> inner_;
};

// ---- traffic and work models (docs/algorithms.md, "hierarchical_sparse") ----
void hierarchical_sparse_traffic(model::TrafficBuilder& b) {
  const auto& p = b.p;
  const auto& c = b.c;
  const int n = b.n, L = std::max(1, p.node_size);
  ZEN_ENFORCE(n % L == 0, "cost model (hierarchical_sparse): node size " + std::to_string(L) + " does not divide " +
                              std::to_string(n) + " ranks");
  const int H = n / L;
  ZEN_ENFORCE(c.hs_L == L && c.hs_push.size() == b.un && c.hs_inner.size() == static_cast<size_t>(L),
              "cost model (hierarchical_sparse): counts lack the node split for node size " + std::to_string(L));
  const Partitioner ch = model::node_chunks(b.R, L, p.opt.seed);
  const uint64_t isz = model::key_width(ch.owner_size(0)), rb = b.D * b.vs;
  const double lgL = L > 1 ? std::ceil(std::log2(static_cast<double>(L))) : 0.0, oneL = L > 1 ? 1.0 : 0.0;
  // The inner balanced of every chunk over the H nodes.
  std::vector<model::Traffic> inner(static_cast<size_t>(L));
  double rounds = 0, messages = 0;
  std::vector<uint64_t> Kj(static_cast<size_t>(L), 0);
  for (int j = 0; j < L; ++j) {
    const uint64_t mj = ch.owner_size(static_cast<uint32_t>(j));
    if (mj == 0) continue;
    model::Problem ip = p;
    ip.rows = mj;
    ip.n = H;
    ip.node_size = 1;
    ip.sparse_out = true;
    inner[static_cast<size_t>(j)] = model::traffic("balanced", ip, c.hs_inner[static_cast<size_t>(j)]);
    Kj[static_cast<size_t>(j)] = c.hs_inner[static_cast<size_t>(j)].K;
    if (j == 0)
      for (const auto& ph : inner[0].phases) {
        rounds += ph.rounds;
        messages += ph.messages;
      }
  }
  b.phase("split", 0, 0);
  model::PhaseTraffic& cn = b.phase("node_counts", lgL, lgL);
  cn.where = model::PhaseTraffic::kInsideNode;
  model::PhaseTraffic& pu = b.phase("node_push", oneL, L - 1);
  pu.where = model::PhaseTraffic::kInsideNode;
  model::PhaseTraffic& it = b.phase("inter", rounds, messages);
  it.where = model::PhaseTraffic::kAcrossNodes;
  model::PhaseTraffic& sz = b.phase("node_sizes", lgL, lgL);
  sz.where = model::PhaseTraffic::kInsideNode;
  model::PhaseTraffic& pl = b.phase("node_pull", oneL, L - 1);
  pl.where = model::PhaseTraffic::kInsideNode;
  b.phase("decode", 0, 0);
  std::vector<uint64_t> P(static_cast<size_t>(L));
  std::vector<uint8_t> encs(static_cast<size_t>(L));
  for (int j = 0; j < L; ++j) {
    const uint64_t mj = ch.owner_size(static_cast<uint32_t>(j)), K = Kj[static_cast<size_t>(j)];
    encs[static_cast<size_t>(j)] = wire::pick_encoding(IndexEncoding::Auto, mj, K, isz);
    P[static_cast<size_t>(j)] = wire::index_part_bytes(encs[static_cast<size_t>(j)], mj, K, isz) + K * rb;
  }
  b.t.encoding = wire::encodings_name(encs.data(), L, -1);
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<size_t>(r);
    const int g = r / L, l = r % L;
    cn.sent[ur] = cn.recv[ur] = 8 * static_cast<uint64_t>(L - 1);
    sz.sent[ur] = sz.recv[ur] = 8 * static_cast<uint64_t>(L - 1);
    for (int j = 0; j < L; ++j) {
      if (j == l) continue;
      const auto uq = static_cast<size_t>(g * L + j);
      pu.sent[ur] += c.hs_push[ur][static_cast<size_t>(j)] * (isz + rb);
      pu.recv[ur] += c.hs_push[uq][static_cast<size_t>(l)] * (isz + rb);
      pl.recv[ur] += P[static_cast<size_t>(j)];
    }
    pl.sent[ur] = static_cast<uint64_t>(L - 1) * P[static_cast<size_t>(l)];
    const auto& t = inner[static_cast<size_t>(l)];
    if (!t.sent.empty()) {
      it.sent[ur] = t.sent[static_cast<size_t>(g)];
      it.recv[ur] = t.recv[static_cast<size_t>(g)];
    }
  }
}

double hierarchical_sparse_work(const model::Problem& p, const model::Counts& c, size_t r) {
  const int L = std::max(1, p.node_size);
  const size_t l = r % static_cast<size_t>(L), g = r / static_cast<size_t>(L);
  double w = static_cast<double>(c.k[r]);  // coalesce and split
  if (c.hs_inner.size() == static_cast<size_t>(L) && !c.hs_inner[l].k.empty()) {
    const model::Counts& ic = c.hs_inner[l];
    for (size_t j = 0; j < static_cast<size_t>(L); ++j) w += static_cast<double>(c.hs_push[g * static_cast<size_t>(L) + j][l]);
    model::Problem ip = p;
    ip.n = static_cast<int>(ic.k.size());
    w += plan::owner_exchange_work(ip, ic, g, plan::Partition::Hash);
  }
  return w + static_cast<double>(c.K);  // decode of the whole result
}

}  // namespace

namespace detail {
extern const SchemeRow hierarchical_sparse_row{HierarchicalSparse::kName, plan::factory<HierarchicalSparse>,
                                               hierarchical_sparse_traffic, hierarchical_sparse_work,
                                               /*auto_position=*/7, detail::kNodes};
}  // namespace detail

}  // namespace zen
