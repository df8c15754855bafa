#pragma once
// One interface for every sparse allreduce scheme (Gloo style: the constructor sets up, run() moves
// data). Semantics shared by all schemes:
//  - input: a SparseView on each rank, same N, D, dtype on all ranks (checked once at setup);
//    indices in [0, N/D), any order; duplicates are summed (or rejected, Options::duplicates).
//  - result: the elementwise sum over ranks. Its support is the UNION of the input supports: a
//    coordinate whose contributions cancel to exactly 0 stays present. Every rank gets identical
//    bits. Output either as a dense buffer (N values, zeros outside the support) or as a sorted
//    SparseTensor (indices ascending, int64), caller's choice.
//  - 16-bit values are accumulated in fp32 and rounded once.
//  - report(): bytes sent/received per rank and per phase, imbalance, chosen encodings.
//  - errors poison the communicator: any error of one rank during a call (bad input, allocation,
//    a worker's exception, a communicator error) is sent to every peer at once, whose calls fail
//    with RemoteError naming that rank; afterwards the communicator refuses further use on every
//    rank (build a new one), so no call can ever mix two steps' data (docs/reliability.md).
//  - a scheme object is a plan (CUB / Gloo style): it owns its workspace and its thread pool, and
//    after its first call on a given size it allocates nothing on later calls of the same or a
//    smaller size (balanced, allgather, sparse_ps, dense, dense_native; `out` keeps its capacity).
//  - non-blocking form (start / start_dense -> Request, then wait() or test()): the call runs on the
//    communicator's call-queue thread (zen/detail/call_queue.hpp) while the caller computes; calls on one
//    communicator run in the order they were started, which must be the same on every rank (or in
//    the order the ranks agree on, CallOrder::Agreed, when several threads drive plans of one
//    communicator; docs/api.md "Concurrency"). The input and output buffers must stay untouched
//    until the request completes. Results are the same bits as the blocking call's.
//  - output options (SchemeOptions::output): average instead of sum; accumulate into the caller's
//    dense buffer.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zen/comm/communicator.hpp"
#include "zen/detail/call_queue.hpp"
#include "zen/detail/thread_pool.hpp"
#include "zen/tensor.hpp"

