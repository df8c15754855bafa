// Device loopback backend: n virtual ranks on one GPU (threads of one process, one stream each).
//
// Collectives use a pull model with three host-side barriers (no GPU synchronization):
//   post (buffer pointers, counts) + record `ready` on the own stream     -> barrier 1
//   wait on the peers' `ready`, cudaMemcpyAsync from their buffers into own buffers, record `done`
//                                                                          -> barrier 2
//   wait on the peers' `done` (nobody reuses a send buffer a peer still reads) -> barrier 3
// Barrier 3 also guarantees nobody re-records an event a peer has not waited on yet. Every
// event a stream waits on was recorded before a host barrier, so a stream never waits on a peer
// that has not posted: waiting for the stream is a plain cudaStreamSynchronize (DeviceComm).
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "../../src/comm/in_process.hpp"
#include "device_comm.hpp"
#include "kernels/check.cuh"
#include "zen/cuda/comm.hpp"
#include "zen/cuda/kernels.hpp"

namespace zen::cuda {

namespace loopback {
namespace {

struct Post {
  CommOp op = CommOp::Barrier;
  const void* sbuf = nullptr;
  size_t sbytes = 0;
  std::vector<size_t> scounts, sdispls;
  void* buf = nullptr;
  size_t count = 0;
  DType dtype = DType::F32;
  ReduceOp rop = ReduceOp::Sum;
  int root = 0;
  void* tmp = nullptr;
};

// A buffered point-to-point message: the sender copies the bytes into a stream-ordered staging
// allocation (cudaMallocAsync on its stream) and records `ready`; the receiver waits on `ready`,
// copies, and frees the staging buffer on its own stream (cudaFreeAsync), so send never waits.
struct P2P {
  void* staging;
  size_t bytes;
  int tag;
  cudaEvent_t ready;
};

struct World {
  explicit World(int n_, int dev) : n(n_), device(dev), here(static_cast<size_t>(n_), 0), posts(static_cast<size_t>(n_)),
                                    ch(static_cast<size_t>(n_) * static_cast<size_t>(n_)) {}
  int n, device;
  std::mutex m;
  std::condition_variable cv;
  uint64_t gen = 0;
  int arrived = 0;
  std::vector<char> here;
  bool aborted = false;
  int abort_rank = -1;
  std::string abort_reason;
  std::vector<Post> posts;
  std::vector<std::deque<std::shared_ptr<P2P>>> ch;  // (src, dst) -> pending sends
  ~World() {  // messages nobody received
    for (auto& q : ch)
      for (auto& m : q) {
        if (m->staging) cudaFree(m->staging);
        if (m->ready) cudaEventDestroy(m->ready);
      }
  }
  std::deque<std::shared_ptr<P2P>>& channel(int src, int dst) { return ch[static_cast<size_t>(src) * n + dst]; }
};

class DeviceLoopbackComm final : public detail::DeviceComm {
 public:
  DeviceLoopbackComm(std::shared_ptr<World> w, int rank) : w_(std::move(w)), rank_(rank) {
    int cur = 0;
    cudaGetDevice(&cur);
    ZEN_CUDA_CHECK(cudaSetDevice(w_->device));
    for (cudaEvent_t* e : {&ready_, &done_, &done2_}) ZEN_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    cudaSetDevice(cur);
  }
  ~DeviceLoopbackComm() override {
    for (cudaEvent_t e : {ready_, done_, done2_}) cudaEventDestroy(e);
    if (tmp_) cudaFree(tmp_);
  }
  int rank() const override { return rank_; }
  int size() const override { return w_->n; }
  const char* backend_name() const override { return "device-loopback"; }
  cudaEvent_t ready() const { return ready_; }
  cudaEvent_t done() const { return done_; }
  cudaEvent_t done2() const { return done2_; }

 protected:
  // ---- point to point: the receiver copies from the sender's buffer ----
  void do_send(const void* buf, size_t bytes, int peer, int tag) override { post_send(buf, bytes, peer, tag); }
  void do_recv(void* buf, size_t bytes, int peer, int tag) override { take_recv(buf, bytes, peer, tag); }
  void do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag) override {
    post_send(sbuf, sbytes, dst, tag);
    take_recv(rbuf, rbytes, src, tag);
  }

