#pragma once
#include <cuda_runtime.h>

#include <string>

#include "zen/error.hpp"

#define ZEN_CUDA_CHECK(expr)                                                                        \
  do {                                                                                              \
    cudaError_t zen_e_ = (expr);                                                                    \
    if (zen_e_ != cudaSuccess)                                                                      \
      ::zen::throw_error(::zen::Result::CudaError, std::string(#expr) + ": " + cudaGetErrorString(zen_e_), \
                         __FILE__, __LINE__);                                                       \
  } while (0)
