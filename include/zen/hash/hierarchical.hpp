#pragma once
// Hierarchical hashing (Zen §4), CPU implementation: the push partitioner of the balanced scheme.
//
// For each input entry e with row index idx: owner p = h0(idx) (Partitioner, identical on all
// ranks) and its owner-local position. Then k second-level hashes h_1..h_k place e in p's parallel
// region (cap1 slots) with compare-and-swap on an atomic slot (slots hold entry ids, EMPTY is all
// ones, so index 0 is an ordinary key); if all k slots are taken, an atomic counter hands out a
// slot of p's serial region (cap2). When the serial region is full the entry goes to a per-thread
// spill list for p: the overflow is detected, counted and reported, nothing is written past a region,
// and no entry is lost (the spill is appended to p's segment at compaction; documented in
// docs/algorithms.md). Sizes: r1 = parallel_factor * nnz slots in total (cap1 = r1/n per owner,
// at least 16), r2 = serial_fraction * r1 (cap2 = r2/n, at least 8).
// Duplicated indices are not merged here: each occurrence is placed and pushed, and the owner sums.
#include <cstdint>
#include <vector>

#include "zen/hash/hash.hpp"
#include "zen/tensor.hpp"

namespace zen {

struct HashPartition {
  std::vector<size_t> offsets;   ///< n+1 offsets into entry/pos: owner p's segment is [offsets[p], offsets[p+1])
  std::vector<uint32_t> entry;   ///< input entry ids grouped by owner
  std::vector<uint64_t> pos;     ///< owner-local position of each grouped entry
  uint64_t parallel_placed = 0;  ///< entries placed in parallel regions
  uint64_t serial_placed = 0;    ///< entries placed in serial regions
  uint64_t spilled = 0;          ///< entries that found the serial region full (handled, not lost)
  uint64_t overflowed_owners = 0;
  size_t count(size_t p) const { return offsets[p + 1] - offsets[p]; }
};

struct HierarchicalHashConfig {
  int hash_functions = 3;
  double parallel_factor = 2.0;
  double serial_fraction = 0.1;
  int threads = 0;
  uint64_t seed = 0;  ///< seed of h_1..h_k (may differ per rank)
};

/// Partition the entries of `in` (row indices) over the owners of `part`.
void hierarchical_partition(const SparseView& in, const Partitioner& part, const HierarchicalHashConfig& cfg,
                            HashPartition& out);

}  // namespace zen
