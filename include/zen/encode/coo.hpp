#pragma once
// COO wire encoding: [nnz keys][nnz*D values], little-endian, no header (counts travel separately).
// Keys are int32 when they fit (key space <= 2^31), else int64: the wire width follows the key
// space, not the caller's index type.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "zen/types.hpp"

namespace zen::encode {

/// int32 when every key in [0, key_space) fits in int32, else int64.
IndexType wire_index_type(uint64_t key_space);

/// Bytes of one COO entry / of nnz entries.
size_t coo_entry_bytes(uint32_t row_width, DType t, IndexType it);
size_t coo_bytes(size_t nnz, uint32_t row_width, DType t, IndexType it);

/// Write keys (int64 in memory) and their values into `out` (coo_bytes(...) bytes).
void coo_encode(const int64_t* keys, const void* values, size_t nnz, uint32_t row_width, DType t, IndexType it,
                uint8_t* out);

/// Decode a COO message of `bytes` bytes, appending keys and value bytes. Validates that the size is
/// a whole number of entries and every key is in [0, key_space); throws InvalidArgument otherwise.
/// Returns the number of entries decoded.
size_t coo_decode(const uint8_t* in, size_t bytes, uint64_t key_space, uint32_t row_width, DType t, IndexType it,
                  std::vector<int64_t>& keys, std::vector<uint8_t>& values);

}  // namespace zen::encode
