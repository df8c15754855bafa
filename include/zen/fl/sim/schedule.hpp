#pragma once
// The output of the timing simulator: a deterministic list of events (who sends what to whom, when,
// for how long) plus one record per global model update. The learner (learner.hpp) replays it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zen::fl::sim {

/// Actor id of the parameter server in events (satellites are 0..K-1).
constexpr int kServer = -1;

enum class EventKind : uint8_t {
  Download,      ///< server -> satellite `to`: the global model of `version`
  IslModel,      ///< satellite `from` -> satellite `to` over an ISL: copy of the global model `version`
  Train,         ///< satellite `from` trains one local round on its shard from model `version`
  IslAggregate,  ///< partial aggregate (sum D_k w_k, sum D_k) of `members`, from -> to over an ISL
  Upload,        ///< partial aggregate of `members`, satellite `from` -> server
  ServerUpdate,  ///< the server folds what it received into a new global model `version`
};
const char* event_kind_name(EventKind k) noexcept;

struct Event {
  int id = 0;  ///< index in Schedule::events
  EventKind kind = EventKind::Train;
  double start_s = 0.0;  ///< transfer start (Train: training start)
  double end_s = 0.0;    ///< arrival (start + link time); ServerUpdate: start == end
  int from = kServer;
  int to = kServer;
  int round = 0;         ///< sync: round (1-based); async: the orbit's iteration (1-based)
  int orbit = -1;        ///< plane of the satellites involved (-1: several / none)
  int version = 0;       ///< model version carried / trained from; ServerUpdate: the new version
  int epochs = 0;        ///< Train: local epochs (0: the federation's); fedprox varies them
  bool failed = false;   ///< an attempt that did not deliver (missed window, failed link/node): no data moves
  uint64_t bytes = 0;    ///< transfers: bytes of the message on the link, header included (wire.hpp)
  std::vector<int> members;  ///< IslAggregate / Upload: clients inside; ServerUpdate: clients of the update
  /// ServerUpdate of fedasync only: the mixing weight a_t of w <- (1 - a_t) w + a_t w_k.
  double mix = 0.0;
  /// ServerUpdate of ring-async: (orbit, staleness weight s_p) of every orbit pair in the mean;
  /// of fedbuff: (client, staleness weight s_i) of every buffered delta, in arrival order.
  std::vector<std::pair<int, double>> orbit_weights;

  bool is_transfer() const noexcept {
    return kind == EventKind::Download || kind == EventKind::IslModel || kind == EventKind::IslAggregate ||
           kind == EventKind::Upload;
  }
  bool touches_server() const noexcept { return kind == EventKind::Download || kind == EventKind::Upload; }
};

/// One global model update (one row of the output CSV).
struct UpdateRecord {
  int version = 0;       ///< 1, 2, ...
  int round = 0;         ///< sync: round; async: the reporting orbit's iteration
  int orbit = -1;        ///< async: the reporting orbit
  double time_s = 0.0;   ///< simulated time of the update
  int ps_transfers = 0;  ///< delivered server transfers (downloads + uploads) since the previous update
  int ps_failed = 0;     ///< failed server transfer attempts since the previous update
  int isl_transfers = 0; ///< delivered ISL transfers (models + aggregates) since the previous update
  double ps_bits = 0.0;  ///< bits delivered through the server links since the previous update
  double isl_bits = 0.0; ///< bits delivered over ISLs since the previous update
  std::vector<int> members;  ///< clients whose fresh updates entered this global update
  /// Staleness tau of every contribution (async schemes: updates since the version it trained
  /// from); empty for the synchronous schemes (all 0).
  std::vector<int> staleness;
};

struct Schedule {
  std::string scheme;           ///< baseline | baseline-deadline | fedasync | fedprox | fedbuff | ring | ring-async
  int num_satellites = 0;
  int num_planes = 0;
  std::size_t model_params = 0;  ///< parameters of the model the transfers carry
  std::size_t topk = 0;          ///< 0: dense aggregates; else entries per compressed aggregate
  std::size_t download_topk = 0; ///< 0: dense model transfers; else entries per compressed model transfer
  float prox_mu = 0.0f;          ///< fedprox: the clients' proximal term
  double server_lr = 1.0;        ///< fedbuff: the server's step
  std::vector<Event> events;    ///< sorted by (start_s, id); ids are indices
  std::vector<UpdateRecord> updates;
  std::vector<int> lost;        ///< clients whose trained update was lost with a failed node, per occurrence
  std::vector<int> skipped;     ///< clients that could not take part in some round (failed / cut off)

  double end_time_s() const noexcept { return updates.empty() ? 0.0 : updates.back().time_s; }
  /// Mean time between global updates (sync: the round time), from t = 0.
  double mean_update_interval_s() const noexcept {
    return updates.empty() ? 0.0 : updates.back().time_s / static_cast<double>(updates.size());
  }
};

}  // namespace zen::fl::sim
