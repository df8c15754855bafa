#pragma once
// Host/device portability macro shared by the CPU and CUDA paths.
#if defined(__CUDACC__)
#define ZEN_HD __host__ __device__ __forceinline__
#else
#define ZEN_HD inline
#endif
