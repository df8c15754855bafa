// libFuzzer target: hash-bitmap decoding (zen/encode/bitmap.hpp). Input: 8 header bytes (item count
// N <= 2^20, owner count n in 1..64, owner id, seed byte), then the bitmap. Invariants: decode either
// throws zen::Error (padding bit set) or yields strictly increasing positions < |I_owner| whose count
// equals bitmap_count and whose re-encoding is byte-identical; every decoded global index is owned by
// the owner at that position (h0 round trip), sorted, with a permutation as value order.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "zen/encode/bitmap.hpp"
#include "zen/error.hpp"

#define CHECK(c) \
  do {           \
    if (!(c)) std::abort(); \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint32_t nitems;
  std::memcpy(&nitems, data, 4);
  nitems &= (1u << 20) - 1;
  const uint32_t n = 1 + data[4] % 64, owner = data[5] % n;
  const uint64_t seed = data[6] | (uint64_t{data[7]} << 8);
  data += 8;
  size -= 8;
  const zen::Partitioner part = zen::Partitioner::make(nitems, n, seed);
  const uint64_t nbits = part.owner_size(owner);
  const size_t nbytes = zen::encode::bitmap_bytes(nbits);
  if (size < nbytes) return 0;  // the caller always passes whole bitmaps (sizes come from N and n)
  std::vector<uint64_t> pos;
  try {
    zen::encode::bitmap_decode(data, nbits, pos);
  } catch (const zen::Error&) {
    CHECK(nbits % 8 != 0);  // only a set padding bit is an error
    return 0;
  }
  CHECK(pos.size() == zen::encode::bitmap_count(data, nbits));
  for (size_t i = 0; i < pos.size(); ++i) CHECK(pos[i] < nbits && (i == 0 || pos[i] > pos[i - 1]));
  std::vector<uint8_t> again(nbytes + 1, 0xEE);
  zen::encode::bitmap_encode(pos.data(), pos.size(), nbits, again.data());
  CHECK(nbytes == 0 || std::memcmp(again.data(), data, nbytes) == 0);
  CHECK(again[nbytes] == 0xEE);  // nothing written past the bitmap

  std::vector<int64_t> idx;
  std::vector<uint32_t> order;
  zen::encode::hash_bitmap_decode(data, owner, part, idx, order);
  CHECK(idx.size() == pos.size() && order.size() == pos.size());
  std::vector<char> seen(order.size(), 0);
  for (size_t k = 0; k < idx.size(); ++k) {
    CHECK(idx[k] >= 0 && static_cast<uint64_t>(idx[k]) < nitems);
    CHECK(k == 0 || idx[k] > idx[k - 1]);
    uint32_t o;
    uint64_t p;
    part.locate(static_cast<uint64_t>(idx[k]), &o, &p);
    CHECK(o == owner && p == pos[order[k]]);
    CHECK(order[k] < seen.size() && !seen[order[k]]);
    seen[order[k]] = 1;
  }
  return 0;
}
