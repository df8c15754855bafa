// Loopback backend: the ranks are threads of one process.
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
#include "zen/comm/loopback.hpp"

#include "../ring_chunk.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

namespace zen::loopback {
namespace {

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
  ~LoopbackComm() override { finish_progress(); }
  int rank() const override { return rank_; }
  int size() const override { return w_->n(); }
  int ranks_on_node() const override { return w_->n(); }
  const char* backend_name() const override { return "loopback"; }

 protected:
  // ---------------- point to point ----------------
  void do_send(const void* buf, size_t bytes, int peer, int tag) override { post_p2p(buf, bytes, peer, tag); }

  void do_recv(void* buf, size_t bytes, int peer, int tag) override {
    const auto deadline = Clock::now() + timeout_;
    take_p2p(buf, bytes, peer, tag, deadline);
  }

  // The send part is zero-copy: the receiver copies straight from sbuf, and the call returns once it
  // has (everyone posts before receiving, so rings cannot deadlock). On an error the unread message
  // is withdrawn first, so no peer reads sbuf after we return.
  void do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag) override {
    bool done = false;
    Channel& out = w_->channel(rank_, dst);
    {
      std::lock_guard<std::mutex> lk(out.m);
      Msg m;
      m.tag = tag;
      m.bytes = sbytes;
      m.ext = static_cast<const uint8_t*>(sbuf);
      m.done = &done;
      out.q.push_back(std::move(m));
    }
    out.cv.notify_all();
    struct Withdraw {
      Channel& c;
      bool& done;
      ~Withdraw() {
        std::lock_guard<std::mutex> lk(c.m);
        if (done) return;
        for (size_t i = 0; i < c.q.size(); ++i)
          if (c.q[i].done == &done) {
            c.q.erase(c.q.begin() + static_cast<std::ptrdiff_t>(i));
            break;
          }
      }
    } withdraw{out, done};
    const auto deadline = Clock::now() + timeout_;
    take_p2p(rbuf, rbytes, src, tag, deadline);
    // Wait until dst has copied our bytes.
    Waiting waiting(*w_, rank_, dst);
    std::unique_lock<std::mutex> lk(out.m);
    while (!done) {
      check_abort(lk, dst);
      if (out.cv.wait_until(lk, deadline) == std::cv_status::timeout && !done) {
        lk.unlock();
        timeout_error(dst);
      }
    }
  }

