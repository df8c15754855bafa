#pragma once
// Region hashing (Zen §4, which calls it "hierarchical hashing"; renamed here so that "hierarchical"
// names only the two-level scheme), CPU implementation: the push partitioner of the balanced scheme.
//
// For each input entry e with row index idx: owner p = h0(idx) (Partitioner, identical on all
// ranks) and its owner-local position. Then k second-level hashes h_1..h_k place idx in p's parallel
// region (cap1 slots) with compare-and-swap on an atomic slot holding an entry id (EMPTY is all ones,
// so index 0 is an ordinary key). Equal keys meet in the table: an entry whose probe finds its own
// key merges into that slot (the slot keeps the smallest entry id of the key, by atomic min), so each
// key is pushed once. If all k slots hold other keys, an atomic counter hands out a slot of p's serial
// region (cap2); when that is full too the entry goes to a per-thread spill list for p: the overflow
// is detected, counted and reported, nothing is written past a region, and no entry is lost. Keys of
// the serial region and the spill (a few percent) are merged by a small sort at compaction. A key is
// either in exactly one parallel slot or only in the serial region / spill: slots never empty while
// the table is built, so every occurrence of a key probes the same occupied slots.
//
// Sizes: r1 = parallel_factor * nnz slots in total (cap1 = r1/n per owner, at least 16), r2 =
// serial_fraction * r1 (cap2 = r2/n, at least 8). The table persists across calls and is cleared
// touched-only at compaction (a pass over the entries: a slot's key is the first entry that holds
// it), so a call allocates nothing once the sizes have been seen. Entries are
// placed in blocks of 32 (pi of the whole block first, each first slot prefetched, then the probes),
// so the table's cache misses overlap instead of stalling one after another.
//
// Determinism: the duplicates of a key are summed by the caller in ascending entry order from the
// key's smallest entry id (`rep`), whatever the thread count and the race order of the inserts.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "zen/detail/thread_pool.hpp"
#include "zen/hash/hash.hpp"
#include "zen/tensor.hpp"

namespace zen {

struct HashPartition {
  std::vector<size_t> offsets;   ///< n+1 offsets: owner p's keys are [offsets[p], offsets[p+1])
  std::vector<uint32_t> rep;     ///< per key (grouped by owner): its smallest input entry id
  std::vector<uint64_t> pos;     ///< per key: owner-local position of the key
  std::vector<uint32_t> key_of;  ///< per input entry: its key (index into rep/pos); set when `duplicates`
  size_t keys = 0;               ///< distinct keys (== offsets[n]); the vectors may be longer (reused storage)
  bool duplicates = false;       ///< some key occurs more than once in the input
  bool sorted = false;           ///< each owner's keys ascend by position (SortPartition)
  uint64_t parallel_placed = 0;  ///< entries whose key sits in a parallel region
  uint64_t serial_placed = 0;    ///< entries placed in serial regions
  uint64_t spilled = 0;          ///< entries that found the serial region full (handled, not lost)
  uint64_t overflowed_owners = 0;
  size_t count(size_t p) const { return offsets[p + 1] - offsets[p]; }
};

struct RegionHashConfig {
  int hash_functions = 3;
  double parallel_factor = 2.0;
  double serial_fraction = 0.1;
  int threads = 0;    ///< for the one-shot function only (0 = all cores); plans pass their pool
  uint64_t seed = 0;  ///< seed of h_1..h_k (may differ per rank)
};

/// The hash table and per-entry scratch of one plan, reused across calls.
class RegionHash {
 public:
  RegionHash();
  ~RegionHash();
  /// Partition the entries of `in` over the owners of `part`. `fwd` (optional): fwd[idx] = pi(idx)
  /// for every row (a cached forward table; null: evaluate pi). Indices outside [0, N/D) throw
  /// InvalidArgument naming the entry (checked even when the caller skipped validation).
  void partition(const SparseView& in, const Partitioner& part, const RegionHashConfig& cfg,
                 detail::ThreadPool* pool, HashPartition& out, const uint32_t* fwd = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// One-shot convenience (a throwaway table and pool).
void region_hash_partition(const SparseView& in, const Partitioner& part, const RegionHashConfig& cfg,
                            HashPartition& out);

}  // namespace zen
