#pragma once
// The cost model: bytes per rank per phase of every scheme, and an alpha-beta time on top.
//
// Bytes come from the formulas of docs/algorithms.md, evaluated on Counts: the sizes those formulas
// need (distinct rows per rank, rows per rank and h0 owner / key range, union rows per owner,
// SparCML's merged-state sizes, OmniReduce's present blocks). Counts built from the ranks' index
// sets (count_exact) make the bytes exact, equal to what the communicator counts; Counts estimated
// from a hash sample (estimate_from_sample, what `auto` gathers) or extrapolated to other rank
// counts (zen_model) give predictions. Time = sum over phases of alpha * steps + beta * (most bytes
// any rank sends or receives in the phase), per rank link (full duplex), plus an optional per-entry
// compute cost.
#include <cstdint>
#include <string>
#include <vector>

#include "zen/detail/mix64.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen::model {

/// Where a rank runs, for the compute term of ranks that share cores (Problem::share_cores): its
/// machine (a hash of the kernel's boot id, which every network namespace of one machine shares; of
/// the host name where the boot id cannot be read) and the CPUs its affinity mask allows.
struct CpuSite {
  uint64_t machine = 0;
  uint64_t mask[16] = {};  ///< bit c: CPU c (the first 1024)
  /// This thread's site.
  static CpuSite here();
};

/// What the bytes depend on besides the index sets.
struct Problem {
  uint64_t rows = 0;  ///< R = N / D
  uint32_t D = 1;
  DType dtype = DType::F32;
  int n = 1;
  bool sparse_out = true;  ///< sparse result (support traffic of the dense schemes, OmniReduce masks)
  /// Ranks per node (consecutive ranks; they share one network link): opt.node_size, 1 when 0. A
  /// caller with a communicator whose opt.node_size is 0 sets it from ranks_on_node().
  int node_size = 1;
  SchemeOptions opt;       ///< seed (h0), pull, block_size, sparcml_dense_switch
  /// Ranks that share cores (docs/cost-model.md, "Shared cores"): cpu_group[r] is rank r's group,
  /// cpu_cores[g] the cores group g's ranks run on. Empty: every rank has cores of its own, and the
  /// compute term is the busiest rank's; else it is also each group's CPU time over its cores.
  std::vector<int> cpu_group;
  std::vector<double> cpu_cores;
  /// Groups the ranks by machine (CpuSite::machine; one site per rank): a group's cores are the
  /// union of its ranks' masks when `cores` is 0, `cores` when > 0; `cores` < 0 clears the groups
  /// (SchemeOptions::Auto::cores). Cleared too when no group's ranks outnumber its cores.
  void share_cores(const std::vector<CpuSite>& sites, int cores);
  /// Most ranks per core of any group (1 without groups): what the dense term is charged times.
  double ranks_per_core() const;
  static Problem of(const TensorSpec& spec, int n, const SchemeOptions& opt, bool sparse_out);
  uint64_t N() const { return rows * D; }
};

/// The sizes the byte formulas need. Vectors are indexed [rank] or [rank][owner].
struct Counts {
  std::vector<uint64_t> k;                      ///< distinct rows per rank
  /// Entries per rank as given, duplicates counted (what allgather's dense-output path sends); empty
  /// = k (no duplicates).
  std::vector<uint64_t> entries;
  uint64_t entries_of(size_t r) const { return entries.empty() ? k[r] : entries[r]; }
  uint64_t K = 0;                               ///< rows in the union of all ranks
  std::vector<std::vector<uint64_t>> bal_push;  ///< [r][i]: rows of rank r owned by h0 owner i
  std::vector<uint64_t> bal_K;                  ///< [i]: union rows owned by h0 owner i
  std::vector<std::vector<uint64_t>> ps_push;   ///< [r][o]: rows of rank r in key range o
  std::vector<uint64_t> ps_K;                   ///< [o]: union rows in key range o
  /// SparCML: [s][r], r < P (largest power of two <= n): rows in rank r's state when stage s starts
  /// (s = 0 after the fold; s = log2 P: the final state).
  std::vector<std::vector<uint64_t>> sc_state;
  /// OmniReduce (blocks of whole rows): per [r][o] the rows and the ceil(rows/8) mask bytes of rank
  /// r's present blocks in owner o's range; per [o] the same over the union. Empty = unknown.
  std::vector<std::vector<uint64_t>> om_rows, om_mask;
  std::vector<uint64_t> om_V_rows, om_V_mask;
  bool has_omnireduce() const { return !om_V_rows.empty(); }
  /// hierarchical_sparse at node size hs_L (Problem::node_size; 0 = not counted): [r][j] rows of rank r
  /// in node chunk j, and per chunk j the Counts of its inter-node balanced (n = nodes, rows = chunk
  /// positions, rank g's rows = the union of node g's rows in chunk j).
  int hs_L = 0;
  std::vector<std::vector<uint64_t>> hs_push;
  std::vector<Counts> hs_inner;
};

