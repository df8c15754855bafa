#pragma once
// Helpers shared by the scheme implementations (src/schemes/common.cpp, scheme.cpp): private to the
// schemes layer (they left the public zen/schemes/scheme.hpp in issue 30).
#include <cstdint>
#include <string>
#include <vector>

#include "zen/comm/communicator.hpp"
#include "zen/schemes/scheme.hpp"
#include "zen/tensor.hpp"

namespace zen::detail {
/// Sort (key, value-row) pairs by key (stable) and sum equal keys in order, accumulating in
/// accum_of<T>. Output keys are strictly increasing.
void sort_and_reduce(std::vector<int64_t>& keys, std::vector<uint8_t>& values, uint32_t row_width, DType t);
/// Merge sorted-or-not COO contributions into `out` (sorted, union support, sum in input order).
void write_sparse_result(std::vector<int64_t>&& keys, std::vector<uint8_t>&& values, const TensorSpec& spec,
                         SparseTensor& out);
/// Scatter a sorted sparse result into a zeroed dense buffer.
void sparse_to_dense(const SparseTensor& s, void* dense);
double seconds_now();
/// max/mean of a load vector (1 when everything is zero): the imbalance the schemes report.
double imbalance(const std::vector<uint64_t>& load);
/// Alltoall of one uint64 per peer (entry counts): returns what every peer sent to this rank.
std::vector<uint64_t> alltoall_counts(Communicator& comm, const std::vector<uint64_t>& send);
/// Throw Unsupported naming `where`, the rank, `scheme` and the backend unless `comm` holds host memory.
void require_host_memory(const Communicator& comm, const char* where, const std::string& scheme);

/// While one is alive on this thread, SparseAllreduce's constructor skips its setup exchange (the
/// seed's broadcast and the allgather that checks the tensor spec): for a plan made by another plan
/// on the same communicator, spec and (agreed) seed, whose own setup did both (auto's candidates,
/// made inside its calls). Scoped: it never outlives the plan being made.
class AgreedSetup {
 public:
  AgreedSetup();
  ~AgreedSetup();
  AgreedSetup(const AgreedSetup&) = delete;
  AgreedSetup& operator=(const AgreedSetup&) = delete;
  static bool active();

 private:
  bool was_;
};
}  // namespace zen::detail
