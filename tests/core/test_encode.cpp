#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "zen/encode/bitmap.hpp"
#include "zen/encode/coo.hpp"
#include "zen/encode/elias_fano.hpp"
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

namespace {
std::vector<uint64_t> random_subset(uint64_t m, uint64_t k, std::mt19937_64& g) {
  std::vector<uint64_t> s;
  if (k * 2 > m) {  // dense: keep each with probability k/m, exact count not needed
    for (uint64_t x = 0; x < m; ++x)
      if (g() % m < k) s.push_back(x);
    return s;
  }
  std::vector<char> seen;
  if (m <= (1u << 24)) seen.assign(m, 0);
  while (s.size() < k) {
    const uint64_t x = g() % m;
    if (!seen.empty()) {
      if (seen[x]) continue;
      seen[x] = 1;
    }
    s.push_back(x);
  }
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}
}  // namespace

TEST(EliasFano, LayoutIsTheDocumentedFormula) {
  EXPECT_EQ(ef_bytes(1000, 0), 0u);
  EXPECT_EQ(ef_bytes(0, 0), 0u);
  // m = 1000, K = 10: L = floor(log2(100)) = 6, upper = 10 + (1000 >> 6) = 25 bits -> 4 bytes,
  // lower = 60 bits -> 8 bytes.
  EliasFanoLayout l = ef_layout(1000, 10);
  EXPECT_EQ(l.low_bits, 6u);
  EXPECT_EQ(l.upper_bits, 25u);
  EXPECT_EQ(l.upper_bytes, 4u);
  EXPECT_EQ(l.lower_bytes, 8u);
  EXPECT_EQ(l.bytes(), 12u);
  // Full set: L = 0, upper = 2m bits.
  l = ef_layout(64, 64);
  EXPECT_EQ(l.low_bits, 0u);
  EXPECT_EQ(l.bytes(), 16u);
  // Huge universe, one position: L = 62 for m = 2^63 - 1.
  l = ef_layout((uint64_t{1} << 63) - 1, 1);
  EXPECT_EQ(l.low_bits, 62u);
  EXPECT_EQ(l.upper_bits, 2u);
  // Within 2 bits per position of the information bound at every density from 1e-5 to 1.
  for (uint64_t m : {uint64_t{1000}, uint64_t{1} << 20, uint64_t{100000007}})
    for (double d : {1e-5, 1e-4, 1e-3, 0.01, 0.03, 0.1, 0.3, 0.5, 1.0}) {
      const uint64_t k = std::max<uint64_t>(1, static_cast<uint64_t>(d * static_cast<double>(m)));
      EXPECT_LE(8.0 * static_cast<double>(ef_bytes(m, k)), log2_binomial(m, k) + 2.0 * static_cast<double>(k) + 16.0)
          << m << " " << k;
    }
  EXPECT_NEAR(log2_binomial(100, 1), std::log2(100.0), 1e-9);
  EXPECT_NEAR(log2_binomial(10, 5), std::log2(252.0), 1e-9);
  EXPECT_EQ(log2_binomial(10, 10), 0.0);
}

TEST(EliasFano, RoundTripAtEveryDensityAndEdge) {
  std::mt19937_64 g(7);
  for (uint64_t m : {uint64_t{1}, uint64_t{7}, uint64_t{64}, uint64_t{1000}, uint64_t{65537}, (uint64_t{1} << 40) + 3})
    for (double d : {0.0, 1e-4, 0.01, 0.1, 0.5, 1.0}) {
      if (m > (1u << 24) && d > 0.01) continue;
      uint64_t k = static_cast<uint64_t>(d * static_cast<double>(m));
      if (d > 0 && k == 0) k = 1;
      if (m > (1u << 24) && k) k = 1000 + static_cast<uint64_t>(d * 1e5);  // huge universe: few positions
      std::vector<uint64_t> pos = d == 1.0 ? std::vector<uint64_t>() : random_subset(m, k, g);
      if (d == 1.0)
        for (uint64_t x = 0; x < m; ++x) pos.push_back(x);
      if (!pos.empty() && m > 1) {  // index 0 and m-1 present
        pos.front() = 0;
        pos.back() = m - 1;
        pos.erase(std::unique(pos.begin(), pos.end()), pos.end());
      }
      std::vector<uint8_t> buf(ef_bytes(m, pos.size()) + 1, 0xEE);
      ef_encode(pos.data(), pos.size(), m, buf.data());
      EXPECT_EQ(buf.back(), 0xEE) << "wrote past the message";
      std::vector<uint64_t> back{42};
      ef_decode(buf.data(), buf.size() - 1, m, pos.size(), back);
      ASSERT_EQ(back.size(), pos.size() + 1);
      EXPECT_EQ(back[0], 42u);  // appends
      EXPECT_TRUE(std::equal(pos.begin(), pos.end(), back.begin() + 1)) << m << " " << d;
    }
}