/// Exact counts from every rank's rows (any order, duplicates allowed, each in [0, R)).
Counts count_exact(const Problem& p, const std::vector<std::vector<int64_t>>& rows);

/// Estimated counts from a hash sample: sample[r] = rank r's distinct rows x in a sample of rate
/// 1/stride that is the same on every rank (auto: stride 2^shift, in_sample(sample_hash(x, salt),
/// shift); all of them when stride == 1, which makes the counts exact), k[r] = its distinct row
/// count. Unions and per-owner loads are the sample's times stride
/// (never more than the rows that exist). OmniReduce is left unknown unless stride == 1.
Counts estimate_from_sample(const Problem& p, const std::vector<std::vector<int64_t>>& sample,
                            const std::vector<uint64_t>& k, uint64_t stride);
/// The same from one buffer: rank r's sample is the sizes[r] rows that follow the earlier ranks'
/// (what auto's allgatherv receives), read where they lie.
Counts estimate_from_sample(const Problem& p, const int64_t* rows, const std::vector<size_t>& sizes,
                            const std::vector<uint64_t>& k, uint64_t stride);
/// The hash that picks sample rows (same on every rank): sample_hash(row, salt) =
/// SampleHash(salt)(row). The struct mixes the salt once, for loops over many rows.
struct SampleHash {
  uint64_t key;
  explicit SampleHash(uint64_t salt) : key(mix64(salt + 0x2545f4914f6cdd1dULL)) {}
  uint64_t operator()(uint64_t row) const { return mix64(row ^ key); }
};
inline uint64_t sample_hash(uint64_t row, uint64_t salt) { return SampleHash(salt)(row); }
/// Whether a row whose sample_hash is `hash` is in the sample of rate 1/2^shift: the hash's top
/// `shift` bits are zero (shift 0: every row). Samples nest: shift + 1's is a subset of shift's, so
/// ranks that sampled at different shifts cut theirs to the highest one and agree on every row.
inline bool in_sample(uint64_t hash, unsigned shift) { return shift == 0 || (hash >> (64 - shift)) == 0; }

struct PhaseTraffic {
  std::string name;
  std::vector<uint64_t> sent, recv;  ///< per rank
  double rounds = 0;                 ///< dependent message rounds (each costs the latency alpha)
  double messages = 0;               ///< messages the busiest rank sends (each costs the per-message overhead)
  /// Where the bytes go when ranks share nodes (Problem::node_size > 1): to peers anywhere (spread
  /// evenly, the flat schemes), only inside the node (shared memory), or only to other nodes.
  enum Where : uint8_t { kAnywhere = 0, kInsideNode = 1, kAcrossNodes = 2 };
  Where where = kAnywhere;
};

struct Traffic {
  std::string scheme;
  std::string encoding;               ///< pull encoding chosen ("coo", "bitmap", "mixed", "dense", ...)
  std::vector<PhaseTraffic> phases;
  std::vector<uint64_t> sent, recv;   ///< per rank, totals over phases
  uint64_t max_sent() const;
  uint64_t max_recv() const;
};