  // ---- collectives ----
  void do_alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf, const size_t* rcounts,
                    const size_t* rdispls) override {
    const int n = size();
    Post& me = w_->posts[rank_];
    me = Post{};
    me.op = CommOp::Alltoallv;
    me.sbuf = sbuf;
    me.scounts.assign(scounts, scounts + n);
    me.sdispls.assign(sdispls, sdispls + n);
    record(ready_);
    barrier();
    check_ops(CommOp::Alltoallv);
    for (int k = 0; k < n; ++k) {
      const int src = (rank_ + k) % n;
      const Post& ps = w_->posts[src];
      if (ps.scounts[rank_] != rcounts[src])
        fail(Result::InvalidUsage, src, "peer sends " + std::to_string(ps.scounts[rank_]) + " bytes, this rank expects " +
                                            std::to_string(rcounts[src]));
      pull(static_cast<uint8_t*>(rbuf) + rdispls[src], static_cast<const uint8_t*>(ps.sbuf) + ps.sdispls[rank_],
           rcounts[src], src);
    }
    finish();
  }
  void do_allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts, const size_t* rdispls) override {
    const int n = size();
    Post& me = w_->posts[rank_];
    me = Post{};
    me.op = current_op();
    me.sbuf = sbuf;
    me.sbytes = sbytes;
    record(ready_);
    barrier();
    check_ops(current_op());
    for (int k = 0; k < n; ++k) {
      const int src = (rank_ + k) % n;
      const Post& ps = w_->posts[src];
      if (ps.sbytes != rcounts[src])
        fail(Result::InvalidUsage, src, "peer contributes " + std::to_string(ps.sbytes) + " bytes, this rank expects " +
                                            std::to_string(rcounts[src]));
      pull(static_cast<uint8_t*>(rbuf) + rdispls[src], ps.sbuf, rcounts[src], src);
    }
    finish();
  }
  void do_broadcast(void* buf, size_t bytes, int root) override {
    Post& me = w_->posts[rank_];
    me = Post{};
    me.op = CommOp::Broadcast;
    me.buf = buf;
    me.count = bytes;
    me.root = root;
    record(ready_);
    barrier();
    check_ops(CommOp::Broadcast);
    const Post& pr = w_->posts[root];
    if (pr.root != root) fail(Result::InvalidUsage, root, "ranks disagree on the broadcast root");
    if (rank_ != root) {
      if (pr.count != bytes)
        fail(Result::InvalidUsage, root, "root broadcasts " + std::to_string(pr.count) + " bytes, this rank expects " +
                                             std::to_string(bytes));
      pull(buf, pr.buf, bytes, root);
    }
    finish();
  }
  // Reduce-scatter (rank r reduces chunk r of every buffer, in rank order) + allgather of chunks.
  void do_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) override {
    const int n = size();
    const size_t es = dtype_size(dtype);
    const size_t mine = count / n + (static_cast<size_t>(rank_) < count % n ? 1 : 0);
    if (mine * es > tmp_bytes_) {  // grows once to the largest chunk seen (outside the steady state)
      if (tmp_) cudaFree(tmp_);
      tmp_ = nullptr;
      cuda_check(cudaMalloc(&tmp_, mine * es), -1, "device loopback allreduce scratch");
      tmp_bytes_ = mine * es;
    }
    Post& me = w_->posts[rank_];
    me = Post{};
    me.op = CommOp::Allreduce;
    me.buf = buf;
    me.count = count;
    me.dtype = dtype;
    me.rop = op;
    me.tmp = tmp_;
    record(ready_);
    barrier();
    check_ops(CommOp::Allreduce);
    for (int p = 0; p < n; ++p) {
      const Post& pp = w_->posts[p];
      if (pp.count != count || pp.dtype != dtype || pp.rop != op)
        fail(Result::InvalidUsage, p, "peer allreduces " + std::to_string(pp.count) + " x " + dtype_name(pp.dtype) +
                                          ", this rank " + std::to_string(count) + " x " + dtype_name(dtype));
    }
    auto lo = [&](int r) {
      size_t o = 0;
      for (int q = 0; q < r; ++q) o += count / n + (static_cast<size_t>(q) < count % n ? 1 : 0);
      return o;
    };
    const size_t my_lo = lo(rank_);
    std::vector<const void*> srcs(static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) {
      if (p != rank_) wait_event(peer(p).ready(), p);
      srcs[p] = static_cast<const uint8_t*>(w_->posts[p].buf) + my_lo * es;
    }
    if (mine) Kernels<Gpu>::reduce_rank_order(srcs.data(), n, mine, dtype, op, tmp_, stream_);
    record(done_);
    barrier();
    for (int p = 0; p < n; ++p)
      if (p != rank_) wait_event(peer(p).done(), p);  // all chunks reduced; nobody still reads my buffer
    for (int p = 0; p < n; ++p) {
      const size_t len = count / n + (static_cast<size_t>(p) < count % n ? 1 : 0);
      if (len)
        cuda_check(cudaMemcpyAsync(static_cast<uint8_t*>(buf) + lo(p) * es, w_->posts[p].tmp, len * es,
                                   cudaMemcpyDeviceToDevice, cstream()),
                   p, "cudaMemcpyAsync");
    }
    record(done2_);
    barrier();
    for (int p = 0; p < n; ++p)
      if (p != rank_) wait_event(peer(p).done2(), p);  // peers finished reading my scratch
    barrier();
  }
  void do_barrier() override {
    Post& me = w_->posts[rank_];
    me = Post{};
    me.op = CommOp::Barrier;
    record(ready_);
    barrier();
    check_ops(CommOp::Barrier);
    for (int p = 0; p < size(); ++p)
      if (p != rank_) wait_event(peer(p).ready(), p);
    barrier();
  }
  void do_abort(const std::string& reason) override { abort_world(reason); }

 public:
  void set_peers(std::vector<DeviceLoopbackComm*> peers) { peers_ = std::move(peers); }
  /// Tell every member of this world that this rank gave up (touches only the shared world state,
  /// so any thread may call it).
  void abort_world(const std::string& reason) {
    {
      std::lock_guard<std::mutex> lk(w_->m);
      if (!w_->aborted) {
        w_->aborted = true;
        w_->abort_rank = rank_;
        w_->abort_reason = reason;
      }
    }
    w_->cv.notify_all();
  }

 private:
  DeviceLoopbackComm& peer(int p) const { return *peers_[p]; }
  void record(cudaEvent_t e) { cuda_check(cudaEventRecord(e, cstream()), -1, "cudaEventRecord"); }
  void wait_event(cudaEvent_t e, int p) { cuda_check(cudaStreamWaitEvent(cstream(), e, 0), p, "cudaStreamWaitEvent"); }
  void pull(void* dst, const void* src, size_t bytes, int p) {
    if (p != rank_) wait_event(peer(p).ready(), p);
    if (bytes) cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cstream()), p, "cudaMemcpyAsync");
  }
  void finish() {
    record(done_);
    barrier();
    for (int p = 0; p < size(); ++p)
      if (p != rank_) wait_event(peer(p).done(), p);
    barrier();
  }
  void check_ops(CommOp op) {
    for (int p = 0; p < size(); ++p)
      if (w_->posts[p].op != op)
        fail(Result::InvalidUsage, p, std::string("collective mismatch: peer called ") + comm_op_name(w_->posts[p].op) +
                                          " where this rank called " + comm_op_name(op));
  }

  [[noreturn]] void fail_aborted(std::unique_lock<std::mutex>& lk, int waiting_for) {
    const int who = w_->abort_rank;
    const std::string why = w_->abort_reason;
    lk.unlock();
    fail(Result::RemoteError, who, "rank " + std::to_string(who) + " aborted while this rank waited" +
                                       (waiting_for >= 0 ? " for peer " + std::to_string(waiting_for) : std::string()) +
                                       " (" + why + ")");
  }

  void barrier() {
    std::unique_lock<std::mutex> lk(w_->m);
    if (w_->aborted) fail_aborted(lk, -1);
    const uint64_t g = w_->gen;
    w_->here[rank_] = 1;
    if (++w_->arrived == w_->n) {
      w_->arrived = 0;
      std::fill(w_->here.begin(), w_->here.end(), 0);
      ++w_->gen;
      lk.unlock();
      w_->cv.notify_all();
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (w_->gen == g) {
      if (w_->aborted) fail_aborted(lk, -1);
      if (w_->cv.wait_until(lk, deadline) == std::cv_status::timeout && w_->gen == g && !w_->aborted) {
        std::string missing;
        int first = -1;
        for (int p = 0; p < w_->n; ++p)
          if (!w_->here[p]) {
            missing += (missing.empty() ? "" : ", ") + std::to_string(p);
            if (first < 0) first = p;
          }
        lk.unlock();
        fail(Result::Timeout, first, "timed out after " + std::to_string(timeout_.count()) + " ms waiting for peer(s) " +
                                         missing + " (they did not take part)");
      }
    }
  }

  void post_send(const void* buf, size_t bytes, int peer_rank, int tag) {
    auto msg = std::make_shared<P2P>(P2P{nullptr, bytes, tag, nullptr});
    if (bytes) {
      cuda_check(cudaMallocAsync(&msg->staging, bytes, cstream()), peer_rank, "cudaMallocAsync (send staging)");
      cuda_check(cudaMemcpyAsync(msg->staging, buf, bytes, cudaMemcpyDeviceToDevice, cstream()), peer_rank, "cudaMemcpyAsync");
    }
    cuda_check(cudaEventCreateWithFlags(&msg->ready, cudaEventDisableTiming), peer_rank, "cudaEventCreate");
    record(msg->ready);
    {
      std::lock_guard<std::mutex> lk(w_->m);
      w_->channel(rank_, peer_rank).push_back(msg);
    }
    w_->cv.notify_all();
  }
  void take_recv(void* buf, size_t bytes, int src, int tag) {
    std::shared_ptr<P2P> msg;
    {
      std::unique_lock<std::mutex> lk(w_->m);
      const auto deadline = std::chrono::steady_clock::now() + timeout_;
      auto& q = w_->channel(src, rank_);
      for (;;) {
        for (auto it = q.begin(); it != q.end(); ++it)
          if ((*it)->tag == tag) {
            msg = *it;
            q.erase(it);
            break;
          }
        if (msg) break;
        if (w_->aborted) fail_aborted(lk, src);
        if (w_->cv.wait_until(lk, deadline) == std::cv_status::timeout && !w_->aborted) {
          bool found = false;
          for (auto& m : q) found |= m->tag == tag;
          if (found) continue;
          lk.unlock();
          fail(Result::Timeout, src, "timed out after " + std::to_string(timeout_.count()) + " ms waiting for peer " +
                                         std::to_string(src) + " (it did not send)");
        }
      }
    }
    wait_event(msg->ready, src);
    cudaEventDestroy(msg->ready);  // the wait above is already enqueued
    const bool ok = msg->bytes == bytes;
    if (ok && bytes) cuda_check(cudaMemcpyAsync(buf, msg->staging, bytes, cudaMemcpyDeviceToDevice, cstream()), src, "cudaMemcpyAsync");
    if (msg->staging) cuda_check(cudaFreeAsync(msg->staging, cstream()), src, "cudaFreeAsync (send staging)");
    if (!ok)
      fail(Result::InvalidUsage, src, "peer sent " + std::to_string(msg->bytes) + " bytes, this rank expected " + std::to_string(bytes));
  }

  std::shared_ptr<World> w_;
  int rank_;
  std::vector<DeviceLoopbackComm*> peers_;
  cudaEvent_t ready_ = nullptr, done_ = nullptr, done2_ = nullptr;
  void* tmp_ = nullptr;
  size_t tmp_bytes_ = 0;
};