  // ---------------- collectives ----------------
  void do_alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf,
                    const size_t* rcounts, const size_t* rdispls) override {
    const int n = size();
    if (scounts[rank_] != rcounts[rank_])
      fail(Result::InvalidArgument, rank_, "send count to self " + std::to_string(scounts[rank_]) +
                                               " != receive count from self " + std::to_string(rcounts[rank_]));
    Collective c(*this, CommOp::Alltoallv);
    c.mine.sbuf = static_cast<const uint8_t*>(sbuf);
    c.mine.scounts = scounts;
    c.mine.sdispls = sdispls;
    c.publish();
    auto* r = static_cast<uint8_t*>(rbuf);
    if (rcounts[rank_]) std::memmove(r + rdispls[rank_], c.mine.sbuf + sdispls[rank_], rcounts[rank_]);
    for (int k = 1; k < n; ++k) {
      const int p = (rank_ - k + n) % n;
      c.read(p, [&](const Post& q) {
        const size_t got = q.scounts[rank_];
        if (got != rcounts[p]) return mismatch(p, got, rcounts[p]);
        if (got) std::memcpy(r + rdispls[p], q.sbuf + q.sdispls[rank_], got);
        return true;
      });
    }
    c.finish();
  }

  void do_allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts, const size_t* rdispls) override {
    const int n = size();
    Collective c(*this, current_op());
    c.mine.sbuf = static_cast<const uint8_t*>(sbuf);
    c.mine.sbytes = sbytes;
    c.publish();
    auto* r = static_cast<uint8_t*>(rbuf);
    if (sbytes && r + rdispls[rank_] != sbuf) std::memmove(r + rdispls[rank_], sbuf, sbytes);
    for (int k = 1; k < n; ++k) {
      const int p = (rank_ - k + n) % n;
      c.read(p, [&](const Post& q) {
        if (q.sbytes != rcounts[p]) return mismatch(p, q.sbytes, rcounts[p]);
        if (q.sbytes) std::memcpy(r + rdispls[p], q.sbuf, q.sbytes);
        return true;
      });
    }
    c.finish();
  }

  void do_allgather(const void* sbuf, size_t bytes, void* rbuf) override {
    const int n = size();
    Collective c(*this, CommOp::Allgather);
    c.mine.sbuf = static_cast<const uint8_t*>(sbuf);
    c.mine.sbytes = bytes;
    c.publish();
    auto* r = static_cast<uint8_t*>(rbuf);
    if (bytes) std::memmove(r + bytes * static_cast<size_t>(rank_), sbuf, bytes);
    for (int k = 1; k < n; ++k) {
      const int p = (rank_ - k + n) % n;
      c.read(p, [&](const Post& q) {
        if (q.sbytes != bytes) return mismatch(p, q.sbytes, bytes);
        if (bytes) std::memcpy(r + bytes * static_cast<size_t>(p), q.sbuf, bytes);
        return true;
      });
    }
    c.finish();
  }

  void do_alltoall(const void* sbuf, size_t bytes, void* rbuf) override {
    const int n = size();
    Collective c(*this, CommOp::Alltoall);
    c.mine.sbuf = static_cast<const uint8_t*>(sbuf);
    c.mine.sbytes = bytes;
    c.publish();
    auto* r = static_cast<uint8_t*>(rbuf);
    if (bytes) std::memmove(r + bytes * static_cast<size_t>(rank_), c.mine.sbuf + bytes * static_cast<size_t>(rank_), bytes);
    for (int k = 1; k < n; ++k) {
      const int p = (rank_ - k + n) % n;
      c.read(p, [&](const Post& q) {
        if (q.sbytes != bytes) return mismatch(p, q.sbytes, bytes);
        if (bytes) std::memcpy(r + bytes * static_cast<size_t>(p), q.sbuf + bytes * static_cast<size_t>(rank_), bytes);
        return true;
      });
    }
    c.finish();
  }

  // Shared-memory allreduce: stage 0 every rank sums its chunk over all ranks' buffers (rank order,
  // accumulating 16-bit values in fp32, rounded once) and writes it into its own buffer; stage 1
  // every rank copies the other chunks from their owners. Identical bits on every rank.
  void do_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) override { allreduce_impl(buf, count, dtype, op, false); }
  void do_allreduce_or(void* buf, size_t bytes) override { allreduce_impl(buf, bytes, DType::F32, ReduceOp::Sum, true); }

  void allreduce_impl(void* buf, size_t count, DType dtype, ReduceOp op, bool bit_or) {
    const int n = size();
    Collective c(*this, CommOp::Allreduce);
    c.mine.buf = static_cast<uint8_t*>(buf);
    c.mine.count = count;
    c.mine.dtype = dtype;
    c.mine.op = op;
    c.mine.bit_or = bit_or;
    c.publish();
    if (n == 1) {
      c.finish();
      return;
    }
    const size_t es = bit_or ? 1 : dtype_size(dtype);
    // Everybody posted (and agrees on the size) before anybody reads.
    for (int p = 0; p < n; ++p)
      if (p != rank_) c.wait_post(p, [&](const Post& q) {
        const size_t qb = q.count * (q.bit_or ? 1 : dtype_size(q.dtype));
        if (qb != count * es)
          fail(Result::InvalidUsage, p, "peer contributed " + std::to_string(qb) + " bytes, this rank " + std::to_string(count * es));
        if (q.bit_or != bit_or || q.dtype != dtype || q.op != op)
          fail(Result::InvalidUsage, p, "peer's allreduce dtype/op differs from this rank's");
      });
    // Stage 0: reduce chunk rank_.
    size_t lo = 0;
    for (int i = 0; i < rank_; ++i) lo += ring_chunk_bytes(count, es, n, i) / es;
    const size_t len = ring_chunk_bytes(count, es, n, rank_) / es;
    {
      Readers all(*this, c);
      all.acquire();
      if (bit_or) {
        auto* out = static_cast<uint8_t*>(buf) + lo;
        for (size_t i = 0; i < len; ++i) {
          uint8_t x = 0;
          for (const uint8_t* b : all.bufs) x = static_cast<uint8_t>(x | b[lo + i]);
          out[i] = x;
        }
      } else {
        dispatch_dtype(dtype, [&](auto tag) { reduce_chunk<decltype(tag)>(all.bufs, lo, len, op, static_cast<uint8_t*>(buf)); });
      }
    }
    c.arrive(0);
    // Stage 1: copy every other chunk from its owner.
    {
      Readers all(*this, c);
      all.acquire();
      size_t off = 0;
      for (int p = 0; p < n; ++p) {
        const size_t b = ring_chunk_bytes(count, es, n, p);
        if (p != rank_ && b) std::memcpy(static_cast<uint8_t*>(buf) + off, all.bufs[static_cast<size_t>(p)] + off, b);
        off += b;
      }
    }
    c.arrive(1);
  }

  void do_broadcast(void* buf, size_t bytes, int root) override {
    Collective c(*this, CommOp::Broadcast);
    if (rank_ == root) {
      c.mine.sbuf = static_cast<const uint8_t*>(buf);
      c.mine.sbytes = bytes;
      c.mine.root = root;
      c.publish();
      c.finish();  // every other rank takes the bytes
      return;
    }
    c.read(root, [&](const Post& q) {
      if (q.sbytes != bytes) return mismatch(root, q.sbytes, bytes);
      if (bytes) std::memcpy(buf, q.sbuf, bytes);
      return true;
    });
    c.done_reading();
  }

  void do_barrier() override {
    const int n = size();
    Collective c(*this, CommOp::Barrier);
    c.publish();
    for (int k = 1; k < n; ++k) c.read((rank_ - k + n) % n, [](const Post&) { return true; });
    c.finish();
  }

  void do_abort(const std::string& reason) override { w_->abort(rank_, reason, timed_out_on_); }

 private:
  template <typename T>
  static void reduce_chunk(const std::vector<const uint8_t*>& bufs, size_t lo, size_t len, ReduceOp op, uint8_t* out) {
    using A = typename accum_of<T>::type;
    constexpr size_t kBlock = 1024;
    A tmp[kBlock];
    const size_t n = bufs.size();
    for (size_t b = 0; b < len; b += kBlock) {
      const size_t m = std::min(kBlock, len - b);
      const T* s0 = reinterpret_cast<const T*>(bufs[0]) + lo + b;
      for (size_t i = 0; i < m; ++i) tmp[i] = static_cast<A>(s0[i]);
      for (size_t p = 1; p < n; ++p) {
        const T* s = reinterpret_cast<const T*>(bufs[p]) + lo + b;
        if (op == ReduceOp::Sum) {
          for (size_t i = 0; i < m; ++i) tmp[i] += static_cast<A>(s[i]);
        } else if (op == ReduceOp::Max) {
          for (size_t i = 0; i < m; ++i) tmp[i] = static_cast<A>(s[i]) > tmp[i] ? static_cast<A>(s[i]) : tmp[i];
        } else {
          for (size_t i = 0; i < m; ++i) tmp[i] = static_cast<A>(s[i]) < tmp[i] ? static_cast<A>(s[i]) : tmp[i];
        }
      }
      T* d = reinterpret_cast<T*>(out) + lo + b;
      for (size_t i = 0; i < m; ++i) d[i] = static_cast<T>(tmp[i]);
    }
  }

  bool mismatch(int peer, size_t got, size_t want) {
    if (!first_error_.empty()) return false;
    first_peer_ = peer;
    first_error_ = "peer sent " + std::to_string(got) + " bytes, this rank expected " + std::to_string(want);
    return false;
  }

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

  void check_kind(const Post& q, int p, uint64_t cs, CommOp kind) {
    if (q.cs > cs)
      fail(Result::InvalidUsage, p, "collective mismatch: peer is already at collective #" + std::to_string(q.cs) +
                                        " while this rank is at #" + std::to_string(cs) + " (" + comm_op_name(kind) +
                                        "): the ranks called different sequences of collectives");
    if (q.kind != static_cast<uint8_t>(kind))
      fail(Result::InvalidUsage, p, std::string("collective mismatch: peer called ") +
                                        comm_op_name(static_cast<CommOp>(q.kind)) + " where this rank called " +
                                        comm_op_name(kind));
  }

  void throw_first_error() {
    if (!first_error_.empty()) {
      const std::string e = first_error_;
      first_error_.clear();
      fail(Result::InvalidUsage, first_peer_, e);
    }
  }

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
  // Wait until `want` peers arrived at stage st of our own post; names the first missing peer.
  void wait_on_own(Slot& s, int st, int want) {
    const auto deadline = Clock::now() + timeout_;
    std::unique_lock<std::mutex> lk(s.m);
    auto missing = [&] {
      for (int p = 0; p < size(); ++p)
        if (p != rank_ && !s.post.from[st][static_cast<size_t>(p)]) return p;
      return -1;
    };
    Waiting waiting(*w_, rank_, -1);
    for (;;) {
      if (s.post.arrived[st] >= want) return;
      const int m = missing();
      w_->set_waiting(rank_, m);
      check_abort(lk, m);
      if (s.cv.wait_until(lk, deadline) == std::cv_status::timeout && s.post.arrived[st] < want) {
        const int who = missing();
        lk.unlock();
        timeout_error(who);
      }
    }
  }

  struct Waiting {
    World& w;
    int r;
    Waiting(World& world, int rank, int on) : w(world), r(rank) { w.set_waiting(r, on); }
    ~Waiting() { w.set_waiting(r, -1); }
  };

  void check_abort(std::unique_lock<std::mutex>& lk, int peer) {
    if (!w_->aborted()) return;
    auto info = w_->abort_info();
    // A peer that gave up on a timeout is no news (it was stuck like us): keep waiting until our own
    // deadline, so that every waiting rank reports the missing rank as a timeout (1x the timeout
    // after it entered). Any other abort fails fast.
    if (info.missing >= 0) return;
    lk.unlock();
    fail(Result::RemoteError, info.rank, "rank " + std::to_string(info.rank) + " aborted while this rank waited for peer " +
                                             std::to_string(peer) + " (" + info.reason + ")");
  }

  [[noreturn]] void timeout_error(int src) {
    // src may itself be blocked on another rank (rings, trees): name the end of the wait chain.
    std::string chain;
    const int root = w_->root_of(src, chain);
    timed_out_on_ = root >= 0 ? root : src;
    w_->set_blamed(rank_, timed_out_on_);
    if (root == src)
      fail(Result::Timeout, src, "timed out after " + std::to_string(timeout_.count()) + " ms waiting for peer " +
                                     std::to_string(src) + " (it did not take part)");
    if (root < 0)
      fail(Result::Timeout, src, "timed out after " + std::to_string(timeout_.count()) + " ms waiting for peer " +
                                     std::to_string(src) + "; the ranks wait for each other in a cycle (" + chain +
                                     "): mismatched operations");
    fail(Result::Timeout, root, "timed out after " + std::to_string(timeout_.count()) + " ms waiting for peer " +
                                    std::to_string(src) + ", which waits for rank " + std::to_string(root) +
                                    " (wait chain " + chain + "); rank " + std::to_string(root) + " did not take part");
  }

  void post_p2p(const void* buf, size_t bytes, int peer, int tag) {
    Channel& c = w_->channel(rank_, peer);
    {
      std::lock_guard<std::mutex> lk(c.m);
      Msg m;
      m.tag = tag;
      m.bytes = bytes;
      // A pooled buffer that already has room (so steady-state traffic allocates nothing), else the
      // largest one, grown.
      if (!c.pool.empty()) {
        size_t pick = 0;
        for (size_t i = 0; i < c.pool.size(); ++i) {
          if (c.pool[i].capacity() >= bytes) {
            pick = i;
            break;
          }
          if (c.pool[i].capacity() > c.pool[pick].capacity()) pick = i;
        }
        m.data = std::move(c.pool[pick]);
        c.pool.erase(c.pool.begin() + static_cast<std::ptrdiff_t>(pick));
      }
      if (m.data.size() < bytes) m.data.resize(bytes);
      if (bytes) std::memcpy(m.data.data(), buf, bytes);
      c.q.push_back(std::move(m));
    }
    c.cv.notify_all();
  }

  void take_p2p(void* buf, size_t bytes, int src, int tag, Clock::time_point deadline) {
    Channel& c = w_->channel(src, rank_);
    Waiting waiting(*w_, rank_, src);
    std::unique_lock<std::mutex> lk(c.m);
    for (;;) {
      for (size_t i = 0; i < c.q.size(); ++i) {
        if (c.q[i].tag != tag) continue;
        Msg m = std::move(c.q[i]);
        c.q.erase(c.q.begin() + static_cast<std::ptrdiff_t>(i));
        const bool ok = m.bytes == bytes;
        if (ok && bytes) std::memcpy(buf, m.ext ? m.ext : m.data.data(), bytes);
        if (m.done) {
          *m.done = true;  // the sender may return (and free its buffer) once we release the lock
          c.cv.notify_all();
        } else {
          c.pool.push_back(std::move(m.data));
        }
        if (!ok) {
          lk.unlock();
          fail(Result::InvalidUsage, src, "peer sent " + std::to_string(m.bytes) + " bytes, this rank expected " + std::to_string(bytes));
        }
        return;
      }
      check_abort(lk, src);
      if (c.cv.wait_until(lk, deadline) == std::cv_status::timeout) {
        bool found = false;
        for (auto& m : c.q) found = found || m.tag == tag;
        if (found) continue;
        lk.unlock();
        timeout_error(src);
      }
    }
  }

  std::shared_ptr<World> w_;
  int rank_;
  uint64_t cseq_ = 0;
  int timed_out_on_ = -1;  // the peer this rank timed out on (reported with an abort)
  std::string first_error_;
  int first_peer_ = -1;
  std::vector<const uint8_t*> reader_bufs_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> create(int n) {
  ZEN_ENFORCE(n >= 1, "loopback::create: rank count " + std::to_string(n) + " must be >= 1");
  auto w = std::make_shared<World>(n);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < n; ++r) out.push_back(std::make_unique<LoopbackComm>(w, r));
  return out;
}