namespace zen {

enum class DuplicatePolicy : uint8_t { Sum = 0, Reject = 1 };

struct TensorSpec {
  uint64_t dense_len = 0;  ///< N elements
  uint32_t row_width = 1;  ///< D
  DType dtype = DType::F32;
};

/// What a call writes (SchemeOptions::output). Applied once, by the SparseAllreduce base class, to
/// every scheme alike.
struct OutputOptions {
  /// Divide the sum by the number of ranks: each result value is the dtype's rounding of
  /// (sum as computed by the scheme) / n, computed in double for f32/f64 and in float for f16/bf16
  /// (so 16-bit results are rounded twice: once for the sum, once for the quotient).
  bool average = false;
  /// run_dense only: add the result (the average when `average`) into the caller's dense buffer
  /// instead of overwriting it (16-bit: added in float, rounded once). Only the rows of the result
  /// support are touched. run() with accumulate is an InvalidUsage error.
  bool accumulate = false;
};

struct SchemeOptions {
  PullEncoding pull = PullEncoding::Auto;   ///< balanced / sparse_ps pull encoding (forced modes for experiments)
  /// balanced / sparse_ps push encoding. Auto: COO unless a sorted encoding (bitmap or Elias-Fano)
  /// saves at least 1/8 of the push message (balanced must sort its keys per owner for it; sparse_ps
  /// has them sorted already); forced modes apply to every push message.
  IndexEncoding push = IndexEncoding::Auto;
  DuplicatePolicy duplicates = DuplicatePolicy::Sum;
  uint64_t seed = 0;                        ///< h0 seed; rank 0's value is broadcast at setup
  int hash_functions = 3;                   ///< k second-level hashes
  double parallel_factor = 2.0;             ///< r1 = factor * nnz (total over owners)
  double serial_fraction = 0.1;             ///< r2 = fraction * r1
  int threads = 0;                          ///< CPU threads of the plan's pool (0 = cores / ranks on the node)
  bool validate = true;                     ///< check index ranges on input
  /// Report each phase's CPU time (PhaseReport::cpu_seconds). Off by default: reading a thread's CPU
  /// clock is a system call (a few per phase: about 4 us each on a virtual machine), too dear for small calls.
  bool phase_cpu_time = false;
  double sparcml_dense_switch = 0.0;        ///< density where SparCML switches to dense (0 = byte break-even)
  uint32_t block_size = 256;                ///< OmniReduce block size (elements)
  /// hierarchical_sparse: ranks per node, consecutive ranks forming a node (0: the communicator's
  /// ranks_on_node(), which MPI takes from its shared-memory split; the same on every rank, dividing n).
  int node_size = 0;
  OutputOptions output;                     ///< average / accumulate (see OutputOptions)
  /// Scheme "auto" (docs/algorithms.md, "auto"): how it gathers statistics, predicts and measures.
  struct Auto {
    /// empty: balanced, allgather, sparcml, sparse_ps, omnireduce, dense_native, and hierarchical_sparse
    /// when the ranks form several nodes of several ranks (SchemeOptions::node_size or ranks_on_node())
    std::vector<std::string> candidates;
    int reevaluate_every = 500;           ///< calls between re-evaluations (0: never)
    double drift = 0.25;                  ///< re-evaluate when the agreed size moves by more than this fraction
    double explore_within = 1.5;          ///< measure the candidates predicted within this factor of the best (<= 1: model only)
    int max_explore = 4;                  ///< measure at most this many candidates (the best predicted ones)
    int trials = 3;                       ///< calls per measured candidate; the first one is a warm-up when > 1
    /// Measure only while the predicted extra time of all trial calls over the predicted best is at
    /// most this many calls of the predicted best (bounds the exploration's cost; docs/cost-model.md).
    double explore_budget = 1.0;
    /// ... plus this many calls of the predicted best per call since the last decision: a
    /// re-evaluation may spend this share of the calls it follows on measuring (docs/cost-model.md).
    double explore_share = 0.1;
    /// A candidate's first call costs this many times its predicted CPU time beyond a warm call (its
    /// workspace and tables touched for the first time); counted in the budget for a candidate auto
    /// has not run yet. This machine's median over the fixed sparse schemes' first calls in
    /// scripts/bench_fastpath.sh's 20-call runs (2026-12-04: 8.3, quartiles 1.6 and 15).
    double cold_calls = 8.0;
    uint64_t sample_rows = 1024;          ///< most rows of a rank's hash sample for the statistics (every row, exact, when nnz <= it)
    /// Cores that ranks on one machine share, for the model's compute term (model::Problem::share_cores;
    /// docs/cost-model.md, "Shared cores"): 0 finds them (ranks with the same kernel boot id share
    /// one machine, whose cores are the union of their affinity masks), > 0 sets them per machine,
    /// < 0: ranks never share cores (the busiest rank's CPU time is the term).
    int cores = 0;
    /// Learn a slower link (docs/cost-model.md, "Learning the link"): after a decision, when the
    /// chosen scheme's calls (the slowest rank's fastest of its 2nd and 3rd call, or its measured
    /// time when auto explored) take more than this many times its prediction, auto charges the
    /// excess to the link (lower bytes_per_s, model::learned_bytes_per_s), keeps that rate and decides
    /// again on the same statistics. One allgather of a number, once per decision; <= 1: never.
    double learn_link = 2.0;
    /// Remembered decisions (docs/cost-model.md, "Remembered decisions"): a file where auto appends
    /// what it chose and how fast it ran, and from which a later plan in the same situation (zen
    /// version, host, rank, communicator and node sizes, tensor, output form, input size within
    /// 19 %, these options) takes its first choice: one allgather of a number in the first call
    /// instead of the statistics and the model, then checked against its calls (agreed size within
    /// `drift`, time within 1.5x, else a full decision). Empty: none.
    std::string cache;
    double alpha_s = 20e-6;               ///< model latency per message round
    double message_s = 1e-6;              ///< model overhead per message
    double bytes_per_s = 25e9 / 8.0;      ///< model per-rank bandwidth
    double entry_s = 0.0;                 ///< model compute per row touched (every scheme)
    /// Model compute per scheme, on top of entry_s: seconds per value of the rows it touches
    /// (rows x D), per value of the dense tensor it touches (model::dense_values: buffers it zeroes
    /// or reduces whole) and per row it touches (sorting, hashing, indexing: the cost that does not
    /// grow with D).
    struct CpuTerm {
      std::string scheme;
      double value_s = 0, dense_s = 0, row_s = 0;
    };
    /// This machine's calibration (scripts/calibrate_auto.sh prints another machine's; docs/cost-model.md).
    std::vector<CpuTerm> cpu = default_cpu();
    static std::vector<CpuTerm> default_cpu();
  } autotune;
};

/// Bytes and time of one phase of one call on this rank.
struct PhaseReport {
  std::string name;
  uint64_t sent = 0;
  uint64_t recv = 0;
  double seconds = 0;
  /// CPU seconds of the phase: the calling thread's plus the plan's pool workers' (thread CPU clocks,
  /// user and system time), when SchemeOptions::phase_cpu_time asks for it; 0 otherwise.
  double cpu_seconds = 0;
};

struct SyncReport {
  std::vector<PhaseReport> phases;
  uint64_t sent = 0, recv = 0;       ///< totals over phases
  double seconds = 0;                ///< wall time of the call on this rank
  double push_imbalance = 1.0;       ///< max/mean over owners of entries pushed (balanced, ps, omni)
  double pull_imbalance = 1.0;       ///< max/mean over owners of result entries
  uint64_t result_nnz = 0;           ///< rows in the result support
  std::string encoding;              ///< pull: "coo", "bitmap", "ef", "mixed"; "dense" for the dense schemes
  std::string push_encoding;         ///< balanced / sparse_ps push messages this rank sent: "coo", "bitmap", "ef", "mixed"
  /// balanced / sparse_ps: the information content of what this rank sent in the data phases, counted
  /// like `sent` (a pull message once per receiver): value bytes plus log2 C(m, K) / 8 for every
  /// index set of K positions out of an owner's m. sent / bound_bytes is the distance to the bound
  /// (zen_perf's bound_eff). 0 for the other schemes.
  double bound_bytes = 0;
  uint64_t serial_overflows = 0;     ///< balanced: owners whose serial region overflowed (handled losslessly)
  /// A size every rank learned in the call, identical on all ranks: the union's rows for balanced
  /// and sparse_ps (from meta), the sum of the ranks' distinct rows for allgather; 0 otherwise.
  uint64_t global_rows = 0;
  std::string scheme;    ///< the scheme that ran (auto: the one it chose)
  std::string decision;  ///< auto: what it chose and why (empty for the fixed schemes)
  /// Back to a fresh report, keeping the storage of its vector and strings (no allocation per call).
  void clear();
};

/// Handle of a non-blocking call (SparseAllreduce::start / start_dense); move-only. Completing it
/// (wait, or test returning true) rethrows the call's error, if any, once. Destroying a pending
/// request waits for it (its error, if any, has already poisoned the communicator and is dropped).
class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<detail::AsyncState> s) : s_(std::move(s)) {}
  Request(Request&&) noexcept = default;
  Request& operator=(Request&& o) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();
  /// True while the request has not been completed by wait() or a test() that returned true.
  bool valid() const { return s_ != nullptr; }
  /// Non-blocking: true once the call has finished (then the request is complete and no longer valid).
  /// A request that is not valid tests true.
  bool test();
  /// Block until the call has finished. No-op on a request that is not valid.
  void wait();

 private:
  void finish();
  std::shared_ptr<detail::AsyncState> s_;
};

