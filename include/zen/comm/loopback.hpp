#pragma once
// Loopback backend: n ranks are threads of one process exchanging messages through in-memory
// channels (one FIFO per ordered rank pair). Collectives are direct exchanges, reduced in rank order,
// so results are bitwise identical on every rank. For fast exhaustive tests and single-node runs.
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "zen/comm/communicator.hpp"

namespace zen::loopback {

/// Create n connected communicators (rank i = element i). Each must be used by one thread at a time.
std::vector<std::unique_ptr<Communicator>> create(int n);

/// Run fn(comm) on n threads, one per rank. When a rank throws, the others are told (abort) so they
/// fail fast instead of waiting for the timeout. Returns each rank's exception (or null).
std::vector<std::exception_ptr> run_collect(int n, const std::function<void(Communicator&)>& fn,
                                            Communicator::Ms timeout = Communicator::Ms(60000));

/// As run_collect, but rethrows the first failing rank's exception (lowest rank).
void run(int n, const std::function<void(Communicator&)>& fn, Communicator::Ms timeout = Communicator::Ms(60000));

}  // namespace zen::loopback
