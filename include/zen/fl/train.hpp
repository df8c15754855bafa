#pragma once
// Local training on one client: minibatch SGD, reshuffled every epoch, deterministic given the seed.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "zen/fl/dataset.hpp"
#include "zen/fl/model.hpp"

namespace zen::fl {

struct SgdConfig {
  float lr = 0.1f;
  size_t batch_size = 10;  ///< the last batch of an epoch is smaller when it does not divide
  int epochs = 1;          ///< E local epochs
  /// FedProx (Li et al., arXiv 1812.06127): the local objective adds (mu / 2) ||w - w_0||^2 with
  /// w_0 the model training started from, so each step is w <- w - lr (grad + mu (w - w_0)).
  /// 0: plain SGD.
  float prox_mu = 0.0f;
};

struct TrainStats {
  size_t samples = 0;        ///< local data set size D_k
  size_t steps = 0;          ///< SGD updates performed
  double mean_loss = 0;      ///< mean minibatch loss over the last epoch (before each update)
  double wall_seconds = 0;   ///< measured wall time of the whole call (steady clock)
};

/// Train `model` in place for cfg.epochs epochs over the samples `indices` of `data`.
/// Each epoch visits the samples in a fresh permutation drawn from Rng(seed), continued across
/// epochs; the update is w <- w - lr * grad(mean batch loss) (plus lr * mu (w - w_0) with FedProx's
/// proximal term, cfg.prox_mu > 0). Same inputs and seed => same result.
/// Throws zen::Error on an empty index list, an index out of range or a bad config.
TrainStats train_local(Model& model, const Dataset& data, const std::vector<size_t>& indices,
                       const SgdConfig& cfg, uint64_t seed);

/// Same on all samples of `data`.
TrainStats train_local(Model& model, const Dataset& data, const SgdConfig& cfg, uint64_t seed);

}  // namespace zen::fl
