#pragma once
// Elias–Fano encoding of a strictly increasing set of K positions out of [0, m) (an owner's result
// support in the pull, or a sender's keys for one owner in the push), near the information bound
// log2 C(m, K) bits: at most K * (2 + ceil(log2(m / K))) bits, about 0.6 bit per position above the
// bound at typical densities. Exact layout (docs/algorithms.md, "Index encodings"):
//
//   L      = 0 when K == 0 or m <= K, else floor(log2(floor(m / K)))    (low bits per position)
//   upper  = K + (m >> L) bits: position i (x_i ascending) sets bit (x_i >> L) + i
//   lower  = K * L bits: bits [i*L, (i+1)*L) hold x_i & (2^L - 1)
//   bytes  = ceil(upper / 8) + ceil(lower / 8): the upper part first, then the lower part, each
//            LSB-first (bit b = byte b >> 3, mask 1 << (b & 7)) and padded with zero bits.
//   K == 0: zero bytes.
//
// Both sides know m and K before the message travels (K from the counts or the owner's meta), so
// the size is known in advance and nothing else is sent. Decodable in parallel by blocks: the i-th
// set bit of the upper part at bit b gives x_i = ((b - i) << L) | low_i, so a block of upper words
// needs only the popcount before it (the same prefix as the hash bitmap's value order).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace zen::encode {

struct EliasFanoLayout {
  uint32_t low_bits = 0;     ///< L
  uint64_t upper_bits = 0;   ///< K + (m >> L) (0 when K == 0)
  size_t upper_bytes = 0;    ///< ceil(upper_bits / 8)
  size_t lower_bytes = 0;    ///< ceil(K * L / 8)
  size_t bytes() const { return upper_bytes + lower_bytes; }
};

EliasFanoLayout ef_layout(uint64_t m, uint64_t k);
inline size_t ef_bytes(uint64_t m, uint64_t k) { return ef_layout(m, k).bytes(); }

/// log2 C(m, k): the information content of a k-subset of [0, m), in bits (0 when k == 0 or k == m).
double log2_binomial(uint64_t m, uint64_t k);

/// Streaming encoder: construct over ef_bytes(m, k) bytes (they are zeroed), then push the k
/// positions in strictly increasing order. The caller guarantees order and range (ef_encode checks).
class EliasFanoWriter {
 public:
  EliasFanoWriter(uint8_t* out, uint64_t m, uint64_t k) : lay_(ef_layout(m, k)), upper_(out), lower_(out + lay_.upper_bytes) {
    if (lay_.bytes()) std::memset(out, 0, lay_.bytes());
    mask_ = lay_.low_bits ? (~uint64_t{0} >> (64 - lay_.low_bits)) : 0;
  }
  void push(uint64_t x) {
    const uint64_t b = (x >> lay_.low_bits) + i_++;
    upper_[b >> 3] = static_cast<uint8_t>(upper_[b >> 3] | (1u << (b & 7)));
    uint64_t v = x & mask_;
    for (uint32_t left = lay_.low_bits; left;) {  // one step unless L > 56 (m / K >= 2^57)
      const uint32_t take = left < 56 ? left : 56;
      acc_ |= (v & (~uint64_t{0} >> (64 - take))) << nacc_;  // nacc_ < 8: fits in 64 bits
      v >>= take;
      left -= take;
      nacc_ += take;
      while (nacc_ >= 8) {
        *lower_++ = static_cast<uint8_t>(acc_);
        acc_ >>= 8;
        nacc_ -= 8;
      }
    }
  }
  /// Write the last partial byte of the lower part (call once after the last push).
  void finish() {
    if (nacc_) *lower_ = static_cast<uint8_t>(acc_);
    nacc_ = 0;
  }

 private:
  EliasFanoLayout lay_;
  uint8_t* upper_;
  uint8_t* lower_;
  uint64_t mask_ = 0, i_ = 0, acc_ = 0;
  uint32_t nacc_ = 0;
};

/// Encode strictly increasing positions < m into ef_bytes(m, k) bytes. Throws InvalidArgument for a
/// position out of range or out of order.
void ef_encode(const uint64_t* positions, size_t k, uint64_t m, uint8_t* out);

