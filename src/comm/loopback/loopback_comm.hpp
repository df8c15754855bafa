#pragma once
// Loopback backend, private: the world the ranks share (channels, posts, the wait-for graph, the
// abort) and the communicator class. One concern per file:
//   loopback.cpp     create, run_collect, run
//   channels.cpp     point to point (buffered send, zero-copy sendrecv)
//   collectives.cpp  the zero-copy collectives and the shared-memory allreduce
//   waits.cpp        waiting for peers: collective checks, aborts, timeouts naming the missing rank
//
// Collectives are zero-copy: each rank publishes a descriptor of its buffers ("post"), every
// receiver copies its part straight out of the poster's memory, and a rank leaves the collective
// only when every peer has taken what it needed from it. The dense allreduce is a shared-memory
// reduce-scatter + allgather: rank r sums chunk r over all ranks' buffers in rank order (so every
// rank gets bitwise the same result) and the others copy it. Point-to-point sends are buffered in
// pooled per-channel buffers. In steady state nothing is allocated.
//
// Failures: a rank that gives up (timeout, error, abort) withdraws its post after the peers that are
// copying from it have finished, so no peer ever reads memory the caller may free. Timeouts name
// the end of the wait chain (the rank that did not take part); an abort wakes every waiting rank.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zen/comm/communicator.hpp"

namespace zen::loopback::impl {

using Clock = std::chrono::steady_clock;

// ---- point to point ----
struct Msg {
  int tag = 0;
  std::vector<uint8_t> data;     // buffered send: the bytes
  size_t bytes = 0;
  const uint8_t* ext = nullptr;  // zero-copy send (sendrecv): the sender's buffer ...
  bool* done = nullptr;          // ... and the flag the receiver sets once it copied (under the lock)
};
struct Channel {
  std::mutex m;
  std::condition_variable cv;
  std::vector<Msg> q;                     // FIFO (short): front = oldest
  std::vector<std::vector<uint8_t>> pool;  // recycled message buffers
};

// ---- collectives ----
constexpr int kStages = 3;
struct Post {
  uint64_t cs = 0;   // collective sequence number
  uint8_t kind = 0;  // CommOp
  bool live = false;
  const uint8_t* sbuf = nullptr;
  const size_t* scounts = nullptr;  // alltoallv
  const size_t* sdispls = nullptr;
  size_t sbytes = 0;                // allgatherv / allgather / alltoall block / broadcast
  uint8_t* buf = nullptr;           // allreduce (in place)
  size_t count = 0;
  DType dtype = DType::F32;
  ReduceOp op = ReduceOp::Sum;
  bool bit_or = false;  // allreduce_or (bytes)
  int root = -1;
  int readers = 0;                        // peers copying out of this post right now
  int arrived[kStages] = {0, 0, 0};       // peers that finished stage s with this post
  std::vector<uint8_t> from[kStages];     // which peers (for naming the missing one)
};
struct Slot {
  std::mutex m;
  std::condition_variable cv;
  Post post;
};

class World {
 public:
  explicit World(int n)
      : n_(n), ch_(static_cast<size_t>(n) * static_cast<size_t>(n)), slots_(static_cast<size_t>(n)),
        waiting_(static_cast<size_t>(n)), blamed_(static_cast<size_t>(n)) {
    for (int r = 0; r < n; ++r) {
      waiting_[r].store(-1);
      blamed_[r].store(-1);
      for (auto& f : slots_[r].post.from) f.assign(static_cast<size_t>(n), 0);
    }
    for (auto& c : ch_) {
      c.q.reserve(8);
      c.pool.reserve(8);
    }
  }
  // Wait-for graph, for naming the rank that did not take part: waiting_[r] is the peer rank r is
  // blocked on (-1: not blocked in an operation), blamed_[r] the rank r timed out on.
  void set_waiting(int r, int on) { waiting_[r].store(on); }
  void set_blamed(int r, int who) { blamed_[r].store(who); }
  // Follow the chain src -> (the rank src waits for, or the rank src blamed) -> ... to a rank that is
  // neither blocked nor timed out: that one did not take part. Returns src's chain as "a -> b -> c".
  int root_of(int src, std::string& chain) {
    std::vector<char> seen(static_cast<size_t>(n_), 0);
    int cur = src;
    chain = std::to_string(src);
    for (;;) {
      seen[cur] = 1;
      int next = waiting_[cur].load();
      if (next < 0) next = blamed_[cur].load();
      if (next < 0) return cur;
      chain += " -> " + std::to_string(next);
      if (seen[next]) return -1;  // a cycle of waits: mismatched operations, nobody is simply missing
      cur = next;
    }
  }
  int n() const { return n_; }
  Channel& channel(int src, int dst) { return ch_[static_cast<size_t>(src) * static_cast<size_t>(n_) + static_cast<size_t>(dst)]; }
  Slot& slot(int r) { return slots_[static_cast<size_t>(r)]; }

