// The stages of the owner exchange that do not depend on the value type (owner_exchange.hpp):
// the push layout, the push, the owners' meta and the pull layout, the pull, and the checks of the
// pulled messages. Shared by balanced and sparse_ps.
#include "owner_exchange.hpp"

#include <algorithm>

#include "zen/encode/elias_fano.hpp"
#include "zen/encode/coo.hpp"
#include "zen/hash/hash.hpp"

namespace zen::plan {

void OwnerExchangePlan::set_owner_sets(std::vector<uint64_t> sizes) {
  m_of_ = std::move(sizes);
  wire_ = encode::wire_index_type(m_of_.empty() ? 0 : m_of_[0]);
}

StageCtx OwnerExchangePlan::stage_ctx(size_t value_size) {
  const int n = comm_.size(), me = comm_.rank();
  const size_t D = spec_.row_width;
  return StageCtx{n, me, static_cast<size_t>(n), index_size(wire_), D, value_size, D * value_size, owner_set(me), pool(), name()};
}

void OwnerExchangePlan::layout_push(const StageCtx& c) {
  OwnerExchange& w = x();
  w.rcount.resize(c.un);
  {
    Phase ph(*this, "counts");
    comm_.alltoall(w.scount.data(), sizeof(uint64_t), w.rcount.data());
  }
  for (auto* v : {&w.sbytes, &w.sdispl, &w.rbytes, &w.rdispl, &w.sib, &w.rib}) v->resize(c.un);
  w.senc.resize(c.un);
  w.renc.resize(c.un);
  size_t stotal = 0, rtotal = 0;
  w.bound = 0;
  for (int p = 0; p < c.n; ++p) {
    const uint64_t mp = owner_set(p);
    // The own segment stays local as COO; the others by the push rule (same inputs on both sides).
    w.senc[p] = p == c.me ? wire::kEncCoo : wire::pick_push_encoding(opt_.push, mp, w.scount[p], c.isz, c.rb);
    w.renc[p] = p == c.me ? wire::kEncCoo : wire::pick_push_encoding(opt_.push, c.m, w.rcount[p], c.isz, c.rb);
    w.sib[p] = wire::index_part_bytes(w.senc[p], mp, w.scount[p], c.isz);
    w.rib[p] = wire::index_part_bytes(w.renc[p], c.m, w.rcount[p], c.isz);
    w.sdispl[p] = stotal;
    stotal += w.sib[p] + w.scount[p] * c.rb;
    w.sbytes[p] = p == c.me ? 0 : w.sib[p] + w.scount[p] * c.rb;
    w.rdispl[p] = rtotal;
    w.rbytes[p] = p == c.me ? 0 : w.rib[p] + w.rcount[p] * c.rb;
    rtotal += w.rbytes[p];
    if (p != c.me) w.bound += static_cast<double>(w.scount[p] * c.rb) + encode::log2_binomial(mp, w.scount[p]) / 8.0;
  }
  report_.push_encoding = wire::encodings_name(w.senc.data(), c.n, c.me);
  grow(w.sbuf, stotal);
  grow(w.rbuf, rtotal);
}

void OwnerExchangePlan::push(const StageCtx&) {
  OwnerExchange& w = x();
  Phase ph(*this, "push");
  comm_.alltoallv(w.sbuf.data(), w.sbytes.data(), w.sdispl.data(), w.rbuf.data(), w.rbytes.data(), w.rdispl.data());
}

void OwnerExchangePlan::publish_meta(const StageCtx& c, uint64_t K) {
  OwnerExchange& w = x();
  w.pull_enc = wire::pick_encoding(opt_.pull, c.m, K, c.isz);
  w.mine = wire::OwnerMeta{K, w.received, w.pull_enc};
  w.bound += static_cast<double>(c.n - 1) * (static_cast<double>(K * c.rb) + encode::log2_binomial(c.m, K) / 8.0);
  report_.bound_bytes = w.bound;
  w.meta.resize(c.un);
  {
    Phase ph(*this, "meta");
    comm_.allgather(&w.mine, sizeof(wire::OwnerMeta), w.meta.data());
  }
  w.pbytes.resize(c.un);
  w.pdispl.resize(c.un);
  w.pushed.resize(c.un);
  w.results.resize(c.un);
  size_t ptotal = 0;
  bool same = true;
  report_.global_rows = 0;
  for (int p = 0; p < c.n; ++p) {
    const uint8_t ep = static_cast<uint8_t>(std::min<uint64_t>(w.meta[p].encoding, 255));
    w.pbytes[p] = wire::index_part_bytes(ep, owner_set(p), w.meta[p].result_rows, c.isz) + w.meta[p].result_rows * c.rb;
    w.pdispl[p] = ptotal;
    ptotal += w.pbytes[p];
    w.pushed[p] = w.meta[p].pushed_rows;
    w.results[p] = w.meta[p].result_rows;
    report_.global_rows += w.meta[p].result_rows;
    same = same && w.meta[p].encoding == w.meta[0].encoding;
  }
  report_.push_imbalance = detail::imbalance(w.pushed);
  report_.pull_imbalance = detail::imbalance(w.results);
  report_.encoding = same ? wire::encoding_name(static_cast<uint8_t>(w.meta[0].encoding)) : "mixed";
  w.ptotal = ptotal;
  grow(w.all, ptotal);
}

void OwnerExchangePlan::pull(const StageCtx& c) {
  OwnerExchange& w = x();
  Phase ph(*this, "pull");
  uint8_t* all = w.all.data();
  comm_.allgatherv(all + w.pdispl[c.me], w.pbytes[c.me], all, w.pbytes.data(), w.pdispl.data());
}

uint64_t OwnerExchangePlan::open_pulled(const StageCtx& c) {
  OwnerExchange& w = x();
  w.owner_base.resize(c.un + 1);
  w.val_off.resize(c.un);
  w.owner_base[0] = 0;
  for (int p = 0; p < c.n; ++p) {
    const uint64_t mp = owner_set(p), Kp = w.meta[p].result_rows;
    const uint8_t ep = static_cast<uint8_t>(std::min<uint64_t>(w.meta[p].encoding, 255));
    wire::check_pull_message(w.all.data() + w.pdispl[p], ep, mp, Kp, c.isz, c.me, p, c.scheme);
    w.val_off[p] = w.pdispl[p] + wire::index_part_bytes(ep, mp, Kp, c.isz);
    w.owner_base[p + 1] = w.owner_base[p] + Kp;
  }
  report_.result_nnz = w.owner_base[c.un];
  return w.owner_base[c.un];
}

void owner_exchange_traffic(model::TrafficBuilder& b, Partition policy) {
  const auto& p = b.p;
  const auto& c = b.c;
  const int n = b.n;
  const size_t un = b.un;
  const uint64_t R = b.R;
  const bool bal = policy == Partition::Hash;
  const Partitioner part = Partitioner::make(R, static_cast<uint32_t>(n), p.opt.seed);
  auto m = [&](int o) {
    return bal ? part.owner_size(static_cast<uint32_t>(o)) : model::part_begin(R, n, o + 1) - model::part_begin(R, n, o);
  };
  const auto& push = bal ? c.bal_push : c.ps_push;
  const auto& Ko = bal ? c.bal_K : c.ps_K;
  ZEN_ENFORCE(push.size() == un && Ko.size() == un, "cost model: counts lack the per-owner loads");
  const uint64_t iw = model::key_width(m(0)), rb = b.D * b.vs;
  // Pull message of owner o and push message r -> o: index part by the schemes' rules (src/encode/wire.hpp).
  std::vector<uint64_t> P(un);
  std::vector<uint8_t> encs(un);
  for (int o = 0; o < n; ++o) {
    const uint64_t K = Ko[static_cast<size_t>(o)];
    encs[static_cast<size_t>(o)] = wire::pick_encoding(p.opt.pull, m(o), K, iw);
    P[static_cast<size_t>(o)] = wire::index_part_bytes(encs[static_cast<size_t>(o)], m(o), K, iw) + K * rb;
  }
  b.t.encoding = wire::encodings_name(encs.data(), n, -1);
  auto push_bytes = [&](int o, uint64_t K) {
    return wire::index_part_bytes(wire::pick_push_encoding(p.opt.push, m(o), K, iw, rb), m(o), K, iw) + K * rb;
  };
  if (bal) b.phase("hash", 0, 0);
  model::PhaseTraffic& cn = b.phase("counts", b.lg, b.lg);
  b.phase("encode", 0, 0);
  model::PhaseTraffic& pu = b.phase("push", b.one, b.nm1);
  b.phase("aggregate", 0, 0);
  model::PhaseTraffic& me = b.phase("meta", b.lg, b.lg);
  b.phase("encode", 0, 0);
  model::PhaseTraffic& pl = b.phase("pull", b.one, b.nm1);
  b.phase("decode", 0, 0);
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<size_t>(r);
    cn.sent[ur] = cn.recv[ur] = 8 * (un - 1);
    me.sent[ur] = me.recv[ur] = 24 * (un - 1);
    pl.sent[ur] = (un - 1) * P[ur];
    for (int o = 0; o < n; ++o) {
      if (o == r) continue;
      const auto uo = static_cast<size_t>(o);
      pl.recv[ur] += P[uo];
      const uint64_t x = push_bytes(o, push[ur][uo]);
      pu.sent[ur] += x;
      pu.recv[uo] += x;
    }
  }
}

double owner_exchange_work(const model::Problem& p, const model::Counts& c, size_t r, Partition policy) {
  const auto& push = policy == Partition::Hash ? c.bal_push : c.ps_push;
  double w = static_cast<double>(c.k[r] + c.K);
  for (size_t q = 0; q < static_cast<size_t>(p.n); ++q) w += static_cast<double>(push[q][r]);
  return w;
}

}  // namespace zen::plan
