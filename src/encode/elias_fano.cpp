#include "zen/encode/elias_fano.hpp"

#include <cmath>
#include <string>

#include "zen/detail/popcount.hpp"
#include "zen/error.hpp"

namespace zen::encode {

EliasFanoLayout ef_layout(uint64_t m, uint64_t k) {
  EliasFanoLayout l;
  if (k == 0) return l;
  if (m > k) l.low_bits = static_cast<uint32_t>(63 - __builtin_clzll(m / k));
  l.upper_bits = k + (m >> l.low_bits);
  l.upper_bytes = static_cast<size_t>((l.upper_bits + 7) / 8);
  // k * L < 2^64 for every k <= m < 2^64 (L <= log2(m / k)).
  l.lower_bytes = static_cast<size_t>((static_cast<unsigned __int128>(k) * l.low_bits + 7) / 8);
  return l;
}

double log2_binomial(uint64_t m, uint64_t k) {
  if (k == 0 || k >= m) return 0.0;
  const double dm = static_cast<double>(m), dk = static_cast<double>(k);
  return (std::lgamma(dm + 1) - std::lgamma(dk + 1) - std::lgamma(dm - dk + 1)) / std::log(2.0);
}

void ef_encode(const uint64_t* positions, size_t k, uint64_t m, uint8_t* out) {
  for (size_t i = 0; i < k; ++i) {
    ZEN_ENFORCE(positions[i] < m, "Elias-Fano encode: position " + std::to_string(positions[i]) + " outside [0, " +
                                      std::to_string(m) + ")");
    ZEN_ENFORCE(i == 0 || positions[i] > positions[i - 1],
                "Elias-Fano encode: positions not strictly increasing at entry " + std::to_string(i));
  }
  EliasFanoWriter w(out, m, k);
  for (size_t i = 0; i < k; ++i) w.push(positions[i]);
  w.finish();
}

bool ef_check_frame(const uint8_t* msg, size_t bytes, uint64_t m, uint64_t k, const char** why) {
  auto fail = [&](const char* r) {
    if (why) *why = r;
    return false;
  };
  if (k > m) return fail("more positions than the set holds");
  const EliasFanoLayout lay = ef_layout(m, k);
  if (bytes != lay.bytes()) return fail("size differs from the layout of (m, K)");
  if (!k) return true;
  // Exactly k set bits in the upper part, none in its padding.
  const uint64_t ones = zen::detail::popcount_bytes(msg, static_cast<size_t>(lay.upper_bytes));
  if (ones != k) return fail("upper part does not hold K set bits");
  if (lay.upper_bits % 8 && (msg[lay.upper_bytes - 1] >> (lay.upper_bits % 8))) return fail("padding bit set in the upper part");
  const unsigned __int128 lbits = static_cast<unsigned __int128>(k) * lay.low_bits;
  if (lbits % 8 && (msg[lay.bytes() - 1] >> static_cast<unsigned>(lbits % 8))) return fail("padding bit set in the lower part");
  return true;
}

bool ef_check(const uint8_t* msg, size_t bytes, uint64_t m, uint64_t k, const char** why) {
  if (!ef_check_frame(msg, bytes, m, k, why)) return false;
  if (ef_for_each_checked(msg, m, k, [](uint64_t, uint64_t) {})) return true;
  if (why) *why = "positions out of range or not strictly increasing";
  return false;
}

void ef_decode(const uint8_t* msg, size_t bytes, uint64_t m, uint64_t k, std::vector<uint64_t>& positions) {
  const char* why = "";
  if (!ef_check(msg, bytes, m, k, &why))
    ZEN_THROW(Result::InvalidArgument, "Elias-Fano decode: message of " + std::to_string(bytes) + " bytes for " +
                                           std::to_string(k) + " positions in [0, " + std::to_string(m) + "): " + why);
  const size_t p0 = positions.size();
  positions.resize(p0 + k);
  ef_for_each(msg, m, k, [&](uint64_t x, uint64_t i) { positions[p0 + i] = x; });
}

}  // namespace zen::encode