/// One interface for every plan, host or device (Gloo's CudaAllreduceRing<T, W> derives from the
/// same Algorithm as the host algorithms): SparseAllreduce (the host schemes below, buffers in host
/// memory) and the device plans zen::cuda::DeviceBalanced / DeviceHierarchical (buffers in the
/// memory of the communicator's backend, calls stream-ordered; zen/cuda/balanced.hpp). Callers such
/// as the C API hold a Plan and dispatch once.
class Plan {
 public:
  virtual ~Plan() = default;
  virtual const char* name() const = 0;
  /// Where inputs and outputs live: the communicator's memory space.
  MemSpace memory_space() const { return comm_.memory_space(); }

  /// Sum `in` over all ranks into a dense buffer of N values of the spec's dtype (overwritten).
  /// Device plans enqueue the work on the communicator's stream; synchronize() waits for it.
  virtual void run_dense(const SparseView& in, void* dense_out) = 0;
  /// The same for a dense gradient of N values: the rows holding a value != 0 are the input entries
  /// (-0.0 counts as zero, NaN as non-zero). Host plans collect those rows and call run_dense (the
  /// row lists keep their capacity: no allocation in steady state); device plans scan on the device.
  virtual void run_dense_from_dense(const void* grad, void* dense_out);
  /// Sorted sparse output and the non-blocking forms: host plans (SparseAllreduce); device plans
  /// throw Unsupported naming the rank and the calls they offer.
  virtual void run(const SparseView& in, SparseTensor& out);
  virtual Request start(const SparseView& in, SparseTensor& out);
  virtual Request start_dense(const SparseView& in, void* dense_out);
  /// Wait for the last call and report errors found on the device (host plans return at once).
  virtual void synchronize() {}

