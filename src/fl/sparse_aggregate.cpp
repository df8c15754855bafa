// Compressed FedAvg updates (sparse_aggregate.hpp).
#include "zen/fl/sparse_aggregate.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "zen/encode/bitmap.hpp"
#include "zen/encode/elias_fano.hpp"
#include "byte_io.hpp"
#include "zen/error.hpp"

namespace zen::fl {

namespace {
constexpr uint32_t kMagic = 0x4153465Au;  // "ZFSA" little-endian
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 4 + 4 + 8 + 8 + 8 + 4 + 4 + 8;
enum : uint32_t { kEliasFano = 0, kBitmap = 1 };

uint32_t index_encoding(uint64_t dim, uint64_t k) {
  return encode::ef_bytes(dim, k) <= encode::bitmap_bytes(dim) ? kEliasFano : kBitmap;
}
size_t index_bytes(uint64_t dim, uint64_t k) {
  return std::min(encode::ef_bytes(dim, k), encode::bitmap_bytes(dim));
}
using detail::get;
using detail::put;
}  // namespace

size_t SparseAggregate::wire_bytes(uint64_t dim, uint64_t k, size_t num_members) {
  return kHeader + num_members * sizeof(int32_t) + index_bytes(dim, k) + k * sizeof(float);
}

std::vector<uint8_t> SparseAggregate::to_bytes() const {
  ZEN_ENFORCE(positions.size() == values.size() && positions.size() <= dim,
              "SparseAggregate::to_bytes: " + std::to_string(positions.size()) + " positions, " +
                  std::to_string(values.size()) + " values, dim " + std::to_string(dim));
  const uint64_t k = positions.size();
  std::vector<uint8_t> out;
  out.reserve(wire_bytes(dim, k, members.size()));
  put(out, kMagic);
  put(out, kVersion);
  put(out, dim);
  put(out, k);
  put(out, uint64_t(members.size()));
  const uint32_t enc = index_encoding(dim, k);
  put(out, enc);
  put(out, uint32_t(0));
  put(out, weight);
  for (int m : members) put(out, int32_t(m));
  const size_t at = out.size();
  out.resize(at + index_bytes(dim, k), 0);
  if (enc == kEliasFano) encode::ef_encode(positions.data(), k, dim, out.data() + at);
  else encode::bitmap_encode(positions.data(), k, dim, out.data() + at);
  const auto* v = reinterpret_cast<const uint8_t*>(values.data());
  out.insert(out.end(), v, v + k * sizeof(float));
  return out;
}

SparseAggregate SparseAggregate::from_bytes(const uint8_t* data, size_t n) {
  ZEN_ENFORCE(n >= kHeader, "SparseAggregate::from_bytes: " + std::to_string(n) + " bytes, shorter than the " +
                                std::to_string(kHeader) + "-byte header");
  ZEN_ENFORCE(get<uint32_t>(data) == kMagic, "SparseAggregate::from_bytes: bad magic");
  ZEN_ENFORCE(get<uint32_t>(data + 4) == kVersion,
              "SparseAggregate::from_bytes: unsupported version " + std::to_string(get<uint32_t>(data + 4)));
  SparseAggregate a;
  a.dim = get<uint64_t>(data + 8);
  const uint64_t k = get<uint64_t>(data + 16), nm = get<uint64_t>(data + 24);
  const uint32_t enc = get<uint32_t>(data + 32);
  ZEN_ENFORCE(k <= a.dim && nm <= n && a.dim <= (uint64_t{1} << 40) && n == wire_bytes(a.dim, k, nm),
              "SparseAggregate::from_bytes: " + std::to_string(n) + " bytes do not match dim " +
                  std::to_string(a.dim) + ", k " + std::to_string(k) + " and " + std::to_string(nm) + " members");
  ZEN_ENFORCE(enc == index_encoding(a.dim, k), "SparseAggregate::from_bytes: index encoding " + std::to_string(enc) +
                                                   " is not the one (dim, k) selects");
  a.weight = get<double>(data + 40);
  ZEN_ENFORCE(nm == 0 || (std::isfinite(a.weight) && a.weight > 0),
              "SparseAggregate::from_bytes: " + std::to_string(nm) + " members with weight " + std::to_string(a.weight));
  const uint8_t* p = data + kHeader;
  a.members.resize(nm);
  for (uint64_t i = 0; i < nm; ++i) a.members[i] = get<int32_t>(p + 4 * i);
  ZEN_ENFORCE(std::adjacent_find(a.members.begin(), a.members.end(), std::greater_equal<int>()) == a.members.end(),
              "SparseAggregate::from_bytes: member list is not strictly increasing");
  p += 4 * nm;
  const size_t ib = index_bytes(a.dim, k);
  if (enc == kEliasFano) {
    encode::ef_decode(p, ib, a.dim, k, a.positions);
  } else {
    encode::bitmap_decode(p, a.dim, a.positions);
    ZEN_ENFORCE(a.positions.size() == k, "SparseAggregate::from_bytes: bitmap has " +
                                             std::to_string(a.positions.size()) + " bits set, header says " +
                                             std::to_string(k));
  }
  p += ib;
  a.values.resize(k);
  if (k) std::memcpy(a.values.data(), p, k * sizeof(float));
  return a;
}

void SparseAggregate::add_to(std::vector<double>& dense) const {
  ZEN_ENFORCE(dense.size() == dim, "SparseAggregate::add_to: dense vector of " + std::to_string(dense.size()) +
                                       " entries for dim " + std::to_string(dim));
  for (size_t i = 0; i < positions.size(); ++i) dense[positions[i]] += static_cast<double>(values[i]);
}

SparseAggregate topk_extract(std::vector<double>& acc, size_t k, double weight, std::vector<int> members) {
  SparseAggregate a;
  a.dim = acc.size();
  a.weight = weight;
  a.members = std::move(members);
  k = std::min(k, acc.size());
  std::vector<uint64_t> idx(acc.size());
  std::iota(idx.begin(), idx.end(), uint64_t{0});
  auto larger = [&](uint64_t x, uint64_t y) {
    const double ax = std::abs(acc[x]), ay = std::abs(acc[y]);
    return ax != ay ? ax > ay : x < y;
  };
  std::nth_element(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(), larger);
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  a.positions = std::move(idx);
  a.values.resize(k);
  for (size_t i = 0; i < k; ++i) {
    const float v = static_cast<float>(acc[a.positions[i]]);
    a.values[i] = v;
    acc[a.positions[i]] -= static_cast<double>(v);  // the float rounding stays in the residual too
  }
  return a;
}

}  // namespace zen::fl