TEST(EliasFano, RejectsBadInput) {
  std::vector<uint64_t> pos{0, 5, 9, 100, 999};
  const uint64_t m = 1000, k = pos.size();
  std::vector<uint8_t> buf(ef_bytes(m, k));
  ef_encode(pos.data(), k, m, buf.data());
  std::vector<uint64_t> out;
  const char* why = nullptr;
  EXPECT_TRUE(ef_check(buf.data(), buf.size(), m, k, &why));
  // Truncated and oversized messages.
  EXPECT_FALSE(ef_check(buf.data(), buf.size() - 1, m, k, &why));
  std::vector<uint8_t> big = buf;
  big.push_back(0);
  EXPECT_FALSE(ef_check(big.data(), big.size(), m, k, &why));
  EXPECT_THROW(ef_decode(buf.data(), buf.size() - 1, m, k, out), Error);
  // Wrong count announced.
  EXPECT_FALSE(ef_check(buf.data(), buf.size(), m, k + 1, &why));
  // An extra upper bit (count mismatch), a padding bit, a non-monotone low part.
  const EliasFanoLayout lay = ef_layout(m, k);
  std::vector<uint8_t> bad = buf;
  for (uint64_t b = 0; b < lay.upper_bits; ++b)
    if (!(bad[b >> 3] >> (b & 7) & 1)) {
      bad[b >> 3] = static_cast<uint8_t>(bad[b >> 3] | (1u << (b & 7)));
      break;
    }
  EXPECT_FALSE(ef_check(bad.data(), bad.size(), m, k, &why));
  if (lay.upper_bits % 8) {
    bad = buf;
    bad[lay.upper_bytes - 1] = static_cast<uint8_t>(bad[lay.upper_bytes - 1] | 0x80);
    EXPECT_FALSE(ef_check(bad.data(), bad.size(), m, k, &why));
  }
  // 5 and 9 share the high part 0 (L = 7): swapping their low bits makes the list decrease.
  ASSERT_EQ(lay.low_bits, 7u);
  std::vector<uint64_t> swapped{0, 9, 5, 100, 999};
  bad.assign(buf.size(), 0);
  EliasFanoWriter w(bad.data(), m, k);
  for (uint64_t x : swapped) w.push(x);
  w.finish();
  EXPECT_FALSE(ef_check(bad.data(), bad.size(), m, k, &why));
  EXPECT_THROW(ef_decode(bad.data(), bad.size(), m, k, out), Error);
  // Out of range: the last high part may point past m.
  bad = buf;
  const uint64_t last_low_bit = (k - 1) * lay.low_bits;
  for (uint32_t j = 0; j < lay.low_bits; ++j) {
    const uint64_t b = last_low_bit + j;
    bad[lay.upper_bytes + (b >> 3)] = static_cast<uint8_t>(bad[lay.upper_bytes + (b >> 3)] | (1u << (b & 7)));
  }
  EXPECT_FALSE(ef_check(bad.data(), bad.size(), m, k, &why));  // 999 | 127 = 1023 >= 1000
  // Encoder input checks.
  std::vector<uint8_t> tmp(64);
  std::vector<uint64_t> unsorted{3, 2};
  EXPECT_THROW(ef_encode(unsorted.data(), 2, 10, tmp.data()), Error);
  std::vector<uint64_t> outside{10};
  EXPECT_THROW(ef_encode(outside.data(), 1, 10, tmp.data()), Error);
  EXPECT_FALSE(ef_check(tmp.data(), 0, 5, 6, &why));  // more positions than the set holds
}
