#pragma once
// Hash-bitmap encoding (Zen §5). Owner i's index set I_i (see zen/hash/hash.hpp: the positions
// 0..|I_i|-1 of the agreed enumeration j -> Partitioner::index_at(i, j)) is covered by |I_i| bits,
// LSB-first (bit j = byte j>>3, mask 1<<(j&7)), padded with zero bits to whole bytes: ceil(|I_i|/8)
// bytes per owner, N bits in total over all owners, whatever n and the density. Bit j is set iff
// position j is present in the result (the union of the input supports), and the values follow in
// position order.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "zen/hash/hash.hpp"

namespace zen::encode {

inline size_t bitmap_bytes(uint64_t nbits) { return static_cast<size_t>((nbits + 7) / 8); }

/// Bits 64w..64w+63 of a bitmap of nbytes bytes as one little-endian word, zero past the end.
inline uint64_t bitmap_word(const uint8_t* bm, size_t nbytes, size_t w) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "bitmaps are read as little-endian 64-bit words");
  uint64_t x = 0;
  if ((w + 1) * 8 <= nbytes) std::memcpy(&x, bm + w * 8, 8);
  else if (w * 8 < nbytes) std::memcpy(&x, bm + w * 8, nbytes - w * 8);
  return x;
}

/// Set the bits of strictly increasing positions (< nbits) in a zeroed bitmap of bitmap_bytes(nbits).
void bitmap_encode(const uint64_t* positions, size_t k, uint64_t nbits, uint8_t* out);

/// Number of set bits (the value count that follows the bitmap).
uint64_t bitmap_count(const uint8_t* bm, uint64_t nbits);

/// Positions of the set bits, ascending. Throws InvalidArgument if a padding bit is set.
void bitmap_decode(const uint8_t* bm, uint64_t nbits, std::vector<uint64_t>& positions);

/// Decode owner `owner`'s bitmap into global indices sorted ascending; order[k] is the value slot
/// (rank of the bit) of the k-th index.
void hash_bitmap_decode(const uint8_t* bm, uint32_t owner, const Partitioner& part, std::vector<int64_t>& indices,
                        std::vector<uint32_t>& order);

}  // namespace zen::encode
