#pragma once
// MPI backend: wraps a caller's MPI_Comm (duplicated, so zen's traffic never mixes with the caller's).
// Never calls MPI_Init when MPI is already initialized, so it lives inside a user's MPI job.
// Point-to-point based alltoallv/allgatherv/broadcast/barrier (so a timeout can name the missing
// peer); native MPI_Iallreduce for allreduce. Every wait polls with a deadline (the timeout).
// Threads: below MPI_THREAD_MULTIPLE only one thread at a time may be inside zen's MPI calls (an
// operation that finds another thread inside fails with Unsupported instead of calling MPI beside it).
#include <mpi.h>

#include <memory>

#include "zen/comm/communicator.hpp"

namespace zen::mpi {

/// RAII: initializes MPI unless already initialized, asking for `required` thread support
/// (default MPI_THREAD_SERIALIZED, what non-blocking zen calls need; MPI_THREAD_MULTIPLE to use
/// several communicators from several threads at once, docs/api.md "Concurrency"); finalizes only
/// what it began.
class Environment {
 public:
  Environment(int* argc, char*** argv, int required = MPI_THREAD_SERIALIZED);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;
  bool initialized_here() const { return owns_; }
  /// The thread support MPI gives (MPI_THREAD_SINGLE .. MPI_THREAD_MULTIPLE).
  int provided() const { return provided_; }

 private:
  bool owns_ = false;
  int provided_ = MPI_THREAD_SINGLE;
};

/// Name of an MPI thread level ("MPI_THREAD_SERIALIZED", ...).
const char* thread_level_name(int level);

std::unique_ptr<Communicator> create(MPI_Comm comm);

}  // namespace zen::mpi
