// The cost model (include/zen/model/cost_model.hpp; in the schemes layer, zen_schemes, since it
// replays the scheme rows and auto uses it): the byte formulas of docs/algorithms.md on
// Counts, and an alpha-beta time.
#include "zen/model/cost_model.hpp"

#include "../schemes/scheme_row.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iterator>
#include <unordered_set>

#include "zen/comm/communicator.hpp"
#include "zen/detail/mix64.hpp"
#include "zen/detail/popcount.hpp"
#include "zen/detail/thread_pool.hpp"
#include "zen/error.hpp"
#include "zen/hash/hash.hpp"

namespace zen::model {
namespace {

/// Part holding item x of that split.
int part_of(uint64_t x, uint64_t total, int n) {
  const uint64_t un = static_cast<uint64_t>(n), q = total / un, rem = total % un;
  if (x < rem * (q + 1)) return static_cast<int>(x / (q + 1));
  return static_cast<int>(rem + (x - rem * (q + 1)) / q);
}

/// A rank's sample rows where they lie (the caller's vector or buffer, or a merged union).
struct Run {
  const int64_t* p = nullptr;
  size_t n = 0;
  Run() = default;
  Run(const int64_t* ptr, size_t len) : p(ptr), n(len) {}
  explicit Run(const std::vector<int64_t>& v) : p(v.data()), n(v.size()) {}
  const int64_t* begin() const { return p; }
  const int64_t* end() const { return p + n; }
  size_t size() const { return n; }
  int64_t operator[](size_t i) const { return p[i]; }
};

/// Sorted union of two ascending runs of distinct rows, into out (cleared).
void merge_unique(Run a, Run b, std::vector<int64_t>& out) {
  out.clear();
  out.reserve(a.size() + b.size());
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
}

/// The samples as ascending runs of distinct rows: the caller's own where they are (auto's
/// statistics sort them), else sorted copies kept in `own`.
std::vector<Run> ascending(const std::vector<Run>& sample, std::vector<std::vector<int64_t>>& own) {
  std::vector<Run> asc = sample;
  own.reserve(sample.size());
  for (auto& r : asc) {
    if (std::adjacent_find(r.begin(), r.end(), std::greater_equal<int64_t>()) == r.end()) continue;
    own.emplace_back(r.begin(), r.end());
    auto& s = own.back();
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    r = Run(s);
  }
  return asc;
}

std::vector<Run> runs_of(const std::vector<std::vector<int64_t>>& sample) {
  std::vector<Run> runs;
  runs.reserve(sample.size());
  for (const auto& s : sample) runs.emplace_back(s);
  return runs;
}

Counts estimate_runs(const Problem& p, const std::vector<Run>& sample, const std::vector<uint64_t>& k, uint64_t stride);

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

// hierarchical_sparse (src/schemes/hierarchical_sparse.cpp): each rank's rows per node chunk, and per
// chunk the Counts of its inter-node balanced, whose rank g holds the union of node g's rows in the
// chunk (as chunk positions). Skipped for problems with node_size 0 (the inner problems themselves)
// or a node size that does not divide n.
void node_split_counts(const Problem& p, const std::vector<Run>& sample, const std::vector<uint64_t>& k,
                       uint64_t stride, Counts& c) {
  const int n = p.n, L = p.node_size;
  if (L < 1 || n % L != 0) return;
  const int H = n / L;
  const auto un = static_cast<size_t>(n), uL = static_cast<size_t>(L);
  const Partitioner ch = node_chunks(p.rows, L, p.opt.seed);
  c.hs_L = L;
  c.hs_push.assign(un, std::vector<uint64_t>(uL, 0));
  if (L == 1) {  // one chunk whose positions are the rows: its balanced over n nodes is balanced's
    for (size_t r = 0; r < un; ++r) c.hs_push[r][0] = k[r];
    c.hs_inner.assign(1, c);
    return;
  }
  std::vector<std::vector<std::vector<int64_t>>> node(uL, std::vector<std::vector<int64_t>>(static_cast<size_t>(H)));
  for (size_t r = 0; r < un; ++r) {
    std::vector<uint64_t> w(uL, 0);
    for (int64_t x : sample[r]) {
      uint32_t j = 0;
      uint64_t q = 0;
      ch.locate(static_cast<uint64_t>(x), &j, &q);
      ++w[j];
      node[j][r / uL].push_back(static_cast<int64_t>(q));
    }
    c.hs_push[r] = proportional(k[r], w);
  }
  c.hs_inner.assign(uL, Counts{});
  for (size_t j = 0; j < uL; ++j) {
    const uint64_t mj = ch.owner_size(static_cast<uint32_t>(j));
    if (mj == 0) continue;
    Problem ip = p;
    ip.rows = mj;
    ip.n = H;
    ip.node_size = 0;
    ip.sparse_out = true;
    std::vector<uint64_t> kin(static_cast<size_t>(H));
    for (size_t g = 0; g < static_cast<size_t>(H); ++g) {
      auto& s = node[j][g];
      std::sort(s.begin(), s.end());
      s.erase(std::unique(s.begin(), s.end()), s.end());
      uint64_t v = scaled(s.size(), stride, mj);
      for (size_t l = 0; l < uL; ++l) v = std::max(v, c.hs_push[g * uL + l][j]);  // a union holds each member
      kin[g] = std::min(v, mj);
    }
    c.hs_inner[j] = estimate_runs(ip, runs_of(node[j]), kin, stride);
  }
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
  p.node_size = opt.node_size > 0 ? opt.node_size : 1;
  return p;
}

Counts estimate_from_sample(const Problem& p, const std::vector<std::vector<int64_t>>& sample,
                            const std::vector<uint64_t>& k, uint64_t stride) {
  return estimate_runs(p, runs_of(sample), k, stride);
}

Counts estimate_from_sample(const Problem& p, const int64_t* rows, const std::vector<size_t>& sizes,
                            const std::vector<uint64_t>& k, uint64_t stride) {
  std::vector<Run> runs;
  runs.reserve(sizes.size());
  for (size_t at = 0, r = 0; r < sizes.size(); at += sizes[r], ++r) runs.emplace_back(rows + at, sizes[r]);
  return estimate_runs(p, runs, k, stride);
}

namespace {

Counts estimate_runs(const Problem& p, const std::vector<Run>& sample, const std::vector<uint64_t>& k, uint64_t stride) {
  const int n = p.n;
  ZEN_ENFORCE(n >= 1 && static_cast<int>(sample.size()) == n && static_cast<int>(k.size()) == n,
              "cost model: need the sample and row count of each of the " + std::to_string(n) + " ranks");
  ZEN_ENFORCE(stride >= 1, "cost model: sample stride must be >= 1");
  const uint64_t R = p.rows;
  const auto un = static_cast<size_t>(n);
  Counts c;
  c.k = k;
  const Partitioner part = Partitioner::make(R, static_cast<uint32_t>(n), p.opt.seed);

  std::vector<std::vector<int64_t>> own;
  const std::vector<Run> asc = ascending(sample, own);

  // Unions, in SparCML's groups (estimate of its merged states): at level 0 rank r < P with its fold
  // partner r + P; at level s the 2^s ranks sharing r's bits above s (with their partners), the union
  // of two groups of level s - 1. The last level's one group holds every rank: the union of all.
  const int P = sparcml_ranks(n);
  int L = 0;
  while ((1 << L) < P) ++L;
  const auto uP = static_cast<size_t>(P);
  // A group of one rank is its sample, not a copy; the merged unions (at most n) live in `merged`.
  std::vector<std::vector<Run>> level(static_cast<size_t>(L) + 1);  // [s][base >> s]
  std::vector<std::vector<int64_t>> merged;
  merged.reserve(un);
  auto merge = [&](Run a, Run b) {
    merged.emplace_back();
    merge_unique(a, b, merged.back());
    return Run(merged.back());
  };
  level[0].resize(uP);
  for (size_t r = 0; r < uP; ++r) level[0][r] = r + uP < un ? merge(asc[r], asc[r + uP]) : asc[r];
  for (size_t s = 1; s <= static_cast<size_t>(L); ++s) {
    level[s].resize(uP >> s);
    for (size_t g = 0; g < (uP >> s); ++g) level[s][g] = merge(level[s - 1][2 * g], level[s - 1][2 * g + 1]);
  }
  const Run uni = level[static_cast<size_t>(L)][0];
  c.K = scaled(uni.size(), stride, R);

  // Per-owner loads: sample proportions of each rank's k (h0 owners, key ranges); union per owner.
  // h0 is evaluated once per union row; a rank's rows (a subset of the union) find theirs in one
  // sweep, and key ranges by their bounds (rows ascending).
  std::vector<uint64_t> bound(un + 1);
  for (size_t o = 0; o <= un; ++o) bound[o] = part_begin(R, n, static_cast<int>(o));
  std::vector<uint32_t> uowner(uni.size());
  std::vector<uint64_t> wb(un, 0), wp(un, 0);
  {
    size_t o = 0;
    for (size_t i = 0; i < uni.size(); ++i) {
      const auto x = static_cast<uint64_t>(uni[i]);
      uowner[i] = part.owner(x);
      ++wb[uowner[i]];
      while (o + 1 < un && x >= bound[o + 1]) ++o;  // a row outside [0, R) counts in the last range
      ++wp[o];
    }
    c.bal_K = proportional(c.K, wb);
    c.ps_K = proportional(c.K, wp);
    for (size_t q = 0; q < un; ++q) {  // never more rows than the owner has
      c.bal_K[q] = std::min<uint64_t>(c.bal_K[q], part.owner_size(static_cast<uint32_t>(q)));
      c.ps_K[q] = std::min<uint64_t>(c.ps_K[q], bound[q + 1] - bound[q]);
    }
  }
  c.bal_push.assign(un, std::vector<uint64_t>(un, 0));
  c.ps_push.assign(un, std::vector<uint64_t>(un, 0));
  for (size_t r = 0; r < un; ++r) {
    std::fill(wb.begin(), wb.end(), 0);
    std::fill(wp.begin(), wp.end(), 0);
    size_t i = 0, o = 0;
    for (int64_t x : asc[r]) {
      while (uni[i] < x) ++i;  // x is in the union
      ++wb[uowner[i]];
      while (o + 1 < un && static_cast<uint64_t>(x) >= bound[o + 1]) ++o;
      ++wp[o];
    }
    c.bal_push[r] = proportional(k[r], wb);
    c.ps_push[r] = proportional(k[r], wp);
  }

  // SparCML: rank r < P holds its group's union when stage s starts (every member of a group the
  // same), never less than any member's rows; a group of one rank holds its k.
  c.sc_state.assign(static_cast<size_t>(L) + 1, std::vector<uint64_t>(uP, 0));
  for (size_t s = 0; s <= static_cast<size_t>(L); ++s)
    for (size_t r = 0; r < uP; ++r) {
      const size_t base = r & ~((size_t{1} << s) - 1);
      uint64_t v = 0;
      size_t members = 0;
      for (size_t q = base; q < base + (size_t{1} << s); ++q)
        for (size_t m : {q, q + uP})
          if (m < un) {
            v = std::max(v, k[m]);
            ++members;
          }
      if (members > 1) v = std::max(v, scaled(level[s][base >> s].size(), stride, R));
      c.sc_state[s][r] = v;
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
    auto blocks_of = [&](Run rows) {
      std::vector<uint64_t> b;
      b.reserve(rows.size());
      for (int64_t x : rows) b.push_back(static_cast<uint64_t>(x) / BR);
      if (!std::is_sorted(b.begin(), b.end())) std::sort(b.begin(), b.end());
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
  node_split_counts(p, sample, k, stride, c);
  return c;
}

}  // namespace

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
  Counts c = estimate_from_sample(p, distinct, k, 1);
  c.entries.resize(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) c.entries[r] = rows[r].size();
  return c;
}

uint64_t Traffic::max_sent() const { return sent.empty() ? 0 : *std::max_element(sent.begin(), sent.end()); }
uint64_t Traffic::max_recv() const { return recv.empty() ? 0 : *std::max_element(recv.begin(), recv.end()); }

bool covers(const std::string& s) { return detail::find_scheme(s) != nullptr; }

uint64_t dense_bytes(const Problem& p) {
  if (p.n <= 1) return 0;
  const uint64_t S = p.N() * dtype_size(p.dtype);
  uint64_t worst = 0;
  for (int r = 0; r < p.n; ++r) worst = std::max<uint64_t>(worst, 2 * (S - ring_chunk_bytes(S / dtype_size(p.dtype), dtype_size(p.dtype), p.n, r)));
  return worst;
}

Traffic traffic(const std::string& scheme, const Problem& p, const Counts& c) {
  const detail::SchemeRow* row = detail::find_scheme(scheme);
  ZEN_ENFORCE(row, "cost model: unknown scheme '" + scheme + "'");
  ZEN_ENFORCE(c.k.size() == static_cast<size_t>(p.n),
              "cost model: counts are for " + std::to_string(c.k.size()) + " ranks, the problem has " + std::to_string(p.n));
  Traffic t;
  t.scheme = scheme;
  t.sent.assign(static_cast<size_t>(p.n), 0);
  t.recv.assign(static_cast<size_t>(p.n), 0);
  TrafficBuilder b(p, c, t);
  row->traffic(b);  // the scheme's own model, defined with its row
  for (const auto& ph : t.phases)
    for (size_t r = 0; r < t.sent.size(); ++r) {
      t.sent[r] += ph.sent[r];
      t.recv[r] += ph.recv[r];
    }
  return t;
}

double work_rows(const std::string& scheme, const Problem& p, const Counts& c) {
  const detail::SchemeRow* row = detail::find_scheme(scheme);
  ZEN_ENFORCE(row, "cost model: unknown scheme '" + scheme + "'");
  double worst = 0;
  for (size_t r = 0; r < static_cast<size_t>(p.n); ++r) worst = std::max(worst, row->work(p, c, r));
  return worst;
}

namespace {

/// The compute term's count of per-rank amounts v: the largest, or a group's sum over its cores
/// where ranks share cores (Problem::cpu_group), whichever is more.
double shared_max(const Problem& p, const std::vector<double>& v) {
  double m = v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
  if (p.cpu_group.size() != v.size()) return m;
  std::vector<double> sum(p.cpu_cores.size(), 0.0);
  for (size_t r = 0; r < v.size(); ++r) {
    const int g = p.cpu_group[r];
    if (g >= 0 && static_cast<size_t>(g) < sum.size()) sum[static_cast<size_t>(g)] += v[r];
  }
  for (size_t g = 0; g < sum.size(); ++g) m = std::max(m, sum[g] / std::max(1.0, p.cpu_cores[g]));
  return m;
}

}  // namespace

CpuSite CpuSite::here() {
  CpuSite s;
  std::string id;
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char b[64] = {};
    if (std::fgets(b, sizeof b, f)) id = b;
    std::fclose(f);
  }
  if (id.empty()) {
    char h[256] = {};
    if (gethostname(h, sizeof h - 1) == 0) id = std::string("host:") + h;
  }
  s.machine = fnv1a(id.data(), id.size());
  detail::affinity_mask(s.mask, 16);
  return s;
}

void Problem::share_cores(const std::vector<CpuSite>& sites, int cores) {
  cpu_group.clear();
  cpu_cores.clear();
  if (cores < 0 || sites.size() != static_cast<size_t>(n)) return;
  std::vector<uint64_t> machines;
  std::vector<int> group(sites.size());
  std::vector<std::array<uint64_t, 16>> masks;
  std::vector<int> members;
  for (size_t r = 0; r < sites.size(); ++r) {
    const auto it = std::find(machines.begin(), machines.end(), sites[r].machine);
    const auto g = static_cast<size_t>(it - machines.begin());
    if (it == machines.end()) {
      machines.push_back(sites[r].machine);
      masks.emplace_back();
      masks.back().fill(0);
      members.push_back(0);
    }
    group[r] = static_cast<int>(g);
    for (size_t w = 0; w < 16; ++w) masks[g][w] |= sites[r].mask[w];
    ++members[g];
  }
  std::vector<double> have(machines.size());
  bool shared = false;
  for (size_t g = 0; g < machines.size(); ++g) {
    const auto c = static_cast<int>(detail::popcount_bytes(masks[g].data(), sizeof masks[g]));
    have[g] = cores > 0 ? cores : std::max(1, c);
    shared = shared || members[g] > have[g];
  }
  if (!shared) return;
  cpu_group = std::move(group);
  cpu_cores = std::move(have);
}

double Problem::ranks_per_core() const {
  if (cpu_group.empty()) return 1.0;
  std::vector<double> members(cpu_cores.size(), 0.0);
  for (int g : cpu_group)
    if (g >= 0 && static_cast<size_t>(g) < members.size()) members[static_cast<size_t>(g)] += 1.0;
  double f = 1.0;
  for (size_t g = 0; g < members.size(); ++g) f = std::max(f, members[g] / std::max(1.0, cpu_cores[g]));
  return f;
}

Prediction predict(const std::string& scheme, const Problem& p, const Counts& c, const Link& link) {
  Prediction pr;
  pr.scheme = scheme;
  pr.traffic = traffic(scheme, p, c);
  const int L = p.node_size;
  const bool nodes = L > 1 && p.n % L == 0;
  for (const auto& ph : pr.traffic.phases) {
    uint64_t b = 0;
    for (size_t r = 0; r < ph.sent.size(); ++r) b = std::max({b, ph.sent[r], ph.recv[r]});
    pr.max_bytes += b;
    pr.latency_s += ph.rounds * link.alpha_s + ph.messages * link.message_s;
    if (!nodes) {
      pr.comm_s += static_cast<double>(b) / link.bytes_per_s;
      continue;
    }
    // Ranks sharing a node share its link: the busiest node's bytes to other nodes at bytes_per_s,
    // the busiest rank's bytes inside the node at node_bytes_per_s. A flat scheme's bytes go to its
    // n - 1 peers alike, n - L of them on other nodes.
    const double away = ph.where == PhaseTraffic::kInsideNode  ? 0.0
                        : ph.where == PhaseTraffic::kAcrossNodes ? 1.0
                                                                 : static_cast<double>(p.n - L) / static_cast<double>(p.n - 1);
    uint64_t host = 0;
    for (int g = 0; g < p.n / L; ++g) {
      uint64_t s = 0, v = 0;
      for (int l = 0; l < L; ++l) {
        s += ph.sent[static_cast<size_t>(g * L + l)];
        v += ph.recv[static_cast<size_t>(g * L + l)];
      }
      host = std::max({host, s, v});
    }
    const auto hb = static_cast<uint64_t>(std::llround(static_cast<double>(host) * away));
    const auto nb = static_cast<uint64_t>(std::llround(static_cast<double>(b) * (1.0 - away)));
    pr.host_bytes += hb;
    pr.node_bytes += nb;
    pr.comm_s += static_cast<double>(hb) / link.bytes_per_s + static_cast<double>(nb) / link.node_bytes_per_s;
  }
  // The compute term: each rank's CPU time from the rows it touches; the busiest rank's, or a group
  // of ranks sharing cores its sum over them (they take turns).
  const detail::SchemeRow* row = detail::find_scheme(scheme);
  std::vector<double> rows(static_cast<size_t>(p.n)), cpu(static_cast<size_t>(p.n));
  for (size_t r = 0; r < rows.size(); ++r) {
    rows[r] = row->work(p, c, r);
    cpu[r] = link.entry_s * rows[r] + link.cpu_s(scheme, rows[r], p);
  }
  pr.rows = rows.empty() ? 0.0 : *std::max_element(rows.begin(), rows.end());
  pr.cpu_rows = shared_max(p, rows);
  pr.compute_s = shared_max(p, cpu);
  pr.seconds = pr.comm_s + pr.latency_s + pr.compute_s;
  return pr;
}

uint64_t dense_values(const std::string& scheme, const Problem& p) {
  const detail::SchemeRow* row = detail::find_scheme(scheme);
  ZEN_ENFORCE(row, "cost model: unknown scheme '" + scheme + "'");
  return !p.sparse_out || row->has(detail::kDense) ? p.N() : 0;
}

double Link::cpu_s(const std::string& scheme, double rows, const Problem& p) const {
  double s = 0;
  for (const auto& t : cpu)
    if (t.scheme == scheme) s += t.value_s * rows * p.D + t.row_s * rows + t.dense_s * static_cast<double>(dense_values(scheme, p));
  return s;
}

Link Link::of(const SchemeOptions::Auto& a) {
  return Link{a.alpha_s, a.message_s, a.bytes_per_s, a.entry_s, a.cpu};
}

double learned_bytes_per_s(const Prediction& p, double measured_s, const Link& link, double ratio) {
  if (!(ratio > 1) || !(p.seconds > 0) || !(measured_s > ratio * p.seconds)) return 0;
  const bool node_aware = p.host_bytes + p.node_bytes > 0;
  const double bytes = static_cast<double>(node_aware ? p.host_bytes : p.max_bytes);
  if (!(bytes > 0) || !(link.bytes_per_s > 0)) return 0;
  const double rest = p.seconds - bytes / link.bytes_per_s;  // what does not move over the link
  if (!(measured_s > rest)) return 0;
  return bytes / (measured_s - rest);
}

ExploreLimits ExploreLimits::of(const SchemeOptions::Auto& a) {
  return ExploreLimits{a.explore_within, a.max_explore, a.trials, a.explore_budget};
}

size_t explore_count(const std::vector<double>& seconds, const ExploreLimits& l, const std::vector<double>& first_extra) {
  if (seconds.empty()) return 0;
  ZEN_ENFORCE(first_extra.empty() || first_extra.size() == seconds.size(), "explore_count: one first-call extra per candidate");
  const double best = seconds.front();
  const size_t close = explore_window(seconds, l);
  double extra = 0;  // predicted time of the trial calls beyond the best's, in seconds
  size_t m = 1;
  for (size_t i = 1; i <= close; ++i) {
    const double more = extra + static_cast<double>(l.trials) * (seconds[i] - best) + (first_extra.empty() ? 0.0 : first_extra[i]);
    if (more > l.budget * best) break;
    extra = more;
    ++m;
  }
  return m;
}

size_t explore_window(const std::vector<double>& seconds, const ExploreLimits& l) {
  if (seconds.empty() || l.within <= 1.0) return 0;
  size_t close = 0;  // seconds ascending: the window ends at the first one outside it
  for (size_t i = 1; i < seconds.size() && static_cast<int>(i) < l.max_explore && seconds[i] <= l.within * seconds.front(); ++i) ++close;
  return close;
}

uint64_t calls_until_affordable(const std::vector<double>& seconds, const ExploreLimits& l, const std::vector<double>& first_extra,
                                double share) {
  if (explore_window(seconds, l) == 0 || share <= 0 || seconds.front() <= 0) return 0;
  const double need = static_cast<double>(l.trials) * (seconds[1] - seconds[0]) + (first_extra.size() > 1 ? first_extra[1] : 0.0);
  const double calls = std::ceil((need / seconds[0] - l.budget) / share);
  if (!(calls < 1e12)) return 0;
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::max(0.0, calls)));
}

