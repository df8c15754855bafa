#pragma once
// Stable LSD radix sort of packed 64-bit records, serial (callers sort independent pieces in
// parallel). Used by the sort partition (zen/hash/sort_partition.hpp) and the plans.
#include <cstddef>
#include <cstdint>

namespace zen::detail {

/// Bits of the values 0..n-1 (at least 1; n >= 1): the key width of records over n items.
inline int bits_for(uint64_t n) {
  int b = 1;
  while (b < 64 && (n - 1) >> b) ++b;
  return b;
}

/// Sort a[0..n) by their bits [lo, lo + bits) (bits above lo + bits up to the next digit boundary
/// take part too: callers keep them zero), stably: 11-bit digits, all histograms from one read,
/// digits equal in every record skipped; at most 66 bits. tmp holds n records; the result is in a.
void radix_sort_u64(uint64_t* a, uint64_t* tmp, size_t n, int lo, int bits);

}  // namespace zen::detail