// A rank thread's stream, once the rank is done (failed or not): drained, then destroyed.
void destroy_stream(cudaStream_t s) {
  if (s) {
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
  }
}

}  // namespace

std::vector<std::unique_ptr<Communicator>> create(int n, int device) {
  ZEN_ENFORCE(n >= 1, "cuda::loopback::create: rank count " + std::to_string(n) + " must be >= 1");
  ZEN_ENFORCE(n <= 64, "cuda::loopback::create: rank count " + std::to_string(n) + " exceeds 64");
  auto w = std::make_shared<World>(n, device);
  std::vector<DeviceLoopbackComm*> raw;
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < n; ++r) {
    auto c = std::make_unique<DeviceLoopbackComm>(w, r);
    raw.push_back(c.get());
    out.push_back(std::move(c));
  }
  for (auto* c : raw) c->set_peers(raw);
  return out;
}

std::vector<std::exception_ptr> run_collect(int n, const std::function<void(Communicator&)>& fn, Communicator::Ms timeout,
                                            int device) {
  auto comms = create(n, device);
  for (auto& c : comms) c->set_timeout(timeout);
  std::vector<cudaStream_t> streams(static_cast<size_t>(n), nullptr);
  return in_process::run_rank_threads(
      n,
      [&](int r) {
        cudaStream_t& s = streams[static_cast<size_t>(r)];
        ZEN_CUDA_CHECK(cudaSetDevice(device));
        ZEN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        comms[r]->set_stream(s);
        fn(*comms[r]);
        stream_wait(*comms[r], s);
      },
      [&](int r, const char* what) { comms[r]->abort(what); },
      [&](int r) { destroy_stream(streams[static_cast<size_t>(r)]); });
}

