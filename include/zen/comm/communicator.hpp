#pragma once
// The one communicator interface of zen. Backends: loopback (threads of one process), mpi (a caller's
// MPI_Comm), and on the GPU path nccl and device loopback. Buffers live in `memory_space()` (host for
// loopback/mpi, device for nccl); `set_stream` gives the stream that device backends order work on.
//
// Every operation has a timeout; every error names this rank, the peer (if any), the operation and
// the communicator's sequence number. After an error the communicator refuses further use.
// Every operation counts bytes sent and received (see docs/algorithms.md, "traffic accounting").
//
// Buffer ownership (memory safety on failure): an MPI collective cannot be withdrawn once started,
// so after a timeout MPI may still read or write its buffers. Zen's plans therefore run their
// operations inside an OwnerScope naming the object that owns the buffers (their workspace); when an
// operation fails, the communicator keeps that owner alive until the communicator itself is
// destroyed (and longer, deliberately leaked, if the backend still holds requests on it then).
// Operations outside an OwnerScope work on caller memory; each backend documents how it keeps
// caller memory safe (the MPI backend stages small messages and checks that every rank has entered
// a large collective before starting it; see docs/reliability.md).
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zen/error.hpp"
#include "zen/types.hpp"

namespace zen {

namespace detail {
class CallQueue;
}

/// How the calls on one communicator are ordered (docs/api.md, "Concurrency").
enum class CallOrder : uint8_t {
  /// Default: calls run in the order this rank starts them, which must be the same on every rank.
  Submitted = 0,
  /// The ranks agree on the order (one 16-byte broadcast per call): threads of one rank may start
  /// the calls of different plans in any order. Set on every rank before the first call.
  Agreed = 1,
};

enum class CommOp : uint8_t {
  Send = 0, Recv, SendRecv, Alltoallv, Allgatherv, Allreduce, Broadcast, Barrier, Allgather, Alltoall, Count
};
const char* comm_op_name(CommOp op) noexcept;

/// Bytes and calls per operation kind, for this rank.
struct TrafficStats {
  static constexpr size_t kOps = static_cast<size_t>(CommOp::Count);
  std::array<uint64_t, kOps> sent{};
  std::array<uint64_t, kOps> recv{};
  std::array<uint64_t, kOps> calls{};
  uint64_t total_sent() const;
  uint64_t total_recv() const;
  void reset() { *this = TrafficStats{}; }
  TrafficStats operator-(const TrafficStats& o) const;
};

class Communicator {
 public:
  using Ms = std::chrono::milliseconds;
  Communicator();
  /// Derived backends must call finish_calls() first in their destructors when they may have run
  /// non-blocking calls (every backend in zen does); here it is a no-op safety net.
  virtual ~Communicator();

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend_name() const = 0;
  virtual MemSpace memory_space() const { return MemSpace::Host; }
  /// Ranks of this communicator that share this rank's node (threads of one process for loopback,
  /// MPI_COMM_TYPE_SHARED for MPI). Plans divide the node's cores by it to size their thread pools.
  virtual int ranks_on_node() const { return 1; }

  /// Stream for device backends (a cudaStream_t); ignored by host backends.
  void set_stream(void* stream) { stream_ = stream; }
  void* stream() const { return stream_; }

  void set_timeout(Ms t) { timeout_ = t; }
  Ms timeout() const { return timeout_; }

  // ---- point to point (tag in [0, 16383]) ----
  /// Buffered: returns once the bytes are copied, before the peer receives (so ranks that send to
  /// each other before receiving do not deadlock). Messages between a pair with one tag arrive in order.
  void send(const void* buf, size_t bytes, int peer, int tag = 0);
  /// Receives exactly `bytes` bytes; a message of another size is an error.
  void recv(void* buf, size_t bytes, int peer, int tag = 0);
  /// Send to `dst` and receive from `src` at once (no deadlock in rings).
  void sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag = 0);

