#include <gtest/gtest.h>

#include <random>

#include "zen/encode/bitmap.hpp"
#include "zen/encode/coo.hpp"
#include "zen/error.hpp"

using namespace zen;
using namespace zen::encode;

TEST(Coo, RoundTripInt32AndInt64) {
  for (uint64_t space : {1000ULL, (1ULL << 31), (1ULL << 40)}) {
    IndexType it = wire_index_type(space);
    EXPECT_EQ(it, space <= (1ULL << 31) ? IndexType::I32 : IndexType::I64);
    std::vector<int64_t> keys{0, static_cast<int64_t>(space - 1), 5, 5, static_cast<int64_t>(space / 2)};
    std::vector<float> vals;
    for (int i = 0; i < 5 * 3; ++i) vals.push_back(static_cast<float>(i - 4));
    std::vector<uint8_t> buf(coo_bytes(keys.size(), 3, DType::F32, it));
    EXPECT_EQ(buf.size(), keys.size() * (index_size(it) + 12));
    coo_encode(keys.data(), vals.data(), keys.size(), 3, DType::F32, it, buf.data());
    std::vector<int64_t> k2;
    std::vector<uint8_t> v2;
    EXPECT_EQ(coo_decode(buf.data(), buf.size(), space, 3, DType::F32, it, k2, v2), keys.size());
    EXPECT_EQ(k2, keys);
    ASSERT_EQ(v2.size(), vals.size() * 4);
    EXPECT_EQ(0, std::memcmp(v2.data(), vals.data(), v2.size()));
  }
}

TEST(Coo, EmptyAndErrors) {
  std::vector<int64_t> k;
  std::vector<uint8_t> v;
  EXPECT_EQ(coo_decode(nullptr, 0, 10, 1, DType::F16, IndexType::I32, k, v), 0u);
  std::vector<uint8_t> bad(7);
  EXPECT_THROW(coo_decode(bad.data(), bad.size(), 10, 1, DType::F32, IndexType::I32, k, v), Error);
  int64_t key = 10;
  float val = 1;
  std::vector<uint8_t> buf(8);
  coo_encode(&key, &val, 1, 1, DType::F32, IndexType::I32, buf.data());
  try {
    coo_decode(buf.data(), buf.size(), 10, 1, DType::F32, IndexType::I32, k, v);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("key 10"), std::string::npos) << e.what();
  }
}

TEST(Bitmap, RoundTripLsbFirstAndSizes) {
  for (uint64_t nbits : {0ULL, 1ULL, 7ULL, 8ULL, 9ULL, 63ULL, 64ULL, 65ULL, 1000ULL}) {
    for (int density : {0, 10, 50, 100}) {
      std::mt19937_64 rng(nbits * 131 + static_cast<uint64_t>(density));
      std::vector<uint64_t> pos;
      for (uint64_t j = 0; j < nbits; ++j)
        if (static_cast<int>(rng() % 100) < density) pos.push_back(j);
      std::vector<uint8_t> bm(bitmap_bytes(nbits), 0xAA);
      EXPECT_EQ(bm.size(), (nbits + 7) / 8);
      bitmap_encode(pos.data(), pos.size(), nbits, bm.data());
      for (uint64_t j : pos) EXPECT_TRUE(bm[j >> 3] & (1u << (j & 7)));
      EXPECT_EQ(bitmap_count(bm.data(), nbits), pos.size());
      std::vector<uint64_t> back;
      bitmap_decode(bm.data(), nbits, back);
      EXPECT_EQ(back, pos);
    }
  }
}

TEST(Bitmap, RejectsPaddingAndUnsortedInput) {
  std::vector<uint8_t> bm{0x80};  // bit 7 set, but only 5 bits in use
  std::vector<uint64_t> out;
  EXPECT_THROW(bitmap_decode(bm.data(), 5, out), Error);
  std::vector<uint64_t> pos{3, 2};
  EXPECT_THROW(bitmap_encode(pos.data(), 2, 8, bm.data()), Error);
  std::vector<uint64_t> big{8};
  EXPECT_THROW(bitmap_encode(big.data(), 1, 8, bm.data()), Error);
}

TEST(HashBitmap, OwnersCoverNBitsAndDecodeSortedGlobalIndices) {
  for (uint32_t n : {1u, 3u, 5u, 8u}) {
    const uint64_t N = 1003;  // not divisible by n
    auto part = Partitioner::make(N, n, 77);
    uint64_t total_bits = 0, total_bytes = 0;
    std::vector<int64_t> all;
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t m = part.owner_size(i);
      total_bits += m;
      total_bytes += bitmap_bytes(m);
      // Mark every position whose global index is even, plus index 0 and N-1 wherever they live.
      std::vector<uint64_t> pos;
      for (uint64_t j = 0; j < m; ++j) {
        uint64_t idx = part.index_at(i, j);
        if (idx % 2 == 0 || idx == N - 1) pos.push_back(j);
      }
      std::vector<uint8_t> bm(bitmap_bytes(m));
      bitmap_encode(pos.data(), pos.size(), m, bm.data());
      std::vector<int64_t> idx;
      std::vector<uint32_t> order;
      hash_bitmap_decode(bm.data(), i, part, idx, order);
      ASSERT_TRUE(std::is_sorted(idx.begin(), idx.end()));
      ASSERT_EQ(idx.size(), pos.size());
      for (size_t k = 0; k < idx.size(); ++k) {
        EXPECT_EQ(part.owner(static_cast<uint64_t>(idx[k])), i);
        EXPECT_EQ(part.index_at(i, pos[order[k]]), static_cast<uint64_t>(idx[k]));
      }
      all.insert(all.end(), idx.begin(), idx.end());
    }
    EXPECT_EQ(total_bits, N);
    EXPECT_LE(total_bytes, N / 8 + n);
    std::sort(all.begin(), all.end());
    ASSERT_EQ(all.size(), 502u);  // even indices 0..1002
    EXPECT_EQ(all.front(), 0);
    EXPECT_EQ(all.back(), static_cast<int64_t>(N - 1));
  }
}
