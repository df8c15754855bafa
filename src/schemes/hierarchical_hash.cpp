#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>

#include "zen/detail/parallel.hpp"
#include "zen/error.hpp"
#include "zen/hash/hierarchical.hpp"

namespace zen {

void hierarchical_partition(const SparseView& in, const Partitioner& part, const HierarchicalHashConfig& cfg,
                            HashPartition& out) {
  const size_t nnz = in.nnz;
  const uint32_t n = part.n_owners;
  ZEN_ENFORCE(nnz < 0xFFFFFFFFull, "hierarchical hashing: " + std::to_string(nnz) + " entries exceed 2^32-1 per call");
  ZEN_ENFORCE(cfg.hash_functions >= 1 && cfg.hash_functions <= 16,
              "hierarchical hashing: hash function count " + std::to_string(cfg.hash_functions) + " outside [1, 16]");
  const double r1 = std::max(0.0, cfg.parallel_factor) * static_cast<double>(nnz);
  const size_t cap1 = std::max<size_t>(16, static_cast<size_t>(std::ceil(r1 / n)));
  const size_t cap2 = std::max<size_t>(8, static_cast<size_t>(std::ceil(r1 * cfg.serial_fraction / n)));
  constexpr uint32_t kEmpty = 0xFFFFFFFFu;

  std::unique_ptr<std::atomic<uint32_t>[]> par(new std::atomic<uint32_t>[n * cap1]);
  std::unique_ptr<uint32_t[]> ser(new uint32_t[n * cap2]);
  std::unique_ptr<std::atomic<uint64_t>[]> cnt(new std::atomic<uint64_t>[n]);
  for (size_t i = 0; i < n * cap1; ++i) par[i].store(kEmpty, std::memory_order_relaxed);
  for (uint32_t p = 0; p < n; ++p) cnt[p].store(0, std::memory_order_relaxed);
  std::vector<uint64_t> pos_of(nnz);
  std::vector<uint32_t> owner_of(nnz);

  uint64_t hseed[16];
  for (int j = 0; j < cfg.hash_functions; ++j)
    hseed[j] = mix_seed(mix64(cfg.seed * 0x100000001b3ULL + static_cast<uint64_t>(j) + 1));

  const int threads = detail::resolve_threads(cfg.threads, nnz);
  std::vector<std::vector<uint32_t>> spill(static_cast<size_t>(threads));
  std::vector<uint64_t> placed_par(static_cast<size_t>(threads), 0), placed_ser(static_cast<size_t>(threads), 0);

  detail::parallel_for(nnz, threads, [&](size_t b, size_t e, int t) {
    for (size_t i = b; i < e; ++i) {
      const uint64_t idx = static_cast<uint64_t>(in.index_at(i));
      uint32_t p;
      uint64_t pos;
      part.locate(idx, &p, &pos);
      owner_of[i] = p;
      pos_of[i] = pos;
      std::atomic<uint32_t>* region = &par[static_cast<size_t>(p) * cap1];
      bool placed = false;
      for (int j = 0; j < cfg.hash_functions && !placed; ++j) {
        const size_t s = static_cast<size_t>(reduce_range(hash64_mixed(idx, hseed[j]), cap1));
        uint32_t expected = kEmpty;
        // compare-and-swap: a slot is claimed by exactly one entry, no check-then-store race.
        placed = region[s].compare_exchange_strong(expected, static_cast<uint32_t>(i), std::memory_order_relaxed);
      }
      if (placed) {
        ++placed_par[t];
        continue;
      }
      const uint64_t j = cnt[p].fetch_add(1, std::memory_order_relaxed);
      if (j < cap2) {
        ser[static_cast<size_t>(p) * cap2 + j] = static_cast<uint32_t>(i);
        ++placed_ser[t];
      } else {
        spill[t].push_back(static_cast<uint32_t>(i));  // serial region full: never written past it
      }
    }
  });

  // Compaction: per owner, parallel region then serial region then spill, into contiguous segments.
  std::vector<size_t> seg(n, 0);
  std::vector<std::vector<uint32_t>> spill_by_owner(n);
  for (auto& s : spill)
    for (uint32_t i : s) spill_by_owner[owner_of[i]].push_back(i);
  const int cthreads = detail::resolve_threads(cfg.threads, static_cast<size_t>(n) * cap1, 1u << 16);
  std::vector<std::vector<uint32_t>> lists(n);
  detail::parallel_for(n, std::min<int>(cthreads, static_cast<int>(n)), [&](size_t b, size_t e, int) {
    for (size_t p = b; p < e; ++p) {
      auto& L = lists[p];
      const std::atomic<uint32_t>* region = &par[p * cap1];
      for (size_t s = 0; s < cap1; ++s) {
        uint32_t v = region[s].load(std::memory_order_relaxed);
        if (v != kEmpty) L.push_back(v);
      }
      const size_t ns = std::min<uint64_t>(cnt[p].load(), cap2);
      L.insert(L.end(), &ser[p * cap2], &ser[p * cap2] + ns);
      L.insert(L.end(), spill_by_owner[p].begin(), spill_by_owner[p].end());
    }
  });
  out.offsets.assign(n + 1, 0);
  for (uint32_t p = 0; p < n; ++p) out.offsets[p + 1] = out.offsets[p] + lists[p].size();
  ZEN_CHECK_CODE(out.offsets[n] == nnz, Result::InternalError,
                 "hierarchical hashing lost entries: " + std::to_string(out.offsets[n]) + " of " + std::to_string(nnz));
  out.entry.resize(nnz);
  out.pos.resize(nnz);
  for (uint32_t p = 0; p < n; ++p) {
    size_t o = out.offsets[p];
    for (uint32_t i : lists[p]) {
      out.entry[o] = i;
      out.pos[o] = pos_of[i];
      ++o;
    }
  }
  out.parallel_placed = out.serial_placed = out.spilled = out.overflowed_owners = 0;
  for (int t = 0; t < threads; ++t) {
    out.parallel_placed += placed_par[t];
    out.serial_placed += placed_ser[t];
    out.spilled += spill[t].size();
  }
  for (uint32_t p = 0; p < n; ++p) out.overflowed_owners += spill_by_owner[p].empty() ? 0 : 1;
}

}  // namespace zen
