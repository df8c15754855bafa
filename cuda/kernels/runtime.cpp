// The CUDA runtime side of the device path: Memory<Gpu> (allocation, stream-ordered copies and
// fills) and device_count().
#include <cuda_runtime.h>

#include <string>

#include "check.cuh"
#include "zen/cuda/kernels.hpp"
#include "zen/cuda/runtime.hpp"

namespace zen::cuda {

int device_count(std::string* why) {
  int n = 0;  // cudaGetDeviceCount leaves the count untouched when it fails
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    cudaGetLastError();  // clear the sticky error
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device";
  return n;
}

void* Memory<Gpu>::alloc(size_t bytes) {
  void* p = nullptr;
  ZEN_CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
  return p;
}
void Memory<Gpu>::release(void* p) noexcept {
  if (p) cudaFree(p);
}
void* Memory<Gpu>::alloc_staging(size_t bytes) {
  void* p = nullptr;
  ZEN_CUDA_CHECK(cudaMallocHost(&p, bytes ? bytes : 1));
  return p;
}
void Memory<Gpu>::release_staging(void* p) noexcept {
  if (p) cudaFreeHost(p);
}
void Memory<Gpu>::copy(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes) ZEN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
}
void Memory<Gpu>::fill(void* dst, int byte, size_t bytes, void* stream) {
  if (bytes) ZEN_CUDA_CHECK(cudaMemsetAsync(dst, byte, bytes, static_cast<cudaStream_t>(stream)));
}
void Memory<Gpu>::synchronize(void* stream) {
  // The legacy stream does not order the communicators' non-blocking streams: wait for the device.
  if (stream == nullptr) ZEN_CUDA_CHECK(cudaDeviceSynchronize());
  else ZEN_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

}  // namespace zen::cuda
