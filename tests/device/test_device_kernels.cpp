// The device kernels on the CPU (Kernels<Host>: the kernel bodies of cuda/kernels run by the host
// launch helper, with the standard library's primitives), bit for bit against the CPU code, in every
// build (CI, the sanitizer suite). The same suite runs on a GPU as tests/cuda/test_kernels.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "zen/cuda/kernels.hpp"
namespace zen::test {
using TestBackend = cuda::Host;
}  // namespace zen::test

#include "kernels/bodies.hpp"
#include "kernels/exec_host.hpp"
#include "kernels_suite.hpp"

using namespace zen;

// Compaction that lost entries (fewer selected slots than entries, CheckSelected reports it) must
// not make the owner-key pass read unwritten slots: ids past the selected count and out-of-range ids
// become entry 0 of the last owner, and nothing outside owner_of is read (ASan checks the reads).
TEST(DeviceKernelBodies, OwnerKeysNeverReadUnselectedSlots) {
  const uint64_t nnz = 6;
  std::vector<uint32_t> owner_of{0, 1, 2, 0, 1, 2};
  // Slots 2.. were not written by this compaction: stale ids, some of them valid-looking (4, 1).
  std::vector<uint32_t> sel{5, 3, 4, 0xDEADBEEFu, 1, 0xFFFFFFFFu};
  std::vector<uint32_t> keys(nnz, 77);
  const uint64_t num_sel = 2;  // two of six entries survived
  const cuda::detail::OwnerKeys body{sel.data(), owner_of.data(), &num_sel, nnz, 3, keys.data()};
  cuda::detail::Exec<cuda::Host>::for_each(nnz, body, nullptr);
  EXPECT_EQ(keys[0], 2u);
  EXPECT_EQ(keys[1], 0u);
  for (uint64_t i = 2; i < nnz; ++i) {
    EXPECT_EQ(sel[i], 0u) << i;
    EXPECT_EQ(keys[i], 2u) << i;
  }
  // A selected id out of range (a corrupted slot) is neutralized too.
  sel = {1, 9, 0, 0, 0, 0};
  const uint64_t all = nnz;
  const cuda::detail::OwnerKeys body2{sel.data(), owner_of.data(), &all, nnz, 3, keys.data()};
  cuda::detail::Exec<cuda::Host>::for_each(nnz, body2, nullptr);
  EXPECT_EQ(keys[0], 1u);
  EXPECT_EQ(sel[1], 0u);
  EXPECT_EQ(keys[1], 2u);
}

// The host warp runs 32 lanes in lockstep: ballot collects lane l's predicate in bit l, as
// __ballot_sync does, and the bitmap words it writes are the CPU encoder's.
TEST(DeviceKernelBodies, HostWarpBallot) {
  cuda::detail::HostWarp w;
  cuda::detail::HostWarp::Var<bool> p;
  w.lanes([&](unsigned l) { p[l] = l % 3 == 0 || l == 31; });
  uint32_t want = 0;
  for (unsigned l = 0; l < 32; ++l)
    if (l % 3 == 0 || l == 31) want |= 1u << l;
  EXPECT_EQ(w.ballot(p), want);
}

// The host emulation of CUDA's atomics is atomic: threads contending on one word lose no update.
// Four threads, released together, increment one word with a compare-and-swap loop (what the hash
// insert's slot claim relies on: exactly one claimant sees the expected value) until they have seen
// enough contention (failed swaps) to know they overlapped, and count the swaps each believes it
// made: the word must equal their sum. Then atomic_add (32 and 64 bit) from the same threads.
TEST(DeviceKernelBodies, HostAtomicsLoseNoUpdate) {
  constexpr int kThreads = 4;
  constexpr uint64_t kContention = 20000, kMaxIters = 200000000, kAdds = 200000;
  // Called through volatile pointers, as from separately compiled kernels: one call per operation.
  uint32_t (*volatile cas)(uint32_t*, uint32_t, uint32_t) = &cuda::detail::atomic_cas;
  uint32_t (*volatile add32_fn)(uint32_t*, uint32_t) = &cuda::detail::atomic_add;
  uint64_t (*volatile add64_fn)(uint64_t*, uint64_t) = &cuda::detail::atomic_add;
  uint32_t word = 0, add32 = 0;
  uint64_t add64 = 0;
  std::atomic<int> ready{0};
  std::atomic<uint64_t> failed_swaps{0}, claimed{0};
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; ++t)
    th.emplace_back([&] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      uint64_t mine = 0, fails = 0;
      for (uint64_t i = 0; i < kMaxIters; ++i) {
        const uint32_t seen = std::atomic_ref<uint32_t>(word).load(std::memory_order_relaxed);
        if (cas(&word, seen, seen + 1) == seen) ++mine;
        else ++fails;
        if ((i & 1023) == 0 && failed_swaps.load(std::memory_order_relaxed) + fails >= kContention) break;
      }
      failed_swaps.fetch_add(fails);
      claimed.fetch_add(mine);
      for (uint64_t i = 0; i < kAdds; ++i) {
        add32_fn(&add32, 1u);
        add64_fn(&add64, uint64_t{3});
      }
    });
  for (auto& t : th) t.join();
  EXPECT_GT(failed_swaps.load(), 0u) << "the threads never contended: nothing was checked";
  EXPECT_EQ(word, claimed.load()) << "compare-and-swap: " << claimed.load() << " successful swaps, the word says "
                                  << word << " (" << failed_swaps.load() << " failed swaps)";
  EXPECT_EQ(add32, kThreads * kAdds) << "atomic_add (32 bit) lost updates";
  EXPECT_EQ(add64, uint64_t{3} * kThreads * kAdds) << "atomic_add (64 bit) lost updates";
}
