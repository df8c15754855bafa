#include "zen/comm/loopback.hpp"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace zen::loopback {
namespace {

constexpr uint8_t kP2P = 0xFF;  // message kind for point-to-point; otherwise the CommOp of a collective

struct Msg {
  uint8_t kind;
  int tag;         // p2p tag
  uint64_t cseq;   // collective sequence number
  std::vector<uint8_t> data;
};

struct Channel {
  std::mutex m;
  std::condition_variable cv;
  std::deque<Msg> q;
};

class World {
 public:
  explicit World(int n)
      : n_(n), ch_(static_cast<size_t>(n) * static_cast<size_t>(n)), waiting_(static_cast<size_t>(n)),
        blamed_(static_cast<size_t>(n)) {
    for (int r = 0; r < n; ++r) {
      waiting_[r].store(-1);
      blamed_[r].store(-1);
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

  void post(int src, int dst, Msg&& m) {
    Channel& c = channel(src, dst);
    {
      std::lock_guard<std::mutex> lk(c.m);
      c.q.push_back(std::move(m));
    }
    c.cv.notify_all();
  }

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
  bool has_message(int src, int dst) {
    Channel& c = channel(src, dst);
    std::lock_guard<std::mutex> lk(c.m);
    return !c.q.empty();
  }

 private:
  int n_;
  std::vector<Channel> ch_;
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
  int rank() const override { return rank_; }
  int size() const override { return w_->n(); }
  const char* backend_name() const override { return "loopback"; }

 protected:
  void do_send(const void* buf, size_t bytes, int peer, int tag) override { post_p2p(buf, bytes, peer, tag); }

  void do_recv(void* buf, size_t bytes, int peer, int tag) override {
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    Msg m = take(peer, kP2P, tag, 0, deadline);
    copy_out(m, buf, bytes, peer);
  }

  void do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag) override {
    post_p2p(sbuf, sbytes, dst, tag);
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    Msg m = take(src, kP2P, tag, 0, deadline);
    copy_out(m, rbuf, rbytes, src);
  }

  void do_alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf,
                    const size_t* rcounts, const size_t* rdispls) override {
    const uint64_t cs = ++cseq_;
    const int n = size();
    const auto* s = static_cast<const uint8_t*>(sbuf);
    auto* r = static_cast<uint8_t*>(rbuf);
    for (int k = 1; k < n; ++k) {
      int p = (rank_ + k) % n;
      post_coll(p, CommOp::Alltoallv, cs, s + sdispls[p], scounts[p]);
    }
    if (scounts[rank_] != rcounts[rank_])
      fail(Result::InvalidArgument, rank_, "send count to self " + std::to_string(scounts[rank_]) + " != receive count from self " + std::to_string(rcounts[rank_]));
    if (rcounts[rank_]) std::memmove(r + rdispls[rank_], s + sdispls[rank_], rcounts[rank_]);
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (int k = 1; k < n; ++k) {
      int p = (rank_ - k + n) % n;
      Msg m = take(p, static_cast<uint8_t>(CommOp::Alltoallv), 0, cs, deadline);
      copy_out(m, r + rdispls[p], rcounts[p], p);
    }
  }

  void do_allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts, const size_t* rdispls) override {
    const uint64_t cs = ++cseq_;
    const int n = size();
    const uint8_t kind = static_cast<uint8_t>(current_op());
    auto* r = static_cast<uint8_t*>(rbuf);
    for (int k = 1; k < n; ++k) post_coll((rank_ + k) % n, current_op(), cs, sbuf, sbytes);
    if (sbytes) std::memmove(r + rdispls[rank_], sbuf, sbytes);
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (int k = 1; k < n; ++k) {
      int p = (rank_ - k + n) % n;
      Msg m = take(p, kind, 0, cs, deadline);
      copy_out(m, r + rdispls[p], rcounts[p], p);
    }
  }