void run(int n, const std::function<void(Communicator&)>& fn, Communicator::Ms timeout, int device) {
  in_process::rethrow_first(run_collect(n, fn, timeout, device));
}

void run_nodes(int n, int node_size, const NodeFn& fn, Communicator::Ms timeout, int device) {
  ZEN_ENFORCE(node_size >= 1 && n >= 1 && n % node_size == 0,
              "cuda::loopback::run_nodes: node size " + std::to_string(node_size) + " must be >= 1 and divide " +
                  std::to_string(n));
  const int L = node_size, nodes = n / L;
  auto world = create(n, device);
  std::vector<std::vector<std::unique_ptr<Communicator>>> intra, inter;
  for (int g = 0; g < nodes; ++g) intra.push_back(create(L, device));
  for (int l = 0; l < L; ++l) inter.push_back(create(nodes, device));
  // On failure every world is aborted (world-level state only), so no rank waits for the timeout.
  auto abort_all = [&](const std::string& why) {
    auto ab = [&](std::unique_ptr<Communicator>& c) { static_cast<DeviceLoopbackComm&>(*c).abort_world(why); };
    ab(world[0]);
    for (auto& w : intra) ab(w[0]);
    for (auto& w : inter) ab(w[0]);
  };
  std::vector<cudaStream_t> streams(static_cast<size_t>(n), nullptr);
  auto errs = in_process::run_rank_threads(
      n,
      [&](int r) {
        const int g = r / L, l = r % L;
        Communicator* cs[3] = {world[r].get(), intra[g][l].get(), inter[l][g].get()};
        cudaStream_t& s = streams[static_cast<size_t>(r)];
        ZEN_CUDA_CHECK(cudaSetDevice(device));
        ZEN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        for (auto* c : cs) {
          c->set_timeout(timeout);
          c->set_stream(s);
        }
        fn(*cs[0], *cs[1], *cs[2]);
        stream_wait(*cs[0], s);
      },
      [&](int r, const char* what) { abort_all("rank " + std::to_string(r) + ": " + what); },
      [&](int r) { destroy_stream(streams[static_cast<size_t>(r)]); });
  in_process::rethrow_first(errs);
}

}  // namespace loopback
}  // namespace zen::cuda
