// Scheme "auto": picks the scheme by the cost model (zen/model/cost_model.hpp) and by measuring the
// candidates the model cannot separate.
//
// A decision (first call, then every `reevaluate_every` calls, or when the size every rank learns
// in a call moves by more than `drift`) runs in the call itself:
//  1. statistics ("auto_stats"): each rank keeps the rows in its sample of rate 1/2^shift
//     (model::in_sample; shift 0 when nnz <= sample_rows: every row), the lowest shift that keeps
//     at most sample_rows distinct rows, in one pass, and sorts only those; one allgather of fixed
//     blocks (nnz, distinct rows exact or estimated from the sample, sample size and shift, where
//     the rank runs: model::CpuSite, and up to kBlockRows sample rows; an allgatherv of the rest
//     only when some sample is longer) gives every rank the same numbers, and every sample is cut
//     to the highest shift (samples nest), the common sample the estimate reads.
//  2. model: predicted time of every candidate (alpha-beta on the model's bytes, plus the CPU terms;
//     ranks of one machine that outnumber its cores are charged their summed CPU time over them:
//     model::Problem::share_cores). Dense fallback: when every sparse candidate moves more bytes than
//     a dense allreduce, run dense_native.
//  3. measurement (model::explore_count): the candidates the best one does not dominate
//     (model::dominated: as many bytes, latency and charged rows or more) predicted within `explore_within` of
//     the best, while the predicted extra time of their trial calls (and of the first call of a
//     candidate not run yet: `cold_calls` x its CPU time) stays within `explore_budget` calls of the
//     best plus `explore_share` of a call per call since the last decision (so the first decision
//     measures only what is cheap to try, and a re-evaluation spends at most that share of the calls
//     it follows), run real calls in rounds (one call each per round, interleaved; one
//     allgather of the round's times after it); after the first warm round the ones slower than
//     explore_within x the fastest are dropped; after `trials` rounds (or one left) the chosen
//     scheme is the one whose slowest rank was fastest in the warm rounds (ties: model order).
//  0. remembered decisions (SchemeOptions::Auto::cache, the first decision only): each rank looks
//     up its situation (cache_key) in the cache file; one allgather of each rank's entry (scheme
//     code, time, size; "auto_cache"): when every rank remembers the same scheme, it is the choice,
//     without steps 1-3, and the calls check it (agreed size within drift of the remembered ones,
//     the slowest rank's fastest of calls 2-9 within kCacheSlack x the slowest
//     remembered time; else a full decision in the next call). The ranks' entries may come from
//     different decisions (a rank whose input size class changed between two decisions holds the
//     older one), hence the ranges. A choice made in steps 1-3 is written there with its warm
//     time (measured in the exploration, else timed as for the link check).
//  4. link check (once per statistics, `learn_link` > 1, ranks on several nodes): the chosen scheme's time (the slowest rank's
//     fastest of its 2nd and 3rd call, one allgather of a number; or its warm time in the
//     exploration) against its prediction. Above learn_link x, the link is slower than the model
//     says: link_ takes the rate that explains the time (model::learned_bytes_per_s), kept for later
//     decisions, and steps 2-3 run again on the same statistics.
// Every choice is a function of allgathered numbers only, so all ranks choose alike. The calls of
// the exploration are ordinary calls (their results are correct), only possibly slower.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <type_traits>

#include <unistd.h>

#include "auto_cache.hpp"
#include "plan_util.hpp"
#include "scheme_row.hpp"
#include "zen/error.hpp"
#include "zen/model/cost_model.hpp"
#include "zen/detail/mix64.hpp"
#include "zen/schemes/scheme.hpp"
#include "zen/version.h"