  void do_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) override {
    const uint64_t cs = ++cseq_;
    const int n = size();
    const size_t bytes = count * dtype_size(dtype);
    for (int k = 1; k < n; ++k) post_coll((rank_ + k) % n, CommOp::Allreduce, cs, buf, bytes);
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    std::vector<Msg> in(static_cast<size_t>(n));
    for (int k = 1; k < n; ++k) {
      int p = (rank_ - k + n) % n;
      in[p] = take(p, static_cast<uint8_t>(CommOp::Allreduce), 0, cs, deadline);
      if (in[p].data.size() != bytes)
        fail(Result::InvalidUsage, p, "peer contributed " + std::to_string(in[p].data.size()) + " bytes, this rank " + std::to_string(bytes));
    }
    // Reduce in rank order so that every rank computes bitwise the same result.
    std::vector<uint8_t> own(static_cast<const uint8_t*>(buf), static_cast<const uint8_t*>(buf) + bytes);
    in[rank_].data = std::move(own);
    dispatch_dtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      using A = typename accum_of<T>::type;
      T* out = static_cast<T*>(buf);
      for (size_t i = 0; i < count; ++i) {
        A acc = static_cast<A>(reinterpret_cast<const T*>(in[0].data.data())[i]);
        for (int p = 1; p < n; ++p) {
          A v = static_cast<A>(reinterpret_cast<const T*>(in[p].data.data())[i]);
          if (op == ReduceOp::Sum) acc += v;
          else if (op == ReduceOp::Max) acc = v > acc ? v : acc;
          else acc = v < acc ? v : acc;
        }
        out[i] = static_cast<T>(acc);
      }
    });
  }

  void do_broadcast(void* buf, size_t bytes, int root) override {
    const uint64_t cs = ++cseq_;
    if (rank_ == root) {
      for (int p = 0; p < size(); ++p)
        if (p != root) post_coll(p, CommOp::Broadcast, cs, buf, bytes);
      return;
    }
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    Msg m = take(root, static_cast<uint8_t>(CommOp::Broadcast), 0, cs, deadline);
    copy_out(m, buf, bytes, root);
  }

  void do_barrier() override {
    const uint64_t cs = ++cseq_;
    const int n = size();
    for (int k = 1; k < n; ++k) post_coll((rank_ + k) % n, CommOp::Barrier, cs, nullptr, 0);
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (int k = 1; k < n; ++k) take((rank_ - k + n) % n, static_cast<uint8_t>(CommOp::Barrier), 0, cs, deadline);
  }

  void do_abort(const std::string& reason) override { w_->abort(rank_, reason, timed_out_on_); }

 private:
  void post_p2p(const void* buf, size_t bytes, int peer, int tag) {
    Msg m{kP2P, tag, 0, {}};
    if (bytes) m.data.assign(static_cast<const uint8_t*>(buf), static_cast<const uint8_t*>(buf) + bytes);
    w_->post(rank_, peer, std::move(m));
  }
  void post_coll(int peer, CommOp op, uint64_t cs, const void* buf, size_t bytes) {
    Msg m{static_cast<uint8_t>(op), 0, cs, {}};
    if (bytes) m.data.assign(static_cast<const uint8_t*>(buf), static_cast<const uint8_t*>(buf) + bytes);
    w_->post(rank_, peer, std::move(m));
  }

  void copy_out(const Msg& m, void* dst, size_t expect, int peer) {
    if (m.data.size() != expect)
      fail(Result::InvalidUsage, peer, "peer sent " + std::to_string(m.data.size()) + " bytes, this rank expected " + std::to_string(expect));
    if (expect) std::memcpy(dst, m.data.data(), expect);
  }

  // Wait for the first message from `src` matching (kind, tag) for p2p or (collective seq) otherwise.
  Msg take(int src, uint8_t kind, int tag, uint64_t cs, std::chrono::steady_clock::time_point deadline) {
    Channel& c = w_->channel(src, rank_);
    struct Waiting {
      World& w;
      int r;
      ~Waiting() { w.set_waiting(r, -1); }
    } waiting{*w_, rank_};
    w_->set_waiting(rank_, src);
    std::unique_lock<std::mutex> lk(c.m);
    for (;;) {
      for (auto it = c.q.begin(); it != c.q.end(); ++it) {
        if (kind == kP2P) {
          if (it->kind == kP2P && it->tag == tag) {
            Msg m = std::move(*it);
            c.q.erase(it);
            return m;
          }
        } else if (it->kind != kP2P && it->cseq == cs) {
          if (it->kind != kind)
            fail(Result::InvalidUsage, src, std::string("collective mismatch: peer called ") +
                                                 comm_op_name(static_cast<CommOp>(it->kind)) + " where this rank called " +
                                                 comm_op_name(static_cast<CommOp>(kind)));
          Msg m = std::move(*it);
          c.q.erase(it);
          return m;
        }
      }
      if (w_->aborted()) {
        auto info = w_->abort_info();
        // A peer that gave up on a timeout is no news (it was stuck like us): keep waiting until our own
        // deadline, so that every waiting rank reports the missing rank as a timeout (1x the timeout
        // after it entered). Any other abort fails fast.
        if (info.missing < 0) {
          lk.unlock();
          fail(Result::RemoteError, info.rank, "rank " + std::to_string(info.rank) + " aborted while this rank waited for peer " +
                                                   std::to_string(src) + " (" + info.reason + ")");
        }
      }
      if (c.cv.wait_until(lk, deadline) == std::cv_status::timeout) {
        bool found = false;
        for (auto& m : c.q) found |= (kind == kP2P ? (m.kind == kP2P && m.tag == tag) : (m.kind != kP2P && m.cseq == cs));
        if (found) continue;
        lk.unlock();
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
    }
  }

  std::shared_ptr<World> w_;
  int rank_;
  uint64_t cseq_ = 0;
  int timed_out_on_ = -1;  // the peer this rank timed out on (reported with an abort)
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
