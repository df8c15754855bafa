// The device kernels on the CPU (Kernels<Host>: the kernel bodies of cuda/kernels run by the host
// launch helper, with the standard library's primitives), bit for bit against the CPU code, in every
// build (CI, the sanitizer suite). The same suite runs on a GPU as tests/cuda/test_kernels.cpp.
#include <gtest/gtest.h>

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
