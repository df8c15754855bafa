#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fl_test_util.hpp"
#include "zen/error.hpp"
#include "zen/fl/dataset.hpp"
#include "zen/fl/idx.hpp"

namespace zen::fl {
namespace {

using test::temp_path;
using test::tiny_dir;

void write_plain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// Expects fn() to throw zen::Error with `code` whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& fn, Result code, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
        << "message '" << e.what() << "' lacks '" << p << "'";
  }
}

IdxImages small_images() {
  IdxImages img;
  img.count = 3;
  img.rows = 2;
  img.cols = 4;
  for (int i = 0; i < 24; ++i) img.pixels.push_back(uint8_t(i * 11));
  return img;
}

TEST(Idx, ReadsTinyTrainSample) {
  const IdxImages img = read_idx_images(tiny_dir() + "/train-images-idx3-ubyte.gz");
  EXPECT_EQ(img.count, 200u);
  EXPECT_EQ(img.rows, 28u);
  EXPECT_EQ(img.cols, 28u);
  ASSERT_EQ(img.pixels.size(), 200u * 784u);
  const auto labels = read_idx_labels(tiny_dir() + "/train-labels-idx1-ubyte.gz");
  ASSERT_EQ(labels.size(), 200u);
  // First labels of the Fashion-MNIST training set: ankle boot, T-shirt, T-shirt, dress, ...
  EXPECT_EQ(std::vector<uint8_t>(labels.begin(), labels.begin() + 8),
            (std::vector<uint8_t>{9, 0, 0, 3, 0, 2, 7, 2}));
  size_t nonzero = 0;
  for (uint8_t p : img.pixels) nonzero += p != 0;
  EXPECT_GT(nonzero, img.pixels.size() / 4);
}

TEST(Idx, ReadsTinyTestSample) {
  const auto labels = read_idx_labels(tiny_dir() + "/t10k-labels-idx1-ubyte.gz");
  ASSERT_EQ(labels.size(), 100u);
  EXPECT_EQ(std::vector<uint8_t>(labels.begin(), labels.begin() + 8),
            (std::vector<uint8_t>{9, 2, 1, 1, 6, 1, 4, 6}));
  EXPECT_EQ(read_idx_images(tiny_dir() + "/t10k-images-idx3-ubyte.gz").count, 100u);
}

TEST(Idx, EncodeParseRoundTrip) {
  const IdxImages img = small_images();
  const auto bytes = encode_idx_images(img);
  ASSERT_EQ(bytes.size(), 16u + 24u);
  EXPECT_EQ(bytes[2], 0x08);
  EXPECT_EQ(bytes[3], 0x03);
  EXPECT_EQ(bytes[7], 3);  // big-endian count
  const IdxImages back = parse_idx_images(bytes, "mem");
  EXPECT_EQ(back.count, 3u);
  EXPECT_EQ(back.rows, 2u);
  EXPECT_EQ(back.cols, 4u);
  EXPECT_EQ(back.pixels, img.pixels);
  const std::vector<uint8_t> labels{0, 9, 4};
  EXPECT_EQ(parse_idx_labels(encode_idx_labels(labels), "mem"), labels);
}

TEST(Idx, GzipAndPlainFilesReadAlike) {
  const auto bytes = encode_idx_images(small_images());
  const std::string gz = temp_path("img.gz"), plain = temp_path("img");
  write_gzip(gz, bytes);
  write_plain(plain, bytes);
  EXPECT_EQ(read_maybe_gzip(gz), bytes);
  EXPECT_EQ(read_maybe_gzip(plain), bytes);
  EXPECT_EQ(read_idx_images(gz).pixels, small_images().pixels);
  std::remove(gz.c_str());
  std::remove(plain.c_str());
}

TEST(Idx, WrongMagicNamesFileAndValue) {
  const std::string path = temp_path("labels-as-images.gz");
  write_gzip(path, encode_idx_labels({1, 2, 3}));
  expect_error([&] { read_idx_images(path); }, Result::InvalidArgument,
               {path, "0x00000801", "0x00000803"});
  auto bytes = encode_idx_images(small_images());
  bytes[3] = 0x0D;  // float IDX
  expect_error([&] { parse_idx_images(bytes, "some.idx"); }, Result::InvalidArgument,
               {"some.idx", "0x0000080D"});
  std::remove(path.c_str());
}

