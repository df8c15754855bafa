#pragma once
// The raw-MPI baselines zen_perf times beside zen's schemes in the same run: the code a user would
// otherwise write (a dense MPI_Allreduce; MPI_Allgatherv of the indices and values plus a local sum).
#include <memory>
#include <string>
#include <vector>

#include "zen/tensor.hpp"
#ifdef ZEN_HAVE_MPI
#include <mpi.h>
#endif

namespace zen_perf {

/// The baselines' --scheme names (they run under mpirun only).
const std::vector<std::string>& raw_names();
bool is_raw(const std::string& s);

#ifdef ZEN_HAVE_MPI
/// The MPI type of a value dtype (f32, f64; a clear error for the others).
MPI_Datatype raw_value_type(zen::DType t);

class RawBaseline {
 public:
  virtual ~RawBaseline() = default;
  /// One call on this rank; dense_out selects the result form (mpi_allreduce is always dense).
  virtual void run(const zen::SparseView& in, bool dense_out, void* dense, zen::SparseTensor& sparse) = 0;
  uint64_t sent = 0, recv = 0;  ///< bytes this rank moved in the last call (logical, as zen counts)
};

/// The baseline called `name` (one of raw_names()).
std::unique_ptr<RawBaseline> make_raw(const std::string& name);
#endif

}  // namespace zen_perf
