// The base of zen's device communicators (DeviceComm) and zen::cuda::stream_wait, the one way the
// device path waits for a stream. No sleeps: a plain wait is cudaStreamSynchronize; a backend that
// must watch something while it waits (NCCL: its asynchronous errors and the timeout) polls the
// stream and yields the core between polls.
#include <chrono>
#include <thread>

#include "device_comm.hpp"
#include "zen/cuda/comm.hpp"

namespace zen::cuda {

namespace detail {

void DeviceComm::cuda_check(cudaError_t e, int peer, const char* what) const {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  fail(Result::CudaError, peer, std::string(what) + ": " + cudaGetErrorString(e));
}

void DeviceComm::wait_stream(cudaStream_t stream) {
  cuda_check(cudaStreamSynchronize(stream), -1, "stream wait (cudaStreamSynchronize)");
}

void DeviceComm::poll_stream(cudaStream_t stream) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (unsigned spin = 1;; ++spin) {
    const cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) {
      cudaGetLastError();
      fail(Result::CudaError, -1, std::string("stream wait: ") + cudaGetErrorString(q));
    }
    poll_backend();
    if (spin % 64 == 0 && std::chrono::steady_clock::now() > deadline) {
      on_timeout();
      fail(Result::Timeout, -1, "device work did not complete within " + std::to_string(timeout_.count()) +
                                    " ms (a peer did not take part, or a kernel hangs)");
    }
    std::this_thread::yield();
  }
}

}  // namespace detail

void stream_wait(Communicator& comm, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (auto* dc = dynamic_cast<detail::DeviceComm*>(&comm)) {
    dc->wait_stream(s);
    return;
  }
  const cudaError_t e = cudaStreamSynchronize(s);
  if (e != cudaSuccess) {
    cudaGetLastError();
    ZEN_THROW(Result::CudaError, "rank " + std::to_string(comm.rank()) + " stream wait: " + cudaGetErrorString(e));
  }
}

}  // namespace zen::cuda
