#include <cuda_runtime.h>

#include "check.cuh"
#include "zen/cuda/runtime.hpp"
#include "zen/hash/hash.hpp"

namespace zen::cuda {

__global__ void partition_kernel(const int64_t* idx, size_t n, Partitioner part, uint32_t* owner, uint64_t* pos) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  uint32_t o;
  uint64_t p;
  part.locate(static_cast<uint64_t>(idx[i]), &o, &p);
  owner[i] = o;
  pos[i] = p;
}

void partition_host(const int64_t* idx, size_t n, uint64_t n_items, uint32_t n_owners, uint64_t seed, uint32_t* owner,
                    uint64_t* pos) {
  if (n == 0) return;
  const Partitioner part = Partitioner::make(n_items, n_owners, seed);
  int64_t* d_idx = nullptr;
  uint32_t* d_owner = nullptr;
  uint64_t* d_pos = nullptr;
  ZEN_CUDA_CHECK(cudaMalloc(&d_idx, n * sizeof(int64_t)));
  ZEN_CUDA_CHECK(cudaMalloc(&d_owner, n * sizeof(uint32_t)));
  ZEN_CUDA_CHECK(cudaMalloc(&d_pos, n * sizeof(uint64_t)));
  ZEN_CUDA_CHECK(cudaMemcpy(d_idx, idx, n * sizeof(int64_t), cudaMemcpyHostToDevice));
  const unsigned threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  partition_kernel<<<blocks, threads>>>(d_idx, n, part, d_owner, d_pos);
  ZEN_CUDA_CHECK(cudaGetLastError());
  ZEN_CUDA_CHECK(cudaMemcpy(owner, d_owner, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  ZEN_CUDA_CHECK(cudaMemcpy(pos, d_pos, n * sizeof(uint64_t), cudaMemcpyDeviceToHost));
  cudaFree(d_idx);
  cudaFree(d_owner);
  cudaFree(d_pos);
}

}  // namespace zen::cuda