  /// Report of the last completed call (do not read it while a request of this plan is pending).
  const SyncReport& report() const { return report_; }
  const TensorSpec& spec() const { return spec_; }
  Communicator& comm() { return comm_; }

 protected:
  Plan(Communicator& comm, const TensorSpec& spec) : comm_(comm), spec_(spec) {}
  /// Throw Unsupported: `call` is not offered by this (device) plan.
  [[noreturn]] void unsupported(const char* call) const;

  Communicator& comm_;
  TensorSpec spec_;
  SyncReport report_;

 private:
  std::vector<int64_t> dd_rows_;  // run_dense_from_dense on host memory: the non-zero rows
  std::vector<uint8_t> dd_vals_;
};

class SparseAllreduce : public Plan {
 public:
  /// Every host plan is made as the final class plan::Quiesced<scheme> (src/schemes/plan_util.hpp),
  /// whose destructor first waits for the non-blocking calls pending on its communicator (quiesce())
  /// before the scheme's members go, so a plan destroyed while one of its requests runs is safe.
  ~SparseAllreduce() override = default;

  /// Sum `in` over all ranks; `out` receives the sorted sparse result (dense_len/row_width/dtype set).
  void run(const SparseView& in, SparseTensor& out) override;
  /// Sum `in` over all ranks into a dense buffer of N values of the spec's dtype (overwritten).
  void run_dense(const SparseView& in, void* dense_out) override;
  /// Non-blocking run(): `in`'s buffers and `out` must stay valid and untouched until completion.
  /// Errors found before the call is queued (e.g. a backend without call-queue support) throw here.
  Request start(const SparseView& in, SparseTensor& out) override;
  /// Non-blocking run_dense().
  Request start_dense(const SparseView& in, void* dense_out) override;

  /// Block until every non-blocking call of this plan has finished (what the destructor does first;
  /// no-op on the communicator's call-queue thread).
  void wait_pending() noexcept;

  /// The output options given at setup (SchemeOptions::output).
  const OutputOptions& output() const { return output_; }

