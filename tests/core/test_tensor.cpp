#include <gtest/gtest.h>

#include "zen/detail/parse.hpp"
#include "zen/error.hpp"
#include "zen/tensor.hpp"

using namespace zen;

TEST(Tensor, ValidateNamesRankOpAndValue) {
  SparseTensor t(100, DType::F32, 4);  // 25 rows
  t.indices = {0, 24, 25};
  t.values.resize(3 * 4 * 4);
  try {
    validate(t.view(), 3, "allreduce_sparse");
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("rank 3"), std::string::npos) << m;
    EXPECT_NE(m.find("allreduce_sparse"), std::string::npos) << m;
    EXPECT_NE(m.find("index 25"), std::string::npos) << m;
  }
  t.indices = {0, 24, -1};
  EXPECT_THROW(validate(t.view(), 0, "x"), Error);
  t.indices = {0, 24, 3};
  EXPECT_NO_THROW(validate(t.view(), 0, "x"));
  SparseTensor odd(10, DType::F32, 3);
  EXPECT_THROW(validate(odd.view(), 0, "x"), Error);
  // int32 indices cannot address 2^31 rows or more.
  SparseView v;
  v.dense_len = 1ULL << 32;
  v.index_type = IndexType::I32;
  EXPECT_THROW(validate(v, 0, "x"), Error);
}

TEST(Tensor, CoalesceSumsDuplicatesInOrder) {
  SparseTensor t(10, DType::F32, 2);
  t.indices = {7, 0, 7, 9, 0};
  std::vector<float> v{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  t.values.assign(reinterpret_cast<uint8_t*>(v.data()), reinterpret_cast<uint8_t*>(v.data()) + 40);
  EXPECT_TRUE(coalesce(t));
  ASSERT_EQ(t.indices, (std::vector<int64_t>{0, 7, 9}));
  const float* o = t.vals<float>();
  EXPECT_EQ(o[0], 3 + 9);
  EXPECT_EQ(o[1], 4 + 10);
  EXPECT_EQ(o[2], 1 + 5);
  EXPECT_EQ(o[3], 2 + 6);
  EXPECT_EQ(o[4], 7);
  EXPECT_FALSE(coalesce(t));
}

TEST(Tensor, DenseRoundTripAllDtypes) {
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> dense(12, T(0));
      dense[0] = T(1);
      dense[11] = T(-2);
      dense[5] = T(3);
      auto s = dense_to_sparse(dense.data(), 12, dt, 1);
      EXPECT_EQ(s.indices, (std::vector<int64_t>{0, 5, 11}));
      std::vector<T> back(12, T(0));
      scatter_add(s.view(), back.data());
      for (int i = 0; i < 12; ++i) EXPECT_EQ(static_cast<float>(back[i]), static_cast<float>(dense[i]));
      auto rows = dense_to_sparse(dense.data(), 12, dt, 4);
      EXPECT_EQ(rows.indices, (std::vector<int64_t>{0, 1, 2}));
    });
  }
}

// The number-list rule shared by zen_perf's --auto-cpu and the orbit server spec.
TEST(ParseDoubles, WholeFiniteFieldsOnly) {
  using zen::detail::parse_doubles;
  EXPECT_EQ(parse_doubles("1.5", ',', "x"), std::vector<double>({1.5}));
  EXPECT_EQ(parse_doubles("-33.9,18.4,20", ',', "x"), std::vector<double>({-33.9, 18.4, 20.0}));
  EXPECT_EQ(parse_doubles("2e-9/0/1e-8", '/', "x"), std::vector<double>({2e-9, 0.0, 1e-8}));
  for (const char* bad : {"", "1x", "1,", ",1", "1,,2", "abc", "inf", "nan", "1e999", " "}) {
    try {
      parse_doubles(bad, ',', "the list");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const zen::Error& e) {
      EXPECT_EQ(e.code(), zen::Result::InvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find("the list"), std::string::npos) << bad;
    }
  }
}
