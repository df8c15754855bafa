// Stable LSD radix sort of packed 64-bit records (see zen/detail/radix_sort.hpp).
#include "zen/detail/radix_sort.hpp"

#include <algorithm>
#include <cstring>

namespace zen::detail {

void radix_sort_u64(uint64_t* a, uint64_t* tmp, size_t n, int lo, int bits) {
  if (n < 2 || bits <= 0) return;
  constexpr int digit = 11, kMaxDigits = 6;  // 66 bits: any [lo, lo + bits) of a 64-bit record
  constexpr size_t buckets = size_t{1} << digit, mask = buckets - 1;
  const int digits = (bits + digit - 1) / digit;
  // The histograms of every digit in one read of the records; a digit that is the same for every
  // record moves nothing and is skipped.
  size_t hist[kMaxDigits][buckets];
  for (int d = 0; d < digits; ++d) std::fill(hist[d], hist[d] + buckets, size_t{0});
  for (size_t i = 0; i < n; ++i) {
    const uint64_t x = a[i] >> lo;
    for (int d = 0; d < digits; ++d) ++hist[d][(x >> (d * digit)) & mask];
  }
  uint64_t* src = a;
  uint64_t* dst = tmp;
  int passes = 0;
  for (int d = 0; d < digits; ++d) {
    const int shift = lo + d * digit;
    size_t* h = hist[d];
    if (h[(src[0] >> shift) & mask] == n) continue;
    size_t sum = 0;
    for (size_t k = 0; k < buckets; ++k) {
      const size_t c = h[k];
      h[k] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; ++i) dst[h[(src[i] >> shift) & mask]++] = src[i];
    std::swap(src, dst);
    ++passes;
  }
  if (passes % 2) std::memcpy(a, tmp, n * sizeof(uint64_t));
}

}  // namespace zen::detail
