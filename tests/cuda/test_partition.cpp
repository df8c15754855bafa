// h0 on the device (zen::cuda::partition_host) equals the CPU's Partitioner bit for bit. Skips
// without a GPU (fails with ZEN_GPU_REQUIRED).
#include <gtest/gtest.h>

#include <vector>

#include "gpu_test_util.hpp"
#include "zen/cuda/runtime.hpp"
#include "zen/hash/hash.hpp"

TEST(CudaPartition, MatchesCpuBitForBit) {
  ZEN_REQUIRE_GPU();
  for (uint64_t N : {1ULL, 1003ULL, (1ULL << 20) + 3, 1ULL << 40}) {
    for (uint32_t n : {1u, 3u, 8u}) {
      std::vector<int64_t> idx;
      for (uint64_t i = 0; i < 5000 && i < N; ++i) idx.push_back(static_cast<int64_t>((i * 2654435761ULL) % N));
      idx.push_back(0);
      idx.push_back(static_cast<int64_t>(N - 1));
      std::vector<uint32_t> owner(idx.size());
      std::vector<uint64_t> pos(idx.size());
      zen::cuda::partition_host(idx.data(), idx.size(), N, n, 42, owner.data(), pos.data());
      auto p = zen::Partitioner::make(N, n, 42);
      for (size_t i = 0; i < idx.size(); ++i) {
        uint32_t o;
        uint64_t q;
        p.locate(static_cast<uint64_t>(idx[i]), &o, &q);
        ASSERT_EQ(owner[i], o);
        ASSERT_EQ(pos[i], q);
      }
    }
  }
}
