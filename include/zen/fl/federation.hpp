#pragma once
// The learning side of a federation: K clients with their data shards, a global model, local
// updates and synchronous FedAvg rounds. The orbit-aware schemes decide WHEN and in which grouping
// clients take part; they call local_update() and aggregate with PartialAggregate themselves, or
// use run_round() for a plain synchronous round.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zen/fl/dataset.hpp"
#include "zen/fl/fedavg.hpp"
#include "zen/fl/model.hpp"
#include "zen/fl/train.hpp"

namespace zen::fl {

struct FederationConfig {
  int num_clients = 40;
  ModelSpec model;
  SgdConfig sgd;
  Weighting weighting = Weighting::SampleCount;
  std::string split = "iid";  ///< "iid", "dirichlet", "lognormal" or "groups" (dataset.hpp)
  double alpha = 0.5;         ///< Dirichlet concentration (split == "dirichlet")
  DirichletMode dirichlet_mode = DirichletMode::PerClient;
  double sigma = 1.0;         ///< log-normal size spread (split == "lognormal")
  std::vector<int> group_of;  ///< client -> group, e.g. orbital plane (split == "groups")
  int classes_per_group = 2;  ///< classes each group holds (split == "groups")
  uint64_t seed = 1;          ///< master seed; split, init and shuffles use separate streams
  /// > 0: split only the first sample_limit training samples (the rest of `train` is unused), so
  /// that runs of different sizes can share one loaded data set.
  size_t sample_limit = 0;
};

/// Per-call overrides of the local training (FedProx: a variable number of epochs and the
/// proximal term). Negative values keep the federation's SgdConfig.
struct LocalOptions {
  int epochs = -1;
  float prox_mu = -1.0f;
};

struct ClientUpdate {
  int client = -1;
  std::vector<float> params;  ///< the client's model after local training
  double weight = 0;          ///< its FedAvg weight D_k (sample count or 1)
  TrainStats stats;
};

struct RoundStats {
  int round = 0;
  size_t participants = 0;
  double mean_train_loss = 0;     ///< mean over participants of the last-epoch loss
  double train_wall_seconds = 0;  ///< sum of the measured local training times
  double max_train_seconds = 0;   ///< slowest participant
};

class Federation {
 public:
  /// Splits `train` across cfg.num_clients and initializes the global model. Keeps references to
  /// `train` and `test`, which must outlive the Federation. Throws zen::Error on a bad config.
  Federation(const Dataset& train, const Dataset& test, FederationConfig cfg);

  const FederationConfig& config() const noexcept { return cfg_; }
  int num_clients() const noexcept { return cfg_.num_clients; }
  const Partition& partition() const noexcept { return partition_; }
  size_t client_samples(int client) const;
  double client_weight(int client) const;  ///< fedavg_weight(cfg.weighting, client_samples)

  Model& global() noexcept { return *global_; }
  const Model& global() const noexcept { return *global_; }

  /// Train a copy of the model with parameters `start` on the client's shard. The shuffle seed is
  /// stream_seed(cfg.seed, Stream::Shuffle, client, round), so the result depends only on
  /// (start, client, round). Thread-safe for distinct calls (the Federation is not modified).
  ClientUpdate local_update(int client, const std::vector<float>& start, int round) const;
  /// Same with the epochs and / or FedProx's mu overridden (LocalOptions).
  ClientUpdate local_update(int client, const std::vector<float>& start, int round, const LocalOptions& opt) const;

  /// Synchronous FedAvg: every participant (all clients when empty) trains from the current
  /// global model; the global model becomes the weighted mean of their results.
  RoundStats run_round(int round, const std::vector<int>& participants = {});

  /// Global model on the test set.
  Model::Eval evaluate() const { return global_->evaluate(test_); }

 private:
  void check_client(int client) const;

  const Dataset& train_;
  const Dataset& test_;
  FederationConfig cfg_;
  Partition partition_;
  std::unique_ptr<Model> global_;
};

}  // namespace zen::fl
