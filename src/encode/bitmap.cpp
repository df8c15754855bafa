#include "zen/encode/bitmap.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "zen/detail/popcount.hpp"
#include "zen/error.hpp"

namespace zen::encode {

void bitmap_encode(const uint64_t* positions, size_t k, uint64_t nbits, uint8_t* out) {
  if (const size_t nb = bitmap_bytes(nbits)) std::memset(out, 0, nb);  // out may be null when nbits == 0
  uint64_t prev = 0;
  for (size_t i = 0; i < k; ++i) {
    const uint64_t j = positions[i];
    ZEN_ENFORCE(j < nbits, "bitmap encode: position " + std::to_string(j) + " outside [0, " + std::to_string(nbits) + ")");
    ZEN_ENFORCE(i == 0 || j > prev, "bitmap encode: positions not strictly increasing at entry " + std::to_string(i) +
                                        " (" + std::to_string(prev) + ", " + std::to_string(j) + ")");
    out[j >> 3] |= static_cast<uint8_t>(1u << (j & 7));
    prev = j;
  }
}

namespace {
void check_padding(const uint8_t* bm, uint64_t nbits) {
  if (nbits % 8 == 0) return;
  const uint8_t last = bm[nbits / 8];
  const uint8_t pad = static_cast<uint8_t>(0xFFu << (nbits % 8));
  ZEN_ENFORCE((last & pad) == 0, "bitmap decode: padding bit set beyond bit " + std::to_string(nbits - 1));
}
}  // namespace

uint64_t bitmap_count(const uint8_t* bm, uint64_t nbits) {
  const uint64_t nbytes = bitmap_bytes(nbits);
  return zen::detail::popcount_bytes(bm, static_cast<size_t>(nbytes));
}

void bitmap_decode(const uint8_t* bm, uint64_t nbits, std::vector<uint64_t>& positions) {
  check_padding(bm, nbits);
  const size_t nbytes = bitmap_bytes(nbits);
  for (size_t w = 0; w * 8 < nbytes; ++w) {
    uint64_t x = bitmap_word(bm, nbytes, w);
    while (x) {
      const int b = __builtin_ctzll(x);
      positions.push_back(w * 64 + static_cast<uint64_t>(b));
      x &= x - 1;
    }
  }
}

void hash_bitmap_decode(const uint8_t* bm, uint32_t owner, const Partitioner& part, std::vector<int64_t>& indices,
                        std::vector<uint32_t>& order) {
  std::vector<uint64_t> pos;
  bitmap_decode(bm, part.owner_size(owner), pos);
  std::vector<std::pair<int64_t, uint32_t>> pairs(pos.size());
  for (size_t k = 0; k < pos.size(); ++k)
    pairs[k] = {static_cast<int64_t>(part.index_at(owner, pos[k])), static_cast<uint32_t>(k)};
  std::sort(pairs.begin(), pairs.end());
  indices.resize(pairs.size());
  order.resize(pairs.size());
  for (size_t k = 0; k < pairs.size(); ++k) {
    indices[k] = pairs[k].first;
    order[k] = pairs[k].second;
  }
}

}  // namespace zen::encode
