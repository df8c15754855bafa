// Every device kernel on the GPU (Kernels<Gpu>) against the CPU implementation, bit for bit: the
// suite of tests/device/kernels_suite.hpp, which CI runs on the CPU (Kernels<Host>). Skips without
// a GPU (fails with ZEN_GPU_REQUIRED).
#include "zen/cuda/kernels.hpp"
namespace zen::test {
using TestBackend = cuda::Gpu;
}  // namespace zen::test

#include "../device/kernels_suite.hpp"