TEST(Idx, SizeMismatchNamesCounts) {
  auto bytes = encode_idx_images(small_images());
  bytes.pop_back();
  expect_error([&] { parse_idx_images(bytes, "short.idx"); }, Result::InvalidArgument,
               {"short.idx", "23", "24"});
  auto lab = encode_idx_labels({1, 2, 3});
  lab.push_back(4);
  expect_error([&] { parse_idx_labels(lab, "long.idx"); }, Result::InvalidArgument,
               {"long.idx", "4 data bytes", "3"});
  expect_error([&] { parse_idx_labels({0, 0, 8}, "tiny.idx"); }, Result::InvalidArgument,
               {"tiny.idx", "3 bytes"});
  std::vector<uint8_t> hdr{0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 28};
  expect_error([&] { parse_idx_images(hdr, "zero.idx"); }, Result::InvalidArgument,
               {"zero.idx", "dimension 1 = 0"});
}

TEST(Idx, MissingFileIsSystemError) {
  const std::string path = temp_path("does-not-exist.gz");
  expect_error([&] { read_idx_labels(path); }, Result::SystemError, {path});
}

TEST(Idx, TruncatedGzipStreamFails) {
  const std::string full = temp_path("full.gz"), cut = temp_path("cut.gz");
  std::vector<uint8_t> big(200000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t((i * 2654435761u) >> 13);
  write_gzip(full, big);
  std::ifstream in(full, std::ios::binary);
  std::vector<uint8_t> gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(gz.size(), 1000u);
  gz.resize(gz.size() / 2);
  write_plain(cut, gz);
  expect_error([&] { read_maybe_gzip(cut); }, Result::SystemError, {cut});
  std::remove(full.c_str());
  std::remove(cut.c_str());
}

TEST(Idx, DatasetCountMismatchNamesBothFiles) {
  const std::string img = tiny_dir() + "/train-images-idx3-ubyte.gz";
  const std::string lab = tiny_dir() + "/t10k-labels-idx1-ubyte.gz";
  expect_error([&] { load_idx_dataset(img, lab); }, Result::InvalidArgument,
               {img, lab, "200", "100"});
}

TEST(Idx, DatasetLabelOutOfRangeNamesValue) {
  const std::string img = temp_path("img.gz"), lab = temp_path("lab.gz");
  write_gzip(img, encode_idx_images(small_images()));
  write_gzip(lab, encode_idx_labels({3, 10, 2}));
  expect_error([&] { load_idx_dataset(img, lab); }, Result::InvalidArgument,
               {lab, "label 10", "sample 1"});
  std::remove(img.c_str());
  std::remove(lab.c_str());
}

TEST(Dataset, PixelsScaledToUnitInterval) {
  const IdxImages img = read_idx_images(tiny_dir() + "/train-images-idx3-ubyte.gz");
  const Dataset& d = test::tiny_train();
  ASSERT_EQ(d.size(), 200u);
  EXPECT_EQ(d.dim, 784);
  EXPECT_EQ(d.num_classes, 10);
  ASSERT_EQ(d.x.size(), img.pixels.size());
  float lo = 1, hi = 0;
  for (size_t i = 0; i < d.x.size(); ++i) {
    ASSERT_FLOAT_EQ(d.x[i], float(img.pixels[i]) / 255.0f) << "pixel " << i;
    lo = std::min(lo, d.x[i]);
    hi = std::max(hi, d.x[i]);
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
  EXPECT_NO_THROW(d.validate());
}

TEST(Dataset, LimitAndSubset) {
  const Dataset d = load_fashion_mnist(tiny_dir(), "train", 50);
  ASSERT_EQ(d.size(), 50u);
  const Dataset s = test::tiny_train().subset({7, 3});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.y[0], test::tiny_train().y[7]);
  EXPECT_EQ(s.x[783 + 784], test::tiny_train().x[3 * 784 + 783]);
  EXPECT_THROW(test::tiny_train().subset({200}), Error);
  EXPECT_THROW(load_fashion_mnist(tiny_dir(), "valid"), Error);
}

}  // namespace
}  // namespace zen::fl