double first_call_extra(const Prediction& p, double cold_calls) { return std::max(0.0, cold_calls) * p.compute_s; }

bool dominated(const Prediction& b, const Prediction& a) {
  return b.max_bytes >= a.max_bytes && b.host_bytes >= a.host_bytes && b.node_bytes >= a.node_bytes &&
         b.latency_s >= a.latency_s && b.cpu_rows >= a.cpu_rows && b.compute_s >= a.compute_s && b.seconds >= a.seconds;
}

int explore_drop_round(const ExploreLimits& l) { return l.trials > 1 ? 1 : 0; }

bool explore_drops(double t, double fastest, const ExploreLimits& l) { return t > std::max(1.0, l.within) * fastest; }

double exploration_mean(const std::vector<double>& predicted, const std::vector<double>& real, const ExploreLimits& l,
                        int calls, double stats_s, size_t* chosen) {
  ZEN_ENFORCE(predicted.size() == real.size() && !real.empty() && calls >= 1, "exploration_mean: one real time per candidate");
  const size_t m = explore_count(predicted, l);
  double total = stats_s;
  int done = 0;
  auto call = [&](size_t i) {
    if (done < calls) total += real[i];
    ++done;
  };
  size_t pick = 0;
  if (m > 1) {
    // Rounds as auto runs them (auto.cpp): all m until the drop round, then the survivors, `trials`
    // rounds or until one is left; the choice is the fastest measured (rounds >= 1 when there were any).
    std::vector<size_t> alive;
    for (size_t i = 0; i < m; ++i) alive.push_back(i);
    std::vector<double> best(m, INFINITY);
    for (int round = 0; round < std::max(1, l.trials) && alive.size() > 1; ++round) {
      for (size_t i : alive) call(i);
      if (round >= 1 || l.trials <= 1)
        for (size_t i : alive) best[i] = std::min(best[i], real[i]);
      if (round == explore_drop_round(l)) {
        double fastest = INFINITY;
        for (size_t i : alive) fastest = std::min(fastest, real[i]);
        std::vector<size_t> keep;
        for (size_t i : alive)
          if (!explore_drops(real[i], fastest, l)) keep.push_back(i);
        alive = keep;
      }
    }
    pick = alive.front();
    for (size_t i : alive)
      if (best[i] < best[pick]) pick = i;
  }
  while (done < calls) call(pick);
  if (chosen) *chosen = pick;
  return total / calls;
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
