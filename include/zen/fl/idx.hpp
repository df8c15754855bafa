#pragma once
// IDX file reader (the MNIST / Fashion-MNIST container format).
//
// Layout (all integers big-endian): magic = 0x00 0x00 <type> <ndim>, then ndim uint32 sizes, then
// the data. zen reads unsigned-byte IDX only: images have magic 0x00000803 (N x rows x cols) and
// labels 0x00000801 (N). Files may be gzip-compressed or plain; zlib detects which.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zen::fl {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803u;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801u;

/// Unsigned-byte images, row-major: pixel (i, r, c) is pixels[(i*rows + r)*cols + c].
struct IdxImages {
  uint32_t count = 0;
  uint32_t rows = 0;
  uint32_t cols = 0;
  std::vector<uint8_t> pixels;
};

/// Whole content of a file, gunzipped when it is gzip data (plain files pass through unchanged).
/// Throws zen::Error(SystemError) naming the path when it cannot be opened or decompressed.
std::vector<uint8_t> read_maybe_gzip(const std::string& path);

/// Parse an in-memory IDX image file. `source` names the data in error messages (usually the path).
/// Throws zen::Error(InvalidArgument) on a wrong magic number, a zero dimension, or a size that
/// does not match the header; the message names the source and the offending value.
IdxImages parse_idx_images(const std::vector<uint8_t>& bytes, const std::string& source);
/// Parse an in-memory IDX label file (see parse_idx_images for the errors).
std::vector<uint8_t> parse_idx_labels(const std::vector<uint8_t>& bytes, const std::string& source);

/// Read (and gunzip) an IDX image / label file.
IdxImages read_idx_images(const std::string& path);
std::vector<uint8_t> read_idx_labels(const std::string& path);

/// Serialize to IDX bytes (uncompressed); parse_idx_* of the result returns the input.
std::vector<uint8_t> encode_idx_images(const IdxImages& images);
std::vector<uint8_t> encode_idx_labels(const std::vector<uint8_t>& labels);

/// Write bytes gzip-compressed (level 9) to path. Throws zen::Error(SystemError) naming the path.
void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace zen::fl