namespace zen {
namespace {

// Auto reads the scheme table (scheme_row.hpp): its default candidates are the rows with an auto
// position, in that order (model ties go to the earlier one); a row's traits say which schemes are
// dense allreduces (the fallback) and which need exact block counts (skipped on a sample).
const std::vector<std::string>& default_candidates() {
  static const std::vector<std::string> c = detail::auto_candidates();
  return c;
}

const detail::SchemeRow& row_of(const std::string& name) {
  const detail::SchemeRow* r = detail::find_scheme(name);
  ZEN_CHECK_CODE(r, Result::InternalError, "sparse allreduce (auto): no row for scheme '" + name + "'");
  return *r;
}

/// A number as an ostream writes it by default (6 significant digits).
std::string fmt_num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

/// A link rate in bits per second, as "25 Gb/s" or "940 Mb/s".
std::string fmt_rate(double bytes_per_s) {
  char b[32];
  const double bits = bytes_per_s * 8;
  if (bits >= 1e9) std::snprintf(b, sizeof b, "%.3g Gb/s", bits / 1e9);
  else std::snprintf(b, sizeof b, "%.3g Mb/s", bits / 1e6);
  return b;
}

std::string fmt_time(double s) {
  char b[32];
  if (s >= 1e-3) std::snprintf(b, sizeof b, "%.3g ms", s * 1e3);
  else std::snprintf(b, sizeof b, "%.3g us", s * 1e6);
  return b;
}

/// Every option that may change what the schemes cost or what auto chooses, as text (exact: doubles
/// with 17 digits), for the decision cache's key.
std::string options_text(const SchemeOptions& o) {
  std::string t;
  auto num = [&](const char* name, double x) {
    char b[64];
    std::snprintf(b, sizeof b, " %s=%.17g", name, x);
    t += b;
  };
  num("pull", static_cast<double>(o.pull));
  num("push", static_cast<double>(o.push));
  num("dup", static_cast<double>(o.duplicates));
  t += " seed=" + std::to_string(o.seed);
  num("k", o.hash_functions);
  num("pf", o.parallel_factor);
  num("sf", o.serial_fraction);
  num("threads", o.threads);
  num("validate", o.validate);
  num("sparcml", o.sparcml_dense_switch);
  num("block", o.block_size);
  num("node", o.node_size);
  num("avg", o.output.average);
  num("acc", o.output.accumulate);
  const auto& a = o.autotune;
  t += " candidates=";
  for (const auto& c : a.candidates) t += c + ",";
  num("within", a.explore_within);
  num("max_explore", a.max_explore);
  num("trials", a.trials);
  num("budget", a.explore_budget);
  num("share", a.explore_share);
  num("cold", a.cold_calls);
  t += " sample=" + std::to_string(a.sample_rows);
  num("cores", a.cores);
  num("learn", a.learn_link);
  num("alpha", a.alpha_s);
  num("message", a.message_s);
  num("bps", a.bytes_per_s);
  num("entry", a.entry_s);
  for (const auto& c : a.cpu) {
    t += " cpu:" + c.scheme;
    num("v", c.value_s);
    num("d", c.dense_s);
    num("r", c.row_s);
  }
  return t;
}

class Auto : public SparseAllreduce {
  static constexpr size_t kSmallSort = 4096;  // samples up to this many rows are sorted by std::sort
  static constexpr int kCheckCalls = 3;       // calls of a model choice timed for the link check (first not counted)
  // Calls of a remembered choice timed for the cache check (first not counted): a new process's
  // calls 2-3 are still cold (Open MPI's non-blocking allgatherv, 4 ranks x 86 KB: 1.1-4.3 ms, the
  // 20th 0.2-0.4 ms), against a time remembered warm; the fastest of calls 2-9 is near warm.
  static constexpr int kCacheCheckCalls = 9;
  static constexpr size_t kBlockRows = 1024;  // sample rows in the statistics' allgather (the default sample_rows)
  static constexpr double kCacheSlack = 1.5;  // a remembered choice slower than this x its remembered time is decided again
  struct Head {  // a rank's statistics, before its sample
    uint64_t nnz, k, sampled, shift;  // no padding: every byte sent is set
    model::CpuSite site;
  };
  static_assert(std::is_trivially_copyable_v<Head>);
  static constexpr size_t kHeadWords = (sizeof(Head) + sizeof(int64_t) - 1) / sizeof(int64_t);

 public:
  Auto(Communicator& comm, const TensorSpec& spec, const SchemeOptions& opt) : SparseAllreduce(comm, spec, opt) {
    const auto& a = opt_.autotune;
    candidates_ = a.candidates.empty() ? default_candidates() : a.candidates;
    for (const auto& c : candidates_)
      ZEN_ENFORCE(model::covers(c), "rank " + std::to_string(comm.rank()) + " sparse allreduce (auto): unknown candidate scheme '" + c + "'");
    ZEN_ENFORCE(!candidates_.empty(), "sparse allreduce (auto): no candidate scheme");
    ZEN_ENFORCE(a.trials >= 1, "sparse allreduce (auto): trials must be >= 1");
    ZEN_ENFORCE(a.max_explore >= 1, "sparse allreduce (auto): max_explore must be >= 1");
    ZEN_ENFORCE(a.sample_rows >= 1, "sparse allreduce (auto): sample_rows must be >= 1");
    ZEN_ENFORCE(a.bytes_per_s > 0 && a.alpha_s >= 0 && a.entry_s >= 0,
                "sparse allreduce (auto): model link parameters must be positive");
    link_ = model::Link::of(a);
    site_ = model::CpuSite::here();  // where this rank runs: agreed in the statistics of each decision
    inner_opt_ = opt_;
    inner_opt_.validate = false;                     // validated once, by this wrapper
    inner_opt_.duplicates = DuplicatePolicy::Sum;    // rejected once, by this wrapper
    if (!a.cache.empty()) {
      cache_ = std::make_unique<detail::DecisionCache>(a.cache);
      char host[256] = {};
      if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;
      cache_prefix_ = std::string("zen " ZEN_VERSION_STRING " host=") + host + " rank=" + std::to_string(comm.rank()) +
                      " n=" + std::to_string(comm.size()) + " on_node=" + std::to_string(comm.ranks_on_node()) +
                      " N=" + std::to_string(spec.dense_len) + " D=" + std::to_string(spec.row_width) +
                      " dtype=" + std::to_string(static_cast<int>(spec.dtype)) + options_text(opt);
    }
  }
  const char* name() const override { return "auto"; }

