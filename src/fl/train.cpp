// Local training on one client: minibatch SGD (with FedProx's proximal term when asked).
#include "zen/fl/train.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "zen/error.hpp"
#include "zen/fl/rng.hpp"

namespace zen::fl {

TrainStats train_local(Model& model, const Dataset& data, const std::vector<size_t>& indices,
                       const SgdConfig& cfg, uint64_t seed) {
  const auto t0 = std::chrono::steady_clock::now();
  ZEN_ENFORCE(!indices.empty(), "train_local: the client holds no samples");
  ZEN_ENFORCE(cfg.batch_size > 0, "train_local: batch_size must be positive");
  ZEN_ENFORCE(cfg.epochs >= 0, "train_local: epochs must be >= 0, got " + std::to_string(cfg.epochs));
  ZEN_ENFORCE(cfg.prox_mu >= 0.0f && std::isfinite(cfg.prox_mu),
              "train_local: the proximal term mu must be finite and >= 0, got " + std::to_string(cfg.prox_mu));
  ZEN_ENFORCE(data.dim == model.input_dim(), "train_local: " + model.name() + " model expects " +
                                                 std::to_string(model.input_dim()) +
                                                 " features, data set has " + std::to_string(data.dim));
  for (size_t idx : indices) {
    ZEN_ENFORCE(idx < data.size(), "train_local: sample index " + std::to_string(idx) +
                                       " >= data set size " + std::to_string(data.size()));
  }

  const size_t dim = static_cast<size_t>(data.dim);
  const size_t bmax = std::min(cfg.batch_size, indices.size());
  std::vector<float> xb(bmax * dim);
  std::vector<int32_t> yb(bmax);
  std::vector<float> grad(model.num_params());
  std::vector<size_t> order(indices);
  Rng rng(seed);
  float* w = model.params().data();
  const size_t np = model.num_params();
  // FedProx: the anchor w_0 of the proximal term is the model training starts from.
  const std::vector<float> anchor = cfg.prox_mu > 0.0f ? model.params() : std::vector<float>();

  TrainStats st;
  st.samples = indices.size();
  for (int e = 0; e < cfg.epochs; ++e) {
    std::shuffle(order.begin(), order.end(), rng);
    double loss_sum = 0;
    size_t batches = 0;
    for (size_t b = 0; b < order.size(); b += cfg.batch_size) {
      const size_t n = std::min(cfg.batch_size, order.size() - b);
      for (size_t i = 0; i < n; ++i) {
        std::copy_n(data.row(order[b + i]), dim, xb.data() + i * dim);
        yb[i] = data.y[order[b + i]];
      }
      loss_sum += model.loss_and_grad(xb.data(), yb.data(), n, grad.data());
      if (cfg.prox_mu > 0.0f) {
        for (size_t j = 0; j < np; ++j) w[j] -= cfg.lr * (grad[j] + cfg.prox_mu * (w[j] - anchor[j]));
      } else {
        for (size_t j = 0; j < np; ++j) w[j] -= cfg.lr * grad[j];
      }
      ++batches;
      ++st.steps;
    }
    st.mean_loss = loss_sum / double(batches);
  }
  st.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

TrainStats train_local(Model& model, const Dataset& data, const SgdConfig& cfg, uint64_t seed) {
  std::vector<size_t> all(data.size());
  std::iota(all.begin(), all.end(), size_t(0));
  return train_local(model, data, all, cfg, seed);
}

}  // namespace zen::fl