/// Schemes the model covers: every name of zen::scheme_names().
bool covers(const std::string& scheme);
/// Bytes per rank per phase of one call of `scheme`. Phase names are the scheme's own
/// (report().phases); phases without traffic are listed when the scheme has them on some rank.
/// Throws InvalidArgument for an unknown scheme or Counts that lack what the scheme needs.
Traffic traffic(const std::string& scheme, const Problem& p, const Counts& c);

/// Values of the dense tensor (N) the scheme writes or reduces whole in one call: N for a dense
/// result (every scheme zeroes it) and for the dense schemes, 0 for a sparse scheme with a sparse
/// result, whose buffers never grow with N. What Link::cpu's dense term is charged for.
uint64_t dense_values(const std::string& scheme, const Problem& p);

/// Link and compute parameters of the time model.
struct Link {
  double alpha_s = 20e-6;            ///< latency per dependent message round
  double message_s = 1e-6;           ///< overhead per message sent (concurrent messages of one round)
  double bytes_per_s = 25e9 / 8.0;   ///< per-rank bandwidth (each direction)
  double entry_s = 0.0;              ///< compute per row touched by the scheme on the busiest rank
  /// Compute per scheme on top of entry_s: seconds per value of the rows touched (rows x D), per row
  /// touched and per dense value it touches (dense_values); a machine's calibration
  /// (docs/cost-model.md, "CPU terms").
  std::vector<SchemeOptions::Auto::CpuTerm> cpu;
  /// The scheme's CPU seconds for `rows` rows touched of a problem (0 when cpu has no term for it).
  double cpu_s(const std::string& scheme, double rows, const Problem& p) const;
  /// The link and compute parameters of auto's options (what auto predicts with).
  static Link of(const SchemeOptions::Auto& a);
  /// Bandwidth of one rank inside its node (shared memory), used when Problem::node_size > 1: the
  /// node's ranks then share one link of bytes_per_s to the other nodes.
  double node_bytes_per_s = 4e9;
};

struct Prediction {
  std::string scheme;
  double seconds = 0;
  double comm_s = 0, latency_s = 0, compute_s = 0;
  double rows = 0;  ///< work_rows: rows touched on the busiest rank
  /// The rows the compute term charges: the busiest rank's or, where ranks share cores
  /// (Problem::cpu_group), a group's rows over its cores, whichever is more.
  double cpu_rows = 0;
  uint64_t max_bytes = 0;  ///< most bytes any rank sends or receives in one call
  /// Problem::node_size > 1: bytes through the busiest node's link (sent or received, summed over its
  /// ranks; a flat scheme's bytes counted as spread evenly over its peers) and the most bytes a rank
  /// moves inside its node, per call.
  uint64_t host_bytes = 0, node_bytes = 0;
  Traffic traffic;
};

/// Rows a scheme touches on its busiest rank (the compute term): hashing/coalescing the input, the
/// owner sums and the decode of the result.
double work_rows(const std::string& scheme, const Problem& p, const Counts& c);

Prediction predict(const std::string& scheme, const Problem& p, const Counts& c, const Link& link);

/// How auto measures the candidates the model leaves close (docs/cost-model.md, "Exploration"):
/// candidates predicted within `within` of the best, at most `max_explore`, and only while the
/// predicted extra time of all their trial calls stays within `budget` calls of the predicted best;
/// `trials` calls each, in rounds; after the first warm round, a candidate slower than `within`
/// times the fastest is measured no further.
struct ExploreLimits {
  double within = 1.5;
  int max_explore = 4;
  int trials = 3;
  double budget = 1.0;
  static ExploreLimits of(const SchemeOptions::Auto& a);
};
/// Whether the model leaves `b` no way to beat `a`: b moves at least as many bytes (per rank, through
/// a node's link and inside a node), pays at least the latency, is charged at least as many rows
/// (Prediction::cpu_rows) and is predicted no faster. Auto never measures a candidate dominated by the model's best one: with the
/// same cost per row for every scheme (no CPU term sets them apart) measuring it can only cost time
/// (at n = 2 sparcml moves allgather's bytes and touches more rows; docs/cost-model.md, "Exploration").
bool dominated(const Prediction& b, const Prediction& a);
/// `seconds`: the candidates' predicted times, ascending. How many of the first ones auto measures
/// (1 or 0: none, the model's choice stands): those within `within` of the best, at most
/// `max_explore`, while the predicted extra time of all their trial calls, `trials` x (predicted -
/// best) each plus `first_extra[i]` (what candidate i's first call costs beyond a warm one: its
/// workspace and tables are touched for the first time; 0 for one already run, or when
/// `first_extra` is empty), stays within `budget` calls of the best.
size_t explore_count(const std::vector<double>& seconds, const ExploreLimits& l,
                     const std::vector<double>& first_extra = {});
