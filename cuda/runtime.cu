#include <cuda_runtime.h>

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

}  // namespace zen::cuda