 protected:
  SparseAllreduce(Communicator& comm, const TensorSpec& spec, const SchemeOptions& opt);

  /// Scheme body. Dense output mode iff `sparse_out` is null (then `dense_out` may itself be null
  /// when N == 0: never pass a null pointer to memset/memcpy). `in` is validated and, if
  /// the policy asks, duplicate-checked. Implementations fill report_ phases via Phase.
  virtual void execute(const SparseView& in, SparseTensor* sparse_out, void* dense_out) = 0;

  /// RAII phase timer/byte counter: records the communicator's traffic delta under `name`.
  class Phase {
   public:
    Phase(SparseAllreduce& s, const char* name);
    ~Phase();

   private:
    SparseAllreduce& s_;
    PhaseReport r_;
    TrafficStats before_;
    double t0_;
    double cpu0_ = 0;  // CPU seconds at the start (phase_cpu_time only)
  };

  /// Wait until no non-blocking call of this plan is pending (wait_pending(); no-op on the call-queue
  /// thread). The factory's final class (plan::Quiesced) calls it first in its destructor.
  void quiesce() noexcept { wait_pending(); }

  /// The plan's persistent thread pool (created at first use, see zen/detail/thread_pool.hpp).
  detail::ThreadPool& pool();

  SchemeOptions opt_;
  /// Set by plans whose communication buffers live in a workspace they own: every call runs inside
  /// a Communicator::OwnerScope on it, so a failed operation cannot leave MPI pointing at freed memory.
  std::shared_ptr<void> holder_;

 private:
  void reset_report();
  template <typename F>
  void poisoning(F&& body);
  void prepare(const SparseView& in);
  std::unique_ptr<detail::ThreadPool> pool_;
  void execute_checked(const SparseView& in, SparseTensor* sparse_out, void* dense_out);
  void run_now(const SparseView& in, SparseTensor& out);
  void run_dense_now(const SparseView& in, void* dense_out);
  void finish_output(SparseTensor* sparse_out, void* dense_out);
  OutputOptions output_;
  SparseTensor acc_;  // accumulate mode: the call's sparse result before it is added in
  // Calls of this plan (agreed order: the key of each call, the same on every rank) and the
  // non-blocking ones still pending (the destructor waits for them).
  uint64_t plan_id_ = 0;
  std::atomic<uint64_t> calls_{0};
  std::mutex inflight_m_;
  std::vector<std::shared_ptr<detail::AsyncState>> inflight_;  // submitted calls not seen complete yet
  template <typename F>
  Request submit(F&& call);
};

namespace detail {
/// Run a plan setup (`make`) in the communicator's call order: directly, or (agreed order, outside
/// the call-queue thread) as an agreed call on the call-queue thread, so that setups of plans on a
/// communicator that other threads are using never run beside their calls.
std::unique_ptr<SparseAllreduce> setup_in_order(Communicator& comm,
                                                const std::function<std::unique_ptr<SparseAllreduce>()>& make);
}  // namespace detail

/// Names: "balanced", "dense" (ring RS+AG over the communicator), "dense_native" (backend allreduce),
/// "allgather", "sparcml", "omnireduce", "sparse_ps", "hierarchical_sparse" (sparse inside the node,
/// balanced across nodes; SchemeOptions::node_size), and "auto" (picks one of them by the cost
/// model and by measuring the close candidates; SchemeOptions::autotune). Host plans: a
/// communicator whose memory is on a device is refused (Unsupported; the device plans are
/// zen::cuda::DeviceBalanced / DeviceHierarchical, or zen::cuda::make_device_plan).
std::unique_ptr<SparseAllreduce> make_scheme(const std::string& name, Communicator& comm, const TensorSpec& spec,
                                             const SchemeOptions& opt = {});
const std::vector<std::string>& scheme_names();

/// "auto", "coo", "bitmap" or "ef" (Elias-Fano); throws InvalidArgument naming the value otherwise.
IndexEncoding parse_index_encoding(const std::string& name);

}  // namespace zen
