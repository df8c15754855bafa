#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>

#include "zen/error.hpp"
#include "zen/trace/trace.hpp"

namespace fs = std::filesystem;
using namespace zen::trace;
using zen::DType;

namespace {

std::string fresh_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("zen_trace_io_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

TraceMeta small_meta(DType dt = DType::F32, int64_t D = 1) {
  TraceMeta m;
  m.N = 40;
  m.ranks = 2;
  m.iterations = 3;
  m.dtype = dt;
  m.source = "unit test";
  m.row_width = D;
  return m;
}

void write_json(const std::string& dir, const std::string& text) {
  fs::create_directories(dir);
  std::ofstream(fs::path(dir) / "trace.json") << text;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const zen::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TraceIo, MetaRoundTrip) {
  const std::string dir = fresh_dir("meta");
  TraceMeta m = small_meta(DType::BF16, 4);
  write_meta(dir, m);
  const TraceMeta r = read_meta(dir);
  EXPECT_EQ(r.N, 40);
  EXPECT_EQ(r.ranks, 2);
  EXPECT_EQ(r.iterations, 3);
  EXPECT_EQ(r.dtype, DType::BF16);
  EXPECT_EQ(r.source, "unit test");
  EXPECT_EQ(r.row_width, 4);
  EXPECT_EQ(r.items(), 10);
  fs::remove_all(dir);
}

TEST(TraceIo, RankIterRoundTripAllDtypes) {
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    const std::string dir = fresh_dir(std::string("rt_") + zen::dtype_name(dt));
    const TraceMeta m = small_meta(dt);
    write_meta(dir, m);
    const std::vector<int64_t> idx = {39, 0, 7, 7, 12};  // any order, duplicates allowed
    const std::vector<double> v = {-8, 1.5, 3, -0.25, 8};
    const auto raw = values_from_double(v, dt);
    ASSERT_EQ(raw.size(), v.size() * zen::dtype_size(dt));
    write_rank_iter(dir, m, 1, 2, idx.data(), idx.size(), raw.data());
    const RankIter ri = read_rank_iter(dir, m, 1, 2);
    EXPECT_EQ(ri.idx, idx);
    EXPECT_EQ(ri.values, raw);
    EXPECT_EQ(values_to_double(ri, m), v) << zen::dtype_name(dt);
    EXPECT_EQ(fs::file_size(idx_path(dir, 1, 2)), idx.size() * 8);
    fs::remove_all(dir);
  }
}

TEST(TraceIo, LittleEndianLayoutOnDisk) {
  const std::string dir = fresh_dir("layout");
  const TraceMeta m = small_meta(DType::F16);
  write_meta(dir, m);
  const int64_t idx[1] = {0x21};
  const zen::half h(1.0f);  // 0x3C00
  write_rank_iter(dir, m, 0, 0, idx, 1, &h);
  std::ifstream in(idx_path(dir, 0, 0), std::ios::binary);
  unsigned char b[8];
  in.read(reinterpret_cast<char*>(b), 8);
  EXPECT_EQ(b[0], 0x21);
  for (int i = 1; i < 8; ++i) EXPECT_EQ(b[i], 0);
  std::ifstream vin(val_path(dir, 0, 0), std::ios::binary);
  unsigned char vb[2];
  vin.read(reinterpret_cast<char*>(vb), 2);
  EXPECT_EQ(vb[0], 0x00);
  EXPECT_EQ(vb[1], 0x3C);
  fs::remove_all(dir);
}

TEST(TraceIo, RowWidthExpandAndSort) {
  const std::string dir = fresh_dir("rows");
  const TraceMeta m = small_meta(DType::F32, 4);  // 10 rows of 4
  write_meta(dir, m);
  const std::vector<int64_t> rows = {9, 2};
  const std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 8};
  const auto raw = values_from_double(v, m.dtype);
  write_rank_iter(dir, m, 0, 0, rows.data(), rows.size(), raw.data());
  RankIter ri = read_rank_iter(dir, m, 0, 0);
  const RankIter e = expand_rows(ri, m);
  EXPECT_EQ(e.idx, (std::vector<int64_t>{36, 37, 38, 39, 8, 9, 10, 11}));
  EXPECT_EQ(e.values, ri.values);
  sort_by_index(ri, m);
  EXPECT_EQ(ri.idx, (std::vector<int64_t>{2, 9}));
  EXPECT_EQ(values_to_double(ri, m), (std::vector<double>{5, 6, 7, 8, 1, 2, 3, 4}));
  // Row index 10 is out of range for 10 rows.
  const int64_t bad = 10;
  EXPECT_THROW(write_rank_iter(dir, m, 0, 1, &bad, 1, raw.data()), zen::Error);
  fs::remove_all(dir);
}

TEST(TraceIo, TypedValueView) {
  RankIter ri;
  ri.idx = {1};
  ri.values = values_from_double({2.5}, DType::F64);
  ASSERT_NE(ri.values_as<double>(DType::F64), nullptr);
  EXPECT_EQ(ri.values_as<double>(DType::F64)[0], 2.5);
  EXPECT_THROW(ri.values_as<float>(DType::F64), zen::Error);
}

