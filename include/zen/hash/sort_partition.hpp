#pragma once
// Sort partition: the push partitioner of balanced when its pushes go sorted (Elias-Fano or bitmap
// index parts: small rows under Auto). Each entry's owner p and position q come from h0, as in
// region hashing; then one stable radix sort of (p, q, entry) records groups the entries by
// owner, orders each owner's keys by position (what a sorted push needs anyway) and puts equal keys
// next to each other in input order, where they are merged: the key's first entry is its
// representative, and the caller sums the others onto it in ascending entry order, as with the hash
// table. The result is a HashPartition whose owner segments ascend by position (`sorted`).
//
// Cost: one evaluation of pi per entry (parallel over entries) and a serial radix sort of 8-byte
// records on bits_for(n) + bits_for(|I_0|) bits (two or three 11-bit passes), all sequential or
// streaming memory traffic, where hashing probes a table at random and then scans it. For inputs
// that one task would sort anyway; the caller hashes otherwise (balanced.cpp).
#include <cstdint>
#include <vector>

#include "zen/detail/thread_pool.hpp"
#include "zen/hash/hash.hpp"
#include "zen/hash/region_hash.hpp"
#include "zen/tensor.hpp"

namespace zen {

class SortPartition {
 public:
  /// Whether owner and position bits fit the 32 key bits of a record (N up to about 2^31).
  static bool fits(const Partitioner& part);
  /// Partition the entries of `in` over the owners of `part` (`fwd`: optional cached pi table).
  /// Indices outside [0, N/D) throw InvalidArgument naming the entry; more than 2^31-1 entries or a
  /// partition that does not fit() throw InvalidArgument.
  void partition(const SparseView& in, const Partitioner& part, detail::ThreadPool* pool, HashPartition& out,
                 const uint32_t* fwd = nullptr);
  /// Grow now what partition() of up to `nnz` entries over `n_owners` owners with up to `tasks`
  /// tasks needs (its own buffers and `out`'s), so that such a call allocates nothing: a plan that
  /// hashes a large call may sort-partition a later, smaller one.
  void reserve(size_t nnz, uint32_t n_owners, int tasks, HashPartition& out);

 private:
  std::vector<uint64_t> rec_, tmp_;
  std::vector<uint64_t> task_bad_;
  std::vector<size_t> count_;
};

}  // namespace zen
