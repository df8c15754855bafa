#pragma once
// The learner: replays a timing Schedule with real models moving through a zen::Communicator.
//
// Actors (the server and the K satellites) are multiplexed onto the communicator's ranks: the
// server on rank 0, satellite k on rank 1 + k mod (n - 1) (n = 1: everything on rank 0). With
// n = K + 1 ranks every satellite is its own rank. Every transfer between actors on different ranks
// is one comm.send/recv of a TransferHeader (event id, simulated [start, end]) followed by the model
// (float32) or the partial aggregate bytes (PartialAggregate::to_bytes), wire.hpp: exactly the
// bytes the schedule charged for it (checked on send); transfers between actors of one rank are
// handed over in memory. Each rank executes its
// actors' events in simulated-time order (receives, then server updates, then training, then sends
// at equal times), which cannot deadlock because every transfer ends after it starts.
//
// The server checks every received aggregate: sum D_k must equal the sum of the registered sample
// weights of its members, the members must be the scheduled ones, and no client may be counted
// twice in an update (PartialAggregate::merge). The aggregation code is the same for every backend.
#include <functional>
#include <cstdint>
#include <vector>

#include "zen/comm/communicator.hpp"
#include "zen/fl/dataset.hpp"
#include "zen/fl/federation.hpp"
#include "zen/fl/sim/schedule.hpp"

namespace zen::fl::sim {

/// One evaluated global model (row of the output CSV). Row 0 is the initial model at t = 0.
struct LearnRow {
  int version = 0;
  int round = 0;
  double time_s = 0.0;
  double accuracy = 0.0;
  double loss = 0.0;
  int ps_transfers = 0;
  double ps_bits = 0.0;
  int isl_transfers = 0;
  double isl_bits = 0.0;
};

/// A message as the receiver saw it: its simulated duration comes from the header.
struct TransferLog {
  int event = 0;
  EventKind kind = EventKind::Download;
  int from = 0, to = 0;
  double start_s = 0.0, end_s = 0.0;
  uint64_t bytes = 0;     ///< the whole message (TransferHeader + payload, wire.hpp)
  bool via_comm = false;  ///< false: both actors live on the same rank
};

struct LearnResult {
  std::vector<LearnRow> rows;          ///< server rank only
  std::vector<float> final_params;     ///< server rank only
  std::vector<TransferLog> transfers;  ///< received by this rank
  uint64_t comm_bytes_sent = 0;        ///< this rank's communicator traffic
  uint64_t comm_messages = 0;
  double train_wall_s = 0.0;           ///< measured local training time on this rank
  int trainings = 0;
};

/// Rank of an actor (kServer or a satellite id) with n ranks.
int actor_rank(int actor, int num_ranks) noexcept;

/// Executes the schedule on this rank. `fed` supplies the shards, D_k and the initial model; `test`
/// is evaluated at every global update. Every rank must call it with the same schedule.
LearnResult execute(const Schedule& s, const Federation& fed, const Dataset& test, Communicator& comm);

/// Merges execute()'s per-rank results of one run (rows from rank 0, transfers and traffic summed
/// over ranks), for runners that hold every rank's result (e.g. loopback threads).
LearnResult merge_ranks(std::vector<LearnResult> per_rank);

/// How an experiment runs the learner for one schedule: the backend is the caller's choice (the
/// library takes any communicator). on_communicator(): execute() on this process's rank of `comm`
/// (e.g. MPI, one process per rank); zen/fl/sim/loopback_runner.hpp: every rank as a thread.
using LearnRunner = std::function<LearnResult(const Schedule&, const Federation&, const Dataset&)>;
LearnRunner on_communicator(Communicator& comm);

}  // namespace zen::fl::sim