 protected:
  void execute(const SparseView& in, SparseTensor* sparse_out, void* dense_out) override {
    const bool sparse = sparse_out != nullptr;
    if (need_decision_) {  // the output form of the deciding call counts
      if (cache_) key_ = cache_key(in, sparse);
      const bool first = decisions_++ == 0;
      if (!(first && cache_ && remembered())) decide(in, sparse);
    }
    std::string run_name = chosen_;
    const bool exploring = next_trial_ < trials_.size();
    if (exploring) run_name = trials_[next_trial_];
    SparseAllreduce& s = scheme(run_name);
    const double t0 = detail::seconds_now();
    if (sparse) s.run(in, *sparse_out);
    else s.run_dense(in, dense_out);
    const double dt = detail::seconds_now() - t0;
    absorb(s.report());
    if (exploring) {
      trial_times_[next_trial_] = dt;
      if (++next_trial_ == trials_.size()) finish_exploration();
    } else {
      ++calls_;
      const uint64_t g = s.report().global_rows;
      if (g > 0) {
        if (agreed_ == 0) {
          agreed_ = g;
          const double d = opt_.autotune.drift, lo = static_cast<double>(cached_rows_lo_), hi = static_cast<double>(cached_rows_hi_);
          if (cache_check_ && cached_rows_lo_ > 0 && (static_cast<double>(g) < lo - d * lo || static_cast<double>(g) > hi + d * hi)) {
            need_decision_ = true;  // another input than the remembered ones'
            reason_ = "cache check: agreed size " + cached_rows_text() + " remembered, " + std::to_string(g) + " now";
          }
        } else if (std::abs(static_cast<double>(g) - static_cast<double>(agreed_)) >
                 opt_.autotune.drift * static_cast<double>(agreed_)) {
          need_decision_ = true;
          reason_ = "drift: agreed size " + std::to_string(agreed_) + " -> " + std::to_string(g);
        }
      }
      if (opt_.autotune.reevaluate_every > 0 && calls_ >= static_cast<uint64_t>(opt_.autotune.reevaluate_every)) {
        need_decision_ = true;
        reason_ = "periodic (" + std::to_string(calls_) + " calls)";
      } else if (measure_at_ > 0 && calls_ >= measure_at_) {
        need_decision_ = true;
        reason_ = "deferred measurement (" + std::to_string(calls_) + " calls)";
      }
      if (check_left_ > 0 && !need_decision_) {  // the link check: the decision's own call not counted
        if (check_left_ < check_calls_) check_min_ = std::min(check_min_, dt);
        if (--check_left_ == 0) timed_check();
      }
      if (cache_ && write_s_ > 0 && !need_decision_) remember();
    }
    report_.scheme = run_name;
    report_.decision = why_;
  }

 private:
  SparseAllreduce& scheme(const std::string& name) {
    auto it = schemes_.find(name);
    if (it == schemes_.end()) {
      // Same communicator, spec and seed as this plan, whose setup agreed on them: no setup exchange
      // in the call that makes it.
      detail::AgreedSetup agreed;
      it = schemes_.emplace(name, make_scheme(name, comm_, spec_, inner_opt_)).first;
    }
    return *it->second;
  }

  void absorb(const SyncReport& r) {
    for (const auto& ph : r.phases) report_.phases.push_back(ph);
    report_.sent += r.sent;
    report_.recv += r.recv;
    report_.push_imbalance = r.push_imbalance;
    report_.pull_imbalance = r.pull_imbalance;
    report_.encoding = r.encoding;
    report_.push_encoding = r.push_encoding;
    report_.bound_bytes += r.bound_bytes;
    report_.serial_overflows = r.serial_overflows;
    report_.global_rows = r.global_rows;
  }

  /// One pass over the input: rows_ gets the rows in the sample of `shift` (model::in_sample;
  /// every row when shift is 0), in input order; returns whether the input is strictly increasing.
  /// Branch-free: every row is written at the end of the sample, which grows by one when the row is
  /// sampled (a taken-or-not branch per row mispredicts at random).
  template <typename I>
  bool sample_pass(const I* idx, size_t nnz, unsigned shift) {
    bool increasing = true;
    int64_t prev = -1;
    const model::SampleHash hash(opt_.seed);
    constexpr size_t kChunk = 1024;  // room for a whole chunk is made before it
    size_t kept = 0;
    for (size_t i0 = 0; i0 < nnz; i0 += kChunk) {
      const size_t end = std::min(nnz, i0 + kChunk);
      if (rows_.size() < kept + (end - i0)) rows_.resize(std::max(2 * rows_.size(), kept + (end - i0)));
      int64_t* out = rows_.data();
      for (size_t i = i0; i < end; ++i) {
        const auto x = static_cast<int64_t>(idx[i]);
        increasing &= x > prev;
        prev = x;
        out[kept] = x;
        kept += model::in_sample(hash(static_cast<uint64_t>(x)), shift);
      }
    }
    rows_.resize(kept);
    return increasing;
  }

  /// Cuts `rows` (a sample of a lower shift) to the sample of `shift`, in order.
  void keep_sampled(std::vector<int64_t>& rows, unsigned shift) const {
    const model::SampleHash hash(opt_.seed);
    rows.erase(std::remove_if(rows.begin(), rows.end(),
                              [&](int64_t x) { return !model::in_sample(hash(static_cast<uint64_t>(x)), shift); }),
               rows.end());
  }

