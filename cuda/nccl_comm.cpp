// NCCL backend: a zen::Communicator over an ncclComm_t, stream-ordered on comm.stream().
//
// alltoallv: pairwise schedule (step k: send to rank+k, receive from rank-k) in ncclGroupStart/End
// groups of at most kStepsPerGroup steps (2 operations each, under NCCL's 2048 per group); a send
// and its matching receive are always in the same step, hence the same group on both sides.
// allgatherv: one ncclBroadcast per root (rank p's rcounts[p] bytes), at most 2048 per group.
// send is buffered (the communicator contract): the bytes are copied into a stream-ordered staging
// buffer and the ncclSend is deferred into the group of this rank's next receive / sendrecv (or
// issued alone before any collective or stream wait), so ranks that all send before receiving do
// not deadlock and a send to self pairs with its receive in one group. The host never waits here; waiting happens in wait_stream (zen::cuda::stream_wait), which polls
// cudaStreamQuery and ncclCommGetAsyncError against the deadline and aborts the communicator
// (ncclCommAbort) on timeout or asynchronous error. barrier() waits.
#include <nccl.h>

#include <algorithm>

#include "check.cuh"
#include "device_comm.hpp"
#include "zen/cuda/comm.hpp"

namespace zen::cuda::nccl {
namespace {

constexpr int kOpsPerGroup = 2048;
constexpr int kStepsPerGroup = kOpsPerGroup / 2;

class NcclComm final : public detail::DeviceComm {
 public:
  NcclComm(ncclComm_t c, bool own) : c_(c), own_(own) {
    ncclCommUserRank(c_, &rank_);
    ncclCommCount(c_, &size_);
    ZEN_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
    ZEN_CUDA_CHECK(cudaMemset(scratch_, 0, sizeof(float)));
  }
  ~NcclComm() override {
    for (auto& p : pending_)
      if (p.staging) cudaFree(p.staging);
    if (scratch_) cudaFree(scratch_);
    if (own_ && !aborted_) ncclCommDestroy(c_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend_name() const override { return "nccl"; }

  void wait_stream(cudaStream_t stream) override { DeviceComm::wait_stream(stream); }
  ncclComm_t handle() const { return c_; }

 protected:
  void do_send(const void* buf, size_t bytes, int peer, int) override {
    if (!bytes) return;
    Pending p{nullptr, bytes, peer};
    cuda_check(cudaMallocAsync(&p.staging, bytes, cstream()), peer, "cudaMallocAsync (send staging)");
    cuda_check(cudaMemcpyAsync(p.staging, buf, bytes, cudaMemcpyDeviceToDevice, cstream()), peer, "cudaMemcpyAsync");
    pending_.push_back(p);
  }
  void do_recv(void* buf, size_t bytes, int peer, int) override {
    group_with_pending([&] {
      if (bytes) check(ncclRecv(buf, bytes, ncclUint8, peer, c_, cstream()), peer, "ncclRecv");
    });
  }
  void do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int) override {
    group_with_pending([&] {
      if (sbytes) check(ncclSend(sbuf, sbytes, ncclUint8, dst, c_, cstream()), dst, "ncclSend");
      if (rbytes) check(ncclRecv(rbuf, rbytes, ncclUint8, src, c_, cstream()), src, "ncclRecv");
    });
  }
  void flush() override {
    if (!pending_.empty()) group_with_pending([] {});
  }
  void do_alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf, const size_t* rcounts,
                    const size_t* rdispls) override {
    flush();
    const int n = size_;
    const auto* s = static_cast<const uint8_t*>(sbuf);
    auto* r = static_cast<uint8_t*>(rbuf);
    if (scounts[rank_] != rcounts[rank_])
      fail(Result::InvalidArgument, rank_, "send count to self " + std::to_string(scounts[rank_]) +
                                               " != receive count from self " + std::to_string(rcounts[rank_]));
    if (rcounts[rank_])
      cuda_check(cudaMemcpyAsync(r + rdispls[rank_], s + sdispls[rank_], rcounts[rank_], cudaMemcpyDeviceToDevice, cstream()),
                 rank_, "cudaMemcpyAsync");
    for (int k0 = 1; k0 < n; k0 += kStepsPerGroup) {
      check(ncclGroupStart(), -1, "ncclGroupStart");
      for (int k = k0; k < std::min(n, k0 + kStepsPerGroup); ++k) {
        const int dst = (rank_ + k) % n, src = (rank_ - k + n) % n;
        if (scounts[dst]) check(ncclSend(s + sdispls[dst], scounts[dst], ncclUint8, dst, c_, cstream()), dst, "ncclSend");
        if (rcounts[src]) check(ncclRecv(r + rdispls[src], rcounts[src], ncclUint8, src, c_, cstream()), src, "ncclRecv");
      }
      check(ncclGroupEnd(), -1, "ncclGroupEnd");
    }
  }
  void do_allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts, const size_t* rdispls) override {
    flush();
    const int n = size_;
    auto* r = static_cast<uint8_t*>(rbuf);
    (void)sbytes;  // == rcounts[rank] (checked by Communicator)
    for (int p0 = 0; p0 < n; p0 += kOpsPerGroup) {
      check(ncclGroupStart(), -1, "ncclGroupStart");
      for (int p = p0; p < std::min(n, p0 + kOpsPerGroup); ++p) {
        if (!rcounts[p]) continue;  // every rank knows every count: all skip the same roots
        const void* send = p == rank_ ? sbuf : r + rdispls[p];
        check(ncclBroadcast(send, r + rdispls[p], rcounts[p], ncclUint8, p, c_, cstream()), p, "ncclBroadcast");
      }
      check(ncclGroupEnd(), -1, "ncclGroupEnd");
    }
  }
  void do_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) override {
    flush();
    if (count == 0) return;
    check(ncclAllReduce(buf, buf, count, nccl_type(dtype), nccl_op(op), c_, cstream()), -1, "ncclAllReduce");
  }
  void do_broadcast(void* buf, size_t bytes, int root) override {
    flush();
    if (bytes) check(ncclBroadcast(buf, buf, bytes, ncclUint8, root, c_, cstream()), root, "ncclBroadcast");
  }
  void do_barrier() override {
    flush();
    check(ncclAllReduce(scratch_, scratch_, 1, ncclFloat, ncclSum, c_, cstream()), -1, "ncclAllReduce (barrier)");
    wait_stream(cstream());
  }
  void do_abort(const std::string&) override { abort_nccl(); }

