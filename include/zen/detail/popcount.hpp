#pragma once
// Set bits of a byte range, with the CPU's popcount instruction where it has one. Debian builds for
// baseline x86-64 (no -mpopcnt), where __builtin_popcountll is a call into libgcc per word.
#include <cstddef>
#include <cstdint>

namespace zen::detail {

/// Number of set bits in bytes [p, p + nbytes) (any alignment).
uint64_t popcount_bytes(const void* p, size_t nbytes);

}  // namespace zen::detail