  /// Collective: statistics, model, and the exploration plan (or the choice).
  void decide(const SparseView& in, bool sparse) {
    const auto& a = opt_.autotune;
    const int n = comm_.size();
    const auto un = static_cast<size_t>(n);
    const uint64_t since = calls_;  // calls since the last decision (0 at the first)
    model::Problem prob = model::Problem::of(spec_, n, opt_, sparse);
    // Ranks sharing nodes, several nodes: the model's time becomes node-aware (a node's ranks share
    // its link) and the rows that need nodes (kNodes) become candidates; otherwise neither.
    const int L = opt_.node_size > 0 ? opt_.node_size : comm_.ranks_on_node();
    const bool nodes = L > 1 && L < n && n % L == 0;
    prob.node_size = nodes ? L : 1;
    model::Counts counts;
    uint64_t stride = 1;
    {
      Phase ph(*this, "auto_stats");
      // Each rank samples at its own rate 1/2^shift, the lowest that keeps at most sample_rows of
      // its distinct rows (model::in_sample: a row is in every rank's sample of a shift or in none,
      // and a higher shift's sample is a subset), in one pass, sorting only the sampled rows.
      const uint64_t cap = a.sample_rows;
      unsigned shift = 0;
      while ((in.nnz >> shift) > cap) ++shift;
      rows_.resize(std::min<uint64_t>(in.nnz, 2 * cap + 64));
      // The whole input sorted and unique (a coalesced gradient): k = nnz.
      const bool increasing = in.index_type == IndexType::I32 ? sample_pass(static_cast<const int32_t*>(in.indices), in.nnz, shift)
                                                              : sample_pass(static_cast<const int64_t*>(in.indices), in.nnz, shift);
      if (!increasing && rows_.size() <= kSmallSort) {
        // A sample of about sample_rows: std::sort in place (6 us for 870 rows here) touches no
        // memory beyond the rows, where the radix sort's histograms (32 KB of stack) and buffer are
        // fresh pages in a job's first call (a dozen page faults, 2-3 us each here).
        std::sort(rows_.begin(), rows_.end());
        rows_.erase(std::unique(rows_.begin(), rows_.end()), rows_.end());
      } else if (!increasing) {  // radix sort (rows < R): a third of std::sort's time on 40k rows
        sort_tmp_.resize(rows_.size());
        static_assert(sizeof(int64_t) == sizeof(uint64_t));
        detail::radix_sort_u64(reinterpret_cast<uint64_t*>(rows_.data()), sort_tmp_.data(), rows_.size(), 0,
                               detail::bits_for(std::max<uint64_t>(prob.rows, 1)));
        rows_.erase(std::unique(rows_.begin(), rows_.end()), rows_.end());
      }
      while (rows_.size() > cap) keep_sampled(rows_, ++shift);  // more than expected: a sparser one
      // Distinct rows: exact when the input is coalesced or wholly in the sample, else the sample's
      // distinct rows x 2^shift (a hash sample: unbiased), within [sample, nnz].
      const uint64_t mine_k = increasing ? in.nnz
                              : shift == 0 ? rows_.size()
                                           : std::min<uint64_t>(in.nnz, rows_.size() > (in.nnz >> shift) ? in.nnz : rows_.size() << shift);
      // One allgather of blocks of a fixed size (the same on every rank, whatever its options):
      // every rank's head (nnz, k, sample size and shift, where it runs) and up to kBlockRows of its
      // sample; the heads say whether any sample is longer (sample_rows above kBlockRows), and then
      // an allgatherv carries the rest.
      const Head mine{in.nnz, mine_k, rows_.size(), shift, site_};
      constexpr size_t block = kHeadWords + kBlockRows;  // in 8-byte words
      const size_t first = std::min<size_t>(rows_.size(), kBlockRows);
      send_.assign(block, 0);
      std::memcpy(static_cast<void*>(send_.data()), &mine, sizeof mine);
      std::copy(rows_.begin(), rows_.begin() + static_cast<std::ptrdiff_t>(first), send_.begin() + kHeadWords);
      recv_.resize(block * un);
      comm_.allgather(send_.data(), block * sizeof(int64_t), recv_.data());
      std::vector<Head> heads(un);
      std::vector<size_t> rest(un), displ(un);  // bytes beyond the block, and where they land
      size_t tot = 0;
      for (size_t r = 0; r < un; ++r) {
        std::memcpy(static_cast<void*>(&heads[r]), recv_.data() + r * block, sizeof(Head));
        ZEN_CHECK_CODE(heads[r].shift < 64 && heads[r].sampled <= heads[r].nnz, Result::InternalError,
                       "rank " + std::to_string(comm_.rank()) + " sparse allreduce (auto): rank " + std::to_string(r) +
                           "'s statistics are corrupt (sample of " + std::to_string(heads[r].sampled) + " rows of " +
                           std::to_string(heads[r].nnz) + ")");
        rest[r] = (heads[r].sampled - std::min<uint64_t>(heads[r].sampled, kBlockRows)) * sizeof(int64_t);
        displ[r] = tot;
        tot += rest[r];
      }
      if (tot > 0) {  // the same on every rank: it reads the heads
        over_.resize(tot / sizeof(int64_t));
        comm_.allgatherv(rows_.data() + first, rest[static_cast<size_t>(comm_.rank())], over_.data(), rest.data(), displ.data());
      }
      std::vector<model::CpuSite> sites(un);
      std::vector<uint64_t> k(un), nnzs(un);
      unsigned common = 0;  // the sparsest rank's shift: every sample is cut to it
      for (size_t r = 0; r < un; ++r) {
        sites[r] = heads[r].site;
        k[r] = heads[r].k;
        nnzs[r] = heads[r].nnz;
        common = std::max(common, static_cast<unsigned>(heads[r].shift));
      }
      prob.share_cores(sites, a.cores);
      all_.clear();
      std::vector<size_t> sizes(un);
      for (size_t r = 0; r < un; ++r) {
        const size_t before = all_.size();
        const int64_t* b = recv_.data() + r * block + kHeadWords;
        all_.insert(all_.end(), b, b + std::min<uint64_t>(heads[r].sampled, kBlockRows));
        const int64_t* o = over_.data() + displ[r] / sizeof(int64_t);
        all_.insert(all_.end(), o, o + rest[r] / sizeof(int64_t));
        if (heads[r].shift < common) {  // in place: the kept rows move to the front of its part
          const model::SampleHash hash(opt_.seed);
          const auto from = all_.begin() + static_cast<std::ptrdiff_t>(before);
          all_.erase(std::remove_if(from, all_.end(), [&](int64_t x) { return !model::in_sample(hash(static_cast<uint64_t>(x)), common); }),
                     all_.end());
        }
        sizes[r] = all_.size() - before;
      }
      stride = uint64_t{1} << common;
      counts = model::estimate_from_sample(prob, all_.data(), sizes, k, stride);
      counts.entries.assign(nnzs.begin(), nnzs.end());
    }
    prob_ = std::move(prob);
    counts_ = std::move(counts);
    stride_ = stride;
    nodes_ = nodes;
    across_ = L < n;  // some ranks talk over a network: the link check applies
    learned_ = false;
    const std::string cause = reason_.empty() ? "first call" : reason_;
    reason_.clear();
    plan(cause, since);
  }