namespace detail {
/// Low bits of position i (L <= 56): one unaligned 8-byte load where the lower part has 8 bytes
/// left, else byte by byte (never reads past the message).
inline uint64_t ef_low(const uint8_t* lower, size_t lower_bytes, uint64_t i, uint32_t L, uint64_t mask) {
  const uint64_t bit = i * L;
  const size_t byte = static_cast<size_t>(bit >> 3);
  uint64_t v = 0;
  if (byte + 8 <= lower_bytes) {
    std::memcpy(&v, lower + byte, 8);
  } else {
    for (size_t j = 0; byte + j < lower_bytes; ++j) v |= uint64_t{lower[byte + j]} << (8 * j);
  }
  return (v >> (bit & 7)) & mask;
}
inline uint64_t ef_low_wide(const uint8_t* lower, uint64_t i, uint32_t L) {  // L > 56
  uint64_t low = 0;
  for (uint32_t j = 0; j < L; ++j) {
    const uint64_t bit = i * L + j;
    low |= static_cast<uint64_t>((lower[bit >> 3] >> (bit & 7)) & 1u) << j;
  }
  return low;
}
/// Walk the positions: f(x_i, i) for each, ascending. Checked: stop and return false at the first
/// position that is >= m or not above its predecessor (f never sees it).
template <bool Checked, typename F>
bool ef_walk(const uint8_t* msg, uint64_t m, uint64_t k, F&& f) {
  const EliasFanoLayout lay = ef_layout(m, k);
  if (!k) return true;
  const uint8_t* lower = msg + lay.upper_bytes;
  const uint32_t L = lay.low_bits;
  const uint64_t mask = L ? (~uint64_t{0} >> (64 - L)) : 0;
  const size_t ub = lay.upper_bytes, words = (ub + 7) / 8;
  uint64_t i = 0, next = 0;  // next: the smallest value the next position may take
  for (size_t w = 0; w < words; ++w) {
    uint64_t x = 0;
    std::memcpy(&x, msg + w * 8, ub - w * 8 < 8 ? ub - w * 8 : 8);
    while (x) {
      const uint64_t b = w * 64 + static_cast<uint64_t>(__builtin_ctzll(x));
      x &= x - 1;
      const uint64_t low = L == 0 ? 0 : L <= 56 ? ef_low(lower, lay.lower_bytes, i, L, mask) : ef_low_wide(lower, i, L);
      const uint64_t v = ((b - i) << L) | low;
      if constexpr (Checked) {
        if (v >= m || v < next) return false;
        next = v + 1;
      }
      f(v, i);
      if (++i == k) return true;
    }
  }
  return !Checked || i == k;
}
}  // namespace detail

/// f(x_i, i) for the k positions of a message of ef_bytes(m, k) bytes, ascending; no validation
/// (run ef_check first on untrusted input, or use ef_for_each_checked).
template <typename F>
void ef_for_each(const uint8_t* msg, uint64_t m, uint64_t k, F&& f) {
  detail::ef_walk<false>(msg, m, k, f);
}

/// As ef_for_each, on a message whose size, set-bit count and padding ef_check_frame accepted:
/// returns false at the first position that is out of range or out of order (f is not called for it).
template <typename F>
bool ef_for_each_checked(const uint8_t* msg, uint64_t m, uint64_t k, F&& f) {
  return detail::ef_walk<true>(msg, m, k, f);
}

/// The O(bytes) part of the validation: size == ef_bytes(m, k), k <= m, exactly k set bits in the
/// upper part, zero padding in both parts. Order and range are checked while decoding
/// (ef_for_each_checked) or by ef_check.
bool ef_check_frame(const uint8_t* msg, size_t bytes, uint64_t m, uint64_t k, const char** why = nullptr);

/// Validate an untrusted message of `bytes` bytes: size == ef_bytes(m, k), exactly k set bits in the
/// upper part, zero padding in both parts, positions strictly increasing and < m. Returns false
/// (with a reason in *why when given) instead of throwing.
bool ef_check(const uint8_t* msg, size_t bytes, uint64_t m, uint64_t k, const char** why = nullptr);

/// Validate and decode, appending the positions. Throws InvalidArgument naming the defect.
void ef_decode(const uint8_t* msg, size_t bytes, uint64_t m, uint64_t k, std::vector<uint64_t>& positions);

}  // namespace zen::encode
