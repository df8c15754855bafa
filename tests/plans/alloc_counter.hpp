#pragma once
// A replaced global operator new that counts allocations while counting is switched on (all threads:
// the ranks of a loopback world and the plans' pool workers). Included by exactly one translation
// unit of a test binary.
#include <atomic>
#include <cstdlib>
#include <new>

namespace zen::test {
inline std::atomic<bool> g_count_allocs{false};
inline std::atomic<uint64_t> g_allocs{0};
}  // namespace zen::test

namespace {
__attribute__((noinline)) inline void note_alloc() { zen::test::g_allocs.fetch_add(1, std::memory_order_relaxed); }
inline void* counted_alloc(std::size_t n) {
  if (zen::test::g_count_allocs.load(std::memory_order_relaxed)) note_alloc();
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
inline void* counted_alloc_aligned(std::size_t n, std::align_val_t a) {
  if (zen::test::g_count_allocs.load(std::memory_order_relaxed)) note_alloc();
  const std::size_t al = static_cast<std::size_t>(a);
  void* p = std::aligned_alloc(al, (n + al - 1) / al * al);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t n, std::align_val_t a) { return counted_alloc_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_alloc_aligned(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