  /// Local (a function of agreed numbers): predictions of the candidates on the last statistics
  /// (prob_, counts_) with link_, the explanation, and the choice or the exploration plan.
  void plan(const std::string& cause, uint64_t since) {
    const auto& a = opt_.autotune;
    const int n = comm_.size();
    const model::Problem& prob = prob_;
    const model::Counts& counts = counts_;
    const uint64_t stride = stride_;
    std::vector<model::Prediction>& pred = pred_;  // kept: learn_from reads the chosen one's
    pred.clear();
    for (const auto& c : candidates_) {
      if (row_of(c).has(detail::kNeedsBlockCounts) && !counts.has_omnireduce()) continue;  // needs exact block sets
      if (row_of(c).has(detail::kNodes) && !nodes_ && a.candidates.empty()) continue;  // one node, or one rank per node
      pred.push_back(model::predict(c, prob, counts, link_));
    }
    std::stable_sort(pred.begin(), pred.end(), [](const auto& x, const auto& y) { return x.seconds < y.seconds; });
    ZEN_ENFORCE(!pred.empty(), "sparse allreduce (auto): no candidate the model can evaluate");

    // The explanation, built with appends (an ostringstream's first use in a job costs more than the
    // rest of the model: auto's first call is its statistics' cold call).
    std::string why = "n=" + std::to_string(n) + " N=" + std::to_string(spec_.dense_len) + " D=" + std::to_string(spec_.row_width) +
                      " k/rank=" + std::to_string(*std::min_element(counts.k.begin(), counts.k.end()));
    if (n > 1) why += ".." + std::to_string(*std::max_element(counts.k.begin(), counts.k.end()));
    why += " union~" + std::to_string(counts.K) + (stride == 1 ? " (exact)" : " (sample 1/" + std::to_string(stride) + ")");
    if (!prob.cpu_group.empty()) why += "; shared cores: " + fmt_num(prob.ranks_per_core()) + " ranks per core";
    if (link_.bytes_per_s != a.bytes_per_s) why += "; link learned: " + fmt_rate(link_.bytes_per_s);
    why += "; model:";
    for (const auto& p : pred)
      why += " " + p.scheme + " " + fmt_time(p.seconds) + " (" + std::to_string(p.max_bytes) + " B, " +
             std::to_string(static_cast<uint64_t>(p.cpu_rows)) + " rows)";

    // Dense fallback on bytes.
    uint64_t best_sparse = UINT64_MAX, dense = 0;
    bool have_dense = false;
    const detail::SchemeRow* fallback = nullptr;  // the dense row with the lowest auto position
    for (const auto& p : pred) {
      const detail::SchemeRow& row = row_of(p.scheme);
      if (row.has(detail::kDense)) {
        dense = have_dense ? std::min(dense, p.max_bytes) : p.max_bytes;
        have_dense = true;
        if (!fallback || row.auto_position < fallback->auto_position) fallback = &row;
      } else {
        best_sparse = std::min(best_sparse, p.max_bytes);
      }
    }
    // A choice by the model alone is checked against its calls (timed_check); an explored one
    // against its measured time (finish_exploration). With a cache, that time is remembered.
    start_choice(link_check_due() || cache_ ? kCheckCalls : 0, false);
    if (have_dense && n > 1 && best_sparse != UINT64_MAX && best_sparse > dense) {
      chosen_ = fallback->name;
      why_ = "auto chose " + chosen_ + " (" + cause + "): dense fallback, every sparse scheme moves more bytes than a dense allreduce (" +
             std::to_string(best_sparse) + " B > " + std::to_string(dense) + " B); " + why;
      return;
    }
    // The ones the model's best does not dominate (model::dominated) may be measured, in model order.
    std::vector<const model::Prediction*> open{&pred.front()};
    for (size_t i = 1; i < pred.size(); ++i)
      if (!model::dominated(pred[i], pred.front())) open.push_back(&pred[i]);
    // The budget: explore_budget calls of the best, plus explore_share of a call per call since the
    // last decision; a candidate not run yet also pays its first call (model::first_call_extra).
    std::vector<double> secs, first;
    for (const auto* p : open) {
      secs.push_back(p->seconds);
      first.push_back(schemes_.count(p->scheme) ? 0.0 : model::first_call_extra(*p, a.cold_calls));
    }
    model::ExploreLimits lim = model::ExploreLimits::of(a);
    lim.budget += std::max(0.0, a.explore_share) * static_cast<double>(since);
    const size_t m = model::explore_count(secs, lim, first);
    if (m <= 1 || n == 1) {
      const size_t close = n > 1 ? model::explore_window(secs, lim) : 0;  // kept out by the budget
      std::string b;
      if (close > 0) {  // model only (window <= 1): nothing to defer
        b += " (" + std::to_string(close) + " within " + fmt_num(a.explore_within) + "x not measured yet: their trials and first calls would cost more than " +
             fmt_num(lim.budget) + " calls of it";
        // The budget grows by explore_share calls per call (from the base budget: calls_ counts from
        // this decision): the call from which the closest one is affordable.
        measure_at_ = model::calls_until_affordable(secs, model::ExploreLimits::of(a), first, a.explore_share);
        if (measure_at_ > 0 && (a.reevaluate_every <= 0 || measure_at_ < static_cast<uint64_t>(a.reevaluate_every)))
          b += "; measured after " + std::to_string(measure_at_) + " calls";
        b += ")";
      }
      chosen_ = pred.front().scheme;
      why_ = "auto chose " + chosen_ + " (" + cause + "): lowest predicted time" +
             (open.size() < pred.size() ? " (" + std::to_string(pred.size() - open.size()) + " dominated by it)" : "") + b +
             "; " + why;
      return;
    }
    // Planning again after an exploration taught the link (learn_from): the candidates it would
    // measure were all measured warm moment ago, so their times decide without new trials.
    if (reuse_measured_) {
      size_t pick = explored_.size();
      std::string w;
      for (size_t i = 0; i < m; ++i) {
        const size_t j = static_cast<size_t>(std::find(explored_.begin(), explored_.end(), open[i]->scheme) - explored_.begin());
        if (j == explored_.size() || !std::isfinite(best_[j])) {
          pick = explored_.size();  // one not measured warm: explore as usual
          break;
        }
        if (pick == explored_.size() || best_[j] < best_[pick]) pick = j;
        w += " " + explored_[j] + " " + fmt_time(best_[j]);
      }
      if (pick < explored_.size()) {
        chosen_ = explored_[pick];
        why_ = "auto chose " + chosen_ + " (" + cause + "): fastest of the " + std::to_string(m) +
               " the model puts within " + fmt_num(a.explore_within) + "x, as measured before:" + w + "; " + why;
        return;
      }
    }
    // Round 0 measures all m (cold); end_round() drops the far-off ones and plans the next rounds.
    explored_.clear();
    for (size_t i = 0; i < m; ++i) explored_.push_back(open[i]->scheme);
    best_.assign(m, INFINITY);
    cold_.assign(m, INFINITY);
    round_ = 0;
    for (size_t i = 0; i < m; ++i) trials_.push_back(explored_[i]);
    trial_of_.clear();
    for (size_t i = 0; i < m; ++i) trial_of_.push_back(i);
    trial_times_.assign(trials_.size(), 0.0);
    chosen_ = explored_.front();
    check_left_ = 0;  // the exploration's times check the model (finish_exploration)
    model_text_ = why;
    cause_ = cause;
    why_ = "auto exploring " + std::to_string(m) + " candidates (" + cause + "); " + model_text_;
  }

