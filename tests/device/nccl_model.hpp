#pragma once
// A host model of NCCL's group semantics, for checking the NCCL communicator's logic
// (cuda/comm/grouped_comm.hpp) on the CPU. It models what decides whether a schedule deadlocks or
// is refused, not how NCCL moves bytes:
//  - each rank has a stream that runs its groups (and copies, frees) in order, one at a time;
//  - the operations of a group progress together; the group ends when all of them have;
//  - point to point is a rendezvous (NCCL for large messages): a send completes when the peer's
//    matching receive has been posted; a pair's sends and receives match in issue order, and their
//    sizes must agree;
//  - collectives (allreduce, broadcast, barrier) match across all ranks in issue order and complete
//    when every rank has posted its counterpart;
//  - a group holding a send to self without the receive from self is refused (ncclInvalidUsage).
// Deadlock is detected exactly: every rank's stream waits in a group that cannot progress and every
// rank's host thread waits for its stream (or has finished).
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/grouped_comm.hpp"
#include "zen/comm/communicator.hpp"

namespace zen::test::ncclm {

struct Op {
  enum Kind { Send, Recv, Bcast, Allreduce, Barrier } kind;
  int rank;
  const void* sbuf;
  void* rbuf;
  size_t bytes;  // Allreduce: count
  DType dtype;
  ReduceOp rop;
  int peer;  // send: destination, recv: source, bcast: root
  bool done = false;
};
using OpP = std::shared_ptr<Op>;

inline const char* kind_name(Op::Kind k) {
  switch (k) {
    case Op::Send: return "send";
    case Op::Recv: return "recv";
    case Op::Bcast: return "broadcast";
    case Op::Allreduce: return "allreduce";
    case Op::Barrier: return "barrier";
  }
  return "?";
}

class World {
 public:
  explicit World(int n) : n_(n), streams_(n), exec_busy_(n, false), host_waiting_(n, false), host_done_(n, false),
                          next_coll_(n, 0) {
    for (int r = 0; r < n; ++r) exec_.emplace_back([this, r] { run_stream(r); });
  }
  ~World() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : exec_) t.join();
    for (auto& q : streams_)  // staging buffers of a stopped world
      for (auto& it : q)
        if (it.kind == 2) delete[] static_cast<uint8_t*>(it.dst);
  }
  int size() const { return n_; }

  struct Item {
    int kind;  // 0 copy, 1 group, 2 free
    void* dst;
    const void* src;
    size_t bytes;
    std::vector<OpP> ops;
  };
  void post(int r, Item it) {
    {
      std::lock_guard<std::mutex> lk(m_);
      streams_[r].push_back(std::move(it));
    }
    cv_.notify_all();
  }
  /// The host thread of rank r waits until its stream is empty. Throws the world's failure.
  void wait(int r) {
    std::unique_lock<std::mutex> lk(m_);
    host_waiting_[r] = true;
    cv_.notify_all();
    while (!failed_ && (!streams_[r].empty() || exec_busy_[r])) {
      cv_.wait_for(lk, std::chrono::milliseconds(20));
      detect_deadlock();
    }
    host_waiting_[r] = false;
    if (failed_) throw_failure(lk);
  }
  void host_finished(int r) {
    std::lock_guard<std::mutex> lk(m_);
    host_done_[r] = true;
    cv_.notify_all();
  }
  void fail(const std::string& why) {
    {
      std::lock_guard<std::mutex> lk(m_);
      if (!failed_) {
        failed_ = true;
        why_ = why;
      }
    }
    cv_.notify_all();
  }
  bool deadlocked() const { return deadlock_; }

 private:
  [[noreturn]] void throw_failure(std::unique_lock<std::mutex>& lk) {
    const std::string w = why_;
    const bool dl = deadlock_;
    lk.unlock();
    ZEN_THROW(dl ? Result::Timeout : Result::CudaError, "NCCL model: " + w);
  }
  void run_stream(int r) {
    std::unique_lock<std::mutex> lk(m_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !streams_[r].empty(); });
      if (stop_) return;
      Item it = std::move(streams_[r].front());
      streams_[r].pop_front();
      exec_busy_[r] = true;
      if (failed_) {  // drop the work of a failed world
      } else if (it.kind == 0) {
        if (it.bytes) std::memcpy(it.dst, it.src, it.bytes);
      } else if (it.kind == 2) {
        delete[] static_cast<uint8_t*>(it.dst);
      } else {
        run_group(r, it.ops, lk);
      }
      if (it.kind == 2 && failed_) delete[] static_cast<uint8_t*>(it.dst);
      exec_busy_[r] = false;
      cv_.notify_all();
    }
  }
  void run_group(int r, const std::vector<OpP>& ops, std::unique_lock<std::mutex>& lk) {
    bool self_send = false, self_recv = false;
    for (auto& o : ops) {
      self_send |= o->kind == Op::Send && o->peer == r;
      self_recv |= o->kind == Op::Recv && o->peer == r;
    }
    if (self_send && !self_recv) {
      failed_ = true;
      why_ = "ncclInvalidUsage: rank " + std::to_string(r) + " sends to itself in a group without the receive";
      return;
    }
    for (auto& o : ops) {
      if (o->kind == Op::Send) sends_[{r, o->peer}].push_back(o);
      else if (o->kind == Op::Recv) recvs_[{o->peer, r}].push_back(o);
      else colls_[next_coll_[r]++].push_back(o);
    }
    match();
    cv_.notify_all();
    auto all_done = [&] {
      for (auto& o : ops)
        if (!o->done) return false;
      return true;
    };
    waiting_group_[r] = &ops;
    while (!failed_ && !stop_ && !all_done()) {
      cv_.wait_for(lk, std::chrono::milliseconds(20));
      detect_deadlock();
    }
    waiting_group_.erase(r);
  }
  void match() {
    for (auto& [pair, sq] : sends_) {
      auto& rq = recvs_[pair];
      while (!sq.empty() && !rq.empty()) {
        OpP s = sq.front(), q = rq.front();
        sq.pop_front();
        rq.pop_front();
        if (s->bytes != q->bytes) {
          failed_ = true;
          why_ = "rank " + std::to_string(pair.first) + " sends " + std::to_string(s->bytes) + " bytes to rank " +
                 std::to_string(pair.second) + ", which receives " + std::to_string(q->bytes) + " (issue order)";
          return;
        }
        if (s->bytes) std::memcpy(q->rbuf, s->sbuf, s->bytes);
        s->done = q->done = true;
      }
    }
    for (auto it = colls_.begin(); it != colls_.end();) {
      auto& v = it->second;
      if (static_cast<int>(v.size()) < n_) {
        ++it;
        continue;
      }
      for (auto& o : v)
        if (o->kind != v[0]->kind || o->bytes != v[0]->bytes || o->peer != v[0]->peer) {
          failed_ = true;
          why_ = std::string("collective mismatch: ") + kind_name(o->kind) + " vs " + kind_name(v[0]->kind);
          return;
        }
      run_collective(v);
      for (auto& o : v) o->done = true;
      it = colls_.erase(it);
    }
  }
  void run_collective(std::vector<OpP>& v) {
    std::vector<OpP> by_rank(n_);
    for (auto& o : v) by_rank[o->rank] = o;
    const Op& k = *v[0];
    if (k.kind == Op::Bcast) {
      const OpP& root = by_rank[k.peer];
      for (auto& o : by_rank)
        if (o->rbuf != root->sbuf) std::memcpy(o->rbuf, root->sbuf, k.bytes);
    } else if (k.kind == Op::Allreduce) {
      dispatch_dtype(k.dtype, [&](auto tag) {
        using T = decltype(tag);
        using A = typename accum_of<T>::type;
        std::vector<T> out(k.bytes);
        for (size_t i = 0; i < k.bytes; ++i) {
          A acc = static_cast<A>(static_cast<const T*>(by_rank[0]->rbuf)[i]);
          for (int p = 1; p < n_; ++p) {
            const A x = static_cast<A>(static_cast<const T*>(by_rank[p]->rbuf)[i]);
            acc = k.rop == ReduceOp::Sum ? acc + x : k.rop == ReduceOp::Max ? (x > acc ? x : acc) : (x < acc ? x : acc);
          }
          out[i] = static_cast<T>(acc);
        }
        for (auto& o : by_rank) std::memcpy(o->rbuf, out.data(), k.bytes * sizeof(T));
      });
    }
  }
  // Called with the lock held: declares a deadlock when nothing can progress any more.
  void detect_deadlock() {
    if (failed_) return;
    bool stuck_group = false;
    for (int r = 0; r < n_; ++r) {
      const auto g = waiting_group_.find(r);
      bool blocked = false;
      if (g != waiting_group_.end())
        for (auto& o : *g->second) blocked |= !o->done;
      if (g != waiting_group_.end() && !blocked) return;               // about to finish its group
      if (g == waiting_group_.end() && (exec_busy_[r] || !streams_[r].empty())) return;  // has work
      const bool idle = g == waiting_group_.end();
      if (!host_done_[r] && !(host_waiting_[r] && !idle)) return;      // its host may still post
      stuck_group |= blocked;
    }
    if (!stuck_group) return;
    std::string w;
    for (auto& [r, ops] : waiting_group_) {
      w += " rank " + std::to_string(r) + " waits in a group of";
      for (auto& o : *ops)
        if (!o->done)
          w += std::string(" ") + kind_name(o->kind) +
               (o->kind == Op::Send ? " to " : o->kind == Op::Recv ? " from " : " #") + std::to_string(o->peer);
      w += ";";
    }
    failed_ = true;
    deadlock_ = true;
    why_ = "deadlock:" + w;
    cv_.notify_all();
  }

  int n_;
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::deque<Item>> streams_;
  std::vector<bool> exec_busy_, host_waiting_, host_done_;
  std::vector<uint64_t> next_coll_;
  std::map<std::pair<int, int>, std::deque<OpP>> sends_, recvs_;
  std::map<uint64_t, std::vector<OpP>> colls_;
  std::map<int, const std::vector<OpP>*> waiting_group_;
  std::vector<std::thread> exec_;
  bool stop_ = false, failed_ = false, deadlock_ = false;
  std::string why_;
};

