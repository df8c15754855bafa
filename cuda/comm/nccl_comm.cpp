// NCCL backend: a zen::Communicator over an ncclComm_t, stream-ordered on comm.stream().
//
// alltoallv: pairwise schedule (step k: send to rank+k, receive from rank-k) in ncclGroupStart/End
// groups of at most 2048 operations (NCCL's per-group limit); a send and its matching receive are
// always in the same step, hence the same group on both sides.
// allgatherv: one ncclBroadcast per root (rank p's rcounts[p] bytes), at most 2048 per group.
//
// Point to point. send is buffered (the communicator contract): the bytes are copied into a
// stream-ordered staging buffer; then
//  - a send to this rank is matched locally: this rank's receive from itself (same tag, in order)
//    copies the staging buffer device to device, as the device loopback does. NCCL never sees it
//    (NCCL refuses a send to self whose receive is not in the same group: ncclInvalidUsage);
//  - a send to a peer is held back and issued inside the NCCL group of this rank's next
//    operation of any kind (receive, sendrecv, or a collective's group), so that it progresses
//    together with whatever the peer may be waiting on first: a ring of sends before receives, or
//    a send before a collective whose peer receives after the collective, cannot deadlock, as a send
//    issued alone (a blocking rendezvous for large messages) could. Waiting for the stream does not
//    issue it (the staging copy is all a buffered send owes the caller); destroying the
//    communicator issues what is left.
// Tags are range-checked only: NCCL matches a pair's messages in issue order.
// Waiting (zen::cuda::stream_wait, barrier()) polls cudaStreamQuery and ncclCommGetAsyncError
// against the deadline, yielding between polls, and aborts the communicator (ncclCommAbort) on
// timeout or asynchronous error.
#include <nccl.h>

#include <algorithm>
#include <deque>

#include "device_comm.hpp"
#include "kernels/check.cuh"
#include "zen/cuda/comm.hpp"

