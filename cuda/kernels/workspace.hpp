#pragma once
// Carving one workspace into 256-byte-aligned regions (query mode when the base is null), shared by
// the kernels' host logic (ops.hpp) and the device plans (cuda/schemes).
#include <cstddef>
#include <cstdint>
#include <string>

#include "zen/error.hpp"

namespace zen::cuda::detail {

struct Carver {
  uint8_t* base;
  size_t off = 0;
  template <typename T>
  T* take(size_t count) {
    off = (off + 255) & ~size_t{255};
    T* p = base ? reinterpret_cast<T*>(base + off) : nullptr;
    off += count * sizeof(T);
    return p;
  }
  size_t bytes() const { return (off + 255) & ~size_t{255}; }
};

inline void need_ws(size_t have, size_t need, const char* what) {
  ZEN_CHECK_CODE(have >= need, Result::InvalidArgument,
                 std::string(what) + ": workspace of " + std::to_string(have) + " bytes is smaller than the " +
                     std::to_string(need) + " bytes this call needs (prepare for the largest problem)");
}

}  // namespace zen::cuda::detail