/// The transport of GroupedComm over the model (host memory).
class ModelTransport : public Communicator {
 public:
  ModelTransport(std::shared_ptr<World> w, int r) : w_(std::move(w)), rank_(r) {}
  int rank() const override { return rank_; }
  int size() const override { return w_->size(); }
  const char* backend_name() const override { return "nccl-model"; }
  /// Wait for this rank's stream (what stream_wait does on a device communicator).
  void wait() { t_wait(); }

 protected:
  void t_group_start() { group_.clear(); }
  void t_group_end() { w_->post(rank_, World::Item{1, nullptr, nullptr, 0, std::move(group_)}); group_.clear(); }
  void t_send(const void* buf, size_t bytes, int peer) { add(Op::Send, buf, nullptr, bytes, peer); }
  void t_recv(void* buf, size_t bytes, int peer) { add(Op::Recv, nullptr, buf, bytes, peer); }
  void t_broadcast(const void* s, void* r, size_t bytes, int root) { add(Op::Bcast, s, r, bytes, root); }
  void t_allreduce(void* buf, size_t count, DType t, ReduceOp op) {
    group_.push_back(std::make_shared<Op>(Op{Op::Allreduce, rank_, buf, buf, count, t, op, 0}));
  }
  void t_barrier() { add(Op::Barrier, nullptr, nullptr, 0, 0); }
  void* t_stage(const void* src, size_t bytes, int) {
    auto* p = new uint8_t[bytes];
    w_->post(rank_, World::Item{0, p, src, bytes, {}});  // stream-ordered, as cudaMemcpyAsync
    return p;
  }
  void t_copy(void* dst, const void* src, size_t bytes, int) { w_->post(rank_, World::Item{0, dst, src, bytes, {}}); }
  void t_release(void* p, int) { w_->post(rank_, World::Item{2, p, nullptr, 0, {}}); }
  void t_free_now(void* p) noexcept { delete[] static_cast<uint8_t*>(p); }
  void t_wait() {
    try {
      w_->wait(rank_);
    } catch (const Error& e) {
      fail(e.code(), -1, e.what());
    }
  }
  bool t_aborted() const { return false; }
  void do_abort(const std::string& reason) override { w_->fail("rank " + std::to_string(rank_) + " aborted: " + reason); }

