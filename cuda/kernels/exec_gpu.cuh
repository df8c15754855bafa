#pragma once
// Exec<Gpu>: the kernel bodies as CUDA kernels on a stream, the primitives from CUB (contract in
// exec.hpp). nvcc only. Every launch and every CUB call (temp-storage queries included) is checked.
#include <cuda_runtime.h>

#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "check.cuh"
#include "exec.hpp"
#include "portable.hpp"

namespace zen::cuda::detail {

constexpr unsigned kThreads = 256;

inline cudaStream_t S(void* s) { return static_cast<cudaStream_t>(s); }

inline unsigned blocks_for(uint64_t n, unsigned threads = kThreads) {
  const uint64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<uint64_t>(1, std::min<uint64_t>(b, 0x7FFFFFFFull)));
}

template <class F>
__global__ void for_each_kernel(F f, uint64_t n) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    f(i);
}

/// One warp: each thread is one lane; per-lane variables are the thread's own.
struct GpuWarp {
  unsigned lane;
  template <class T>
  struct Var {
    T v;
    ZEN_HD T& operator[](unsigned) { return v; }
    ZEN_HD const T& operator[](unsigned) const { return v; }
  };
  template <class F>
  ZEN_HD void lanes(F&& f) {
    f(lane);
  }
  ZEN_HD uint32_t ballot(const Var<bool>& p) const {
#if defined(__CUDA_ARCH__)
    return __ballot_sync(0xFFFFFFFFu, p.v);
#else
    return 0;  // GpuWarp exists only on the device
#endif
  }
};

// Whole warps iterate together (blockDim is a multiple of 32), so every lane takes part in each ballot.
template <class K>
__global__ void for_each_warp_kernel(K k, uint64_t words) {
  GpuWarp w{threadIdx.x & 31u};
  const uint64_t first = (blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x) >> 5;
  const uint64_t stride = (static_cast<uint64_t>(gridDim.x) * blockDim.x) >> 5;
  for (uint64_t i = first; i < words; i += stride) k(w, i);
}

extern __shared__ uint64_t zen_tile_shared[];

template <class K>
__global__ void __launch_bounds__(K::kThreads) tile_kernel(K k, uint64_t n) {
  auto* sh = reinterpret_cast<uint8_t*>(zen_tile_shared);
  typename K::Item items[K::kItems];
  k.block_init(threadIdx.x, blockDim.x, sh);
  __syncthreads();
  const uint64_t base = static_cast<uint64_t>(blockIdx.x) * blockDim.x * K::kItems;
  for (int ph = 0; ph < K::kPhases; ++ph) {
#pragma unroll
    for (int j = 0; j < K::kItems; ++j) k.item(ph, base + static_cast<uint64_t>(j) * blockDim.x + threadIdx.x, items[j], sh);
    __syncthreads();
    k.block_step(ph, threadIdx.x, blockDim.x, sh);
    __syncthreads();
  }
}

template <>
struct Exec<Gpu> {
  template <class F>
  static void for_each(uint64_t n, const F& body, void* stream) {
    if (n == 0) return;
    for_each_kernel<<<blocks_for(n), kThreads, 0, S(stream)>>>(body, n);
    ZEN_CUDA_CHECK(cudaGetLastError());
  }

  template <class K>
  static void for_each_warp(uint64_t words, const K& body, void* stream) {
    if (words == 0) return;
    for_each_warp_kernel<<<blocks_for(words * 32), kThreads, 0, S(stream)>>>(body, words);
    ZEN_CUDA_CHECK(cudaGetLastError());
  }

  template <class K>
  static void for_each_tile(uint64_t n, const K& body, void* stream) {
    if (n == 0) return;
    const uint64_t tile = static_cast<uint64_t>(K::kThreads) * K::kItems;
    const uint64_t blocks = (n + tile - 1) / tile;
    ZEN_CHECK_CODE(blocks <= 0x7FFFFFFFull, Result::InvalidArgument, "device tile launch: too many items");
    tile_kernel<K><<<static_cast<unsigned>(blocks), K::kThreads, body.shared_bytes(), S(stream)>>>(body, n);
    ZEN_CUDA_CHECK(cudaGetLastError());
  }