  void poll_backend() override {
    ncclResult_t st = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(c_, &st);
    if (r != ncclSuccess || (st != ncclSuccess && st != ncclInProgress)) {
      const std::string why = std::string(ncclGetErrorString(r != ncclSuccess ? r : st)) + " (" + ncclGetLastError(c_) + ")";
      abort_nccl();
      fail(Result::RemoteError, -1, "NCCL asynchronous error: " + why + "; communicator aborted");
    }
  }
  void on_timeout() override { abort_nccl(); }

 private:
  struct Pending {
    void* staging;
    size_t bytes;
    int peer;
  };
  // Issue the deferred sends and body()'s operations in one NCCL group, then free the staging
  // buffers in stream order.
  template <typename F>
  void group_with_pending(F&& body) {
    check(ncclGroupStart(), -1, "ncclGroupStart");
    for (auto& p : pending_) check(ncclSend(p.staging, p.bytes, ncclUint8, p.peer, c_, cstream()), p.peer, "ncclSend");
    body();
    check(ncclGroupEnd(), -1, "ncclGroupEnd");
    for (auto& p : pending_) cuda_check(cudaFreeAsync(p.staging, cstream()), p.peer, "cudaFreeAsync (send staging)");
    pending_.clear();
  }
  void abort_nccl() {
    if (aborted_) return;
    aborted_ = true;
    ncclCommAbort(c_);
  }
  void check(ncclResult_t r, int peer, const char* what) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    fail(Result::CudaError, peer, std::string(what) + ": " + ncclGetErrorString(r) + " (" + ncclGetLastError(c_) + ")");
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
  std::vector<Pending> pending_;
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
                     std::to_string(key) + "): " + ncclGetErrorString(r) + " (" + ncclGetLastError(nc->handle()) + ")");
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
                 "rank " + std::to_string(rank) + "/" + std::to_string(nranks) + " ncclCommInitRank: " + ncclGetErrorString(r) +
                     " (" + ncclGetLastError(nullptr) + ")");
  return std::make_unique<NcclComm>(c, true);
}

std::unique_ptr<Communicator> wrap(void* nccl_comm) {
  ZEN_ENFORCE(nccl_comm != nullptr, "cuda::nccl::wrap: null ncclComm_t");
  return std::make_unique<NcclComm>(static_cast<ncclComm_t>(nccl_comm), false);
}

}  // namespace zen::cuda::nccl
