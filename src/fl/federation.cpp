// Federation: the clients' shards, the global model, local updates and synchronous FedAvg rounds.
#include "zen/fl/federation.hpp"

#include <algorithm>
#include <utility>

#include "zen/error.hpp"
#include "zen/fl/rng.hpp"

namespace zen::fl {

Federation::Federation(const Dataset& train, const Dataset& test, FederationConfig cfg)
    : train_(train), test_(test), cfg_(std::move(cfg)) {
  ZEN_ENFORCE(cfg_.num_clients > 0, "federation: num_clients must be positive, got " +
                                        std::to_string(cfg_.num_clients));
  ZEN_ENFORCE(cfg_.sample_limit <= train_.size(),
              "federation: sample limit " + std::to_string(cfg_.sample_limit) + " exceeds the " +
                  std::to_string(train_.size()) + " training samples");
  const size_t n = cfg_.sample_limit > 0 ? cfg_.sample_limit : train_.size();
  ZEN_ENFORCE(n >= size_t(cfg_.num_clients),
              "federation: " + std::to_string(n) + " training samples for " + std::to_string(cfg_.num_clients) +
                  " clients");
  const std::vector<int32_t> labels(train_.y.begin(), train_.y.begin() + static_cast<std::ptrdiff_t>(n));
  const uint64_t split_seed = stream_seed(cfg_.seed, Stream::Split);
  if (cfg_.split == "iid") {
    partition_ = split_iid(n, cfg_.num_clients, split_seed);
  } else if (cfg_.split == "dirichlet") {
    partition_ = split_dirichlet(labels, train_.num_classes, cfg_.num_clients, cfg_.alpha, split_seed,
                                 cfg_.dirichlet_mode);
  } else if (cfg_.split == "lognormal") {
    partition_ = split_iid_lognormal(n, cfg_.num_clients, cfg_.sigma, split_seed);
  } else if (cfg_.split == "groups") {
    ZEN_ENFORCE(cfg_.group_of.size() == static_cast<size_t>(cfg_.num_clients),
                "federation: split 'groups' needs a group for each of the " + std::to_string(cfg_.num_clients) +
                    " clients, got " + std::to_string(cfg_.group_of.size()));
    partition_ = split_by_group(labels, train_.num_classes, cfg_.group_of, cfg_.classes_per_group, split_seed);
  } else {
    ZEN_THROW(Result::InvalidArgument, "federation: unknown split '" + cfg_.split +
                                           "' (expected 'iid', 'dirichlet', 'lognormal' or 'groups')");
  }
  validate_partition(partition_, n);
  cfg_.model.input_dim = train_.dim;
  cfg_.model.num_classes = train_.num_classes;
  global_ = make_model(cfg_.model);
  global_->init(stream_seed(cfg_.seed, Stream::Init));
}

void Federation::check_client(int client) const {
  ZEN_ENFORCE(client >= 0 && client < cfg_.num_clients,
              "federation: client " + std::to_string(client) + " outside [0, " +
                  std::to_string(cfg_.num_clients) + ")");
}

size_t Federation::client_samples(int client) const {
  check_client(client);
  return partition_[size_t(client)].size();
}

double Federation::client_weight(int client) const {
  return fedavg_weight(cfg_.weighting, client_samples(client));
}

ClientUpdate Federation::local_update(int client, const std::vector<float>& start, int round) const {
  return local_update(client, start, round, LocalOptions{});
}

ClientUpdate Federation::local_update(int client, const std::vector<float>& start, int round,
                                      const LocalOptions& opt) const {
  check_client(client);
  auto model = global_->clone();
  model->set_params(start);
  SgdConfig sgd = cfg_.sgd;
  if (opt.epochs >= 0) sgd.epochs = opt.epochs;
  if (opt.prox_mu >= 0.0f) sgd.prox_mu = opt.prox_mu;
  ClientUpdate u;
  u.client = client;
  u.stats = train_local(*model, train_, partition_[size_t(client)], sgd,
                        stream_seed(cfg_.seed, Stream::Shuffle, uint64_t(client), uint64_t(round)));
  u.weight = client_weight(client);
  u.params = std::move(model->params());
  return u;
}

RoundStats Federation::run_round(int round, const std::vector<int>& participants) {
  std::vector<int> who = participants;
  if (who.empty()) {
    who.resize(size_t(cfg_.num_clients));
    for (int k = 0; k < cfg_.num_clients; ++k) who[size_t(k)] = k;
  }
  const std::vector<float> start = global_->params();
  PartialAggregate agg;
  RoundStats rs;
  rs.round = round;
  for (int k : who) {
    if (client_samples(k) == 0) continue;  // an empty Dirichlet shard has nothing to contribute
    const ClientUpdate u = local_update(k, start, round);
    agg.add(u.params, u.weight, k);
    rs.mean_train_loss += u.stats.mean_loss;
    rs.train_wall_seconds += u.stats.wall_seconds;
    rs.max_train_seconds = std::max(rs.max_train_seconds, u.stats.wall_seconds);
    ++rs.participants;
  }
  ZEN_ENFORCE(rs.participants > 0, "federation: round " + std::to_string(round) +
                                       " has no participant with data");
  rs.mean_train_loss /= double(rs.participants);
  global_->set_params(agg.finalize());
  return rs;
}

}  // namespace zen::fl
