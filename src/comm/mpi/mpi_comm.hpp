#pragma once
// MPI backend, private: the communicator class and the state its files share (docs/architecture.md,
// "MPI backend"). One concern per file:
//   setup.cpp      Environment, the process-wide serial gate (MPI_THREAD_SERIALIZED hand-over),
//                  creation and destruction of a communicator
//   data_path.cpp  point to point and the collectives (staging, pieces, the wait loop)
//   schedule.cpp   alltoallv / allgatherv: MPI's native collectives or n-1 pairwise steps
//   failure.cpp    abort channel, presence check, timeouts, quarantine of memory MPI still holds,
//                  the watchdog of blocking calls
// docs/reliability.md, "Timeouts", has the failure semantics.
//
// Data moves through MPI's own non-blocking collectives (MPI_Ialltoall(v), MPI_Iallgather(v),
// MPI_Iallreduce, MPI_Ibcast), which pick their algorithms per size and rank count, send each
// buffer once per peer and copy nothing on the way. Across hosts, large alltoallv / allgatherv go
// point to point in pairwise steps instead (no incast; see Schedule below). A progress loop spins on MPI_Testall (Open MPI
// advances collectives and large messages only inside MPI calls) and yields the core when the node
// runs more ranks than it has cores; it never sleeps. Every wait loop also watches a pre-posted
// receive for abort messages from peers, and checks the clock every 64 sweeps for the timeout.
//
// Memory safety on failure (an MPI collective cannot be withdrawn once started):
//  - operations inside a Communicator::OwnerScope (zen's plans: their workspace) run directly on the
//    owner's buffers; if one fails, the base class keeps the owner alive, and requests MPI still
//    holds stay here as orphans (never freed; at destruction the owners are leaked if any remains);
//  - operations on caller memory are staged through this communicator's own buffers when small
//    (<= 64 KiB); large ones first check that every rank has entered the operation (a handshake of
//    zero-byte messages, cancellable, that names a missing rank exactly like a timeout), then start
//    the collective on the caller's buffer. If such a started collective still does not finish
//    within the timeout (every rank entered it, so the transport itself is stuck), MPI would keep
//    writing the caller's buffer after we return: the job is ended with MPI_Abort and the message,
//    instead of returning.
// Point-to-point sends are always buffered (copied) as the interface promises; receives into caller
// memory are cancelled on timeout.
#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "zen/comm/mpi.hpp"

namespace zen::mpi::impl {

constexpr int kCollTagBase = 16384;                 // tags below are the user's point-to-point tags
constexpr int kCollTags = 16382;                    // p2p collective tags: kCollTagBase + (seq mod kCollTags)
constexpr int kDiagTag = kCollTagBase + kCollTags;  // 32766: presence check
constexpr int kAbortTag = kDiagTag + 1;             // 32767 (<= MPI_TAG_UB by the standard): abort messages
constexpr size_t kAbortBytes = 1024;
constexpr size_t kStageLimit = size_t{64} << 10;    // caller-memory collectives up to this size are staged
constexpr int32_t kClosing = -2;                    // AbortHeader::missing of a "closing" message

// Largest message one MPI request or one native collective buffer carries (data_path.cpp).
size_t max_message_bytes();
// Pieces of a large blocking MPI_Allreduce, in bytes (data_path.cpp).
size_t allreduce_piece_bytes(bool multi_host);

// ---------------- threads (docs/api.md, "Concurrency") ----------------
// Below MPI_THREAD_MULTIPLE only one thread at a time may call MPI. One communicator keeps to that by
// itself (its non-blocking calls run on its progress thread, and a blocking call queues behind them),
// but two communicators used from two threads at once would call MPI side by side. So, when MPI gives
// less than MULTIPLE, every MPI call of zen's MPI communicators is made inside this process-wide gate:
//  - an operation that finds another thread inside fails with Unsupported (naming the fix) rather
//    than call MPI beside it; an operation holds the gate until it ends (it waits for its peers inside);
//  - a setup makes each MPI call inside the gate (handing it to the holder when another thread is
//    inside) and waits for its peers outside it (non-blocking MPI_Comm_idup and MPI_Iallgather):
//    communicators created on several threads at once, in other orders on other ranks, all complete
//    (a blocking MPI_Comm_dup held inside the gate, beside a refused setup on the other thread,
//    waited forever for peers whose own setup of that communicator had been refused; a setup that
//    waited for the gate would wait for an operation that waits for a peer whose setup waits the same way);
//  - an abort message never waits for the gate: when another thread holds it, the message is handed
//    to that thread, which sends it from its wait loop (each sweep) or when it leaves the gate. An
//    abort that waited would wait for an operation that itself waits for a peer whose abort waits the
//    same way (rank 0 holds the gate in communicator 1, rank 1 in communicator 2), until a timeout;
//  - a destruction, like a setup, makes each MPI call inside the gate and waits for its peers'
//    "closing" outside it: one that held the gate while it waited kept this rank's other thread from
//    destroying the communicator a peer was waiting on, whose gate was held the same way (each rank's
//    destruction then ran out its bound and freed its communicator with messages still to come,
//    after which Open MPI's next communicator creation stalled).
// The same thread may enter again (a sub-communicator's operation runs its parent's). Under MULTIPLE
// the gate is unused.
class SerialGate {
 public:
  static SerialGate& get();
  bool try_enter();
  void enter();
  void leave() noexcept;
  void run_or_post(std::function<void()> f);
  void call(const std::function<void()>& f);
  void run_posted();