namespace zen::cuda::nccl {
namespace {

constexpr size_t kOpsPerGroup = 2048;
constexpr size_t kMaxPending = kOpsPerGroup / 2;  // held-back sends, at most half of a group

std::string nccl_error(ncclResult_t r, ncclComm_t c) {
  return std::string(ncclGetErrorString(r)) + " (" + ncclGetLastError(c) + ")";
}

class NcclComm final : public detail::DeviceComm {
 public:
  NcclComm(ncclComm_t c, bool own) : c_(c), own_(own) {
    ncclResult_t r = ncclCommUserRank(c_, &rank_);
    if (r == ncclSuccess) r = ncclCommCount(c_, &size_);
    if (r != ncclSuccess) {
      if (own_) ncclCommDestroy(c_);
      ZEN_THROW(Result::CudaError, "NCCL communicator: ncclCommUserRank / ncclCommCount: " + nccl_error(r, c));
    }
    ZEN_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
    ZEN_CUDA_CHECK(cudaMemset(scratch_, 0, sizeof(float)));
  }
  ~NcclComm() override {
    if (!pending_.empty() && !aborted_) {
      try {  // what the caller sent must still reach its peers
        group([] {});
        poll_stream(cstream());
      } catch (...) {
        // destroying: the peers see the timeout or the abort
      }
    }
    for (auto& p : pending_) cudaFree(p.staging);
    for (auto& m : self_) cudaFree(m.staging);
    if (scratch_) cudaFree(scratch_);
    if (own_ && !aborted_) ncclCommDestroy(c_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend_name() const override { return "nccl"; }

  void wait_stream(cudaStream_t stream) override { poll_stream(stream); }
  ncclComm_t handle() const { return c_; }

 protected:
  void do_send(const void* buf, size_t bytes, int peer, int tag) override {
    Msg m{nullptr, bytes, peer, tag};
    if (peer != rank_ && pending_.size() >= kMaxPending)
      fail(Result::InvalidUsage, peer, std::to_string(kMaxPending) + " sends are pending: receive (or call a collective) first");
    if (bytes) {
      cuda_check(cudaMallocAsync(&m.staging, bytes, cstream()), peer, "cudaMallocAsync (send staging)");
      cuda_check(cudaMemcpyAsync(m.staging, buf, bytes, cudaMemcpyDeviceToDevice, cstream()), peer, "cudaMemcpyAsync");
    }
    if (peer == rank_) self_.push_back(m);
    else pending_.push_back(m);
  }
  void do_recv(void* buf, size_t bytes, int peer, int tag) override {
    if (peer == rank_) {
      // Pending sends to peers still go out with this (local) receive's "group": nothing to do here;
      // they travel with the next NCCL operation.
      take_self(buf, bytes, tag);
      return;
    }
    group([&] {
      if (bytes) check(ncclRecv(buf, bytes, ncclUint8, peer, c_, cstream()), peer, "ncclRecv");
    });
  }
  void do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag) override {
    if (dst == rank_) do_send(sbuf, sbytes, dst, tag);
    if (src == rank_) take_self(rbuf, rbytes, tag);
    if (dst == rank_ && src == rank_) return;
    group([&] {
      if (dst != rank_ && sbytes) check(ncclSend(sbuf, sbytes, ncclUint8, dst, c_, cstream()), dst, "ncclSend");
      if (src != rank_ && rbytes) check(ncclRecv(rbuf, rbytes, ncclUint8, src, c_, cstream()), src, "ncclRecv");
    });
  }
  void do_alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf, const size_t* rcounts,
                    const size_t* rdispls) override {
    const int n = size_;
    const auto* s = static_cast<const uint8_t*>(sbuf);
    auto* r = static_cast<uint8_t*>(rbuf);
    if (scounts[rank_] != rcounts[rank_])
      fail(Result::InvalidArgument, rank_, "send count to self " + std::to_string(scounts[rank_]) +
                                               " != receive count from self " + std::to_string(rcounts[rank_]));
    if (rcounts[rank_])
      cuda_check(cudaMemcpyAsync(r + rdispls[rank_], s + sdispls[rank_], rcounts[rank_], cudaMemcpyDeviceToDevice, cstream()),
                 rank_, "cudaMemcpyAsync");
    int k = 1;
    do {  // the first group also carries the held-back sends (at most half a group)
      const size_t room = (kOpsPerGroup - pending_.size()) / 2;
      const int k1 = static_cast<int>(std::min<size_t>(static_cast<size_t>(n), static_cast<size_t>(k) + room));
      group([&] {
        for (; k < k1; ++k) {
          const int dst = (rank_ + k) % n, src = (rank_ - k + n) % n;
          if (scounts[dst]) check(ncclSend(s + sdispls[dst], scounts[dst], ncclUint8, dst, c_, cstream()), dst, "ncclSend");
          if (rcounts[src]) check(ncclRecv(r + rdispls[src], rcounts[src], ncclUint8, src, c_, cstream()), src, "ncclRecv");
        }
      });
    } while (k < n);
  }
  void do_allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts, const size_t* rdispls) override {
    const int n = size_;
    auto* r = static_cast<uint8_t*>(rbuf);
    (void)sbytes;  // == rcounts[rank] (checked by Communicator)
    int p = 0;
    do {
      const size_t room = kOpsPerGroup - pending_.size();
      const int p1 = static_cast<int>(std::min<size_t>(static_cast<size_t>(n), static_cast<size_t>(p) + room));
      group([&] {
        for (; p < p1; ++p) {
          if (!rcounts[p]) continue;  // every rank knows every count: all skip the same roots
          const void* send = p == rank_ ? sbuf : r + rdispls[p];
          check(ncclBroadcast(send, r + rdispls[p], rcounts[p], ncclUint8, p, c_, cstream()), p, "ncclBroadcast");
        }
      });
    } while (p < n);
  }
  void do_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) override {
    group([&] {
      if (count) check(ncclAllReduce(buf, buf, count, nccl_type(dtype), nccl_op(op), c_, cstream()), -1, "ncclAllReduce");
    });
  }
  void do_broadcast(void* buf, size_t bytes, int root) override {
    group([&] {
      if (bytes) check(ncclBroadcast(buf, buf, bytes, ncclUint8, root, c_, cstream()), root, "ncclBroadcast");
    });
  }
  void do_barrier() override {
    group([&] { check(ncclAllReduce(scratch_, scratch_, 1, ncclFloat, ncclSum, c_, cstream()), -1, "ncclAllReduce (barrier)"); });
    poll_stream(cstream());
  }
  void do_abort(const std::string&) override { abort_nccl(); }

  void poll_backend() override {
    ncclResult_t st = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(c_, &st);
    if (r != ncclSuccess || (st != ncclSuccess && st != ncclInProgress)) {
      const std::string why = nccl_error(r != ncclSuccess ? r : st, c_);
      abort_nccl();
      fail(Result::RemoteError, -1, "NCCL asynchronous error: " + why + "; communicator aborted");
    }
  }
  void on_timeout() override { abort_nccl(); }

