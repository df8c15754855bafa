#pragma once
// MPI backend: wraps a caller's MPI_Comm (duplicated, so zen's traffic never mixes with the caller's).
// Never calls MPI_Init when MPI is already initialized, so it lives inside a user's MPI job.
// Point-to-point based alltoallv/allgatherv/broadcast/barrier (so a timeout can name the missing
// peer); native MPI_Iallreduce for allreduce. Every wait polls with a deadline (the timeout).
#include <mpi.h>

#include <memory>

#include "zen/comm/communicator.hpp"

namespace zen::mpi {

/// RAII: initializes MPI (MPI_THREAD_SERIALIZED, what non-blocking zen calls need) unless already
/// initialized; finalizes only what it began.
class Environment {
 public:
  Environment(int* argc, char*** argv);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;
  bool initialized_here() const { return owns_; }

 private:
  bool owns_ = false;
};

std::unique_ptr<Communicator> create(MPI_Comm comm);

}  // namespace zen::mpi
