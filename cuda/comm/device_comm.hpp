#pragma once
// Internal: the base of zen's device communicators (device loopback, NCCL): device memory, stream
// order, and how the host waits for a stream (zen::cuda::stream_wait).
#include <cuda_runtime.h>

#include "zen/comm/communicator.hpp"

namespace zen::cuda::detail {

class DeviceComm : public Communicator {
 public:
  MemSpace memory_space() const override { return MemSpace::Device; }
  /// Device calls are already asynchronous in stream order (set_stream); the host call-queue thread is not used.
  void check_async_support() const override {
    ZEN_THROW(Result::Unsupported, "rank " + std::to_string(rank()) + " " + backend_name() +
                                       ": non-blocking start() is for host backends; device calls are ordered on "
                                       "the communicator's stream (set_stream) and complete with it");
  }
  /// Wait until `stream` is done (see zen::cuda::stream_wait). Default: cudaStreamSynchronize,
  /// enough where every wait on a peer is bounded on the host (the device loopback's barriers time
  /// out); NCCL polls instead (poll_stream).
  virtual void wait_stream(cudaStream_t stream);

 protected:
  cudaStream_t cstream() const { return static_cast<cudaStream_t>(stream_); }
  /// Throw CudaError (naming rank/op/peer via fail) when e != cudaSuccess.
  void cuda_check(cudaError_t e, int peer, const char* what) const;
  /// Poll the stream until it is done or the timeout passes (then on_timeout() and Timeout),
  /// calling poll_backend() between polls and yielding the core (no sleep).
  void poll_stream(cudaStream_t stream);
  /// Called while polling; NCCL checks its asynchronous error here.
  virtual void poll_backend() {}
  virtual void on_timeout() {}
};

}  // namespace zen::cuda::detail
