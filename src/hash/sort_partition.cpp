// Sort partition (see zen/hash/sort_partition.hpp).
#include "zen/hash/sort_partition.hpp"

#include <algorithm>
#include <string>

#include "zen/detail/radix_sort.hpp"
#include "zen/error.hpp"

namespace zen {

bool SortPartition::fits(const Partitioner& part) {
  return detail::bits_for(part.n_owners) + detail::bits_for(std::max<uint64_t>(part.owner_size(0), 1)) <= 32;
}

void SortPartition::reserve(size_t nnz, uint32_t n_owners, int tasks, HashPartition& out) {
  if (rec_.size() < nnz) rec_.resize(nnz);
  if (tmp_.size() < nnz) tmp_.resize(nnz);
  task_bad_.reserve(static_cast<size_t>(std::max(tasks, 1)));
  count_.reserve(n_owners);
  if (out.offsets.size() < size_t{n_owners} + 1) out.offsets.resize(size_t{n_owners} + 1);
  if (out.rep.size() < nnz) out.rep.resize(nnz);
  if (out.pos.size() < nnz) out.pos.resize(nnz);
  if (out.key_of.size() < nnz) out.key_of.resize(nnz);
}

void SortPartition::partition(const SparseView& in, const Partitioner& part, detail::ThreadPool* pool,
                              HashPartition& out, const uint32_t* fwd) {
  const size_t nnz = in.nnz;
  const uint32_t n = part.n_owners;
  const uint64_t R = part.n_items;
  ZEN_ENFORCE(nnz < 0x7FFFFFFFull, "sort partition: " + std::to_string(nnz) + " entries exceed 2^31-1 per call");
  ZEN_ENFORCE(fits(part), "sort partition: " + std::to_string(R) + " rows over " + std::to_string(n) +
                              " owners do not fit 32 key bits");
  const int qb = detail::bits_for(std::max<uint64_t>(part.owner_size(0), 1)), ob = detail::bits_for(n);
  if (rec_.size() < nnz) rec_.resize(nnz);
  if (tmp_.size() < nnz) tmp_.resize(nnz);
  uint64_t* rec = rec_.data();

  // (p << qb | q) << 32 | entry, in parallel over the entries; the first bad entry of each task.
  const int tasks = pool ? pool->tasks_for(nnz, size_t{1} << 14) : 1;
  task_bad_.assign(static_cast<size_t>(tasks), ~uint64_t{0});
  auto build = [&](int t) {
    const size_t b = detail::ThreadPool::chunk_begin(nnz, tasks, t), e = detail::ThreadPool::chunk_begin(nnz, tasks, t + 1);
    for (size_t i = b; i < e; ++i) {
      const int64_t sx = in.index_at(i);
      if (sx < 0 || static_cast<uint64_t>(sx) >= R) {
        if (task_bad_[static_cast<size_t>(t)] == ~uint64_t{0}) task_bad_[static_cast<size_t>(t)] = i;
        continue;
      }
      const uint64_t x = static_cast<uint64_t>(sx);
      uint32_t p;
      uint64_t q;
      if (fwd) part.divmod(fwd[x], &q, &p);
      else part.locate(x, &p, &q);
      rec[i] = (((static_cast<uint64_t>(p) << qb) | q) << 32) | i;
    }
  };
  if (tasks > 1) pool->run(tasks, build);
  else build(0);
  uint64_t bad = ~uint64_t{0};
  for (uint64_t b : task_bad_) bad = std::min(bad, b);
  if (bad != ~uint64_t{0})
    ZEN_THROW(Result::InvalidArgument, "sort partition: index " + std::to_string(in.index_at(bad)) + " at entry " +
                                           std::to_string(bad) + " is outside [0, " + std::to_string(R) + ")");

  detail::radix_sort_u64(rec, tmp_.data(), nnz, 32, ob + qb);

  // Keys in (owner, position) order: the first entry of each run is the representative.
  if (out.offsets.size() < n + 1) out.offsets.resize(n + 1);
  if (out.rep.size() < nnz) out.rep.resize(nnz);
  if (out.pos.size() < nnz) out.pos.resize(nnz);
  if (out.key_of.size() < nnz) out.key_of.resize(nnz);
  count_.assign(n, 0);
  const uint64_t qmask = (uint64_t{1} << qb) - 1;
  uint32_t* rep = out.rep.data();
  uint64_t* pos = out.pos.data();
  uint32_t* key_of = out.key_of.data();
  size_t K = 0;
  uint64_t prev = ~uint64_t{0};
  bool dup = false;
  for (size_t j = 0; j < nnz; ++j) {
    const uint64_t key = rec[j] >> 32;
    const uint32_t i = static_cast<uint32_t>(rec[j]);
    if (key != prev) {
      rep[K] = i;
      pos[K] = key & qmask;
      ++count_[key >> qb];
      ++K;
      prev = key;
    } else {
      dup = true;
    }
    key_of[i] = static_cast<uint32_t>(K - 1);
  }
  out.offsets[0] = 0;
  for (uint32_t p = 0; p < n; ++p) out.offsets[p + 1] = out.offsets[p] + count_[p];
  out.keys = K;
  out.duplicates = dup;
  out.sorted = true;
  out.parallel_placed = out.serial_placed = out.spilled = out.overflowed_owners = 0;
}

}  // namespace zen