  // `missing` >= 0: the aborting rank gave up because that peer never took part (a timeout).
  void abort(int rank, const std::string& reason, int missing) {
    {
      std::lock_guard<std::mutex> lk(am_);
      if (abort_rank_ < 0) {
        abort_rank_ = rank;
        abort_reason_ = reason;
        abort_missing_ = missing;
      }
      aborted_.store(true);
    }
    for (auto& c : ch_) {
      std::lock_guard<std::mutex> lk(c.m);
      c.cv.notify_all();
    }
    for (auto& s : slots_) {
      std::lock_guard<std::mutex> lk(s.m);
      s.cv.notify_all();
    }
  }
  bool aborted() const { return aborted_.load(); }
  struct AbortInfo {
    int rank;
    std::string reason;
    int missing;
  };
  AbortInfo abort_info() {
    std::lock_guard<std::mutex> lk(am_);
    return {abort_rank_, abort_reason_, abort_missing_};
  }

 private:
  int n_;
  std::vector<Channel> ch_;
  std::vector<Slot> slots_;
  std::mutex am_;
  std::atomic<bool> aborted_{false};
  std::vector<std::atomic<int>> waiting_, blamed_;
  int abort_rank_ = -1;
  int abort_missing_ = -1;
  std::string abort_reason_;
};

class LoopbackComm final : public Communicator {
 public:
  LoopbackComm(std::shared_ptr<World> w, int rank) : w_(std::move(w)), rank_(rank) {}
  ~LoopbackComm() override { finish_calls(); }
  int rank() const override { return rank_; }
  int size() const override { return w_->n(); }
  int ranks_on_node() const override { return w_->n(); }
  const char* backend_name() const override { return "loopback"; }

 protected:
  // ---------------- point to point ----------------
  void do_send(const void* buf, size_t bytes, int peer, int tag) override { post_p2p(buf, bytes, peer, tag); }

  void do_recv(void* buf, size_t bytes, int peer, int tag) override;
  void do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag) override;

