#pragma once
// Internal helpers shared by the scheme simulators (not installed).
#include <optional>
#include <vector>

#include "zen/fl/sim/timing.hpp"

namespace zen::fl::sim::detail {

/// What one orbit does in one ring round (events without ids; Download/IslModel/Train carry
/// `version` as given).
struct OrbitRound {
  std::vector<Event> events;
  struct Delivered {
    int holder = 0;
    std::vector<int> members;
    double completion_s = 0.0;
  };
  std::vector<Delivered> uploads;  ///< delivered uploads (normally one: the sink's)
  double report_s = 0.0;           ///< latest delivered upload completion (T0 when none)
  std::vector<int> members;        ///< union of delivered members, sorted
  std::vector<int> lost;           ///< trained updates lost with a failed node
  std::vector<int> skipped;        ///< members that could not take part (dead / cut off / no model)
};

/// One ring round of plane `plane` starting at T0 (orbit-fl.md §6 with fault handling, see
/// docs/fl-orbit.md). Throws HorizonExceeded when a contact falls past the plan.
OrbitRound ring_orbit_round(const TimingContext& ctx, int plane, double T0, int round, int version,
                            MissTracker& miss);

/// One satellite's download, training and upload without ISLs from T0 (orbit-fl.md §5): download at
/// the first feasible contact, train, upload at the next one (a missed window retries at the next).
struct DirectCycle {
  std::vector<Event> events;
  std::optional<double> trained_s;  ///< training done
  std::optional<double> done_s;     ///< upload delivered
  bool skipped = false;             ///< dead before training finished
  bool lost = false;                ///< died holding its trained update
};
/// fedprox = true: the client trains with FedProx's epoch rule (timing.hpp, simulate_fedprox).
DirectCycle direct_cycle(const TimingContext& ctx, int k, double T0, int round, int version, MissTracker& miss,
                         bool fedprox = false);

/// An empty schedule of scheme `name` for the context (satellites, planes, model size, top-k).
Schedule new_schedule(const TimingContext& ctx, const char* name);

/// Sorts events by start time (stable), assigns ids, attributes transfer counts to the updates.
void finalize_schedule(Schedule& s);

/// Synchronous round r ends: the server aggregates `members` at time t (event + update record).
/// Returns t (the start of the next round).
double add_sync_server_update(Schedule& s, int r, double t, const std::vector<int>& members);

std::vector<int> sorted_union(std::vector<int> a, const std::vector<int>& b);

}  // namespace zen::fl::sim::detail
