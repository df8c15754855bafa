#pragma once
// Building blocks of the kernel bodies, compiled for the GPU (nvcc) and for the CPU (the host
// compiler): atomics (CUDA atomics on the GPU, std::atomic_ref on host threads), bit operations,
// float bits, alignment-checked access to wire buffers, the value types with their conversions and
// the device error word. See docs/gpu.md, "The kernels on the CPU".
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#include "zen/config.hpp"
#include "zen/cuda/kernels.hpp"
#include "zen/types.hpp"

namespace zen::cuda::detail {

constexpr uint32_t kEmpty = 0xFFFFFFFFu;  // an empty hash slot (entry ids are < 2^32 - 1)

// ---- atomics (relaxed, as CUDA's; readers synchronize through the launch boundary) ----
ZEN_HD uint32_t atomic_cas(uint32_t* p, uint32_t expected, uint32_t desired) {
#if defined(__CUDA_ARCH__)
  return atomicCAS(p, expected, desired);
#else
  std::atomic_ref<uint32_t>(*p).compare_exchange_strong(expected, desired, std::memory_order_relaxed);
  return expected;  // the value found: == the expected one iff the swap happened
#endif
}
ZEN_HD uint32_t atomic_add(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  return atomicAdd(p, v);
#else
  return std::atomic_ref<uint32_t>(*p).fetch_add(v, std::memory_order_relaxed);
#endif
}
ZEN_HD uint64_t atomic_add(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "64-bit atomics");
  return atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
#else
  return std::atomic_ref<uint64_t>(*p).fetch_add(v, std::memory_order_relaxed);
#endif
}

// ---- bits ----
ZEN_HD int popc32(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __popc(v);
#else
  return std::popcount(v);
#endif
}
/// 1 + index of the lowest set bit, 0 for 0 (CUDA's __ffs).
ZEN_HD int ffs32(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __ffs(static_cast<int>(v));
#else
  return v ? std::countr_zero(v) + 1 : 0;
#endif
}
ZEN_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return std::bit_cast<uint32_t>(f);
#endif
}
ZEN_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

// ---- alignment-checked access to wire buffers ----
template <typename T>
ZEN_HD T load_u(const uint8_t* p) {
  if ((reinterpret_cast<uintptr_t>(p) & (sizeof(T) - 1)) == 0) return *reinterpret_cast<const T*>(p);
  T v;
  uint8_t* d = reinterpret_cast<uint8_t*>(&v);
  for (int i = 0; i < static_cast<int>(sizeof(T)); ++i) d[i] = p[i];
  return v;
}
template <typename T>
ZEN_HD void store_u(uint8_t* p, T v) {
  if ((reinterpret_cast<uintptr_t>(p) & (sizeof(T) - 1)) == 0) {
    *reinterpret_cast<T*>(p) = v;
    return;
  }
  const uint8_t* s = reinterpret_cast<const uint8_t*>(&v);
  for (int i = 0; i < static_cast<int>(sizeof(T)); ++i) p[i] = s[i];
}
ZEN_HD uint64_t load_key(const uint8_t* p, int isz) {
  return isz == 4 ? static_cast<uint64_t>(load_u<uint32_t>(p)) : load_u<uint64_t>(p);
}
ZEN_HD void store_key(uint8_t* p, uint64_t k, int isz) {
  if (isz == 4) store_u<uint32_t>(p, static_cast<uint32_t>(k));
  else store_u<uint64_t>(p, k);
}
/// Copy n bytes using the widest access both pointers and n allow.
ZEN_HD void copy_bytes(uint8_t* d, const uint8_t* s, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s) | n;
  if ((a & 7) == 0) {
    for (size_t i = 0; i < n; i += 8) *reinterpret_cast<uint64_t*>(d + i) = *reinterpret_cast<const uint64_t*>(s + i);
  } else if ((a & 3) == 0) {
    for (size_t i = 0; i < n; i += 4) *reinterpret_cast<uint32_t*>(d + i) = *reinterpret_cast<const uint32_t*>(s + i);
  } else if ((a & 1) == 0) {
    for (size_t i = 0; i < n; i += 2) *reinterpret_cast<uint16_t*>(d + i) = *reinterpret_cast<const uint16_t*>(s + i);
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = s[i];
  }
}
/// The segment holding item t: the largest i in [0, n) with off[i] <= t (off[0] = 0 <= t < off[n]).
ZEN_HD uint32_t segment_of(const uint64_t* off, uint32_t n, uint64_t t) {
  uint32_t lo = 0, hi = n;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (off[mid] <= t) lo = mid;
    else hi = mid;
  }
  return lo;
}
/// Record the first error (one compare-and-swap claims the record).
ZEN_HD void report_error(DeviceError* e, uint32_t code, uint32_t owner, uint64_t a, uint64_t b) {
  if (atomic_cas(&e->code, 0u, code) == 0u) {
    e->owner = owner;
    e->a = a;
    e->b = b;
  }
}

// ---- value types: storage S, accumulator A, conversions equal to the CPU scheme's (Eigen) ----
ZEN_HD bool is_nan_bits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

struct F32 {
  using S = float;
  using A = float;
  ZEN_HD static A up(S v) { return v; }
  ZEN_HD static S down(A v) { return v; }
  ZEN_HD static bool nonzero(S v) { return v != 0.0f; }
};
struct F64 {
  using S = double;
  using A = double;
  ZEN_HD static A up(S v) { return v; }
  ZEN_HD static S down(A v) { return v; }
  ZEN_HD static bool nonzero(S v) { return v != 0.0; }
};
struct F16 {
  using S = uint16_t;
  using A = float;
  ZEN_HD static A up(S v) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(v));
#else
    Eigen::half h;
    std::memcpy(static_cast<void*>(&h), &v, 2);
    return static_cast<float>(h);
#endif
  }
  // IEEE round-to-nearest-even; NaN -> 0x7e00 | sign (as Eigen::half's conversion on the host).
  ZEN_HD static S down(A f) {
#if defined(__CUDA_ARCH__)
    const uint32_t u = __float_as_uint(f);
    if (is_nan_bits(u)) return static_cast<uint16_t>((u >> 31) ? 0xfe00u : 0x7e00u);
    return __half_as_ushort(__float2half_rn(f));
#else
    const Eigen::half h(f);
    uint16_t s;
    std::memcpy(&s, static_cast<const void*>(&h), 2);
    return s;
#endif
  }
  ZEN_HD static bool nonzero(S v) { return (v & 0x7fffu) != 0; }
};
struct BF16 {
  using S = uint16_t;
  using A = float;
  ZEN_HD static A up(S v) { return bits_float(static_cast<uint32_t>(v) << 16); }
  // Round to nearest even on the upper 16 bits; NaN -> 0x7fc0 | sign (as Eigen::bfloat16). The
  // same bit arithmetic on both backends, so the CPU tests check it against Eigen.
  ZEN_HD static S down(A f) {
    uint32_t u = float_bits(f);
    if (is_nan_bits(u)) return static_cast<uint16_t>((u >> 31) ? 0xffc0u : 0x7fc0u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  ZEN_HD static bool nonzero(S v) { return (v & 0x7fffu) != 0; }
};

}  // namespace zen::cuda::detail