  void do_alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf,
                    const size_t* rcounts, const size_t* rdispls) override;
  void do_allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts, const size_t* rdispls) override;
  void do_allgather(const void* sbuf, size_t bytes, void* rbuf) override;
  void do_alltoall(const void* sbuf, size_t bytes, void* rbuf) override;

  // Shared-memory allreduce: stage 0 every rank sums its chunk over all ranks' buffers (rank order,
  // accumulating 16-bit values in fp32, rounded once) and writes it into its own buffer; stage 1
  // every rank copies the other chunks from their owners. Identical bits on every rank.
  void do_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) override { allreduce_impl(buf, count, dtype, op, false); }
  void do_allreduce_or(void* buf, size_t bytes) override { allreduce_impl(buf, bytes, DType::F32, ReduceOp::Sum, true); }

  void allreduce_impl(void* buf, size_t count, DType dtype, ReduceOp op, bool bit_or);
  void do_broadcast(void* buf, size_t bytes, int root) override;
  void do_barrier() override;
  void do_abort(const std::string& reason) override { w_->abort(rank_, reason, timed_out_on_); }

 private:
  template <typename T>
  static void reduce_chunk(const std::vector<const uint8_t*>& bufs, size_t lo, size_t len, ReduceOp op, uint8_t* out);

  bool mismatch(int peer, size_t got, size_t want);

  // One collective on this rank: publish the own post, read peers' posts, wait until every peer is
  // done with ours. The destructor withdraws the post on every exit path (waiting for the peers that
  // are copying from it), so no peer ever reads memory the caller may free after an error.
  struct Collective {
    LoopbackComm& c;
    CommOp kind;
    uint64_t cs;
    Post mine;
    bool published = false;
    Collective(LoopbackComm& comm, CommOp k) : c(comm), kind(k), cs(++comm.cseq_) {
      comm.first_error_.clear();
      comm.first_peer_ = -1;
    }
    ~Collective() {
      if (!published) return;
      Slot& s = c.w_->slot(c.rank_);
      std::unique_lock<std::mutex> lk(s.m);
      s.post.live = false;
      s.cv.wait(lk, [&] { return s.post.readers == 0; });
    }
    void publish() {
      Slot& s = c.w_->slot(c.rank_);
      {
        std::lock_guard<std::mutex> lk(s.m);
        Post& p = s.post;
        p.cs = cs;
        p.kind = static_cast<uint8_t>(kind);
        p.sbuf = mine.sbuf;
        p.scounts = mine.scounts;
        p.sdispls = mine.sdispls;
        p.sbytes = mine.sbytes;
        p.buf = mine.buf;
        p.count = mine.count;
        p.dtype = mine.dtype;
        p.op = mine.op;
        p.bit_or = mine.bit_or;
        p.root = mine.root;
        p.readers = 0;
        for (int st = 0; st < kStages; ++st) {
          p.arrived[st] = 0;
          std::fill(p.from[st].begin(), p.from[st].end(), 0);
        }
        p.live = true;
      }
      published = true;
      s.cv.notify_all();
    }
    // Wait for peer p's post of this collective and run f(post) under p's lock.
    template <typename F>
    void wait_post(int p, F&& f) {
      Slot& s = c.w_->slot(p);
      c.wait_on(s, p, [&](Post& q) {
        if (!q.live || q.cs < cs) return false;
        c.check_kind(q, p, cs, kind);
        f(q);
        return true;
      });
    }
    // Copy out of peer p's post: f(post) returns false on a size mismatch (recorded, the protocol
    // still completes so that the peer is not left waiting). Marks p's post as consumed (stage 0).
    template <typename F>
    void read(int p, F&& f) {
      Slot& s = c.w_->slot(p);
      c.wait_on(s, p, [&](Post& q) {
        if (!q.live || q.cs < cs) return false;
        c.check_kind(q, p, cs, kind);
        ++q.readers;
        return true;
      });
      struct Done {
        Slot& s;
        int me;
        ~Done() {
          {
            std::lock_guard<std::mutex> lk(s.m);
            --s.post.readers;
            ++s.post.arrived[0];
            s.post.from[0][static_cast<size_t>(me)] = 1;
          }
          s.cv.notify_all();
        }
      } done{s, c.rank_};
      f(s.post);  // the post is stable while we are a reader
    }
    void done_reading() { c.throw_first_error(); }
    // Stage s finished by this rank: tell every peer, then wait for every peer's arrival at our post.
    void arrive(int st) {
      const int n = c.size();
      for (int p = 0; p < n; ++p) {
        if (p == c.rank_) continue;
        Slot& s = c.w_->slot(p);
        {
          std::lock_guard<std::mutex> lk(s.m);
          if (s.post.live && s.post.cs == cs) {
            ++s.post.arrived[st];
            s.post.from[st][static_cast<size_t>(c.rank_)] = 1;
          }
        }
        s.cv.notify_all();
      }
      wait_arrivals(st);
    }
    void wait_arrivals(int st) {
      const int n = c.size();
      Slot& s = c.w_->slot(c.rank_);
      c.wait_on_own(s, st, n - 1);
    }
    // Every peer has consumed our post (stage 0); then report a recorded mismatch.
    void finish() {
      wait_arrivals(0);
      c.throw_first_error();
    }
  };

  // Read access to every rank's allreduce buffer for one stage (readers counted on each peer post).
  struct Readers {
    LoopbackComm& c;
    Collective& col;
    std::vector<const uint8_t*>& bufs;
    int held = 0;  // peers below `held` (this rank excepted) hold a reader count
    Readers(LoopbackComm& comm, Collective& cl) : c(comm), col(cl), bufs(comm.reader_bufs_) {
      const int n = c.size();
      bufs.assign(static_cast<size_t>(n), nullptr);
      bufs[static_cast<size_t>(c.rank_)] = col.mine.buf;
    }
    void acquire() {
      const int n = c.size();
      for (int p = 0; p < n; ++p) {
        if (p != c.rank_) {
          Slot& s = c.w_->slot(p);
          c.wait_on(s, p, [&](Post& q) {
            if (!q.live || q.cs < col.cs) return false;
            c.check_kind(q, p, col.cs, col.kind);
            ++q.readers;
            bufs[static_cast<size_t>(p)] = q.buf;
            return true;
          });
        }
        held = p + 1;
      }
    }
    ~Readers() {
      for (int p = 0; p < held; ++p) {
        if (p == c.rank_) continue;
        Slot& s = c.w_->slot(p);
        {
          std::lock_guard<std::mutex> lk(s.m);
          --s.post.readers;
        }
        s.cv.notify_all();
      }
    }
  };

  void check_kind(const Post& q, int p, uint64_t cs, CommOp kind);

  void throw_first_error();

  // Wait (under s.m) until ready(post) holds. `peer` is the rank waited for (wait chain, timeouts).
  template <typename F>
  void wait_on(Slot& s, int peer, F&& ready) {
    const auto deadline = Clock::now() + timeout_;
    Waiting waiting(*w_, rank_, peer);
    std::unique_lock<std::mutex> lk(s.m);
    for (;;) {
      if (ready(s.post)) return;
      check_abort(lk, peer);
      if (s.cv.wait_until(lk, deadline) == std::cv_status::timeout && !ready(s.post)) {
        lk.unlock();
        timeout_error(peer);
      } else if (ready(s.post)) {
        return;
      }
    }
  }
  void wait_on_own(Slot& s, int st, int want);

  struct Waiting {
    World& w;
    int r;
    Waiting(World& world, int rank, int on) : w(world), r(rank) { w.set_waiting(r, on); }
    ~Waiting() { w.set_waiting(r, -1); }
  };

  void check_abort(std::unique_lock<std::mutex>& lk, int peer);

  [[noreturn]] void timeout_error(int src);

  void post_p2p(const void* buf, size_t bytes, int peer, int tag);

  void take_p2p(void* buf, size_t bytes, int src, int tag, Clock::time_point deadline);

  std::shared_ptr<World> w_;
  int rank_;
  uint64_t cseq_ = 0;
  int timed_out_on_ = -1;  // the peer this rank timed out on (reported with an abort)
  std::string first_error_;
  int first_peer_ = -1;
  std::vector<const uint8_t*> reader_bufs_;
};

}  // namespace zen::loopback::impl