TEST(TraceIo, EmptyRecordIsValid) {
  const std::string dir = fresh_dir("empty");
  const TraceMeta m = small_meta();
  write_meta(dir, m);
  write_rank_iter(dir, m, 0, 0, nullptr, 0, nullptr);
  const RankIter ri = read_rank_iter(dir, m, 0, 0);
  EXPECT_EQ(ri.count(), 0u);
  EXPECT_TRUE(ri.values.empty());
  fs::remove_all(dir);
}

TEST(TraceIo, RejectsBadMeta) {
  const std::string dir = fresh_dir("badmeta");
  EXPECT_NE(error_of([&] { read_meta(dir); }).find("trace.json"), std::string::npos);  // missing
  write_json(dir, "{\"N\": 10, \"ranks\": 1, \"iterations\": 1, \"dtype\": \"f8\"}");
  EXPECT_NE(error_of([&] { read_meta(dir); }).find("'f8'"), std::string::npos);
  write_json(dir, "{\"N\": 10, \"ranks\": 1, \"iterations\": 1, \"dtype\": \"float\"}");  // only the four names
  EXPECT_NE(error_of([&] { read_meta(dir); }).find("'float'"), std::string::npos);
  write_json(dir, "{\"N\": 10, \"ranks\": 1, \"dtype\": \"f32\"}");
  EXPECT_NE(error_of([&] { read_meta(dir); }).find("iterations"), std::string::npos);
  write_json(dir, "{\"N\": 10, \"ranks\": 1, \"iterations\": 1, \"dtype\": \"f32\", \"row_width\": 3}");
  const std::string e = error_of([&] { read_meta(dir); });
  EXPECT_NE(e.find("10"), std::string::npos);
  EXPECT_NE(e.find("row_width 3"), std::string::npos);
  write_json(dir, "{\"N\": -5, \"ranks\": 1, \"iterations\": 1, \"dtype\": \"f32\"}");
  EXPECT_NE(error_of([&] { read_meta(dir); }).find("-5"), std::string::npos);
  write_json(dir, "{\"N\": 10, \"ranks\": 0, \"iterations\": 1, \"dtype\": \"f32\"}");
  EXPECT_NE(error_of([&] { read_meta(dir); }).find("ranks"), std::string::npos);
  write_json(dir, "{\"N\": 1.5, \"ranks\": 1, \"iterations\": 1, \"dtype\": \"f32\"}");
  EXPECT_NE(error_of([&] { read_meta(dir); }).find("1.5"), std::string::npos);
  write_json(dir, "{\"N\": 10, ");
  EXPECT_NE(error_of([&] { read_meta(dir); }).find("not valid JSON"), std::string::npos);
  TraceMeta m = small_meta();
  m.row_width = 0;
  EXPECT_THROW(write_meta(dir, m), zen::Error);
  fs::remove_all(dir);
}

TEST(TraceIo, RejectsBadFiles) {
  const std::string dir = fresh_dir("badfiles");
  const TraceMeta m = small_meta(DType::F32);
  write_meta(dir, m);
  // Missing files.
  EXPECT_NE(error_of([&] { read_rank_iter(dir, m, 0, 0); }).find("r0_t0.idx"), std::string::npos);
  // Rank / iteration out of range.
  EXPECT_NE(error_of([&] { read_rank_iter(dir, m, 2, 0); }).find("rank 2"), std::string::npos);
  EXPECT_NE(error_of([&] { read_rank_iter(dir, m, 0, 3); }).find("iteration 3"), std::string::npos);
  // Index file not a multiple of 8 bytes.
  std::ofstream(idx_path(dir, 0, 0), std::ios::binary) << "abc";
  std::ofstream(val_path(dir, 0, 0), std::ios::binary) << "";
  EXPECT_NE(error_of([&] { read_rank_iter(dir, m, 0, 0); }).find("multiple of 8"), std::string::npos);
  // Value file size mismatch: 2 indices, 1 value.
  const int64_t idx[2] = {1, 2};
  const float one = 1.0f;
  {
    std::ofstream o(idx_path(dir, 0, 0), std::ios::binary);
    o.write(reinterpret_cast<const char*>(idx), sizeof idx);
    std::ofstream v(val_path(dir, 0, 0), std::ios::binary);
    v.write(reinterpret_cast<const char*>(&one), sizeof one);
  }
  const std::string e = error_of([&] { read_rank_iter(dir, m, 0, 0); });
  EXPECT_NE(e.find("expected 8"), std::string::npos) << e;
  // Out-of-range and negative indices on disk.
  for (int64_t bad : {int64_t{40}, int64_t{-1}}) {
    std::ofstream o(idx_path(dir, 1, 1), std::ios::binary);
    o.write(reinterpret_cast<const char*>(&bad), 8);
    o.close();
    std::ofstream v(val_path(dir, 1, 1), std::ios::binary);
    v.write(reinterpret_cast<const char*>(&one), 4);
    v.close();
    const std::string eb = error_of([&] { read_rank_iter(dir, m, 1, 1); });
    EXPECT_NE(eb.find("index " + std::to_string(bad)), std::string::npos) << eb;
  }
  fs::remove_all(dir);
}
