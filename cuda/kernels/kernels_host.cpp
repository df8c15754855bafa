// The device kernels on the CPU: Kernels<Host> (the bodies of bodies.hpp run by exec_host.hpp over
// host memory), Memory<Host>, and the backend-independent helpers (hash_caps, device_error_name).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "exec_host.hpp"
#include "ops.hpp"

namespace zen::cuda {

const char* device_error_name(uint32_t code) {
  switch (code) {
    case kErrNone: return "";
    case kErrPushKeyRange: return "pushed position outside the owner's index set";
    case kErrBitmapPadding: return "hash bitmap has a padding bit set";
    case kErrBitmapCount: return "hash bitmap set-bit count differs from the announced result count";
    case kErrCooKeyRange: return "COO pull key outside the owner's index set";
    case kErrHashLost: return "region hashing compaction lost or duplicated entries";
    case kErrIndexRange: return "input index outside [0, N/D)";
  }
  return "unknown device error";
}

HashCaps hash_caps(size_t nnz, uint32_t n, const HashParams& hp) {
  const double table = static_cast<double>(hp.max_table_bytes / sizeof(uint32_t));
  const double r1 = std::min(std::max(0.0, hp.parallel_factor) * static_cast<double>(nnz), table);
  const uint32_t owners = n == 0 ? 1 : n;
  HashCaps c;
  c.cap1 = std::max<size_t>(16, static_cast<size_t>(std::ceil(r1 / owners)));
  c.cap2 = std::max<size_t>(8, static_cast<size_t>(std::ceil(r1 * hp.serial_fraction / owners)));
  return c;
}

template struct Kernels<Host>;

void* Memory<Host>::alloc(size_t bytes) {
  try {
    return ::operator new(bytes ? bytes : 1, std::align_val_t{256});
  } catch (const std::bad_alloc&) {
    ZEN_THROW(Result::SystemError, "host backend: allocating " + std::to_string(bytes) + " bytes failed");
  }
}
void Memory<Host>::release(void* p) noexcept {
  if (p) ::operator delete(p, std::align_val_t{256});
}
void* Memory<Host>::alloc_staging(size_t bytes) { return alloc(bytes); }
void Memory<Host>::release_staging(void* p) noexcept { release(p); }
void Memory<Host>::copy(void* dst, const void* src, size_t bytes, void*) {
  if (bytes) std::memmove(dst, src, bytes);
}
void Memory<Host>::fill(void* dst, int byte, size_t bytes, void*) {
  if (bytes) std::memset(dst, byte, bytes);
}
void Memory<Host>::synchronize(void*) {}

}  // namespace zen::cuda
