// The cost model (include/zen/model/cost_model.hpp): the byte formulas of docs/algorithms.md on
// Counts, and an alpha-beta time.
#include "zen/model/cost_model.hpp"

#include "owner_stage.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "zen/comm/communicator.hpp"
#include "zen/error.hpp"
#include "zen/hash/hash.hpp"

namespace zen::model {
namespace {

uint64_t key_width(uint64_t key_space) { return key_space <= (uint64_t{1} << 31) ? 4 : 8; }

/// Start of part o when `total` items are split in n contiguous parts (the ring chunk split).
uint64_t part_begin(uint64_t total, int n, int o) {
  const uint64_t uo = static_cast<uint64_t>(o), un = static_cast<uint64_t>(n);
  return uo * (total / un) + std::min<uint64_t>(uo, total % un);
}
/// Part holding item x of that split.
int part_of(uint64_t x, uint64_t total, int n) {
  const uint64_t un = static_cast<uint64_t>(n), q = total / un, rem = total % un;
  if (x < rem * (q + 1)) return static_cast<int>(x / (q + 1));
  return static_cast<int>(rem + (x - rem * (q + 1)) / q);
}

uint64_t scaled(uint64_t count, uint64_t stride, uint64_t cap) { return std::min(cap, count * stride); }

/// Split `total` over parts in proportion to `weights` (largest remainder), so the parts add up.
std::vector<uint64_t> proportional(uint64_t total, const std::vector<uint64_t>& weights) {
  const size_t m = weights.size();
  std::vector<uint64_t> out(m, 0);
  uint64_t wsum = 0;
  for (uint64_t w : weights) wsum += w;
  if (m == 0) return out;
  if (wsum == 0) {
    for (size_t i = 0; i < m; ++i) out[i] = total / m + (i < total % m ? 1 : 0);
    return out;
  }
  std::vector<std::pair<double, size_t>> rem(m);
  uint64_t given = 0;
  for (size_t i = 0; i < m; ++i) {
    const double exact = static_cast<double>(total) * static_cast<double>(weights[i]) / static_cast<double>(wsum);
    out[i] = static_cast<uint64_t>(std::floor(exact));
    given += out[i];
    rem[i] = {exact - std::floor(exact), i};
  }
  std::sort(rem.begin(), rem.end(), [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  for (size_t j = 0; given < total && j < m; ++j, ++given) ++out[rem[j].second];
  return out;
}

}  // namespace

Problem Problem::of(const TensorSpec& spec, int n, const SchemeOptions& opt, bool sparse_out) {
  Problem p;
  p.D = spec.row_width;
  p.rows = spec.row_width ? spec.dense_len / spec.row_width : 0;
  p.dtype = spec.dtype;
  p.n = n;
  p.sparse_out = sparse_out;
  p.opt = opt;
  return p;
}

uint64_t sample_hash(uint64_t row, uint64_t salt) { return mix64(row ^ mix64(salt + 0x2545f4914f6cdd1dULL)); }

Counts estimate_from_sample(const Problem& p, const std::vector<std::vector<int64_t>>& sample,
                            const std::vector<uint64_t>& k, uint64_t stride) {
  const int n = p.n;
  ZEN_ENFORCE(n >= 1 && static_cast<int>(sample.size()) == n && static_cast<int>(k.size()) == n,
              "cost model: need the sample and row count of each of the " + std::to_string(n) + " ranks");
  ZEN_ENFORCE(stride >= 1, "cost model: sample stride must be >= 1");
  const uint64_t R = p.rows;
  const auto un = static_cast<size_t>(n);
  Counts c;
  c.k = k;
  const Partitioner part = Partitioner::make(R, static_cast<uint32_t>(n), p.opt.seed);

  // Union of the sample and, per row, the ranks holding it.
  std::vector<int64_t> uni;
  for (const auto& s : sample) uni.insert(uni.end(), s.begin(), s.end());
  std::sort(uni.begin(), uni.end());
  uni.erase(std::unique(uni.begin(), uni.end()), uni.end());
  c.K = scaled(uni.size(), stride, R);

  // Per-owner loads: sample proportions of each rank's k (h0 owners, key ranges); union per owner.
  c.bal_push.assign(un, std::vector<uint64_t>(un, 0));
  c.ps_push.assign(un, std::vector<uint64_t>(un, 0));
  for (size_t r = 0; r < un; ++r) {
    std::vector<uint64_t> wb(un, 0), wp(un, 0);
    for (int64_t x : sample[r]) {
      ++wb[part.owner(static_cast<uint64_t>(x))];
      ++wp[static_cast<size_t>(part_of(static_cast<uint64_t>(x), R, n))];
    }
    c.bal_push[r] = proportional(k[r], wb);
    c.ps_push[r] = proportional(k[r], wp);
  }
  {
    std::vector<uint64_t> wb(un, 0), wp(un, 0);
    for (int64_t x : uni) {
      ++wb[part.owner(static_cast<uint64_t>(x))];
      ++wp[static_cast<size_t>(part_of(static_cast<uint64_t>(x), R, n))];
    }
    c.bal_K = proportional(c.K, wb);
    c.ps_K = proportional(c.K, wp);
    for (size_t o = 0; o < un; ++o) {  // never more rows than the owner has
      c.bal_K[o] = std::min<uint64_t>(c.bal_K[o], part.owner_size(static_cast<uint32_t>(o)));
      c.ps_K[o] = std::min<uint64_t>(c.ps_K[o], part_begin(R, n, static_cast<int>(o) + 1) - part_begin(R, n, static_cast<int>(o)));
    }
  }

  // SparCML: rank r < P holds the union of its group of ranks (fold partner r + P included) when
  // stage s starts; group at stage s = the 2^s ranks sharing r's bits above s.
  const int P = sparcml_ranks(n);
  int L = 0;
  while ((1 << L) < P) ++L;
  c.sc_state.assign(static_cast<size_t>(L) + 1, std::vector<uint64_t>(static_cast<size_t>(P), 0));
  for (int s = 0; s <= L; ++s)
    for (int r = 0; r < P; ++r) {
      const int base = r & ~((1 << s) - 1);
      if (s > 0 && r != base) {  // every member of a group holds the same union
        c.sc_state[static_cast<size_t>(s)][static_cast<size_t>(r)] = c.sc_state[static_cast<size_t>(s)][static_cast<size_t>(base)];
        continue;
      }
      std::vector<int> members;
      for (int q = base; q < base + (1 << s); ++q) {
        members.push_back(q);
        if (q + P < n) members.push_back(q + P);
      }
      uint64_t v;
      if (members.size() == 1) {
        v = k[static_cast<size_t>(members[0])];
      } else {
        std::vector<int64_t> u;
        for (int q : members) u.insert(u.end(), sample[static_cast<size_t>(q)].begin(), sample[static_cast<size_t>(q)].end());
        std::sort(u.begin(), u.end());
        v = static_cast<uint64_t>(std::unique(u.begin(), u.end()) - u.begin());
        v = scaled(v, stride, R);
        for (int q : members) v = std::max(v, k[static_cast<size_t>(q)]);  // a union holds each member
      }
      c.sc_state[static_cast<size_t>(s)][static_cast<size_t>(r)] = v;
    }

  // OmniReduce: present blocks need the exact sets.
  if (stride == 1) {
    const uint64_t BR = std::max<uint64_t>(1, p.opt.block_size / std::max<uint32_t>(1, p.D));
    const uint64_t NB = (R + BR - 1) / BR;
    auto rows_b = [&](uint64_t b) { return std::min(BR, R - b * BR); };
    c.om_rows.assign(un, std::vector<uint64_t>(un, 0));
    c.om_mask.assign(un, std::vector<uint64_t>(un, 0));
    c.om_V_rows.assign(un, 0);
    c.om_V_mask.assign(un, 0);
    auto blocks_of = [&](const std::vector<int64_t>& rows) {
      std::vector<uint64_t> b;
      b.reserve(rows.size());
      for (int64_t x : rows) b.push_back(static_cast<uint64_t>(x) / BR);
      std::sort(b.begin(), b.end());
      b.erase(std::unique(b.begin(), b.end()), b.end());
      return b;
    };
    for (size_t r = 0; r < un; ++r)
      for (uint64_t b : blocks_of(sample[r])) {
        const auto o = static_cast<size_t>(part_of(b, NB, n));
        c.om_rows[r][o] += rows_b(b);
        c.om_mask[r][o] += (rows_b(b) + 7) / 8;
      }
    for (uint64_t b : blocks_of(uni)) {
      const auto o = static_cast<size_t>(part_of(b, NB, n));
      c.om_V_rows[o] += rows_b(b);
      c.om_V_mask[o] += (rows_b(b) + 7) / 8;
    }
  }
  return c;
}

Counts count_exact(const Problem& p, const std::vector<std::vector<int64_t>>& rows) {
  ZEN_ENFORCE(static_cast<int>(rows.size()) == p.n,
              "cost model: need the rows of each of the " + std::to_string(p.n) + " ranks, got " + std::to_string(rows.size()));
  std::vector<std::vector<int64_t>> distinct(rows.size());
  std::vector<uint64_t> k(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    distinct[r] = rows[r];
    for (int64_t x : distinct[r])
      ZEN_ENFORCE(x >= 0 && static_cast<uint64_t>(x) < p.rows,
                  "cost model: rank " + std::to_string(r) + " row " + std::to_string(x) + " is outside [0, " + std::to_string(p.rows) + ")");
    std::sort(distinct[r].begin(), distinct[r].end());
    distinct[r].erase(std::unique(distinct[r].begin(), distinct[r].end()), distinct[r].end());
    k[r] = distinct[r].size();
  }
  return estimate_from_sample(p, distinct, k, 1);
}

uint64_t Traffic::max_sent() const { return sent.empty() ? 0 : *std::max_element(sent.begin(), sent.end()); }
uint64_t Traffic::max_recv() const { return recv.empty() ? 0 : *std::max_element(recv.begin(), recv.end()); }

bool covers(const std::string& s) {
  for (const auto& name : scheme_names())
    if (name == s) return true;
  return false;
}

uint64_t dense_bytes(const Problem& p) {
  if (p.n <= 1) return 0;
  const uint64_t S = p.N() * dtype_size(p.dtype);
  uint64_t worst = 0;
  for (int r = 0; r < p.n; ++r) worst = std::max<uint64_t>(worst, 2 * (S - ring_chunk_bytes(S / dtype_size(p.dtype), dtype_size(p.dtype), p.n, r)));
  return worst;
}

Traffic traffic(const std::string& scheme, const Problem& p, const Counts& c) {
  const int n = p.n;
  const auto un = static_cast<size_t>(n);
  ZEN_ENFORCE(covers(scheme), "cost model: unknown scheme '" + scheme + "'");
  ZEN_ENFORCE(c.k.size() == un, "cost model: counts are for " + std::to_string(c.k.size()) + " ranks, the problem has " + std::to_string(n));
  const uint64_t R = p.rows, D = p.D, vs = dtype_size(p.dtype), N = p.N(), Rb = (R + 7) / 8;
  const double lg = n > 1 ? std::ceil(std::log2(static_cast<double>(n))) : 0.0, nm1 = n - 1;
  Traffic t;
  t.scheme = scheme;
  t.sent.assign(un, 0);
  t.recv.assign(un, 0);
  t.phases.reserve(72);  // phase() hands out references: no reallocation (SparCML: log2 n + 2 <= 66)
  // Rounds and messages of the collective algorithms assumed (docs/cost-model.md): rings are
  // sequential (one round per step); fixed-size allgathers / alltoalls of small records take log2 n
  // rounds (recursive doubling, Bruck); personalized exchanges (alltoallv, allgatherv) post their
  // n - 1 messages at once (one round).
  auto phase = [&](const char* name, double rounds, double messages) -> PhaseTraffic& {
    t.phases.push_back(PhaseTraffic{name, std::vector<uint64_t>(un, 0), std::vector<uint64_t>(un, 0), rounds, messages});
    return t.phases.back();
  };
  const double one = n > 1 ? 1.0 : 0.0;
  auto ring = [&](PhaseTraffic& ph, uint64_t count, uint64_t elem, bool two_passes) {  // ring RS (+ AG)
    if (n == 1) return;
    const uint64_t S = count * elem;
    for (int r = 0; r < n; ++r) {
      const auto ur = static_cast<size_t>(r);
      ph.sent[ur] += S - ring_chunk_bytes(count, elem, n, r);
      ph.recv[ur] += S - ring_chunk_bytes(count, elem, n, (r + n - 1) % n);
      if (two_passes) {
        ph.sent[ur] += S - ring_chunk_bytes(count, elem, n, (r + 1) % n);
        ph.recv[ur] += S - ring_chunk_bytes(count, elem, n, r);
      }
    }
  };

  if (scheme == "dense") {
    t.encoding = "dense";
    if (n > 1) {
      const uint64_t S = N * vs;
      PhaseTraffic& rs = phase("reduce_scatter", nm1, nm1);
      for (int r = 0; r < n; ++r) {
        rs.sent[static_cast<size_t>(r)] = S - ring_chunk_bytes(N, vs, n, r);
        rs.recv[static_cast<size_t>(r)] = S - ring_chunk_bytes(N, vs, n, (r + n - 1) % n);
      }
      PhaseTraffic& ag = phase("allgather", nm1, nm1);
      for (int r = 0; r < n; ++r) {
        ag.sent[static_cast<size_t>(r)] = S - ring_chunk_bytes(N, vs, n, (r + 1) % n);
        ag.recv[static_cast<size_t>(r)] = S - ring_chunk_bytes(N, vs, n, r);
      }
    } else {
      phase("reduce_scatter", 0, 0);
      phase("allgather", 0, 0);
    }
    if (p.sparse_out) ring(phase("support", 2 * nm1, 2 * nm1), Rb, 1, true);
  } else if (scheme == "dense_native") {
    t.encoding = "dense";
    phase("densify", 0, 0);
    // The sum (large: ring) and, for a sparse output, its support bitmap (small: recursive
    // doubling) in one allreduce_sum_or: one phase.
    const double sup = p.sparse_out ? 2 * lg : 0.0;
    PhaseTraffic& ar = phase("allreduce", 2 * nm1 + sup, 2 * nm1 + sup);
    if (n > 1 && N)
      for (int r = 0; r < n; ++r) {
        uint64_t b = 2 * (N * vs - ring_chunk_bytes(N, vs, n, r));
        if (p.sparse_out) b += 2 * (Rb - ring_chunk_bytes(Rb, 1, n, r));
        ar.sent[static_cast<size_t>(r)] = ar.recv[static_cast<size_t>(r)] = b;
      }
    if (p.sparse_out) phase("extract", 0, 0);
  } else if (scheme == "allgather") {
    t.encoding = "coo";
    const uint64_t e = key_width(R) + D * vs;
    uint64_t tot = 0;
    for (uint64_t x : c.k) tot += x;
    PhaseTraffic& cn = phase("counts", lg, lg);
    PhaseTraffic& ag = phase("allgatherv", one, nm1);
    phase("reduce", 0, 0);
    for (size_t r = 0; r < un; ++r) {
      cn.sent[r] = cn.recv[r] = 8 * (un - 1);
      ag.sent[r] = (un - 1) * c.k[r] * e;
      ag.recv[r] = (tot - c.k[r]) * e;
    }
  } else if (scheme == "sparcml") {
    t.encoding = "coo";
    const uint64_t e = key_width(R) + D * vs, dense_b = N * vs + (p.sparse_out ? Rb : 0);
    auto sw = [&](uint64_t k) {
      return p.opt.sparcml_dense_switch > 0 ? static_cast<double>(k) > p.opt.sparcml_dense_switch * static_cast<double>(R)
                                            : k * e > dense_b;
    };
    bool any_dense = false, any_sparse = false;
    auto bytes = [&](uint64_t k) {
      const bool d = sw(k);
      (d ? any_dense : any_sparse) = true;
      return 8 + (d ? dense_b : k * e);
    };
    const int P = sparcml_ranks(n);
    int L = 0;
    while ((1 << L) < P) ++L;
    ZEN_ENFORCE(c.sc_state.size() == static_cast<size_t>(L) + 1, "cost model: counts lack SparCML's state sizes");
    if (P < n) {
      PhaseTraffic& f = phase("fold", 1, 1);
      for (int r = P; r < n; ++r) {
        const uint64_t b = bytes(c.k[static_cast<size_t>(r)]);
        f.sent[static_cast<size_t>(r)] += b;
        f.recv[static_cast<size_t>(r - P)] += b;
      }
    }
    for (int s = 0; s < L; ++s) {
      const std::string name = "stage" + std::to_string(s);
      PhaseTraffic& st = phase(name.c_str(), 2, 2);
      const auto& sz = c.sc_state[static_cast<size_t>(s)];
      for (int r = 0; r < P; ++r) {
        st.sent[static_cast<size_t>(r)] += bytes(sz[static_cast<size_t>(r)]);
        st.recv[static_cast<size_t>(r)] += bytes(sz[static_cast<size_t>(r ^ (1 << s))]);
      }
    }
    if (P < n) {
      PhaseTraffic& u = phase("unfold", 1, 1);
      for (int r = P; r < n; ++r) {
        const uint64_t b = bytes(c.sc_state[static_cast<size_t>(L)][static_cast<size_t>(r - P)]);
        u.sent[static_cast<size_t>(r - P)] += b;
        u.recv[static_cast<size_t>(r)] += b;
      }
    }
    for (int r = 0; r < n && !any_dense; ++r) any_dense = sw(c.k[static_cast<size_t>(r)]);
    t.encoding = any_dense ? (any_sparse ? "coo+dense" : "dense") : "coo";
  } else if (scheme == "omnireduce") {
    ZEN_ENFORCE(c.has_omnireduce(), "cost model: OmniReduce needs the exact block sets (sample stride 1)");
    t.encoding = "block";
    const uint64_t BR = std::max<uint64_t>(1, p.opt.block_size / D), NB = (R + BR - 1) / BR;
    auto mbytes = [&](int o) { return (part_begin(NB, n, o + 1) - part_begin(NB, n, o) + 7) / 8; };
    auto vbytes = [&](uint64_t rows, uint64_t mask) { return (p.sparse_out ? mask : 0) + rows * D * vs; };
    PhaseTraffic& pb = phase("push_bitmap", one, nm1);
    PhaseTraffic& pu = phase("push", one, nm1);
    PhaseTraffic& lb = phase("pull_bitmap", one, nm1);
    PhaseTraffic& pl = phase("pull", one, nm1);
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
        const uint64_t b = vbytes(c.om_rows[ur][uo], c.om_mask[ur][uo]);
        pu.sent[ur] += b;
        pu.recv[uo] += b;
      }
    }
  } else {  // balanced, sparse_ps: counts, push, meta, pull
    const bool bal = scheme == "balanced";
    const Partitioner part = Partitioner::make(R, static_cast<uint32_t>(n), p.opt.seed);
    auto m = [&](int o) {
      return bal ? part.owner_size(static_cast<uint32_t>(o)) : part_begin(R, n, o + 1) - part_begin(R, n, o);
    };
    const auto& push = bal ? c.bal_push : c.ps_push;
    const auto& Ko = bal ? c.bal_K : c.ps_K;
    ZEN_ENFORCE(push.size() == un && Ko.size() == un, "cost model: counts lack the per-owner loads");
    const uint64_t iw = key_width(m(0)), rb = D * vs;
    // Pull message of owner o and push message r -> o: index part by the schemes' rules (src/encode/wire.hpp).
    std::vector<uint64_t> P(un);
    std::vector<uint8_t> encs(un);
    for (int o = 0; o < n; ++o) {
      const uint64_t K = Ko[static_cast<size_t>(o)];
      encs[static_cast<size_t>(o)] = wire::pick_encoding(p.opt.pull, m(o), K, iw);
      P[static_cast<size_t>(o)] = wire::index_part_bytes(encs[static_cast<size_t>(o)], m(o), K, iw) + K * rb;
    }
    t.encoding = wire::encodings_name(encs.data(), n, -1);
    auto push_bytes = [&](int o, uint64_t K) {
      return wire::index_part_bytes(wire::pick_push_encoding(p.opt.push, m(o), K, iw, rb), m(o), K, iw) + K * rb;
    };
    if (bal) phase("hash", 0, 0);
    PhaseTraffic& cn = phase("counts", lg, lg);
    phase("encode", 0, 0);
    PhaseTraffic& pu = phase("push", one, nm1);
    phase("aggregate", 0, 0);
    PhaseTraffic& me = phase("meta", lg, lg);
    phase("encode", 0, 0);
    PhaseTraffic& pl = phase("pull", one, nm1);
    phase("decode", 0, 0);
    for (int r = 0; r < n; ++r) {
      const auto ur = static_cast<size_t>(r);
      cn.sent[ur] = cn.recv[ur] = 8 * (un - 1);
      me.sent[ur] = me.recv[ur] = 24 * (un - 1);
      pl.sent[ur] = (un - 1) * P[ur];
      for (int o = 0; o < n; ++o) {
        if (o == r) continue;
        const auto uo = static_cast<size_t>(o);
        pl.recv[ur] += P[uo];
        const uint64_t b = push_bytes(o, push[ur][uo]);
        pu.sent[ur] += b;
        pu.recv[uo] += b;
      }
    }
  }
  for (const auto& ph : t.phases)
    for (size_t r = 0; r < un; ++r) {
      t.sent[r] += ph.sent[r];
      t.recv[r] += ph.recv[r];
    }
  return t;
}

double work_rows(const std::string& scheme, const Problem& p, const Counts& c) {
  const auto un = static_cast<size_t>(p.n);
  double worst = 0;
  uint64_t tot = 0;
  for (uint64_t x : c.k) tot += x;
  for (size_t r = 0; r < un; ++r) {
    double w = 0;
    if (scheme == "dense" || scheme == "dense_native") {
      w = static_cast<double>(c.k[r]) + static_cast<double>(p.rows);  // densify + reduce every row
    } else if (scheme == "allgather") {
      w = static_cast<double>(c.k[r] + tot);
    } else if (scheme == "sparcml") {
      w = static_cast<double>(c.k[r]);
      for (const auto& st : c.sc_state) w += static_cast<double>(st[std::min(r, st.size() - 1)]);
    } else if (scheme == "omnireduce") {
      w = static_cast<double>(c.k[r]);
      if (c.has_omnireduce()) {
        for (size_t q = 0; q < un; ++q) w += static_cast<double>(c.om_rows[q][r]);
        for (size_t o = 0; o < un; ++o) w += static_cast<double>(c.om_V_rows[o]);
      }
    } else {  // balanced, sparse_ps: input, the owner's received rows, every result row
      const auto& push = scheme == "balanced" ? c.bal_push : c.ps_push;
      w = static_cast<double>(c.k[r] + c.K);
      for (size_t q = 0; q < un; ++q) w += static_cast<double>(push[q][r]);
    }
    worst = std::max(worst, w);
  }
  return worst;
}

Prediction predict(const std::string& scheme, const Problem& p, const Counts& c, const Link& link) {
  Prediction pr;
  pr.scheme = scheme;
  pr.traffic = traffic(scheme, p, c);
  for (const auto& ph : pr.traffic.phases) {
    uint64_t b = 0;
    for (size_t r = 0; r < ph.sent.size(); ++r) b = std::max({b, ph.sent[r], ph.recv[r]});
    pr.max_bytes += b;
    pr.comm_s += static_cast<double>(b) / link.bytes_per_s;
    pr.latency_s += ph.rounds * link.alpha_s + ph.messages * link.message_s;
  }
  pr.compute_s = link.entry_s * work_rows(scheme, p, c);
  pr.seconds = pr.comm_s + pr.latency_s + pr.compute_s;
  return pr;
}

int sparcml_ranks(int n) {
  int P = 1;
  while (P * 2 <= n) P *= 2;
  return P;
}

int sparcml_members(int n, int s, int r) {
  const int P = sparcml_ranks(n), base = r & ~((1 << s) - 1);
  int members = 0;
  for (int q = base; q < base + (1 << s); ++q) members += 1 + (q + P < n ? 1 : 0);
  return members;
}

}  // namespace zen::model