  /// Collective, at the end of each measuring round: every rank's times of the round (slowest rank
  /// counts); after the first warm round (model::explore_drop_round) the candidates slower than
  /// explore_within x the fastest are dropped (model::explore_drops); after `trials` rounds, or with
  /// one candidate left, the same choice everywhere: the fastest measured in the warm rounds
  /// (model::exploration_mean simulates exactly this).
  void finish_exploration() {
    const auto& a = opt_.autotune;
    const model::ExploreLimits lim = model::ExploreLimits::of(a);
    const int n = comm_.size();
    const size_t k = trials_.size();
    std::vector<double> all(k * static_cast<size_t>(n));
    {
      Phase ph(*this, "auto_choice");
      comm_.allgather(trial_times_.data(), k * sizeof(double), all.data());
    }
    std::vector<double> slowest(k, 0.0);
    for (size_t t = 0; t < k; ++t)
      for (int r = 0; r < n; ++r) slowest[t] = std::max(slowest[t], all[static_cast<size_t>(r) * k + t]);
    std::vector<size_t> alive = trial_of_;
    if (round_ == 0)
      for (size_t t = 0; t < k; ++t) cold_[trial_of_[t]] = slowest[t];
    if (round_ >= 1 || a.trials <= 1)
      for (size_t t = 0; t < k; ++t) best_[trial_of_[t]] = std::min(best_[trial_of_[t]], slowest[t]);
    if (round_ == model::explore_drop_round(lim)) {  // the far-off ones are run no more
      double fastest = INFINITY;
      for (size_t t = 0; t < k; ++t) fastest = std::min(fastest, slowest[t]);
      alive.clear();
      for (size_t t = 0; t < k; ++t)
        if (!model::explore_drops(slowest[t], fastest, lim)) alive.push_back(trial_of_[t]);
    }
    ++round_;
    trials_.clear();
    trial_of_.clear();
    next_trial_ = 0;
    if (round_ < std::max(1, a.trials) && alive.size() > 1) {  // next round: the survivors
      for (size_t i : alive) {
        trials_.push_back(explored_[i]);
        trial_of_.push_back(i);
      }
      trial_times_.assign(trials_.size(), 0.0);
      return;
    }
    size_t pick = alive.front();
    for (size_t i : alive)
      if (best_[i] < best_[pick]) pick = i;
    chosen_ = explored_[pick];
    std::string w = "auto chose " + chosen_ + " (" + cause_ + "): fastest measured of";
    for (size_t c = 0; c < explored_.size(); ++c) {
      const bool dropped = std::find(alive.begin(), alive.end(), c) == alive.end();
      w += " " + explored_[c] + " " + fmt_time(std::isfinite(best_[c]) ? best_[c] : cold_[c]) +
           (std::isfinite(best_[c]) ? "" : " (cold)") + (dropped ? " (dropped)" : "");
    }
    w += " (slowest rank, " + std::to_string(round_) + " round(s)); " + model_text_;
    why_ = std::move(w);
    // The link check on the chosen one's warm time (every rank has the same numbers), and that time
    // remembered unless the check planned again; a cold one says too little: then its next calls
    // are timed (timed_check).
    if (link_check_due() || cache_) {
      if (a.trials <= 1 || !std::isfinite(best_[pick])) check_left_ = check_calls_ = kCheckCalls;
      else if (!(link_check_due() && learn_from(best_[pick], "measured")) && cache_) write_s_ = best_[pick];
    }
  }