std::vector<std::exception_ptr> run_collect(int n, const std::function<void(Communicator&)>& fn, Communicator::Ms timeout) {
  auto comms = create(n);
  std::vector<std::exception_ptr> errs(static_cast<size_t>(n));
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) {
    comms[r]->set_timeout(timeout);
    th.emplace_back([&, r] {
      try {
        fn(*comms[r]);
      } catch (const std::exception& e) {
        errs[r] = std::current_exception();
        comms[r]->abort(e.what());
      } catch (...) {
        errs[r] = std::current_exception();
        comms[r]->abort("unknown exception");
      }
    });
  }
  for (auto& t : th) t.join();
  return errs;
}

void run(int n, const std::function<void(Communicator&)>& fn, Communicator::Ms timeout) {
  auto errs = run_collect(n, fn, timeout);
  // Prefer an original error over the RemoteError echoes it caused on other ranks.
  std::exception_ptr first, remote;
  for (auto& e : errs) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      if (err.code() == Result::RemoteError) {
        if (!remote) remote = e;
      } else if (!first) {
        first = e;
      }
    } catch (...) {
      if (!first) first = e;
    }
  }
  if (first) std::rethrow_exception(first);
  if (remote) std::rethrow_exception(remote);
}

}  // namespace zen::loopback
