// The owner's merge of sorted segments (plan::owner_merge, the balanced owner stage when every push
// arrives sorted) against the accumulator over the owner set (plan::owner_accumulate): the same
// pull message, bit for bit (positions and values), for every dtype, row widths 1 and 3, n = 1..4
// segments, 1 and 3 tasks, values that include +0.0, -0.0, subnormals and mixed magnitudes (so a
// wrong order of the sums or a lost sign of zero shows), empty segments, positions 0 and m-1. And
// segments whose keys do not ascend, or reach m, are an error naming the source.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "owner_stage.hpp"

using namespace zen;

namespace {

template <typename T>
T draw(std::mt19937_64& g) {
  switch (g() % 8) {
    case 0: return static_cast<T>(0.0f);
    case 1: return static_cast<T>(-0.0f);
    case 2: return static_cast<T>(std::numeric_limits<float>::denorm_min() * static_cast<float>(g() % 7 + 1));
    case 3: return static_cast<T>(static_cast<float>(static_cast<int64_t>(g() % 2001) - 1000) * 1048576.0f);
    default: return static_cast<T>(static_cast<float>(static_cast<int64_t>(g() % 20001) - 10000) / 7919.0f);
  }
}

struct Segs {
  std::vector<std::vector<uint32_t>> keys;
  std::vector<std::vector<uint8_t>> rows;
  std::vector<plan::Segment> segs;
};

template <typename T>
Segs make(int n, uint64_t m, size_t D, std::mt19937_64& g) {
  Segs s;
  s.keys.resize(static_cast<size_t>(n));
  s.rows.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto& k = s.keys[static_cast<size_t>(r)];
    const uint64_t want = r == 1 ? 0 : g() % (m / 2 + 1);  // segment 1 empty
    std::vector<uint8_t> used(m, 0);
    if (want > 2) used[0] = used[m - 1] = 1;
    for (uint64_t i = 0; i < want; ++i) used[g() % (g() % 2 ? m / 4 + 1 : m)] = 1;  // overlap on a shared quarter
    for (uint64_t q = 0; q < m; ++q)
      if (used[q]) k.push_back(static_cast<uint32_t>(q));
    auto& v = s.rows[static_cast<size_t>(r)];
    v.resize(k.size() * D * sizeof(T));
    for (size_t i = 0; i < k.size() * D; ++i) wire::store_as<T>(v.data() + i * sizeof(T), draw<T>(g));
  }
  for (int r = 0; r < n; ++r)
    s.segs.push_back(plan::Segment{reinterpret_cast<const uint8_t*>(s.keys[static_cast<size_t>(r)].data()),
                                   s.rows[static_cast<size_t>(r)].data(), s.keys[static_cast<size_t>(r)].size()});
  return s;
}

template <typename T>
void same_as_accumulate() {
  std::mt19937_64 g(123);
  for (size_t D : {size_t{1}, size_t{3}})
    for (int n = 1; n <= 4; ++n)
      for (int threads : {1, 3})
        for (uint64_t m : {uint64_t{1}, uint64_t{97}, uint64_t{300000}}) {
          SCOPED_TRACE(std::string(dtype_name(dtype_of<T>::value)) + " D=" + std::to_string(D) + " n=" + std::to_string(n) +
                       " threads=" + std::to_string(threads) + " m=" + std::to_string(m));
          Segs s = make<T>(n, m, D, g);
          detail::ThreadPool pool(threads);
          plan::OwnerState acc, mer;
          const uint64_t K1 = plan::owner_accumulate<T>(acc, s.segs.data(), n, 4, D, m, pool, 0, "test");
          const uint64_t K2 = plan::owner_merge<T>(mer, s.segs.data(), n, 4, D, m, pool, 0, "test");
          ASSERT_EQ(K1, K2);
          for (uint8_t enc : {wire::kEncCoo, wire::kEncEf}) {
            const size_t bytes = wire::index_part_bytes(enc, m, K1, 4) + K1 * D * sizeof(T);
            std::vector<uint8_t> a(bytes + 1, 0xAB), b(bytes + 1, 0xAB);
            plan::owner_write<T>(acc, 4, D, enc, a.data(), pool);
            plan::owner_write<T>(mer, 4, D, enc, b.data(), pool);
            ASSERT_EQ(a, b) << "encoding " << static_cast<int>(enc);
            if (enc == wire::kEncCoo) {  // the accumulator's presence bits were cleared: run it again
              plan::owner_accumulate<T>(acc, s.segs.data(), n, 4, D, m, pool, 0, "test");
              plan::owner_merge<T>(mer, s.segs.data(), n, 4, D, m, pool, 0, "test");
            }
          }
        }
}

}  // namespace

TEST(OwnerMerge, SameBitsAsAccumulateF32) { same_as_accumulate<float>(); }
TEST(OwnerMerge, SameBitsAsAccumulateF64) { same_as_accumulate<double>(); }
TEST(OwnerMerge, SameBitsAsAccumulateBF16) { same_as_accumulate<bfloat16>(); }
TEST(OwnerMerge, SameBitsAsAccumulateF16) { same_as_accumulate<half>(); }

TEST(OwnerMerge, KeysThatDoNotAscendOrReachTheSetSizeNameTheSource) {
  detail::ThreadPool pool(2);
  plan::OwnerState st;
  const std::vector<float> v(8, 1.0f);
  const auto* rows = reinterpret_cast<const uint8_t*>(v.data());
  struct Case {
    std::vector<uint32_t> bad;
    const char* what;
  };
  for (const Case& c : {Case{{1, 5, 5, 7}, "repeated"}, Case{{1, 6, 3, 7}, "descending"}, Case{{1, 2, 3, 10}, "m"}}) {
    SCOPED_TRACE(c.what);
    const std::vector<uint32_t> good{0, 2, 4, 9};
    plan::Segment segs[3] = {{reinterpret_cast<const uint8_t*>(good.data()), rows, 4},
                             {reinterpret_cast<const uint8_t*>(good.data()), rows, 4},
                             {reinterpret_cast<const uint8_t*>(c.bad.data()), rows, 4}};
    try {
      plan::owner_merge<float>(st, segs, 3, 4, 1, 10, pool, 1, "balanced");
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Result::InvalidUsage);
      EXPECT_NE(std::string(e.what()).find("rank 1 balanced push: peer 2 sent positions that are not strictly increasing"),
                std::string::npos)
          << e.what();
    }
  }
}