 private:
  static void run_all(std::vector<std::function<void()>>& todo) noexcept;
  std::mutex m_;
  std::condition_variable cv_;
  std::thread::id owner_;
  int depth_ = 0;
  std::vector<std::function<void()>> posted_;
  std::atomic<bool> has_posted_{false};
};

// Runs a callable inside the gate when `on` (SerialGate::call: never waits for another thread's
// operation, only for its next sweep), else directly.
struct Gated {
  bool on;
  template <typename F>
  void operator()(F&& f) const {
    if (on) SerialGate::get().call(std::function<void()>(std::forward<F>(f)));
    else f();
  }
};

// Where the buffers of an operation live (decides how a failure is made memory-safe).
enum class Mem { Owned, Staged, Caller };

// Control messages (abort, presence check) carry the communicator's nonce: MPI recycles context ids,
// so a message sent on a communicator freed meanwhile could otherwise reach its successor.
struct AbortHeader {
  uint64_t nonce;
  int32_t rank;
  int32_t missing;  // >= 0: the sender gave up because that rank never took part (a timeout)
  uint32_t len;
  uint32_t pad;
};

class MpiComm final : public Communicator {
 public:
  // setup.cpp
  explicit MpiComm(MPI_Comm comm);
  void setup_check(int rc, int r, const char* what) const;
  void setup_wait(MPI_Request& rq, int r, const char* what);
  void check_async_support() const override;
  ~MpiComm() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int ranks_on_node() const override { return node_ranks_; }
  const char* backend_name() const override { return "mpi"; }