 private:
  struct Msg {
    void* staging;
    size_t bytes;
    int peer;
    int tag;
  };
  // One NCCL group: the held-back sends, then body()'s operations; afterwards the staging buffers
  // of the sends are freed in stream order.
  template <typename F>
  void group(F&& body) {
    check(ncclGroupStart(), -1, "ncclGroupStart");
    for (auto& p : pending_)
      if (p.bytes) check(ncclSend(p.staging, p.bytes, ncclUint8, p.peer, c_, cstream()), p.peer, "ncclSend");
    body();
    check(ncclGroupEnd(), -1, "ncclGroupEnd");
    for (auto& p : pending_)
      if (p.staging) cuda_check(cudaFreeAsync(p.staging, cstream()), p.peer, "cudaFreeAsync (send staging)");
    pending_.clear();
  }
  // This rank's receive from itself: the oldest send to self with the tag, copied on the stream.
  void take_self(void* buf, size_t bytes, int tag) {
    auto it = std::find_if(self_.begin(), self_.end(), [&](const Msg& m) { return m.tag == tag; });
    if (it == self_.end())
      fail(Result::InvalidUsage, rank_, "receive from self (tag " + std::to_string(tag) +
                                            ") without an earlier send to self: it could never complete");
    const Msg m = *it;
    self_.erase(it);
    if (m.bytes != bytes) {
      if (m.staging) cudaFreeAsync(m.staging, cstream());
      fail(Result::InvalidUsage, rank_, "sent " + std::to_string(m.bytes) + " bytes to self, receiving " +
                                            std::to_string(bytes));
    }
    if (bytes) cuda_check(cudaMemcpyAsync(buf, m.staging, bytes, cudaMemcpyDeviceToDevice, cstream()), rank_, "cudaMemcpyAsync");
    if (m.staging) cuda_check(cudaFreeAsync(m.staging, cstream()), rank_, "cudaFreeAsync (send staging)");
  }
  void abort_nccl() {
    if (aborted_) return;
    aborted_ = true;
    ncclCommAbort(c_);
  }
  void check(ncclResult_t r, int peer, const char* what) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    fail(Result::CudaError, peer, std::string(what) + ": " + nccl_error(r, c_));
  }
  ncclDataType_t nccl_type(DType t) const {
    switch (t) {
      case DType::F32: return ncclFloat32;
      case DType::F64: return ncclFloat64;
      case DType::F16: return ncclFloat16;
      case DType::BF16: return ncclBfloat16;
    }
    fail(Result::InvalidArgument, -1, std::string("dtype ") + dtype_name(t) + " has no NCCL type");
  }
  ncclRedOp_t nccl_op(ReduceOp op) const {
    switch (op) {
      case ReduceOp::Sum: return ncclSum;
      case ReduceOp::Max: return ncclMax;
      case ReduceOp::Min: return ncclMin;
    }
    fail(Result::InvalidArgument, -1, "unknown reduce op");
  }

  ncclComm_t c_;
  std::vector<Msg> pending_;  // sends to peers, issued with the next NCCL group
  std::deque<Msg> self_;      // sends to this rank, taken by its receives from itself
  bool own_;
  bool aborted_ = false;
  int rank_ = 0, size_ = 1;
  void* scratch_ = nullptr;
};

}  // namespace

bool available() { return true; }

std::unique_ptr<Communicator> split(Communicator& comm, int color, int key) {
  auto* nc = dynamic_cast<NcclComm*>(&comm);
  ZEN_ENFORCE(nc != nullptr, std::string("cuda::nccl::split: communicator '") + comm.backend_name() + "' is not a zen NCCL communicator");
  ZEN_ENFORCE(color >= 0, "cuda::nccl::split: color " + std::to_string(color) + " must be >= 0");
  ncclComm_t out = nullptr;
  const ncclResult_t r = ncclCommSplit(nc->handle(), color, key, &out, nullptr);
  ZEN_CHECK_CODE(r == ncclSuccess, Result::CudaError,
                 "rank " + std::to_string(comm.rank()) + " ncclCommSplit(color " + std::to_string(color) + ", key " +
                     std::to_string(key) + "): " + nccl_error(r, nc->handle()));
  auto c = std::make_unique<NcclComm>(out, true);
  c->set_stream(comm.stream());
  c->set_timeout(comm.timeout());
  return c;
}

UniqueId unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  ZEN_CHECK_CODE(r == ncclSuccess, Result::CudaError, std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
  UniqueId out{};
  static_assert(sizeof(id.internal) == sizeof(UniqueId), "NCCL unique id size");
  std::copy(id.internal, id.internal + sizeof(id.internal), out.begin());
  return out;
}

std::unique_ptr<Communicator> create(const UniqueId& uid, int nranks, int rank) {
  ncclUniqueId id;
  std::copy(uid.begin(), uid.end(), id.internal);
  ncclComm_t c = nullptr;
  const ncclResult_t r = ncclCommInitRank(&c, nranks, id, rank);
  ZEN_CHECK_CODE(r == ncclSuccess, Result::CudaError,
                 "rank " + std::to_string(rank) + "/" + std::to_string(nranks) + " ncclCommInitRank: " + nccl_error(r, nullptr));
  return std::make_unique<NcclComm>(c, true);
}

std::unique_ptr<Communicator> wrap(void* nccl_comm) {
  ZEN_ENFORCE(nccl_comm != nullptr, "cuda::nccl::wrap: null ncclComm_t");
  return std::make_unique<NcclComm>(static_cast<ncclComm_t>(nccl_comm), false);
}

}  // namespace zen::cuda::nccl
