#include "zen/fl/fedavg.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>

#include "byte_io.hpp"
#include "zen/error.hpp"

namespace zen::fl {

double fedavg_weight(Weighting w, size_t num_samples) noexcept {
  return w == Weighting::Uniform ? 1.0 : static_cast<double>(num_samples);
}

Weighting parse_weighting(const std::string& s) {
  if (s == "samples") return Weighting::SampleCount;
  if (s == "uniform") return Weighting::Uniform;
  ZEN_THROW(Result::InvalidArgument, "unknown FedAvg weighting '" + s + "' (expected 'samples' or 'uniform')");
}

const char* weighting_name(Weighting w) noexcept {
  return w == Weighting::Uniform ? "uniform" : "samples";
}

bool PartialAggregate::contains(int client_id) const noexcept {
  return std::binary_search(members.begin(), members.end(), client_id);
}

void PartialAggregate::clear() noexcept {
  weighted_sum.clear();
  weight = 0;
  members.clear();
}

void PartialAggregate::add(const float* model, size_t n, double D_k, int client_id) {
  ZEN_ENFORCE(std::isfinite(D_k) && D_k > 0, "PartialAggregate::add: client " +
                                                 std::to_string(client_id) + " has weight " +
                                                 std::to_string(D_k) + " (must be positive)");
  ZEN_ENFORCE(n > 0, "PartialAggregate::add: client " + std::to_string(client_id) +
                         " sent an empty model");
  ZEN_ENFORCE(empty() || n == weighted_sum.size(),
              "PartialAggregate::add: client " + std::to_string(client_id) + " sent " +
                  std::to_string(n) + " parameters, aggregate has " +
                  std::to_string(weighted_sum.size()));
  const auto pos = std::lower_bound(members.begin(), members.end(), client_id);
  ZEN_ENFORCE(pos == members.end() || *pos != client_id,
              "PartialAggregate::add: client " + std::to_string(client_id) +
                  " is already counted in this aggregate");
  if (empty()) weighted_sum.assign(n, 0.0);
  for (size_t i = 0; i < n; ++i) weighted_sum[i] += D_k * static_cast<double>(model[i]);
  weight += D_k;
  members.insert(pos, client_id);
}

void PartialAggregate::merge(const PartialAggregate& other) {
  if (other.empty()) return;
  ZEN_ENFORCE(other.weighted_sum.size() > 0 && std::isfinite(other.weight) && other.weight > 0,
              "PartialAggregate::merge: the other aggregate has " + std::to_string(other.members.size()) +
                  " members but weight " + std::to_string(other.weight) + " and dim " +
                  std::to_string(other.weighted_sum.size()));
  ZEN_ENFORCE(empty() || other.weighted_sum.size() == weighted_sum.size(),
              "PartialAggregate::merge: dimensions differ (" + std::to_string(weighted_sum.size()) +
                  " vs " + std::to_string(other.weighted_sum.size()) + ")");
  std::vector<int> both;
  both.reserve(members.size() + other.members.size());
  std::merge(members.begin(), members.end(), other.members.begin(), other.members.end(),
             std::back_inserter(both));
  const auto dup = std::adjacent_find(both.begin(), both.end());
  ZEN_ENFORCE(dup == both.end(), "PartialAggregate::merge: client " + std::to_string(*dup) +
                                     " would be counted twice");
  if (empty()) {
    weighted_sum = other.weighted_sum;
  } else {
    for (size_t i = 0; i < weighted_sum.size(); ++i) weighted_sum[i] += other.weighted_sum[i];
  }
  weight += other.weight;
  members = std::move(both);
}

std::vector<float> PartialAggregate::finalize() const {
  ZEN_CHECK_CODE(!empty() && weight > 0, Result::InvalidUsage,
                 "PartialAggregate::finalize on an empty aggregate (no client added)");
  std::vector<float> out(weighted_sum.size());
  const double inv = 1.0 / weight;
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(weighted_sum[i] * inv);
  return out;
}

// Byte image: "ZFPA" | u32 version=2 | u64 dim | u64 nmembers | f64 weight | i32 members[] |
// f32 mean[] (host byte order; both ends of a link run the same build). The mean goes as float32,
// like the models themselves: a satellite sends what a model costs plus its weight and member list.
namespace {
constexpr uint32_t kMagic = 0x4150465Au;  // "ZFPA" little-endian
constexpr uint32_t kVersion = 2;
constexpr size_t kHeader = 4 + 4 + 8 + 8 + 8;

using detail::get;
using detail::put;
}  // namespace

size_t PartialAggregate::wire_bytes(size_t dim, size_t num_members) noexcept {
  return kHeader + num_members * sizeof(int32_t) + dim * sizeof(float);
}

std::vector<uint8_t> PartialAggregate::to_bytes() const {
  std::vector<uint8_t> out;
  out.reserve(wire_bytes(dim(), members.size()));
  put(out, kMagic);
  put(out, kVersion);
  put(out, uint64_t(weighted_sum.size()));
  put(out, uint64_t(members.size()));
  put(out, weight);
  for (int m : members) put(out, int32_t(m));
  if (!empty()) {
    const std::vector<float> mean = finalize();
    const auto* p = reinterpret_cast<const uint8_t*>(mean.data());
    out.insert(out.end(), p, p + mean.size() * sizeof(float));
  }
  return out;
}

PartialAggregate PartialAggregate::from_bytes(const uint8_t* data, size_t n) {
  ZEN_ENFORCE(n >= kHeader, "PartialAggregate::from_bytes: " + std::to_string(n) +
                                " bytes, shorter than the " + std::to_string(kHeader) + "-byte header");
  const uint32_t magic = get<uint32_t>(data);
  ZEN_ENFORCE(magic == kMagic, "PartialAggregate::from_bytes: bad magic " + std::to_string(magic));
  const uint32_t version = get<uint32_t>(data + 4);
  ZEN_ENFORCE(version == kVersion, "PartialAggregate::from_bytes: unsupported version " + std::to_string(version));
  const uint64_t dim = get<uint64_t>(data + 8);
  const uint64_t nm = get<uint64_t>(data + 16);
  ZEN_ENFORCE(dim <= n && nm <= n && n == wire_bytes(dim, nm),
              "PartialAggregate::from_bytes: " + std::to_string(n) + " bytes do not match dim " +
                  std::to_string(dim) + " and " + std::to_string(nm) + " members");
  PartialAggregate a;
  a.weight = get<double>(data + 24);
  a.members.resize(nm);
  const uint8_t* p = data + kHeader;
  for (uint64_t i = 0; i < nm; ++i) a.members[i] = get<int32_t>(p + 4 * i);
  p += 4 * nm;
  ZEN_ENFORCE(nm == 0 || (std::isfinite(a.weight) && a.weight > 0),
              "PartialAggregate::from_bytes: " + std::to_string(nm) + " members with weight " + std::to_string(a.weight));
  a.weighted_sum.resize(dim);
  for (uint64_t i = 0; i < dim; ++i) a.weighted_sum[i] = a.weight * static_cast<double>(get<float>(p + 4 * i));
  ZEN_ENFORCE(std::is_sorted(a.members.begin(), a.members.end()) &&
                  std::adjacent_find(a.members.begin(), a.members.end()) == a.members.end(),
              "PartialAggregate::from_bytes: member list is not strictly increasing");
  ZEN_ENFORCE((nm == 0) == (dim == 0), "PartialAggregate::from_bytes: " + std::to_string(nm) +
                                           " members with dim " + std::to_string(dim));
  return a;
}

std::vector<float> fedavg(const std::vector<std::vector<float>>& models,
                          const std::vector<double>& weights) {
  ZEN_ENFORCE(models.size() == weights.size(), "fedavg: " + std::to_string(models.size()) +
                                                   " models but " + std::to_string(weights.size()) +
                                                   " weights");
  PartialAggregate a;
  for (size_t k = 0; k < models.size(); ++k) a.add(models[k], weights[k], static_cast<int>(k));
  return a.finalize();
}

}  // namespace zen::fl