 private:
  void add(Op::Kind k, const void* s, void* r, size_t bytes, int peer) {
    group_.push_back(std::make_shared<Op>(Op{k, rank_, s, r, bytes, DType::F32, ReduceOp::Sum, peer}));
  }
  std::shared_ptr<World> w_;
  int rank_;
  std::vector<OpP> group_;
};

using ModelComm = cuda::detail::GroupedComm<ModelTransport>;

/// A host communicator over a ModelComm that waits for the stream after every operation, as the
/// GPU tests' staging adapter does on a device communicator (so host code may read the buffers).
class SyncComm final : public Communicator {
 public:
  explicit SyncComm(ModelComm& c) : c_(c) { timeout_ = c.timeout(); }
  int rank() const override { return c_.rank(); }
  int size() const override { return c_.size(); }
  const char* backend_name() const override { return "nccl-model(sync)"; }

 protected:
  void do_send(const void* b, size_t n, int p, int t) override { c_.send(b, n, p, t); c_.wait(); }
  void do_recv(void* b, size_t n, int p, int t) override { c_.recv(b, n, p, t); c_.wait(); }
  void do_sendrecv(const void* s, size_t sn, int d, void* r, size_t rn, int src, int t) override {
    c_.sendrecv(s, sn, d, r, rn, src, t);
    c_.wait();
  }
  void do_alltoallv(const void* s, const size_t* sc, const size_t* sd, void* r, const size_t* rc,
                    const size_t* rd) override {
    c_.alltoallv(s, sc, sd, r, rc, rd);
    c_.wait();
  }
  void do_allgatherv(const void* s, size_t sb, void* r, const size_t* rc, const size_t* rd) override {
    c_.allgatherv(s, sb, r, rc, rd);
    c_.wait();
  }
  void do_allreduce(void* b, size_t n, DType t, ReduceOp op) override {
    c_.allreduce(b, n, t, op);
    c_.wait();
  }
  void do_broadcast(void* b, size_t n, int root) override {
    c_.broadcast(b, n, root);
    c_.wait();
  }
  void do_barrier() override { c_.barrier(); }
  void do_abort(const std::string& reason) override { c_.abort(reason); }

 private:
  ModelComm& c_;
};

/// Run fn(comm) on n threads over one model world; returns each rank's exception (or null).
inline std::vector<std::exception_ptr> run(int n, const std::function<void(SyncComm&, ModelComm&)>& fn) {
  auto w = std::make_shared<World>(n);
  std::vector<std::exception_ptr> errs(static_cast<size_t>(n));
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      try {
        ModelComm mc(w, r);
        mc.set_timeout(std::chrono::seconds(60));
        SyncComm sc(mc);
        fn(sc, mc);
      } catch (...) {
        errs[r] = std::current_exception();
        w->fail("rank " + std::to_string(r) + " failed");
      }
      w->host_finished(r);
    });
  for (auto& t : th) t.join();
  return errs;
}

}  // namespace zen::test::ncclm