  // ---- primitives (CUB) ----
  template <class Gen>
  static auto gen_iter(const Gen& g) {
    return thrust::make_transform_iterator(thrust::counting_iterator<uint64_t>(0), g);
  }

  template <class Gen, class Pred, class T>
  static size_t select_if_bytes(uint64_t n, const Gen& gen, const Pred& pred, T*) {
    size_t t = 0;
    ZEN_CUDA_CHECK(cub::DeviceSelect::If(nullptr, t, gen_iter(gen), static_cast<T*>(nullptr),
                                         static_cast<uint64_t*>(nullptr), static_cast<int64_t>(n), pred, cudaStream_t{}));
    return t;
  }
  template <class Gen, class Pred, class T>
  static void select_if(void* temp, size_t temp_bytes, const Gen& gen, uint64_t n, const Pred& pred, T* out,
                        uint64_t* d_num, void* stream) {
    size_t tb = temp_bytes;
    ZEN_CUDA_CHECK(cub::DeviceSelect::If(temp, tb, gen_iter(gen), out, d_num, static_cast<int64_t>(n), pred, S(stream)));
  }

  static size_t select_flagged_bytes(uint64_t n) {
    size_t t = 0;
    ZEN_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, t, thrust::counting_iterator<uint32_t>(0),
                                              static_cast<const uint8_t*>(nullptr), static_cast<uint32_t*>(nullptr),
                                              static_cast<uint64_t*>(nullptr), static_cast<int64_t>(n), cudaStream_t{}));
    return t;
  }
  static void select_flagged(void* temp, size_t temp_bytes, const uint8_t* flags, uint64_t n, uint32_t* out,
                             uint64_t* d_num, void* stream) {
    size_t tb = temp_bytes;
    ZEN_CUDA_CHECK(cub::DeviceSelect::Flagged(temp, tb, thrust::counting_iterator<uint32_t>(0), flags, out, d_num,
                                              static_cast<int64_t>(n), S(stream)));
  }

  template <class K, class V>
  static size_t sort_pairs_bytes(uint64_t n, int end_bit) {
    size_t t = 0;
    ZEN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, t, static_cast<const K*>(nullptr), static_cast<K*>(nullptr),
                                                   static_cast<const V*>(nullptr), static_cast<V*>(nullptr),
                                                   static_cast<int64_t>(n), 0, end_bit, cudaStream_t{}));
    return t;
  }
  template <class K, class V>
  static void sort_pairs(void* temp, size_t temp_bytes, const K* kin, K* kout, const V* vin, V* vout, uint64_t n,
                         int end_bit, void* stream) {
    if (n == 0) return;
    size_t tb = temp_bytes;
    ZEN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, tb, kin, kout, vin, vout, static_cast<int64_t>(n), 0, end_bit,
                                                   S(stream)));
  }

  static size_t exclusive_sum_bytes(uint64_t n) {
    size_t t = 0;
    ZEN_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, t, static_cast<const uint64_t*>(nullptr),
                                                 static_cast<uint64_t*>(nullptr), static_cast<int64_t>(n), cudaStream_t{}));
    return t;
  }
  static void exclusive_sum(void* temp, size_t temp_bytes, const uint64_t* in, uint64_t* out, uint64_t n, void* stream) {
    size_t tb = temp_bytes;
    ZEN_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, tb, in, out, static_cast<int64_t>(n), S(stream)));
  }

  template <class Gen>
  static size_t sum_bytes(uint64_t n, const Gen& gen) {
    size_t t = 0;
    ZEN_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, t, gen_iter(gen), static_cast<uint64_t*>(nullptr),
                                          static_cast<int64_t>(n), cudaStream_t{}));
    return t;
  }
  template <class Gen>
  static void sum(void* temp, size_t temp_bytes, const Gen& gen, uint64_t n, uint64_t* d_out, void* stream) {
    size_t tb = temp_bytes;
    ZEN_CUDA_CHECK(cub::DeviceReduce::Sum(temp, tb, gen_iter(gen), d_out, static_cast<int64_t>(n), S(stream)));
  }
};

}  // namespace zen::cuda::detail