  /// Local: this rank's situation for the decision cache (the constructor's part and the call's:
  /// index type, output form, and the input's size class, a quarter octave of nnz).
  uint64_t cache_key(const SparseView& in, bool sparse) const {
    const int cls = in.nnz == 0 ? 0 : 1 + static_cast<int>(std::floor(4.0 * std::log2(static_cast<double>(in.nnz))));
    const std::string s = cache_prefix_ + " idx=" + std::to_string(static_cast<int>(in.index_type)) +
                          (sparse ? " out=sparse" : " out=dense") + " nnz_class=" + std::to_string(cls);
    return fnv1a(s.data(), s.size());
  }

  /// Collective (one allgather of each rank's entry): whether every rank remembers the same scheme
  /// for its situation (key_); if so, that is the choice, checked against its calls.
  bool remembered() {
    const detail::CachedChoice* c = cache_->find(key_);
    const bool usable = c && std::find(candidates_.begin(), candidates_.end(), c->scheme) != candidates_.end();
    struct Held {
      uint64_t scheme = 0;  // CachedChoice::scheme_code, 0: none
      double seconds = 0;
      uint64_t rows = 0;
    } mine;
    if (usable) mine = {c->scheme_code(), c->seconds, c->rows};
    std::vector<Held> held;
    {
      Phase ph(*this, "auto_cache");
      held = comm_.allgather_value(mine);
    }
    const uint64_t code = held[0].scheme;
    if (code == 0 || std::any_of(held.begin(), held.end(), [&](const Held& h) { return h.scheme != code; })) {
      const auto count = std::count_if(held.begin(), held.end(), [](const Held& h) { return h.scheme != 0; });
      reason_ = count == 0 ? "first call, none remembered"
                           : "first call, " + std::to_string(count) + " of " + std::to_string(held.size()) + " ranks remember a choice, not the same";
      return false;
    }
    // The same scheme on every rank; times and sizes as every rank gathered them.
    start_choice(kCacheCheckCalls, true);
    chosen_ = c->scheme;
    cached_s_ = 0;
    cached_rows_lo_ = UINT64_MAX;
    cached_rows_hi_ = 0;
    for (const Held& h : held) {
      cached_s_ = std::max(cached_s_, h.seconds);
      cached_rows_lo_ = std::min(cached_rows_lo_, h.rows);
      cached_rows_hi_ = std::max(cached_rows_hi_, h.rows);
    }
    why_ = "auto chose " + chosen_ + " (first call): remembered in " + cache_->path() + ", where it took " + fmt_time(cached_s_) +
           (cached_rows_lo_ > 0 ? " with agreed size " + cached_rows_text() : std::string()) + "; checked against its calls";
    return true;
  }

  /// The ranks' remembered agreed sizes: "R", or "LO..HI" when their entries differ.
  std::string cached_rows_text() const {
    const std::string lo = std::to_string(cached_rows_lo_);
    return cached_rows_lo_ == cached_rows_hi_ ? lo : lo + ".." + std::to_string(cached_rows_hi_);
  }

  /// The state of a new choice: no trials, no calls counted, no measurement or check pending but
  /// `check_calls` timed calls (timed_check), a cache check when the choice is a remembered one.
  void start_choice(int check_calls, bool cache_check) {
    trials_.clear();
    next_trial_ = 0;
    calls_ = 0;
    measure_at_ = 0;
    agreed_ = 0;
    need_decision_ = false;
    check_left_ = check_calls_ = check_calls;
    check_min_ = INFINITY;
    cache_check_ = cache_check;
    write_s_ = 0;
  }

  /// Local: the chosen scheme and its agreed warm time (write_s_) go to the cache, unless the entry
  /// there says the same (scheme, time within kCacheSlack, size within drift).
  void remember() {
    const detail::CachedChoice c{chosen_, write_s_, agreed_};
    write_s_ = 0;
    const detail::CachedChoice* had = cache_->find(key_);
    const double drift = opt_.autotune.drift;
    if (had && had->scheme == c.scheme && had->seconds <= kCacheSlack * c.seconds && c.seconds <= kCacheSlack * had->seconds &&
        std::abs(static_cast<double>(had->rows) - static_cast<double>(c.rows)) <= drift * static_cast<double>(had->rows))
      return;
    const std::string err = cache_->add(key_, c);
    why_ += err.empty() ? "; remembered in " + cache_->path() : "; not remembered: " + err;
  }

  /// Whether the choice just made is checked against real time: once per statistics (not after
  /// learning), and only where ranks span nodes (on one node the bytes move through memory, which
  /// the CPU terms model).
  bool link_check_due() const { return across_ && opt_.autotune.learn_link > 1 && !learned_; }

