#include "zen/encode/coo.hpp"

#include <cstring>
#include <string>

#include "zen/error.hpp"

namespace zen::encode {

IndexType wire_index_type(uint64_t key_space) { return key_space <= (1ULL << 31) ? IndexType::I32 : IndexType::I64; }

size_t coo_entry_bytes(uint32_t row_width, DType t, IndexType it) { return index_size(it) + row_width * dtype_size(t); }

size_t coo_bytes(size_t nnz, uint32_t row_width, DType t, IndexType it) { return nnz * coo_entry_bytes(row_width, t, it); }

void coo_encode(const int64_t* keys, const void* values, size_t nnz, uint32_t row_width, DType t, IndexType it,
                uint8_t* out) {
  if (it == IndexType::I32) {
    auto* k32 = reinterpret_cast<int32_t*>(out);
    for (size_t i = 0; i < nnz; ++i) {
      int32_t v = static_cast<int32_t>(keys[i]);
      std::memcpy(k32 + i, &v, 4);
    }
  } else if (nnz) {
    std::memcpy(out, keys, nnz * 8);
  }
  const size_t vbytes = nnz * row_width * dtype_size(t);
  if (vbytes) std::memcpy(out + nnz * index_size(it), values, vbytes);
}

size_t coo_decode(const uint8_t* in, size_t bytes, uint64_t key_space, uint32_t row_width, DType t, IndexType it,
                  std::vector<int64_t>& keys, std::vector<uint8_t>& values) {
  const size_t eb = coo_entry_bytes(row_width, t, it);
  ZEN_ENFORCE(bytes % eb == 0, "COO decode: message of " + std::to_string(bytes) + " bytes is not a whole number of " +
                                   std::to_string(eb) + "-byte entries");
  const size_t nnz = bytes / eb;
  const size_t k0 = keys.size();
  keys.resize(k0 + nnz);
  for (size_t i = 0; i < nnz; ++i) {
    int64_t k;
    if (it == IndexType::I32) {
      int32_t v;
      std::memcpy(&v, in + 4 * i, 4);
      k = v;
    } else {
      std::memcpy(&k, in + 8 * i, 8);
    }
    if (k < 0 || static_cast<uint64_t>(k) >= key_space)
      ZEN_THROW(Result::InvalidArgument, "COO decode: key " + std::to_string(k) + " at entry " + std::to_string(i) +
                                             " is outside [0, " + std::to_string(key_space) + ")");
    keys[k0 + i] = k;
  }
  const size_t vbytes = nnz * row_width * dtype_size(t);
  const size_t v0 = values.size();
  values.resize(v0 + vbytes);
  if (vbytes) std::memcpy(values.data() + v0, in + nnz * index_size(it), vbytes);
  return nnz;
}

}  // namespace zen::encode
