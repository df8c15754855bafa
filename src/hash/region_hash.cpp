// Region hashing with source-side merging of equal keys (see zen/hash/region_hash.hpp).
#include <algorithm>
#include <cmath>
#include <string>

#include "zen/error.hpp"
#include "zen/hash/region_hash.hpp"

namespace zen {

namespace {
constexpr uint32_t kEmpty = 0xFFFFFFFFu;
constexpr uint32_t kTail = 0xFFFFFFFFu;  // slot_of: the entry is in the serial region or the spill
constexpr uint32_t kBad = 0xFFFFFFFEu;   // slot_of: index out of range
}  // namespace

// The parallel regions are plain words updated with the compiler's atomic builtins while the table
// is built (pass 1) and read plainly afterwards (the pool's join orders the two), so that the
// compaction scans vectorize.
inline uint32_t load_slot(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline bool cas_slot(uint32_t* p, uint32_t& expected, uint32_t desired) {
  return __atomic_compare_exchange_n(p, &expected, desired, true, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

struct RegionHash::Impl {
  std::unique_ptr<uint32_t[]> par;  // parallel regions; all EMPTY between calls
  size_t par_cap = 0;
  bool par_dirty = false;  // a call ended early: clear everything before the next one
  std::vector<uint32_t> ser;
  std::unique_ptr<std::atomic<uint64_t>[]> cnt;
  size_t cnt_cap = 0;
  std::vector<uint64_t> epos;      // per entry: owner-local position
  std::vector<uint32_t> slot_of;   // per entry: parallel slot id, kTail or kBad
  std::vector<uint32_t> slot_key;  // per parallel slot: key id (valid for occupied slots after compaction)
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> spill;  // per task: (owner, entry)
  std::vector<std::vector<uint32_t>> tail;                         // per owner: serial + spilled entries
  std::vector<size_t> kpar, ktail;                                 // per owner: keys in parallel region / tail
  std::vector<uint8_t> spilled_owner;
  std::vector<uint64_t> task_par, task_ser, task_bad;
  std::vector<uint8_t> task_dup;
  std::vector<uint64_t> ecnt;  // per (entry task, owner): parallel keys, then the task's cursor
};

RegionHash::RegionHash() : impl_(std::make_unique<Impl>()) {}
RegionHash::~RegionHash() = default;

void RegionHash::partition(const SparseView& in, const Partitioner& part, const RegionHashConfig& cfg,
                                 detail::ThreadPool* pool, HashPartition& out, const uint32_t* fwd) {
  Impl& s = *impl_;
  const size_t nnz = in.nnz;
  const uint32_t n = part.n_owners;
  const uint64_t R = part.n_items;
  ZEN_ENFORCE(nnz < 0x7FFFFFFFull, "region hashing: " + std::to_string(nnz) + " entries exceed 2^31-1 per call");
  ZEN_ENFORCE(cfg.hash_functions >= 1 && cfg.hash_functions <= 16,
              "region hashing: hash function count " + std::to_string(cfg.hash_functions) + " outside [1, 16]");
  const double r1 = std::max(0.0, cfg.parallel_factor) * static_cast<double>(nnz);
  size_t cap1 = std::max<size_t>(16, static_cast<size_t>(std::ceil(r1 / n)));
  while (static_cast<uint64_t>(cap1) * n >= 0x7FFFFFF0ull && cap1 > 16) cap1 /= 2;  // slot ids fit 31 bits
  const size_t cap2 = std::max<size_t>(8, static_cast<size_t>(std::ceil(r1 * cfg.serial_fraction / n)));
  const size_t nslots = cap1 * n;

  // Storage (grow only). A grown or dirty table is reset to EMPTY once.
  if (s.par_cap < nslots || s.par_dirty) {
    if (s.par_cap < nslots) {
      s.par.reset(new uint32_t[nslots]);
      s.par_cap = nslots;
    }
    std::fill(s.par.get(), s.par.get() + s.par_cap, kEmpty);
    s.par_dirty = false;
  }
  if (s.cnt_cap < n) {
    s.cnt.reset(new std::atomic<uint64_t>[n]);
    s.cnt_cap = n;
  }
  for (uint32_t p = 0; p < n; ++p) s.cnt[p].store(0, std::memory_order_relaxed);
  if (s.ser.size() < cap2 * n) s.ser.resize(cap2 * n);
  if (s.epos.size() < nnz) s.epos.resize(nnz);
  if (s.slot_of.size() < nnz) s.slot_of.resize(nnz);
  if (s.slot_key.size() < nslots) s.slot_key.resize(nslots);
  if (s.tail.size() < n) s.tail.resize(n);
  s.kpar.assign(n, 0);
  s.ktail.assign(n, 0);
  s.spilled_owner.assign(n, 0);
  const int tasks = pool ? pool->tasks_for(nnz, size_t{1} << 14) : 1;
  if (s.spill.size() < static_cast<size_t>(tasks)) s.spill.resize(static_cast<size_t>(tasks));
  s.task_par.assign(static_cast<size_t>(tasks), 0);
  s.task_ser.assign(static_cast<size_t>(tasks), 0);
  s.task_bad.assign(static_cast<size_t>(tasks), ~uint64_t{0});
  s.task_dup.assign(static_cast<size_t>(tasks), 0);
  for (int t = 0; t < tasks; ++t) s.spill[static_cast<size_t>(t)].clear();

  // h_1..h_k: seeded multiply-add-shift hashes (2-universal; one multiply each), reduced to [0, cap1)
  // by multiply-high of their top 32 bits.
  uint64_t ha[16], hb[16];
  for (int j = 0; j < cfg.hash_functions; ++j) {
    ha[j] = mix64(cfg.seed * 0x100000001b3ULL + static_cast<uint64_t>(j) + 1) | 1u;
    hb[j] = mix64(ha[j] ^ 0x9e3779b97f4a7c15ULL);
  }

  s.par_dirty = true;  // until compaction has cleared what this call wrote
  uint32_t* par = s.par.get();
  uint32_t* ser = s.ser.data();
  uint64_t* epos = s.epos.data();
  uint32_t* slot_of = s.slot_of.data();

  // Pass 1: place every entry (parallel over contiguous input chunks).
  // One task: plain loads and stores (no other thread); several: compare-and-swap.
  auto place = [&](int t, auto atomic_tag) {
    constexpr bool kAtomic = decltype(atomic_tag)::value;
    const size_t b = detail::ThreadPool::chunk_begin(nnz, tasks, t), e = detail::ThreadPool::chunk_begin(nnz, tasks, t + 1);
    uint64_t placed_par = 0, placed_ser = 0;
    bool dup = false;
    // Entries go in blocks: first owner, position and first slot of each (pi evaluated, the slot
    // prefetched), then the probes, so that the table's cache misses overlap.
    constexpr size_t kBlock = 32;
    uint32_t bown[kBlock];
    for (size_t bb = b; bb < e; bb += kBlock) {
      const size_t be = std::min(e, bb + kBlock);
      if (fwd)  // the block's pi lookups overlap their cache misses
        for (size_t i = bb; i < be; ++i) {
          const uint64_t x = static_cast<uint64_t>(in.index_at(i));
          if (x < R) __builtin_prefetch(fwd + x);
        }
      for (size_t i = bb; i < be; ++i) {
        const int64_t sx = in.index_at(i);
        if (sx < 0 || static_cast<uint64_t>(sx) >= R) {
          bown[i - bb] = kEmpty;
          continue;
        }
        const uint64_t x = static_cast<uint64_t>(sx);
        uint32_t p;
        uint64_t q;
        if (fwd)
          part.divmod(fwd[x], &q, &p);
        else
          part.locate(x, &p, &q);
        epos[i] = q;
        bown[i - bb] = p;
        __builtin_prefetch(
            par + static_cast<size_t>(p) * cap1 + static_cast<size_t>(((x * ha[0] + hb[0]) >> 32) * cap1 >> 32), 1);
      }
      for (size_t i = bb; i < be; ++i) {
        if (bown[i - bb] == kEmpty) {
          if (s.task_bad[static_cast<size_t>(t)] == ~uint64_t{0}) s.task_bad[static_cast<size_t>(t)] = i;
          slot_of[i] = kBad;
          continue;
        }
        const uint64_t x = static_cast<uint64_t>(in.index_at(i));
        const uint32_t p = bown[i - bb];
        uint32_t* region = par + static_cast<size_t>(p) * cap1;
        const uint32_t me = static_cast<uint32_t>(i);
        bool placed = false;
        for (int j = 0; j < cfg.hash_functions && !placed; ++j) {
          const size_t sl = static_cast<size_t>(((x * ha[j] + hb[j]) >> 32) * cap1 >> 32);
          uint32_t cur = kAtomic ? load_slot(region + sl) : region[sl];
          for (;;) {
            if (cur == kEmpty) {
              if constexpr (!kAtomic) {
                region[sl] = me;
                placed = true;
                break;
              }
              // compare-and-swap: a slot is claimed by exactly one key, no check-then-store race.
              if (cas_slot(region + sl, cur, me)) {
                placed = true;
                break;
              }
              continue;  // cur now holds whoever won
            }
            if (static_cast<uint64_t>(in.index_at(cur)) == x) {
              // Same key: merge. The slot keeps the smallest entry id of the key (atomic min).
              dup = true;
              if constexpr (kAtomic) {
                while (me < cur && !cas_slot(region + sl, cur, me)) {
                }
              }  // one task: entries arrive in ascending order, the slot already holds the smallest
              placed = true;
            }
            break;  // merged, or another key: next hash function
          }
          if (placed) slot_of[i] = static_cast<uint32_t>(static_cast<size_t>(p) * cap1 + sl);
        }
        if (placed) {
          ++placed_par;
          continue;
        }
        slot_of[i] = kTail;
        const uint64_t c =
            kAtomic ? s.cnt[p].fetch_add(1, std::memory_order_relaxed) : s.cnt[p].load(std::memory_order_relaxed);
        if constexpr (!kAtomic) s.cnt[p].store(c + 1, std::memory_order_relaxed);
        if (c < cap2) {
          ser[static_cast<size_t>(p) * cap2 + c] = me;
          ++placed_ser;
        } else {
          s.spill[static_cast<size_t>(t)].emplace_back(p, me);  // serial region full: never written past it
        }
      }
    }
    s.task_par[static_cast<size_t>(t)] = placed_par;
    s.task_ser[static_cast<size_t>(t)] = placed_ser;
    s.task_dup[static_cast<size_t>(t)] = dup;
  };
  if (tasks > 1) pool->run(tasks, [&](int t) { place(t, std::true_type{}); });
  else place(0, std::false_type{});

  uint64_t bad = ~uint64_t{0};
  for (int t = 0; t < tasks; ++t) bad = std::min(bad, s.task_bad[static_cast<size_t>(t)]);
  if (bad != ~uint64_t{0})
    ZEN_THROW(Result::InvalidArgument, "region hashing: index " + std::to_string(in.index_at(bad)) + " at entry " +
                                           std::to_string(bad) + " is outside [0, " + std::to_string(R) + ")");

  // Tails: serial region then spill, per owner; merged by a sort on (index, entry id).
  bool dup = false;
  for (int t = 0; t < tasks; ++t) dup = dup || s.task_dup[static_cast<size_t>(t)];
  uint64_t spilled = 0;
  for (uint32_t p = 0; p < n; ++p) {
    auto& L = s.tail[p];
    L.clear();
    if (L.capacity() < cap2) L.reserve(cap2);  // a full serial region fits: no growth call to call
    const size_t ns = std::min<uint64_t>(s.cnt[p].load(std::memory_order_relaxed), cap2);
    L.insert(L.end(), ser + static_cast<size_t>(p) * cap2, ser + static_cast<size_t>(p) * cap2 + ns);
  }
  for (int t = 0; t < tasks; ++t)
    for (const auto& [p, e] : s.spill[static_cast<size_t>(t)]) {
      s.tail[p].push_back(e);
      s.spilled_owner[p] = 1;
      ++spilled;
    }
  auto by_key = [&](uint32_t a, uint32_t b) {
    const int64_t ka = in.index_at(a), kb = in.index_at(b);
    return ka != kb ? ka < kb : a < b;
  };
  // Keys per owner: the parallel region's by one pass over the entries (a slot's key is its
  // representative, the smallest entry id that reached it: the first in entry order), in ranges of
  // entries per task, counted per (task, owner); then the tail runs per owner. A pass over the
  // entries, not over the 2x larger table, and the keys come out in entry order.
  const uint64_t cap1_magic = ~uint64_t{0} / cap1 + 1;  // slot / cap1 = (magic * slot) >> 64 (slot < 2^32)
  auto owner_of_slot = [cap1_magic](uint32_t sl) {
    return static_cast<uint32_t>((static_cast<unsigned __int128>(cap1_magic) * sl) >> 64);
  };
  const int etasks = pool ? pool->tasks_for(nnz, size_t{1} << 15) : 1;
  s.ecnt.assign(static_cast<size_t>(etasks) * n, 0);
  auto count_entries = [&](int t) {
    const size_t b = detail::ThreadPool::chunk_begin(nnz, etasks, t), e = detail::ThreadPool::chunk_begin(nnz, etasks, t + 1);
    uint64_t* c = s.ecnt.data() + static_cast<size_t>(t) * n;
    for (size_t i = b; i < e; ++i) {
      const uint32_t sl = slot_of[i];
      if (sl >= kBad) continue;  // the tail (a few %): predictable
      c[owner_of_slot(sl)] += par[sl] == static_cast<uint32_t>(i);  // no branch on "first of its key"
    }
  };
  if (etasks > 1) pool->run(etasks, count_entries);
  else count_entries(0);
  for (uint32_t p = 0; p < n; ++p) {
    uint64_t k = 0;
    for (int t = 0; t < etasks; ++t) k += s.ecnt[static_cast<size_t>(t) * n + p];
    s.kpar[p] = k;
  }
  const int otasks = pool ? std::min<int>(pool->tasks_for(nnz, size_t{1} << 15), static_cast<int>(n)) : 1;
  auto count_owner = [&](uint32_t p) {
    auto& L = s.tail[p];
    if (L.size() > 1) std::sort(L.begin(), L.end(), by_key);
    size_t u = 0;
    for (size_t i = 0; i < L.size(); ++i) u += (i == 0 || in.index_at(L[i]) != in.index_at(L[i - 1]));
    s.ktail[p] = u;
  };
  auto owners_of = [&](int t, auto&& f) {
    const size_t b = detail::ThreadPool::chunk_begin(n, otasks, t), e = detail::ThreadPool::chunk_begin(n, otasks, t + 1);
    for (size_t p = b; p < e; ++p) f(static_cast<uint32_t>(p));
  };
  if (otasks > 1) pool->run(otasks, [&](int t) { owners_of(t, count_owner); });
  else owners_of(0, count_owner);

  if (out.offsets.size() < n + 1) out.offsets.resize(n + 1);
  out.offsets[0] = 0;
  size_t tail_keys = 0, tail_entries = 0;
  for (uint32_t p = 0; p < n; ++p) {
    out.offsets[p + 1] = out.offsets[p] + s.kpar[p] + s.ktail[p];
    tail_keys += s.ktail[p];
    tail_entries += s.tail[p].size();
  }
  dup = dup || tail_keys != tail_entries;
  const size_t K = out.offsets[n];
  if (out.rep.size() < K) out.rep.resize(K);
  if (out.pos.size() < K) out.pos.resize(K);
  if (dup && out.key_of.size() < nnz) out.key_of.resize(nnz);
  uint32_t* key_of = dup ? out.key_of.data() : nullptr;

  // Compaction: per owner, the parallel region's keys (entry order) then the merged tail. One task:
  // one pass writes the keys, key_of and clears each slot at its representative (a later entry of
  // the slot then finds it empty: not the representative). Several: ranges of entries from each
  // (task, owner) cursor, then key_of and the clearing per owner.
  for (uint32_t p = 0; p < n; ++p) {
    uint64_t at = out.offsets[p];
    for (int t = 0; t < etasks; ++t) {
      uint64_t& c = s.ecnt[static_cast<size_t>(t) * n + p];
      const uint64_t k = c;
      c = at;
      at += k;
    }
  }
  const bool one = etasks == 1;
  auto fill_entries = [&](int t) {
    const size_t b = detail::ThreadPool::chunk_begin(nnz, etasks, t), e = detail::ThreadPool::chunk_begin(nnz, etasks, t + 1);
    uint64_t* c = s.ecnt.data() + static_cast<size_t>(t) * n;
    for (size_t i = b; i < e; ++i) {
      const uint32_t sl = slot_of[i];
      if (sl >= kBad) continue;
      if (par[sl] == static_cast<uint32_t>(i)) {
        const uint64_t k = c[owner_of_slot(sl)]++;
        s.slot_key[sl] = static_cast<uint32_t>(k);
        out.rep[k] = static_cast<uint32_t>(i);
        out.pos[k] = epos[i];
        if (one) {
          par[sl] = kEmpty;
          if (key_of) key_of[i] = static_cast<uint32_t>(k);
        }
      } else if (one && key_of) {
        key_of[i] = s.slot_key[sl];
      }
    }
  };
  if (one) fill_entries(0);
  else pool->run(etasks, fill_entries);
  auto fill_owner = [&](uint32_t p) {
    size_t k = out.offsets[p] + s.kpar[p];
    if (!one)
      for (size_t j = out.offsets[p]; j < k; ++j) par[slot_of[out.rep[j]]] = kEmpty;
    const auto& L = s.tail[p];
    for (size_t i = 0; i < L.size(); ++i) {
      if (i > 0 && in.index_at(L[i]) == in.index_at(L[i - 1])) {
        if (key_of) key_of[L[i]] = static_cast<uint32_t>(k - 1);
        continue;
      }
      out.rep[k] = L[i];  // smallest entry id of the run (sorted by (index, entry))
      out.pos[k] = epos[L[i]];
      if (key_of) key_of[L[i]] = static_cast<uint32_t>(k);
      ++k;
    }
  };
  if (otasks > 1) pool->run(otasks, [&](int t) { owners_of(t, fill_owner); });
  else owners_of(0, fill_owner);
  s.par_dirty = false;

  if (key_of && !one) {
    auto map = [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; ++i)
        if (slot_of[i] != kTail) key_of[i] = s.slot_key[slot_of[i]];
    };
    pool->parallel_for(nnz, size_t{1} << 15, map);
  }

  out.keys = K;
  out.duplicates = dup;
  out.sorted = false;
  out.parallel_placed = out.serial_placed = 0;
  for (int t = 0; t < tasks; ++t) {
    out.parallel_placed += s.task_par[static_cast<size_t>(t)];
    out.serial_placed += s.task_ser[static_cast<size_t>(t)];
  }
  out.spilled = spilled;
  out.overflowed_owners = 0;
  for (uint32_t p = 0; p < n; ++p) out.overflowed_owners += s.spilled_owner[p];
}

void region_hash_partition(const SparseView& in, const Partitioner& part, const RegionHashConfig& cfg,
                            HashPartition& out) {
  detail::ThreadPool pool(cfg.threads > 0 ? cfg.threads : detail::affinity_cores());
  RegionHash h;
  h.partition(in, part, cfg, &pool, out);
}

}  // namespace zen
