// The device kernels on the GPU: Kernels<Gpu> (the bodies of bodies.hpp launched by exec_gpu.cuh,
// CUB for the primitives) and h0 on the device (partition_host).
#include <cuda_runtime.h>

#include "exec_gpu.cuh"
#include "ops.hpp"
#include "zen/cuda/runtime.hpp"

namespace zen::cuda {

template struct Kernels<Gpu>;

namespace {
struct Locate {
  const int64_t* idx;
  Partitioner part;
  uint32_t* owner;
  uint64_t* pos;
  ZEN_HD void operator()(uint64_t i) const { part.locate(static_cast<uint64_t>(idx[i]), &owner[i], &pos[i]); }
};
}  // namespace

void partition_host(const int64_t* idx, size_t n, uint64_t n_items, uint32_t n_owners, uint64_t seed, uint32_t* owner,
                    uint64_t* pos) {
  if (n == 0) return;
  using M = Memory<Gpu>;
  const Partitioner part = Partitioner::make(n_items, n_owners, seed);
  struct Bufs {
    void* p[3] = {nullptr, nullptr, nullptr};
    ~Bufs() {
      for (void* q : p) M::release(q);
    }
  } b;
  b.p[0] = M::alloc(n * sizeof(int64_t));
  b.p[1] = M::alloc(n * sizeof(uint32_t));
  b.p[2] = M::alloc(n * sizeof(uint64_t));
  M::copy(b.p[0], idx, n * sizeof(int64_t), nullptr);
  detail::Exec<Gpu>::for_each(n, Locate{static_cast<const int64_t*>(b.p[0]), part, static_cast<uint32_t*>(b.p[1]),
                                        static_cast<uint64_t*>(b.p[2])},
                              nullptr);
  M::copy(owner, b.p[1], n * sizeof(uint32_t), nullptr);
  M::copy(pos, b.p[2], n * sizeof(uint64_t), nullptr);
  M::synchronize(nullptr);
}

}  // namespace zen::cuda
