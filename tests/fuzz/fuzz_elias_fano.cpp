// libFuzzer target: Elias-Fano decoding (zen/encode/elias_fano.hpp). Input: 9 header bytes (set
// size m from 6 bytes and a shift, position count K <= m from 2 bytes, a flag), then the message:
// exactly ef_bytes(m, K) bytes, or with the flag every remaining byte (sizes that may not match).
// Invariants: ef_check accepts iff ef_decode does not throw zen::Error; an accepted message yields K
// strictly increasing positions < m, its frame check passes, the checked walk agrees, and
// re-encoding is byte-identical without writing past the message; the unchecked walk of an accepted
// message visits the same positions. Every input also round-trips as a position set of its own.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "zen/encode/elias_fano.hpp"
#include "zen/error.hpp"

#define CHECK(c) \
  do {           \
    if (!(c)) std::abort(); \
  } while (0)

namespace ze = zen::encode;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  uint64_t m = 0;
  for (int i = 0; i < 6; ++i) m |= uint64_t{data[i]} << (8 * i);
  m <<= data[6] % 18;  // up to 2^65 would overflow: 48 + 17 bits at most, then clamp below 2^63
  if (m >= (uint64_t{1} << 63)) m = (uint64_t{1} << 63) - 1;
  uint64_t k = data[7] | (static_cast<uint64_t>(data[8] & 0x7F) << 8);
  const bool any_size = data[8] & 0x80;
  if (k > m) k = m;
  data += 9;
  size -= 9;
  const size_t want = ze::ef_bytes(m, k);
  const size_t bytes = any_size ? size : want;
  if (bytes > size) return 0;

  std::vector<uint64_t> pos{77};  // appends keep earlier content
  const bool ok = ze::ef_check(data, bytes, m, k);
  bool threw = false;
  try {
    ze::ef_decode(data, bytes, m, k, pos);
  } catch (const zen::Error&) {
    threw = true;
  }
  CHECK(ok == !threw);
  if (ok) {
    CHECK(bytes == want && ze::ef_check_frame(data, bytes, m, k));
    CHECK(pos.size() == k + 1 && pos[0] == 77);
    for (size_t i = 1; i < pos.size(); ++i) CHECK(pos[i] < m && (i == 1 || pos[i] > pos[i - 1]));
    uint64_t n = 0;
    CHECK(ze::ef_for_each_checked(data, m, k, [&](uint64_t x, uint64_t i) { CHECK(i == n && x == pos[++n]); }));
    CHECK(n == k);
    n = 0;
    ze::ef_for_each(data, m, k, [&](uint64_t x, uint64_t) { CHECK(x == pos[++n]); });
    std::vector<uint8_t> again(want + 1, 0xEE);
    ze::ef_encode(pos.data() + 1, k, m, again.data());
    CHECK(want == 0 || std::memcmp(again.data(), data, want) == 0);
    CHECK(again[want] == 0xEE);
  } else if (bytes == want && ze::ef_check_frame(data, bytes, m, k)) {
    // Frame fine, so order or range is what failed: the checked walk must say so.
    CHECK(!ze::ef_for_each_checked(data, m, k, [](uint64_t, uint64_t) {}));
  }

  // The message bytes as a bitset over min(m, 8 * size) positions: encode, check, decode.
  const uint64_t mm = m < 8 * size ? m : 8 * size;
  std::vector<uint64_t> set;
  for (uint64_t x = 0; x < mm; ++x)
    if (data[x >> 3] >> (x & 7) & 1) set.push_back(x);
  std::vector<uint8_t> enc(ze::ef_bytes(m, set.size()) + 1, 0xEE);
  ze::ef_encode(set.data(), set.size(), m, enc.data());
  CHECK(enc.back() == 0xEE);
  CHECK(ze::ef_check(enc.data(), enc.size() - 1, m, set.size()));
  std::vector<uint64_t> back;
  ze::ef_decode(enc.data(), enc.size() - 1, m, set.size(), back);
  CHECK(back == set);
  return 0;
}
