// Bulk popcount (see zen/detail/popcount.hpp): one loop, compiled twice on x86-64 (with and without
// the POPCNT instruction), the variant picked once from the CPU.
#include "zen/detail/popcount.hpp"

#include <cstring>

namespace zen::detail {
namespace {

#define ZEN_POPCOUNT_BODY                                                          \
  const auto* b = static_cast<const unsigned char*>(p);                            \
  uint64_t c = 0;                                                                  \
  size_t i = 0;                                                                    \
  for (; i + 8 <= nbytes; i += 8) {                                                \
    uint64_t x;                                                                    \
    std::memcpy(&x, b + i, 8);                                                     \
    c += static_cast<uint64_t>(__builtin_popcountll(x));                           \
  }                                                                                \
  for (; i < nbytes; ++i) c += static_cast<uint64_t>(__builtin_popcount(b[i]));    \
  return c;

uint64_t count_plain(const void* p, size_t nbytes) { ZEN_POPCOUNT_BODY }

#if defined(__x86_64__) && !defined(__POPCNT__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("popcnt"))) uint64_t count_popcnt(const void* p, size_t nbytes) { ZEN_POPCOUNT_BODY }
#define ZEN_POPCOUNT_DISPATCH 1
#endif
#undef ZEN_POPCOUNT_BODY

}  // namespace

uint64_t popcount_bytes(const void* p, size_t nbytes) {
#ifdef ZEN_POPCOUNT_DISPATCH
  static const bool hw = __builtin_cpu_supports("popcnt");
  return hw ? count_popcnt(p, nbytes) : count_plain(p, nbytes);
#else
  return count_plain(p, nbytes);
#endif
}

}  // namespace zen::detail
