#pragma once
// Internal: host-order put/get of trivially copyable values for the FL wire images (not installed).
#include <cstdint>
#include <cstring>
#include <vector>

namespace zen::fl::detail {

template <typename T>
void put(std::vector<uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace zen::fl::detail