  /// Collective (one allgather of a number): the slowest rank's fastest timed call of the chosen
  /// scheme. A remembered choice slower than kCacheSlack x its remembered time is decided again;
  /// another goes to learn_from when the link check is due, and its time to the cache.
  void timed_check() {
    std::vector<double> t;
    {
      Phase ph(*this, cache_check_ ? "auto_cache" : "auto_link");
      t = comm_.allgather_value(check_min_);
    }
    const double slowest = *std::max_element(t.begin(), t.end());
    if (cache_check_) {
      cache_check_ = false;
      if (slowest > kCacheSlack * cached_s_) {
        need_decision_ = true;
        reason_ = "cache check: " + chosen_ + " took " + fmt_time(slowest) + ", remembered " + fmt_time(cached_s_);
      }
      return;
    }
    if (link_check_due() && learn_from(slowest, "timed")) return;
    if (cache_) write_s_ = slowest;
  }

  /// Local: when the chosen scheme's agreed time `measured` exceeds learn_link x its prediction, the
  /// link is slower than link_ says: link_ takes the rate that explains the time
  /// (model::learned_bytes_per_s) and auto plans again on the same statistics (returns true).
  bool learn_from(double measured, const char* how) {
    const auto& a = opt_.autotune;
    const auto it = std::find_if(pred_.begin(), pred_.end(), [&](const model::Prediction& q) { return q.scheme == chosen_; });
    ZEN_CHECK_CODE(it != pred_.end(), Result::InternalError, "sparse allreduce (auto): no prediction of the chosen scheme '" + chosen_ + "'");
    const model::Prediction p = *it;  // a copy: plan() below replaces pred_
    const double bps = model::learned_bytes_per_s(p, measured, link_, a.learn_link);
    if (bps <= 0) return false;
    const double was = link_.bytes_per_s;
    link_.bytes_per_s = bps;
    learned_ = true;
    reuse_measured_ = std::strcmp(how, "measured") == 0;
    plan("link check: " + chosen_ + " took " + fmt_time(measured) + " (" + how + "), predicted " + fmt_time(p.seconds) + "; link " +
             fmt_rate(was) + " -> " + fmt_rate(bps),
         calls_);
    reuse_measured_ = false;
    return true;
  }

  SchemeOptions inner_opt_;
  model::CpuSite site_;
  model::Link link_;  // the model's link and CPU terms (from the options, once)
  std::vector<std::string> candidates_;
  std::map<std::string, std::unique_ptr<SparseAllreduce>> schemes_;
  std::vector<int64_t> rows_, send_, recv_, over_, all_;  // the statistics' sample, blocks, longer samples' rest, samples at the common shift
  std::vector<uint64_t> sort_tmp_;
  bool need_decision_ = true;
  std::string chosen_, why_, reason_, model_text_, cause_;
  std::vector<std::string> trials_, explored_;  // this round's calls (scheme names); the measured candidates
  std::vector<size_t> trial_of_;                // this round's calls as indices into explored_
  std::vector<double> trial_times_, best_, cold_;
  size_t next_trial_ = 0;
  int round_ = 0;
  uint64_t calls_ = 0, agreed_ = 0;
  uint64_t measure_at_ = 0;  // calls after which the deferred measurement re-decides (0: none)
  // The statistics of the last decision (a link check plans again on them) and the link check.
  model::Problem prob_;
  model::Counts counts_;
  std::vector<model::Prediction> pred_;  // the last plan's predictions (with link_ then)
  uint64_t stride_ = 1;
  bool nodes_ = false;
  bool across_ = false;   // the ranks span several nodes (some bytes cross a network)
  bool learned_ = false;  // link_ was learned since the last statistics: no further check
  bool reuse_measured_ = false;  // plan() may choose by the exploration's times (learn_from)
  int check_left_ = 0;    // calls until the link check (0: none pending)
  int check_calls_ = kCheckCalls;  // the calls that check counts, the first one not timed
  double check_min_ = INFINITY;
  // The decision cache (SchemeOptions::Auto::cache): this rank's situation, the remembered choice
  // being checked, the agreed warm time of a choice to remember (0: none).
  std::unique_ptr<detail::DecisionCache> cache_;
  std::string cache_prefix_;
  uint64_t key_ = 0;
  uint64_t decisions_ = 0;
  bool cache_check_ = false;
  double cached_s_ = 0;                              // the slowest rank's remembered time
  uint64_t cached_rows_lo_ = 0, cached_rows_hi_ = 0;  // the ranks' remembered agreed sizes
  double write_s_ = 0;
};

}  // namespace

// This machine's CPU terms per scheme (2 cores, shared memory; docs/cost-model.md "CPU terms"):
// `scripts/calibrate_auto.sh bench-out/cal10` on 2026-12-04 (n = 2 and 4; at n = 4 the ranks share
// the cores, "Shared cores"), seconds beyond the link's bytes per value touched, per dense value
// touched (model::dense_values: never for a sparse scheme with a sparse result) and per row touched.
// Another machine passes its own (zen_perf --auto-cpu, SchemeOptions::Auto::cpu); `none` is the
// link-only model.
std::vector<SchemeOptions::Auto::CpuTerm> SchemeOptions::Auto::default_cpu() {
  return {{"allgather", 5.85e-10, 3.65e-11, 8.26e-09},  {"balanced", 7.23e-10, 2.18e-10, 9.42e-09},
          {"dense_native", 0, 0, 0},                    {"omnireduce", 1.53e-09, 3.98e-10, 2.25e-09},
          {"sparcml", 1.29e-09, 3.06e-10, 1.68e-08},    {"sparse_ps", 1.75e-10, 2.76e-10, 1.02e-08}};
}

std::unique_ptr<SparseAllreduce> make_auto(Communicator& comm, const TensorSpec& spec, const SchemeOptions& opt) {
  return plan::make_plan<Auto>(comm, spec, opt);
}

}  // namespace zen
