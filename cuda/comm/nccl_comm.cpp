// NCCL backend: a zen::Communicator over an ncclComm_t, stream-ordered on comm.stream(). The
// communicator's logic (grouping, held-back sends, sends to self, alltoallv / allgatherv schedules)
// is GroupedComm (grouped_comm.hpp), which CI runs on a host model of NCCL's group semantics; this
// file is its NCCL transport. Waiting (zen::cuda::stream_wait, barrier()) polls cudaStreamQuery and
// ncclCommGetAsyncError against the deadline, yielding between polls, and aborts the communicator
// (ncclCommAbort) on timeout or asynchronous error.
#include <nccl.h>

#include <algorithm>

#include "device_comm.hpp"
#include "grouped_comm.hpp"
#include "kernels/check.cuh"
#include "zen/cuda/comm.hpp"

namespace zen::cuda::nccl {
namespace {

std::string nccl_error(ncclResult_t r, ncclComm_t c) {
  return std::string(ncclGetErrorString(r)) + " (" + ncclGetLastError(c) + ")";
}

class NcclTransport : public detail::DeviceComm {
 public:
  NcclTransport(ncclComm_t c, bool own) : c_(c), own_(own) {
    ncclResult_t r = ncclCommUserRank(c_, &rank_);
    if (r == ncclSuccess) r = ncclCommCount(c_, &size_);
    if (r != ncclSuccess) {
      if (own_) ncclCommDestroy(c_);
      ZEN_THROW(Result::CudaError, "NCCL communicator: ncclCommUserRank / ncclCommCount: " + nccl_error(r, c));
    }
    cudaError_t e = cudaMalloc(&scratch_, sizeof(float));
    if (e == cudaSuccess) e = cudaMemset(scratch_, 0, sizeof(float));
    if (e != cudaSuccess) {  // the destructor does not run for a constructor that throws
      cudaGetLastError();
      if (scratch_) cudaFree(scratch_);
      if (own_) ncclCommDestroy(c_);
      ZEN_THROW(Result::CudaError, "rank " + std::to_string(rank_) + " NCCL communicator: barrier scratch: " +
                                       cudaGetErrorString(e));
    }
  }
  ~NcclTransport() override {
    if (scratch_) cudaFree(scratch_);
    if (own_ && !aborted_) ncclCommDestroy(c_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend_name() const override { return "nccl"; }
  void wait_stream(cudaStream_t stream) override { poll_stream(stream); }
  ncclComm_t handle() const { return c_; }

 protected:
  // ---- the transport of GroupedComm ----
  void t_group_start() { check(ncclGroupStart(), -1, "ncclGroupStart"); }
  void t_group_end() { check(ncclGroupEnd(), -1, "ncclGroupEnd"); }
  void t_send(const void* buf, size_t bytes, int peer) {
    check(ncclSend(buf, bytes, ncclUint8, peer, c_, cstream()), peer, "ncclSend");
  }
  void t_recv(void* buf, size_t bytes, int peer) {
    check(ncclRecv(buf, bytes, ncclUint8, peer, c_, cstream()), peer, "ncclRecv");
  }
  void t_broadcast(const void* send, void* recv, size_t bytes, int root) {
    check(ncclBroadcast(send, recv, bytes, ncclUint8, root, c_, cstream()), root, "ncclBroadcast");
  }
  void t_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) {
    check(ncclAllReduce(buf, buf, count, nccl_type(dtype), nccl_op(op), c_, cstream()), -1, "ncclAllReduce");
  }
  void t_barrier() { check(ncclAllReduce(scratch_, scratch_, 1, ncclFloat, ncclSum, c_, cstream()), -1, "ncclAllReduce (barrier)"); }
  void* t_stage(const void* src, size_t bytes, int peer) {
    void* p = nullptr;
    cuda_check(cudaMallocAsync(&p, bytes, cstream()), peer, "cudaMallocAsync (send staging)");
    cuda_check(cudaMemcpyAsync(p, src, bytes, cudaMemcpyDeviceToDevice, cstream()), peer, "cudaMemcpyAsync");
    return p;
  }
  void t_copy(void* dst, const void* src, size_t bytes, int peer) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cstream()), peer, "cudaMemcpyAsync");
  }
  void t_release(void* p, int peer) { cuda_check(cudaFreeAsync(p, cstream()), peer, "cudaFreeAsync (send staging)"); }
  void t_free_now(void* p) noexcept {
    if (p) cudaFree(p);
  }
  void t_wait() { poll_stream(cstream()); }
  bool t_aborted() const { return aborted_; }

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
  bool own_;
  bool aborted_ = false;
  int rank_ = 0, size_ = 1;
  void* scratch_ = nullptr;
};

using NcclComm = detail::GroupedComm<NcclTransport>;

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
