#include "zen/trace/trace.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "zen/error.hpp"

namespace fs = std::filesystem;

namespace zen::trace {
namespace {

static_assert(sizeof(int64_t) == 8, "int64 must be 8 bytes");

bool host_is_little_endian() {
  const uint16_t one = 1;
  uint8_t b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

void require_little_endian() {
  ZEN_CHECK_CODE(host_is_little_endian(), Result::Unsupported,
                 "trace files are little-endian; big-endian hosts are not supported");
}

DType strict_dtype(const std::string& s) {
  if (s == "f32") return DType::F32;
  if (s == "f64") return DType::F64;
  if (s == "f16") return DType::F16;
  if (s == "bf16") return DType::BF16;
  ZEN_THROW(Result::InvalidArgument, "trace.json: dtype '" + s + "' is not one of f32, f64, f16, bf16");
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  ZEN_CHECK_CODE(in.good(), Result::InvalidArgument, "cannot open trace file '" + path + "'");
  const std::streamoff size = in.tellg();
  ZEN_CHECK_CODE(size >= 0, Result::SystemError, "cannot size trace file '" + path + "'");
  std::vector<uint8_t> buf(static_cast<size_t>(size));
  in.seekg(0);
  if (size > 0) in.read(reinterpret_cast<char*>(buf.data()), size);
  ZEN_CHECK_CODE(in.good() || in.eof(), Result::SystemError, "read error on trace file '" + path + "'");
  return buf;
}

void write_file(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  ZEN_CHECK_CODE(out.good(), Result::SystemError, "cannot create trace file '" + path + "'");
  if (bytes > 0) out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  out.close();
  ZEN_CHECK_CODE(!out.fail(), Result::SystemError, "write error on trace file '" + path + "'");
}

void check_rank_iter(const TraceMeta& meta, int r, int t) {
  ZEN_ENFORCE(r >= 0 && r < meta.ranks,
              "trace rank " + std::to_string(r) + " out of range [0, " + std::to_string(meta.ranks) + ")");
  ZEN_ENFORCE(t >= 0 && t < meta.iterations, "trace iteration " + std::to_string(t) + " out of range [0, " +
                                                  std::to_string(meta.iterations) + ")");
}

void check_indices(const int64_t* idx, size_t count, const TraceMeta& meta, const std::string& where) {
  const int64_t items = meta.items();
  for (size_t i = 0; i < count; ++i) {
    if (idx[i] < 0 || idx[i] >= items) {
      ZEN_THROW(Result::InvalidArgument,
                where + ": index " + std::to_string(idx[i]) + " at position " + std::to_string(i) +
                    " out of range [0, " + std::to_string(items) + ")" +
                    (meta.row_width > 1 ? " (row indices, row_width " + std::to_string(meta.row_width) + ")"
                                        : std::string()));
    }
  }
}

}  // namespace

void validate_meta(const TraceMeta& m) {
  ZEN_ENFORCE(m.N > 0, "trace: N must be positive, got " + std::to_string(m.N));
  ZEN_ENFORCE(m.ranks > 0, "trace: ranks must be positive, got " + std::to_string(m.ranks));
  ZEN_ENFORCE(m.iterations > 0, "trace: iterations must be positive, got " + std::to_string(m.iterations));
  ZEN_ENFORCE(m.row_width > 0, "trace: row_width must be positive, got " + std::to_string(m.row_width));
  ZEN_ENFORCE(m.N % m.row_width == 0, "trace: N = " + std::to_string(m.N) + " is not divisible by row_width " +
                                          std::to_string(m.row_width));
  ZEN_ENFORCE(dtype_size(m.dtype) != 0, "trace: invalid dtype code " + std::to_string(int(m.dtype)));
}

TraceMeta read_meta(const std::string& dir) {
  const std::string path = (fs::path(dir) / "trace.json").string();
  std::ifstream in(path);
  ZEN_CHECK_CODE(in.good(), Result::InvalidArgument, "cannot open '" + path + "' (not a trace directory?)");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    ZEN_THROW(Result::InvalidArgument, "'" + path + "' is not valid JSON: " + e.what());
  }
  ZEN_ENFORCE(j.is_object(), "'" + path + "' must hold a JSON object");
  auto need_int = [&](const char* key) -> int64_t {
    ZEN_ENFORCE(j.contains(key), "'" + path + "': missing field \"" + key + "\"");
    const auto& v = j.at(key);
    ZEN_ENFORCE(v.is_number_integer(), "'" + path + "': field \"" + key + "\" must be an integer, got " + v.dump());
    return v.get<int64_t>();
  };
  TraceMeta m;
  m.N = need_int("N");
  const int64_t ranks = need_int("ranks"), iters = need_int("iterations");
  ZEN_ENFORCE(ranks > 0 && ranks <= (1 << 20), "'" + path + "': ranks = " + std::to_string(ranks) + " out of range");
  ZEN_ENFORCE(iters > 0 && iters <= (1LL << 30),
              "'" + path + "': iterations = " + std::to_string(iters) + " out of range");
  m.ranks = static_cast<int>(ranks);
  m.iterations = static_cast<int>(iters);
  ZEN_ENFORCE(j.contains("dtype") && j.at("dtype").is_string(), "'" + path + "': missing string field \"dtype\"");
  m.dtype = strict_dtype(j.at("dtype").get<std::string>());
  if (j.contains("source")) {
    ZEN_ENFORCE(j.at("source").is_string(), "'" + path + "': field \"source\" must be a string");
    m.source = j.at("source").get<std::string>();
  }
  if (j.contains("row_width")) m.row_width = need_int("row_width");
  try {
    validate_meta(m);
  } catch (const Error& e) {
    ZEN_THROW(Result::InvalidArgument, "'" + path + "': " + e.what());
  }
  return m;
}

void write_meta(const std::string& dir, const TraceMeta& m) {
  validate_meta(m);
  std::error_code ec;
  fs::create_directories(dir, ec);
  ZEN_CHECK_CODE(!ec, Result::SystemError, "cannot create trace directory '" + dir + "': " + ec.message());
  nlohmann::json j;
  j["N"] = m.N;
  j["ranks"] = m.ranks;
  j["iterations"] = m.iterations;
  j["dtype"] = dtype_name(m.dtype);
  j["source"] = m.source;
  if (m.row_width != 1) j["row_width"] = m.row_width;
  const std::string s = j.dump(2) + "\n";
  write_file((fs::path(dir) / "trace.json").string(), s.data(), s.size());
}

std::string idx_path(const std::string& dir, int r, int t) {
  return (fs::path(dir) / ("r" + std::to_string(r) + "_t" + std::to_string(t) + ".idx")).string();
}
std::string val_path(const std::string& dir, int r, int t) {
  return (fs::path(dir) / ("r" + std::to_string(r) + "_t" + std::to_string(t) + ".val")).string();
}

std::vector<int64_t> read_rank_indices(const std::string& dir, const TraceMeta& meta, int r, int t) {
  require_little_endian();
  check_rank_iter(meta, r, t);
  const std::string ip = idx_path(dir, r, t);
  const std::vector<uint8_t> raw = read_file(ip);
  ZEN_ENFORCE(raw.size() % 8 == 0, "'" + ip + "': size " + std::to_string(raw.size()) +
                                       " bytes is not a multiple of 8 (int64 indices)");
  std::vector<int64_t> idx(raw.size() / 8);
  if (!raw.empty()) std::memcpy(idx.data(), raw.data(), raw.size());
  check_indices(idx.data(), idx.size(), meta, "'" + ip + "'");
  return idx;
}

RankIter read_rank_iter(const std::string& dir, const TraceMeta& meta, int r, int t) {
  RankIter ri;
  ri.idx = read_rank_indices(dir, meta, r, t);
  const std::string vp = val_path(dir, r, t);
  ri.values = read_file(vp);
  const size_t want = ri.idx.size() * static_cast<size_t>(meta.row_width) * dtype_size(meta.dtype);
  ZEN_ENFORCE(ri.values.size() == want,
              "'" + vp + "': size " + std::to_string(ri.values.size()) + " bytes, expected " + std::to_string(want) +
                  " (" + std::to_string(ri.idx.size()) + " indices x row_width " + std::to_string(meta.row_width) +
                  " x " + std::to_string(dtype_size(meta.dtype)) + " bytes of " + dtype_name(meta.dtype) + ")");
  return ri;
}

void write_rank_iter(const std::string& dir, const TraceMeta& meta, int r, int t, const int64_t* idx, size_t count,
                     const void* values) {
  require_little_endian();
  validate_meta(meta);
  check_rank_iter(meta, r, t);
  check_indices(idx, count, meta, "write_rank_iter(r" + std::to_string(r) + ", t" + std::to_string(t) + ")");
  const size_t vbytes = count * static_cast<size_t>(meta.row_width) * dtype_size(meta.dtype);
  ZEN_ENFORCE(count == 0 || (idx != nullptr && values != nullptr), "write_rank_iter: null index or value pointer");
  write_file(idx_path(dir, r, t), idx, count * sizeof(int64_t));
  write_file(val_path(dir, r, t), values, vbytes);
}

RankIter expand_rows(const RankIter& ri, const TraceMeta& meta) {
  const int64_t D = meta.row_width;
  if (D == 1) return ri;
  const size_t w = dtype_size(meta.dtype);
  ZEN_ENFORCE(ri.values.size() == ri.idx.size() * D * w, "expand_rows: value bytes do not match count x row_width");
  RankIter out;
  out.idx.resize(ri.idx.size() * D);
  for (size_t i = 0; i < ri.idx.size(); ++i)
    for (int64_t c = 0; c < D; ++c) out.idx[i * D + c] = ri.idx[i] * D + c;
  out.values = ri.values;  // row-major: row i's D values are already consecutive
  return out;
}

void sort_by_index(RankIter& ri, const TraceMeta& meta) {
  const size_t n = ri.idx.size();
  const size_t rowb = static_cast<size_t>(meta.row_width) * dtype_size(meta.dtype);
  ZEN_ENFORCE(ri.values.size() == n * rowb, "sort_by_index: value bytes do not match count x row_width");
  if (std::is_sorted(ri.idx.begin(), ri.idx.end())) return;
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), size_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](size_t a, size_t b) { return ri.idx[a] < ri.idx[b]; });
  std::vector<int64_t> idx(n);
  std::vector<uint8_t> vals(ri.values.size());
  for (size_t i = 0; i < n; ++i) {
    idx[i] = ri.idx[perm[i]];
    std::memcpy(vals.data() + i * rowb, ri.values.data() + perm[i] * rowb, rowb);
  }
  ri.idx.swap(idx);
  ri.values.swap(vals);
}

std::vector<double> values_to_double(const RankIter& ri, const TraceMeta& meta) {
  const size_t w = dtype_size(meta.dtype);
  ZEN_ENFORCE(ri.values.size() % w == 0, "values_to_double: value bytes not a multiple of the dtype size");
  const size_t n = ri.values.size() / w;
  std::vector<double> out(n);
  dispatch_dtype(meta.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, ri.values.data() + i * sizeof(T), sizeof(T));
      out[i] = static_cast<double>(v);
    }
  });
  return out;
}

std::vector<uint8_t> values_from_double(const std::vector<double>& v, DType dtype) {
  std::vector<uint8_t> out(v.size() * dtype_size(dtype));
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < v.size(); ++i) {
      const T x = static_cast<T>(v[i]);
      std::memcpy(out.data() + i * sizeof(T), &x, sizeof(T));
    }
  });
  return out;
}

}  // namespace zen::trace
