#include "zen/fl/idx.hpp"

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>

#include <zlib.h>

#include "zen/error.hpp"

namespace zen::fl {
namespace {

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  out.push_back(uint8_t(v >> 24));
  out.push_back(uint8_t(v >> 16));
  out.push_back(uint8_t(v >> 8));
  out.push_back(uint8_t(v));
}

// Checks the header of an unsigned-byte IDX file with `ndim` dimensions and returns the sizes.
std::vector<uint32_t> parse_header(const std::vector<uint8_t>& bytes, const std::string& source,
                                   uint32_t expected_magic, const char* what) {
  const size_t ndim = expected_magic & 0xFFu;
  const size_t header = 4 + 4 * ndim;
  ZEN_ENFORCE(bytes.size() >= 4, "IDX " + std::string(what) + " file '" + source + "' is only " +
                                     std::to_string(bytes.size()) + " bytes long (no magic number)");
  const uint32_t magic = be32(bytes.data());
  ZEN_ENFORCE(magic == expected_magic,
              "IDX " + std::string(what) + " file '" + source + "' has magic number " + hex32(magic) +
                  ", expected " + hex32(expected_magic));
  ZEN_ENFORCE(bytes.size() >= header,
              "IDX " + std::string(what) + " file '" + source + "' is " +
                  std::to_string(bytes.size()) + " bytes long, shorter than its " +
                  std::to_string(header) + "-byte header");
  std::vector<uint32_t> dims(ndim);
  size_t payload = 1;
  for (size_t d = 0; d < ndim; ++d) {
    dims[d] = be32(bytes.data() + 4 + 4 * d);
    ZEN_ENFORCE(d == 0 || dims[d] > 0, "IDX " + std::string(what) + " file '" + source +
                                           "' has dimension " + std::to_string(d) + " = 0");
    ZEN_ENFORCE(dims[d] == 0 || payload <= (size_t(1) << 48) / dims[d],
                "IDX " + std::string(what) + " file '" + source + "' announces an absurd size (dimension " +
                    std::to_string(d) + " = " + std::to_string(dims[d]) + ")");
    payload *= dims[d];
  }
  ZEN_ENFORCE(bytes.size() == header + payload,
              "IDX " + std::string(what) + " file '" + source + "' holds " +
                  std::to_string(bytes.size() - header) + " data bytes, header announces " +
                  std::to_string(payload));
  return dims;
}

}  // namespace

std::vector<uint8_t> read_maybe_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) {
    ZEN_THROW(Result::SystemError,
              "cannot open '" + path + "': " + (errno ? std::strerror(errno) : "zlib gzopen failed"));
  }
  gzbuffer(f, 1 << 17);
  std::vector<uint8_t> out;
  constexpr size_t kChunk = 1 << 20;
  for (;;) {
    const size_t old = out.size();
    out.resize(old + kChunk);
    const int got = gzread(f, out.data() + old, static_cast<unsigned>(kChunk));
    if (got < 0) {
      int code = 0;
      const std::string msg = gzerror(f, &code);
      gzclose(f);
      ZEN_THROW(Result::SystemError, "cannot decompress '" + path + "': " + msg);
    }
    out.resize(old + static_cast<size_t>(got));
    if (got == 0) break;
  }
  // gzread stops quietly at a truncated gzip stream; gzclose_r reports it.
  int code = 0;
  const char* msg = gzerror(f, &code);
  std::string err = (code != Z_OK && code != Z_STREAM_END && msg) ? msg : "";
  const int rc = gzclose_r(f);
  if (!err.empty() || (rc != Z_OK && rc != Z_BUF_ERROR)) {
    ZEN_THROW(Result::SystemError, "cannot decompress '" + path + "': " +
                                       (err.empty() ? "zlib error " + std::to_string(rc) : err));
  }
  if (rc == Z_BUF_ERROR) {
    ZEN_THROW(Result::SystemError, "cannot decompress '" + path + "': truncated gzip stream");
  }
  return out;
}

IdxImages parse_idx_images(const std::vector<uint8_t>& bytes, const std::string& source) {
  const auto dims = parse_header(bytes, source, kIdxImagesMagic, "image");
  IdxImages img;
  img.count = dims[0];
  img.rows = dims[1];
  img.cols = dims[2];
  img.pixels.assign(bytes.begin() + 16, bytes.end());
  return img;
}

std::vector<uint8_t> parse_idx_labels(const std::vector<uint8_t>& bytes, const std::string& source) {
  parse_header(bytes, source, kIdxLabelsMagic, "label");
  return std::vector<uint8_t>(bytes.begin() + 8, bytes.end());
}

IdxImages read_idx_images(const std::string& path) {
  return parse_idx_images(read_maybe_gzip(path), path);
}

std::vector<uint8_t> read_idx_labels(const std::string& path) {
  return parse_idx_labels(read_maybe_gzip(path), path);
}

std::vector<uint8_t> encode_idx_images(const IdxImages& images) {
  const size_t expect = size_t(images.count) * images.rows * images.cols;
  ZEN_ENFORCE(images.pixels.size() == expect,
              "encode_idx_images: " + std::to_string(images.pixels.size()) + " pixels for " +
                  std::to_string(images.count) + " images of " + std::to_string(images.rows) + "x" +
                  std::to_string(images.cols));
  std::vector<uint8_t> out;
  out.reserve(16 + expect);
  put_be32(out, kIdxImagesMagic);
  put_be32(out, images.count);
  put_be32(out, images.rows);
  put_be32(out, images.cols);
  out.insert(out.end(), images.pixels.begin(), images.pixels.end());
  return out;
}

std::vector<uint8_t> encode_idx_labels(const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> out;
  out.reserve(8 + labels.size());
  put_be32(out, kIdxLabelsMagic);
  put_be32(out, static_cast<uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb9");
  if (!f) {
    ZEN_THROW(Result::SystemError,
              "cannot create '" + path + "': " + (errno ? std::strerror(errno) : "zlib gzopen failed"));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes.size() - done, 1u << 20));
    if (gzwrite(f, bytes.data() + done, chunk) != static_cast<int>(chunk)) {
      int code = 0;
      const std::string msg = gzerror(f, &code);
      gzclose(f);
      ZEN_THROW(Result::SystemError, "cannot write '" + path + "': " + msg);
    }
    done += chunk;
  }
  if (gzclose(f) != Z_OK) ZEN_THROW(Result::SystemError, "cannot finish '" + path + "'");
}

}  // namespace zen::fl
