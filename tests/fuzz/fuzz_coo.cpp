// libFuzzer target: COO wire decoding (zen/encode/coo.hpp). Input: 4 header bytes (row width 1..4,
// dtype, index type, key-space exponent), then the message. Invariants: decode throws zen::Error
// (size not whole entries, key out of range) or returns bytes/entry_bytes entries, every key in
// [0, key_space), and re-encoding reproduces the message byte for byte; appends keep earlier content.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "zen/encode/coo.hpp"
#include "zen/error.hpp"

#define CHECK(c) \
  do {           \
    if (!(c)) std::abort(); \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint32_t D = 1 + data[0] % 4;
  const zen::DType t = static_cast<zen::DType>(data[1] % 4);
  const zen::IndexType it = (data[2] & 1) ? zen::IndexType::I64 : zen::IndexType::I32;
  const uint64_t key_space = (data[3] % 64 == 63) ? ~uint64_t{0} >> 1 : (uint64_t{1} << (data[3] % 64)) + data[3] / 64;
  data += 4;
  size -= 4;
  std::vector<int64_t> keys{-7};  // pre-existing content must survive
  std::vector<uint8_t> vals{0x5A};
  size_t got = 0;
  try {
    got = zen::encode::coo_decode(data, size, key_space, D, t, it, keys, vals);
  } catch (const zen::Error&) {
    return 0;
  }
  const size_t eb = zen::encode::coo_entry_bytes(D, t, it);
  CHECK(size % eb == 0 && got == size / eb);
  CHECK(keys.size() == got + 1 && keys[0] == -7 && vals[0] == 0x5A);
  CHECK(vals.size() == 1 + got * D * zen::dtype_size(t));
  for (size_t i = 1; i < keys.size(); ++i) CHECK(keys[i] >= 0 && static_cast<uint64_t>(keys[i]) < key_space);
  std::vector<uint8_t> again(size + 1, 0xEE);
  zen::encode::coo_encode(keys.data() + 1, vals.data() + 1, got, D, t, it, again.data());
  CHECK(size == 0 || std::memcmp(again.data(), data, size) == 0);
  CHECK(again[size] == 0xEE);
  return 0;
}
