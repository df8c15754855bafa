#pragma once
// FedAvg aggregation on flat parameter vectors.
//
//   w = sum_k D_k w_k / sum_k D_k          (McMahan et al., arXiv 1602.05629)
//
// A PartialAggregate is the pair (sum_k D_k w_k, sum_k D_k) over a set of clients. Partials over
// disjoint client sets merge by adding both parts, so aggregating along ring chains and then at the
// parameter server gives the same model as the direct weighted mean, in any grouping (up to
// floating-point rounding of the double-precision sums).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zen::fl {

enum class Weighting {
  SampleCount,  ///< D_k = number of local samples
  Uniform,      ///< D_k = 1 for every client
};

/// The weight FedAvg gives a client with `num_samples` samples.
double fedavg_weight(Weighting w, size_t num_samples) noexcept;
Weighting parse_weighting(const std::string& s);  ///< "samples" | "uniform"
const char* weighting_name(Weighting w) noexcept;

struct PartialAggregate {
  std::vector<double> weighted_sum;  ///< sum_k D_k * w_k (empty until the first add)
  double weight = 0;                 ///< sum_k D_k
  std::vector<int> members;          ///< client ids included, kept sorted ascending

  /// Add client `client_id` with model w_k (n floats) and weight D_k > 0. Throws zen::Error when
  /// the client is already a member, D_k is not positive and finite, or n differs from the others.
  void add(const float* model, size_t n, double D_k, int client_id);
  void add(const std::vector<float>& model, double D_k, int client_id) {
    add(model.data(), model.size(), D_k, client_id);
  }
  /// Add another partial over a disjoint client set. Throws zen::Error naming the first client
  /// counted twice, or on a dimension mismatch. Merging an empty partial is a no-op.
  void merge(const PartialAggregate& other);
  /// The weighted mean sum_k D_k w_k / sum_k D_k as floats. Throws on an empty aggregate.
  std::vector<float> finalize() const;

  bool empty() const noexcept { return members.empty(); }
  size_t dim() const noexcept { return weighted_sum.size(); }
  bool contains(int client_id) const noexcept;
  void clear() noexcept;

  /// Byte image for sending through a communicator: header (magic, dim, member count), weight
  /// (float64), members (int32), the weighted mean (float32, like a model). from_bytes(to_bytes())
  /// gives back the members and the weight exactly and weighted_sum = weight * float(mean).
  std::vector<uint8_t> to_bytes() const;
  /// Size of to_bytes() for an aggregate of `dim` parameters and `num_members` clients (what a
  /// link carries; the timing charges exactly this).
  static size_t wire_bytes(size_t dim, size_t num_members) noexcept;
  static PartialAggregate from_bytes(const uint8_t* data, size_t n);
  static PartialAggregate from_bytes(const std::vector<uint8_t>& b) {
    return from_bytes(b.data(), b.size());
  }
};

/// Direct weighted mean of models[k] with weights[k] (client ids 0..K-1).
std::vector<float> fedavg(const std::vector<std::vector<float>>& models,
                          const std::vector<double>& weights);

}  // namespace zen::fl
