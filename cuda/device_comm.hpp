#pragma once
// Internal: the base of zen's device communicators (stream waits with backend-specific polling).
#include <cuda_runtime.h>

#include "zen/comm/communicator.hpp"

namespace zen::cuda::detail {

class DeviceComm : public Communicator {
 public:
  MemSpace memory_space() const override { return MemSpace::Device; }
  /// Device calls are already asynchronous in stream order (set_stream); the host progress thread is not used.
  void check_async_support() const override {
    ZEN_THROW(Result::Unsupported, "rank " + std::to_string(rank()) + " " + backend_name() +
                                       ": non-blocking start() is for host backends; device calls are ordered on "
                                       "the communicator's stream (set_stream) and complete with it");
  }
  /// Poll `stream` to completion within the timeout (see zen::cuda::stream_wait).
  virtual void wait_stream(cudaStream_t stream);

 protected:
  cudaStream_t cstream() const { return static_cast<cudaStream_t>(stream_); }
  /// Throw CudaError (naming rank/op/peer via fail) when e != cudaSuccess.
  void cuda_check(cudaError_t e, int peer, const char* what) const;
  /// Called while polling; NCCL checks its asynchronous error here.
  virtual void poll_backend() {}
  /// Called before waiting: issue work the backend deferred (NCCL's buffered sends).
  virtual void flush() {}
  virtual void on_timeout() {}
};

}  // namespace zen::cuda::detail