  // ---- collectives (all counts and displacements in bytes, one entry per rank) ----
  void alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf, const size_t* rcounts,
                 const size_t* rdispls);
  /// True allgatherv: rank p's `rcounts[p]` bytes land at rbuf + rdispls[p]; no padding. In place
  /// when sbuf == rbuf + rdispls[rank()] (the own block is already where it belongs).
  void allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts, const size_t* rdispls);
  /// Every rank contributes `bytes`; rbuf receives size()*bytes, rank-major (host metadata exchange).
  void allgather(const void* sbuf, size_t bytes, void* rbuf);
  /// Block p of `bytes` bytes (sbuf + p*bytes) goes to rank p; rbuf receives size()*bytes, rank-major.
  void alltoall(const void* sbuf, size_t bytes, void* rbuf);
  /// In-place dense allreduce with the backend's native algorithm (MPI_Allreduce, ncclAllReduce, ...).
  void allreduce(void* buf, size_t count, DType dtype, ReduceOp op = ReduceOp::Sum);
  /// In-place bitwise OR of `bytes` bytes over all ranks (presence bitmaps); counted as an allreduce.
  /// Host memory only: device backends (NCCL, device loopback) refuse it and allreduce_sum_or with
  /// Unsupported (neither has a device bitwise OR; only the host schemes use them).
  void allreduce_or(void* buf, size_t bytes);
  /// Told during allreduce_sum_or that elements [first, first + count) of the sum, and the whole
  /// support, are final: pieces in order from element 0, while the rest is still being reduced (a
  /// caller reads each piece while it is in cache). Backends report some, all or none of the
  /// pieces; everything is final when the call returns. Runs on the thread running the operation
  /// and must not call the communicator; if it throws, no further pieces are reported and the
  /// exception reaches the caller once the operation has completed on this rank.
  struct PieceDone {
    void (*fn)(void* ctx, size_t first, size_t count);  // null: nothing to tell
    void* ctx;
  };
  /// allreduce(buf, count, dtype, Sum) and allreduce_or(bits, bytes) as one operation (a sum and
  /// its support): backends may run the two together (MPI: one presence check, the OR first, the
  /// sum in pieces reported to `done`). One allreduce call; the traffic of both.
  void allreduce_sum_or(void* buf, size_t count, DType dtype, void* bits, size_t bytes, PieceDone done = {});
  void broadcast(void* buf, size_t bytes, int root);
  void barrier();

  /// Host convenience: every rank's value of a small POD, rank-major.
  template <typename T>
  std::vector<T> allgather_value(const T& v) {
    std::vector<T> out(static_cast<size_t>(size()));
    allgather(&v, sizeof(T), out.data());
    return out;
  }

  /// The queue that runs this communicator's non-blocking calls in order (created at first use by
  /// any thread; see zen/detail/call_queue.hpp).
  detail::CallQueue& call_queue();
  /// Agreed order lets several threads of a rank drive plans of this communicator (docs/api.md,
  /// "Concurrency"). Call it on every rank, before any call or plan setup on the communicator.
  void set_call_order(CallOrder order);
  CallOrder call_order() const { return order_; }
  /// Number for a new plan on this communicator (plans get them in setup order, the same on every rank).
  uint64_t next_plan_id() { return ++plan_ids_; }
  /// Number for a plan setup started on this communicator (agreed order: setups are agreed calls too).
  uint64_t next_setup_index() { return ++setups_; }
  /// True when non-blocking calls are queued or running on this communicator and the caller is not
  /// the call-queue thread: a blocking call must then queue behind them.
  bool queue_busy() const;
  /// True on this communicator's call-queue thread (false while it has none).
  bool on_call_thread() const;
  /// Throws Unsupported (naming the rank and the reason) when this backend cannot run operations on
  /// a call-queue thread (e.g. MPI initialized below MPI_THREAD_SERIALIZED).
  virtual void check_async_support() const {}

  /// Mark the communicator failed and tell peers (backends that can) that this rank gave up.
  void abort(const std::string& reason);
  bool failed() const { return failed_; }

  /// See "Buffer ownership" at the top of this header.
  class OwnerScope {
   public:
    OwnerScope(Communicator& c, std::shared_ptr<void> owner) : c_(c), prev_(std::move(c.owner_)) {
      c.owner_ = std::move(owner);
    }
    ~OwnerScope() { c_.owner_ = std::move(prev_); }
    OwnerScope(const OwnerScope&) = delete;
    OwnerScope& operator=(const OwnerScope&) = delete;

   private:
    Communicator& c_;
    std::shared_ptr<void> prev_;
  };
  /// Owners kept alive because an operation on their buffers failed.
  size_t quarantined() const { return quarantine_.size(); }

  const TrafficStats& stats() const { return stats_; }
  TrafficStats& stats() { return stats_; }
  uint64_t sequence() const { return seq_; }

 protected:
  // Backend hooks: move the bytes; accounting, sequence numbers and failure state are handled here.
  virtual void do_send(const void* buf, size_t bytes, int peer, int tag) = 0;
  virtual void do_recv(void* buf, size_t bytes, int peer, int tag) = 0;
  virtual void do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag) = 0;
  virtual void do_alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf,
                            const size_t* rcounts, const size_t* rdispls) = 0;
  virtual void do_allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts,
                             const size_t* rdispls) = 0;
  /// Defaults: allgatherv / alltoallv with equal blocks (backends override with native calls).
  virtual void do_allgather(const void* sbuf, size_t bytes, void* rbuf);
  virtual void do_alltoall(const void* sbuf, size_t bytes, void* rbuf);
  virtual void do_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) = 0;
  /// Default: ring reduce-scatter + allgather over do_sendrecv (backends override with native calls).
  virtual void do_allreduce_or(void* buf, size_t bytes);
  /// Default: do_allreduce, then do_allreduce_or (no piece reported early).
  virtual void do_allreduce_sum_or(void* buf, size_t count, DType dtype, void* bits, size_t bytes, PieceDone done);
  virtual void do_broadcast(void* buf, size_t bytes, int root) = 0;
  virtual void do_barrier() = 0;
  virtual void do_abort(const std::string& reason) { (void)reason; }
  /// Around every operation (run_op): backends that must know which thread is inside them (the MPI
  /// backend under MPI_THREAD_SERIALIZED) check here; begin_op may throw (the operation then fails).
  virtual void begin_op() {}
  virtual void end_op() noexcept {}

  /// Throw an error naming this rank, op, sequence number and (peer >= 0) the peer.
  [[noreturn]] void fail(Result code, int peer, const std::string& detail) const;
  CommOp current_op() const { return op_; }
  /// The owner of the current operation's buffers (null: caller memory).
  const std::shared_ptr<void>& owner() const { return owner_; }
  /// Backends that must keep failed operations' owners alive past their own destruction take them
  /// here (the communicator forgets them; the backend decides when, or whether, to release them).
  std::vector<std::shared_ptr<void>> take_quarantine() { return std::move(quarantine_); }

  /// Wait for queued non-blocking calls and stop the call-queue thread (idempotent).
  void finish_calls();

  void* stream_ = nullptr;
  Ms timeout_{300000};

 private:
  template <typename F>
  void run_op(CommOp op, F&& body);
  void check_peer(int peer) const;
  void count_allreduce(size_t count, size_t elem);  // traffic of one native allreduce

  TrafficStats stats_;
  std::shared_ptr<void> owner_;
  std::vector<std::shared_ptr<void>> quarantine_;
  std::vector<size_t> eq_counts_, eq_displs_;  // scratch of the default allgather/alltoall
  std::vector<uint8_t> or_tmp_;                 // scratch of the default allreduce_or
  uint64_t seq_ = 0;
  CommOp op_ = CommOp::Barrier;
  bool failed_ = false;
  std::string failure_;
  std::unique_ptr<detail::CallQueue> queue_;
  std::atomic<detail::CallQueue*> queue_ptr_{nullptr};  // queue_.get(), readable by any thread
  std::mutex queue_mu_;                                       // creation of queue_
  CallOrder order_ = CallOrder::Submitted;
  uint64_t plan_ids_ = 0;  // setups run on one thread at a time (agreed order: the call-queue thread)
  std::atomic<uint64_t> setups_{0};
};

}  // namespace zen