/// How many candidates after the best the window admits (predicted within `within` of the best, at
/// most `max_explore` - 1 of them), before the budget: 0 when `within` <= 1 (the model alone decides).
size_t explore_window(const std::vector<double>& seconds, const ExploreLimits& l);
/// Auto's deferred measurement: when explore_count leaves the closest candidate (seconds[1]) out for
/// the budget alone, the number of calls after which a budget growing by `share` calls of the best
/// per call, `l.budget` + `share` x calls, covers its trials and first call:
/// ceil(((trials x (seconds[1] - seconds[0]) + first_extra[1]) / seconds[0] - budget) / share), at
/// least 1. 0 when nothing waits: no candidate in the window, `share` <= 0, a best of 0 s, or a wait
/// of 10^12 calls or more. A function of the predictions alone, so every rank defers to the same call.
uint64_t calls_until_affordable(const std::vector<double>& seconds, const ExploreLimits& l,
                                const std::vector<double>& first_extra, double share);
/// Seconds a candidate's first call costs beyond a warm call, predicted: `cold_calls` x its predicted
/// CPU time (Prediction::compute_s; SchemeOptions::Auto::cold_calls).
double first_call_extra(const Prediction& p, double cold_calls);
/// Auto's link check (docs/cost-model.md, "Learning the link"): the per-rank bandwidth that explains
/// a measured call of p's scheme when the link is slower than `link` says. When `measured_s` exceeds
/// `ratio` x p.seconds, the excess is charged to the link: the bytes_per_s with which p's prediction
/// equals measured_s (the bytes on the link: p.host_bytes for a node-aware prediction, p.max_bytes
/// otherwise; latency, compute and bytes inside a node keep their terms). 0 when the measurement
/// calls for no slower link: within `ratio`, no bytes on the link, ratio <= 1, or a prediction of 0 s.
double learned_bytes_per_s(const Prediction& p, double measured_s, const Link& link, double ratio);
/// The round after which the far-off candidates are dropped: the first warm one (round 1; round 0
/// with a single trial). A cold call (first use of a plan) says too little to drop a scheme on.
int explore_drop_round(const ExploreLimits& l);
/// After that round: whether a candidate measured `t` (slowest rank) is dropped when the fastest of
/// the round took `fastest`.
bool explore_drops(double t, double fastest, const ExploreLimits& l);
/// Auto's first `calls` calls, simulated: candidate i (predicted order, `predicted` ascending) costs
/// `real[i]` seconds per call, the first call `stats_s` more (the statistics); measuring follows
/// explore_count / explore_drops / trials exactly as auto does, then the fastest measured one runs.
/// Returns the mean time per call (`chosen`: the candidate it settles on). The bound of
/// docs/cost-model.md is stated on this: mean <= 1.10 x min(real) when the calibrated model is close.
double exploration_mean(const std::vector<double>& predicted, const std::vector<double>& real, const ExploreLimits& l,
                        int calls, double stats_s, size_t* chosen = nullptr);

/// Bytes of one dense allreduce of the problem (what the dense fallback compares against).
uint64_t dense_bytes(const Problem& p);

/// SparCML's recursive doubling over n ranks: the largest power of two P <= n takes part (rank
/// r + P folds into rank r first), in log2(P) stages.
int sparcml_ranks(int n);
/// How many ranks' rows rank r < P holds when stage s starts: its group of the 2^s ranks sharing
/// r's bits above s, with their fold partners.
int sparcml_members(int n, int s, int r);

}  // namespace zen::model