 protected:
  // data_path.cpp
  void do_send(const void* buf, size_t bytes, int peer, int tag) override;
  void do_recv(void* buf, size_t bytes, int peer, int tag) override;
  void do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag) override;
  void do_allgather(const void* sbuf, size_t bytes, void* rbuf) override;
  void do_alltoall(const void* sbuf, size_t bytes, void* rbuf) override;
  /// MPI_Iallgather / MPI_Ialltoall: one native collective of fixed block size (data_path.cpp).
  using NativeFixed = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm, MPI_Request*);
  void native_fixed(NativeFixed fn, const char* what, const void* sbuf, size_t sbytes, size_t block, void* rbuf,
                    size_t rbytes);
  void do_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) override;
  void blocking_allreduce(void* buf, size_t count, DType dtype, ReduceOp op, PieceDone done = {});
  void blocking_allreduce_pieces(void* buf, size_t count, size_t es, MPI_Datatype type, MPI_Op mop, size_t piece_bytes,
                                 PieceDone done);
  void nonblocking_or(void* buf, size_t bytes);
  void do_allreduce_or(void* buf, size_t bytes) override;
  void do_allreduce_sum_or(void* buf, size_t count, DType dtype, void* bits, size_t bytes, PieceDone done) override;
  void do_broadcast(void* buf, size_t bytes, int root) override;
  void do_barrier() override;

  // schedule.cpp
  void do_alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf,
                    const size_t* rcounts, const size_t* rdispls) override;
  void do_allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts, const size_t* rdispls) override;

  // failure.cpp
  void do_abort(const std::string& reason) override;
  void send_abort(const std::string& reason);

  // setup.cpp (the serial gate)
  void begin_op() override;
  void end_op() noexcept override;

 private:
  static constexpr size_t kNoCheck = ~size_t{0};
  static constexpr size_t kSend = ~size_t{0} - 1;

  // Requests of the operation in progress: the peer of each (-1: native collective) and, for
  // receives, the byte count the message must have (kSend marks sends). Reused across calls.
  struct Reqs {
    std::vector<MPI_Request> rq;
    std::vector<int> peer;
    std::vector<size_t> expect;
    void clear() {
      rq.clear();
      peer.clear();
      expect.clear();
    }
  };
  struct PendingSend {
    std::vector<MPI_Request> rq;
    std::vector<uint8_t> data;
  };
  // Staging buffers for caller memory and packed blocks (shared so that a failure can keep them).
  struct Stage {
    std::vector<uint8_t> s, r, ps, pr;
  };

  // Watchdog of blocking MPI calls: if a call is still running past its timeout, print the error and
  // end the process (mpirun then ends the job). No system call per call: arming stores the start
  // time in an atomic, and the thread (started at the first blocking call) looks every quarter
  // timeout, so a stuck call is found within 1.25x the timeout.
  struct Watchdog {
    std::thread th;
    std::mutex m;
    std::condition_variable cv;
    bool stop = false;
    std::atomic<int64_t> since{-1};           // steady_clock ns when the watched call started; -1: none
    std::atomic<int64_t> timeout_ns{0};
    std::atomic<const char*> what{""};
    std::string prefix;
    // Milliseconds to nanoseconds, saturating (a timeout of years must not wrap negative).
    static int64_t ns_of(std::chrono::milliseconds t) {
      constexpr int64_t kMaxMs = std::numeric_limits<int64_t>::max() / 2000000;
      return std::min<int64_t>(std::max<int64_t>(t.count(), 0), kMaxMs) * 1000000;
    }
    static int64_t now_ns() {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    }
    ~Watchdog() {
      if (!th.joinable()) return;
      {
        std::lock_guard<std::mutex> lk(m);
        stop = true;
      }
      cv.notify_all();
      th.join();
    }
    void loop();
  };
  struct Watch {
    Watchdog& d;
    Watch(MpiComm& c, const char* what) : d(c.watchdog()) {
      d.what.store(what, std::memory_order_relaxed);
      const int64_t to = Watchdog::ns_of(c.timeout_);
      if (d.timeout_ns.exchange(to, std::memory_order_relaxed) > to) {  // shorter now: the thread's nap too
        std::lock_guard<std::mutex> lk(d.m);
        d.cv.notify_all();
      }
      d.since.store(Watchdog::now_ns(), std::memory_order_release);
    }
    ~Watch() { d.since.store(-1, std::memory_order_release); }
  };
  Watchdog& watchdog();  // failure.cpp

  static uint8_t* stage_bytes(std::vector<uint8_t>& v, size_t bytes) {
    if (v.size() < bytes) v.resize(bytes);
    return v.data();
  }
  int coll_tag() { return kCollTagBase + static_cast<int>((cseq_++) % kCollTags); }
  MPI_Request* native_slot() {
    q_.rq.emplace_back();
    q_.peer.push_back(-1);
    q_.expect.push_back(kNoCheck);
    return &q_.rq.back();
  }
  void post_native(int rc, const char* what) { check(rc, -1, what); }

  // data_path.cpp
  std::unique_ptr<PendingSend> take_send_buffer(size_t bytes);
  void progress_sends();
  void check(int rc, int peer, const char* what);
  void isend(const void* buf, size_t bytes, int peer, int tag);
  void irecv(void* buf, size_t bytes, int peer, int tag);
  void p2p_barrier();
  void wait(Mem m, int root = -1);
  void status_error(int rc);
  MPI_Op mpi_op(DType t, ReduceOp op);

  // failure.cpp
  void handshake();
  void refuse_if_a_peer_gave_up();
  void poll_abort();
  void orphan_pending();
  void on_timeout(Mem m, int root);
  [[noreturn]] void escalate(const std::string& why);
  std::vector<int> presence_check();
  void close_control_channels();
  void leak_everything();


  MPI_Comm comm_ = MPI_COMM_NULL;
  int level_ = MPI_THREAD_SINGLE;  // MPI's thread support, queried at creation
  bool serial_ = true;             // level_ < MPI_THREAD_MULTIPLE: operations go through SerialGate
  int rank_ = 0, size_ = 1, node_ranks_ = 1;
  bool oversubscribed_ = false;
  // Large alltoallv / allgatherv across hosts go point to point in n-1 pairwise steps (in step k
  // rank r sends to r+k and receives from r-k): every step is a permutation, so no host's link
  // receives from all peers at once (incast: on shallow switch buffers the burst of a one-shot
  // exchange overflows the port queue and TCP waits out its 200 ms retransmission timeout).
  // Native: MPI's own non-blocking collectives (one round; the choice inside one host).
  enum class Schedule { Native, Auto, Pairwise };
  bool multi_host_ = false;
  Schedule schedule_ = Schedule::Native;
  static constexpr size_t kPairwiseBytes = size_t{256} << 10;  // Auto: pairwise above this many bytes per rank
  uint64_t cseq_ = 0;
  Reqs q_;
  std::vector<MPI_Status> st_;
  std::vector<int> icount_s_, icount_r_, idispl_s_, idispl_r_;
  std::shared_ptr<Stage> stage_;
  std::vector<std::unique_ptr<PendingSend>> pending_, free_sends_;
  std::vector<MPI_Request> orphans_;
  MPI_Request abort_rq_ = MPI_REQUEST_NULL;
  std::vector<uint8_t> abort_in_;
  bool aborted_sent_ = false;
  int timed_out_on_ = -1;
  struct Diag {
    uint64_t nonce;
    uint64_t seq;
  };
  uint64_t nonce_ = 0;
  std::vector<uint8_t> closed_ = std::vector<uint8_t>(256, 0);  // resized to size_ in the constructor
  Diag diag_out_{};
  std::vector<Diag> diag_in_;
  MPI_Op ops16_[6] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  std::unique_ptr<Watchdog> dog_;
};

}  // namespace zen::mpi::impl
