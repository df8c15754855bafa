// Balanced Parallelism (Zen): hash partition -> push (alltoallv of COO, or of the owner's keys
// sorted and coded as Elias-Fano / bitmap) -> owner sums in compact per-owner space -> pull
// (allgatherv of COO, hash bitmap or Elias-Fano + values) -> decode. See
// docs/algorithms.md ("balanced") and docs/architecture.md ("A plan").
//
// The plan owns everything a call needs (hash table, push/pull buffers, owner accumulator, decode
// scratch, cached pi / pi^-1 tables) in a workspace that only grows, so steady-state calls allocate
// nothing; the stages run on the plan's thread pool. Equal keys of one rank are merged in the hash
// table and pushed once (summed in ascending input order: the same bits whatever the thread count).
#include <algorithm>
#include <cstring>
#include <memory>

#include "owner_stage.hpp"
#include "plan_util.hpp"
#include "zen/encode/bitmap.hpp"
#include "zen/encode/coo.hpp"
#include "zen/encode/elias_fano.hpp"
#include "zen/error.hpp"
#include "zen/hash/hierarchical.hpp"
#include "zen/hash/sort_partition.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

// What every owner publishes before the pull (one small allgather).
struct OwnerMeta {
  uint64_t result_rows;  // K_i: positions in owner i's result
  uint64_t pushed_rows;  // rows owner i received in the push (for push imbalance)
  uint64_t encoding;     // plan::kEncCoo / kEncBitmap / kEncEf
};

// Tables of pi / pi^-1 over all R rows (4 bytes each) replace the Feistel evaluations of every entry
// and result row: built at the first call when R <= kSmallTable (at most 32 MiB, one evaluation per
// row, once), or when they pay for themselves within a few calls (R <= 32 x the call's entries) up to
// kTableRows. The decision is taken again only when a call brings more entries than any before (a
// larger call may allocate; a call of the same or a smaller size never does).
constexpr uint64_t kSmallTable = uint64_t{1} << 22;
constexpr uint64_t kTableRows = uint64_t{1} << 24;
// The forward table is read in input order (random rows): it only beats evaluating pi while it stays
// in cache. The inverse table is read in position order (a stride of n): it streams when the result is
// dense enough to touch most of its cache lines (16 entries each): it is built only when the call's
// entries alone cover 1/16 of the rows, and read only when the call's result does.
constexpr uint64_t kForwardTableRows = uint64_t{1} << 18;
constexpr uint64_t kInverseDensity = 16;

struct Workspace {
  HierarchicalHash hash;
  SortPartition sorter_part;
  HashPartition hp;
  std::vector<uint64_t> scount, rcount;  // keys per peer
  std::vector<size_t> sbytes, sdispl, rbytes, rdispl, pbytes, pdispl;
  std::vector<uint8_t> senc, renc;    // push encoding per peer (sent / received), from (m, K) on both sides
  std::vector<size_t> sib, rib;       // bytes of the index part of each push segment
  std::vector<uint64_t> sort_a, sort_b;  // sorted pushes: per-slot records and radix scratch
  std::vector<uint8_t> sbuf, rbuf, all, rkeys;
  std::vector<const uint8_t*> rseg;  // start of each received push segment (the own one in sbuf)
  plan::OwnerState owner;
  std::vector<plan::Segment> segs;
  std::vector<float> dup_acc;     // 16-bit inputs with duplicates: fp32 sums per key
  std::vector<uint64_t> row_off;  // inputs with duplicates: push-buffer offset of each key's row
  std::vector<OwnerMeta> meta;
  OwnerMeta mine{};
  std::vector<uint64_t> owner_k, owner_base, val_off;
  std::vector<plan::KV> kv, kv_tmp;
  std::vector<uint64_t> rec, rec_tmp;  // sparse output sorted as packed (row << obits | offset) records
  plan::RadixSort sorter;
  std::vector<uint32_t> fwd, inv;  // pi and pi^-1 over rows (when cached)
  size_t max_nnz = 0;
  std::vector<uint64_t> loads_push;
};

using plan::load_as;
using plan::store_as;

class Balanced final : public SparseAllreduce {
 public:
  ~Balanced() override { quiesce(); }  // pending non-blocking calls finish before the members go
  Balanced(Communicator& c, const TensorSpec& s, const SchemeOptions& o)
      : SparseAllreduce(c, s, o),
        part_(Partitioner::make(s.dense_len / s.row_width, static_cast<uint32_t>(c.size()), opt_.seed)),
        wire_(encode::wire_index_type(part_.owner_size(0))),
        ws_(std::make_shared<Workspace>()) {
    holder_ = ws_;
  }
  const char* name() const override { return "balanced"; }

 protected:
  void execute(const SparseView& in, SparseTensor* sparse_out, void* dense_out) override {
    dispatch_dtype(spec_.dtype, [&](auto tag) { run_typed<decltype(tag)>(in, sparse_out, dense_out); });
  }

 private:
  uint64_t rows() const { return spec_.dense_len / spec_.row_width; }

  // Cache pi and pi^-1 over all rows when the call's size makes them worth it (see kTableRows).
  void maybe_build_tables(size_t nnz) {
    Workspace& w = *ws_;
    const uint64_t R = rows();
    if (nnz <= w.max_nnz) return;
    w.max_nnz = nnz;
    if (R == 0 || R > kTableRows || (R > kSmallTable && R > 32 * static_cast<uint64_t>(nnz))) return;
    const bool fwd = w.fwd.empty() && R <= kForwardTableRows;
    const bool inv = w.inv.empty() && kInverseDensity * static_cast<uint64_t>(nnz) >= R;
    if (!fwd && !inv) return;
    if (fwd) w.fwd.resize(R);
    if (inv) w.inv.resize(R);
    pool().parallel_for(R, size_t{1} << 14, [&](size_t b, size_t e, int) {
      for (size_t x = b; x < e; ++x) {
        const uint64_t v = part_.permute(x);
        if (fwd) w.fwd[x] = static_cast<uint32_t>(v);
        if (inv) w.inv[v] = static_cast<uint32_t>(x);
      }
    });
  }

  template <typename T>
  void run_typed(const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
    using A = typename accum_of<T>::type;
    Workspace& w = *ws_;
    detail::ThreadPool& tp = pool();
    const int n = comm_.size(), me = comm_.rank();
    const size_t un = static_cast<size_t>(n);
    const size_t D = spec_.row_width, vs = sizeof(T), rb = D * vs;
    const size_t isz = index_size(wire_);
    maybe_build_tables(in.nnz);

    // 1. Hash partition: owner + position per entry, equal keys merged (smallest entry id kept).
    //    When the pushes will go sorted (the push rule at the expected nnz / n keys per owner) and
    //    one task would do the work anyway, a radix sort partitions instead: it yields the sorted
    //    segments those pushes need (zen/hash/sort_partition.hpp).
    HashPartition& hp = w.hp;
    const bool by_sort = n > 1 && opt_.push != IndexEncoding::Coo && SortPartition::fits(part_) &&
                         tp.tasks_for(in.nnz, size_t{1} << 16) <= 1 &&
                         plan::pick_push_encoding(opt_.push, part_.owner_size(0), in.nnz / un, isz, rb) != plan::kEncCoo;
    if (by_sort) {
      Phase ph(*this, "hash");
      w.sorter_part.partition(in, part_, &tp, hp, w.fwd.empty() ? nullptr : w.fwd.data());
      report_.serial_overflows = 0;
    } else {
      Phase ph(*this, "hash");
      HierarchicalHashConfig cfg;
      cfg.hash_functions = opt_.hash_functions;
      cfg.parallel_factor = opt_.parallel_factor;
      cfg.serial_fraction = opt_.serial_fraction;
      cfg.seed = opt_.seed ^ (0x51ed2701ULL * static_cast<uint64_t>(me + 1));
      w.hash.partition(in, part_, cfg, &tp, hp, w.fwd.empty() ? nullptr : w.fwd.data());
      report_.serial_overflows = hp.overflowed_owners;
      // A later, smaller call may sort-partition (above: fewer than 2^17 entries with several
      // threads): its buffers grow with this call, so that it allocates nothing.
      if (n > 1 && opt_.push != IndexEncoding::Coo && SortPartition::fits(part_))
        w.sorter_part.reserve(tp.threads() > 1 ? std::min<size_t>(in.nnz, size_t{1} << 17) : in.nnz,
                              static_cast<uint32_t>(n), tp.threads(), hp);
    }

    // 2. Counts (alltoall) and push buffer layout. The own segment stays local (count 0 to self).
    w.scount.resize(un);
    w.rcount.resize(un);
    for (int p = 0; p < n; ++p) w.scount[p] = hp.count(static_cast<size_t>(p));
    {
      Phase ph(*this, "counts");
      comm_.alltoall(w.scount.data(), sizeof(uint64_t), w.rcount.data());
    }
    w.sbytes.resize(un);
    w.sdispl.resize(un);
    w.rbytes.resize(un);
    w.rdispl.resize(un);
    w.senc.resize(un);
    w.renc.resize(un);
    w.sib.resize(un);
    w.rib.resize(un);
    const uint64_t m_me = part_.owner_size(static_cast<uint32_t>(me));
    size_t stotal = 0, rtotal = 0, sorted_keys = 0;
    int nsorted = 0;
    double bound = 0;
    for (int p = 0; p < n; ++p) {
      const uint64_t mp = part_.owner_size(static_cast<uint32_t>(p));
      // The own segment stays local as COO; the others by the push rule (same inputs on both sides).
      w.senc[p] = p == me ? plan::kEncCoo : plan::pick_push_encoding(opt_.push, mp, w.scount[p], isz, rb);
      w.renc[p] = p == me ? plan::kEncCoo : plan::pick_push_encoding(opt_.push, m_me, w.rcount[p], isz, rb);
      w.sib[p] = plan::index_part_bytes(w.senc[p], mp, w.scount[p], isz);
      w.rib[p] = plan::index_part_bytes(w.renc[p], m_me, w.rcount[p], isz);
      if (w.senc[p] != plan::kEncCoo) {
        sorted_keys += w.scount[p];
        ++nsorted;
      }
      w.sdispl[p] = stotal;
      stotal += w.sib[p] + w.scount[p] * rb;
      w.sbytes[p] = p == me ? 0 : w.sib[p] + w.scount[p] * rb;
      w.rdispl[p] = rtotal;
      w.rbytes[p] = p == me ? 0 : w.rib[p] + w.rcount[p] * rb;
      rtotal += w.rbytes[p];
      if (p != me) bound += static_cast<double>(w.scount[p] * rb) + encode::log2_binomial(mp, w.scount[p]) / 8.0;
    }
    report_.push_encoding = plan::encodings_name(w.senc.data(), n, me);
    // Every peer pushes to this owner sorted: sort the own segment too and merge instead of
    // accumulating over the owner set (plan::owner_merge).
    // (Sorting takes (position << 32 | row) records: owner sets of at most 2^32 positions.)
    bool merge = n > 1 && n <= plan::kMaxMerge && m_me <= (uint64_t{1} << 32);
    for (int p = 0; p < n && merge; ++p) merge = p == me || w.renc[p] != plan::kEncCoo || w.rcount[p] == 0;
    auto sorted_seg = [&](int p) { return w.senc[p] != plan::kEncCoo || (merge && p == me); };
    if (merge) {
      sorted_keys += w.scount[me];
      ++nsorted;
    }
    uint8_t* sbuf = plan::grow(w.sbuf, stotal);
    uint8_t* rbuf = plan::grow(w.rbuf, rtotal);

    // 3. Encode: per owner segment [index part][K_p value rows]; merged duplicates summed in entry
    //    order. Segments pushed sorted (Elias-Fano / bitmap) take their keys in position order.
    {
      Phase pe(*this, "encode");
      const auto* vals = static_cast<const uint8_t*>(in.values);
      const size_t K = hp.keys;
      const bool dups = hp.duplicates;
      // Sorted segments: one record per slot, (position << 32 | row), or (position << 32 | key)
      // with duplicates (their rows are summed below by key), radix-sorted on the position bits per
      // segment (the push rule keeps owner sets above 2^32 positions on COO).
      uint64_t* srt = nsorted ? plan::grow(w.sort_a, K) : nullptr;
      if (nsorted) {
        size_t widest = 0;
        for (int p = 0; p < n; ++p) widest = std::max(widest, sorted_seg(p) ? w.scount[p] : 0);
        const int stasks = std::max(1, std::min(n, tp.tasks_for(sorted_keys, size_t{1} << 14)));
        uint64_t* scratch = plan::grow(w.sort_b, widest * static_cast<size_t>(stasks));
        tp.run(stasks, [&](int t) {
          for (int p = t; p < n; p += stasks) {
            if (!sorted_seg(p)) continue;
            const size_t b = hp.offsets[p], e = hp.offsets[p + 1];
            for (size_t k = b; k < e; ++k) srt[k] = (hp.pos[k] << 32) | (dups ? static_cast<uint64_t>(k) : hp.rep[k]);
            if (!hp.sorted)
              plan::radix_sort_u64(srt + b, scratch + static_cast<size_t>(t) * widest, e - b, 32,
                                   plan::bits_for(part_.owner_size(static_cast<uint32_t>(p))));
            plan::write_index_part(w.senc[p], sbuf + w.sdispl[p], part_.owner_size(static_cast<uint32_t>(p)), w.scount[p],
                                   isz, [&](uint64_t j) { return srt[b + j] >> 32; });
          }
        });
      }
      auto seg_of = [&](size_t k, uint32_t& p) {
        p = static_cast<uint32_t>(std::upper_bound(hp.offsets.begin(), hp.offsets.begin() + n + 1, k) - hp.offsets.begin() - 1);
        return k - hp.offsets[p];
      };
      uint64_t* rowoff = dups ? plan::grow(w.row_off, K) : nullptr;
      // Keys of the COO segments, and the rows when every key has one entry; with duplicates the
      // row offsets of the keys. A task's range is walked one owner segment at a time.
      const uint64_t* pos = hp.pos.data();
      const uint32_t* rep = hp.rep.data();
      auto fill = [&](auto width, size_t b, size_t e) {
        constexpr size_t W = decltype(width)::value;
        const size_t RB = W ? W : rb;
        uint32_t p = 0;
        size_t j = seg_of(b, p);
        for (size_t k = b; k < e;) {
          while (j >= w.scount[p]) {
            ++p;
            j = 0;
          }
          const size_t stop = std::min<size_t>(e, hp.offsets[p + 1]);
          const bool coo = !sorted_seg(static_cast<int>(p));
          uint8_t* keys = sbuf + w.sdispl[p] + j * isz;
          uint8_t* rows = sbuf + w.sdispl[p] + w.sib[p] + j * RB;
          const size_t cnt = stop - k;
          if (coo)
            for (size_t i = 0; i < cnt; ++i) plan::store_key(keys, i, isz, pos[k + i]);
          if (dups) {
            for (size_t i = 0; i < cnt; ++i) {
              const uint64_t low = coo ? k + i : static_cast<uint32_t>(srt[k + i]);
              rowoff[low] = static_cast<uint64_t>(rows + i * RB - sbuf);
            }
          } else if (coo) {
            for (size_t i = 0; i < cnt; ++i) {
              if (i + plan::kPrefetchAhead < cnt) plan::prefetch_row(vals + static_cast<size_t>(rep[k + i + plan::kPrefetchAhead]) * RB, RB);
              std::memcpy(rows + i * RB, vals + static_cast<size_t>(rep[k + i]) * RB, RB);
            }
          } else {
            for (size_t i = 0; i < cnt; ++i) {
              if (i + plan::kPrefetchAhead < cnt)
                plan::prefetch_row(vals + static_cast<size_t>(static_cast<uint32_t>(srt[k + i + plan::kPrefetchAhead])) * RB, RB);
              std::memcpy(rows + i * RB, vals + static_cast<size_t>(static_cast<uint32_t>(srt[k + i])) * RB, RB);
            }
          }
          j += cnt;
          k = stop;
        }
      };
      tp.parallel_for(K, size_t{1} << 12, [&](size_t b, size_t e, int) {
        if (rb == 4) fill(std::integral_constant<size_t, 4>{}, b, e);
        else if (rb == 8) fill(std::integral_constant<size_t, 8>{}, b, e);
        else fill(std::integral_constant<size_t, 0>{}, b, e);
      });
      if (dups) {
        // One pass over the entries in ascending order: a key's first entry (its representative)
        // is copied, the others added. Each task owns a range of keys and scans all entries, so the
        // order of every sum is the input order whatever the thread count.
        constexpr bool wide = !std::is_same_v<A, T>;
        float* fa = wide ? plan::grow(w.dup_acc, K * D) : nullptr;
        const int tasks = tp.tasks_for(in.nnz * D, size_t{1} << 16);
        const uint32_t* key_of = hp.key_of.data();
        const uint32_t* rep = hp.rep.data();
        tp.run(tasks, [&](int t) {
          const size_t kb = detail::ThreadPool::chunk_begin(K, tasks, t), ke = detail::ThreadPool::chunk_begin(K, tasks, t + 1);
          for (size_t i = 0; i < in.nnz; ++i) {
            const size_t k = key_of[i];
            if (k < kb || k >= ke) continue;
            const uint8_t* src = vals + i * rb;
            if constexpr (wide) {
              if (rep[k] == i) plan::row_load<T>(fa + k * D, src, D);
              else plan::row_add<T>(fa + k * D, src, D);
            } else {
              uint8_t* dst = sbuf + rowoff[k];
              if (rep[k] == i) std::memcpy(dst, src, rb);
              else plan::row_add_bytes<T>(dst, src, D);
            }
          }
          if constexpr (wide)
            for (size_t k = kb; k < ke; ++k) plan::row_store<T>(sbuf + rowoff[k], fa + k * D, D);
        });
      }
    }
    {
      Phase ph(*this, "push");
      comm_.alltoallv(sbuf, w.sbytes.data(), w.sdispl.data(), rbuf, w.rbytes.data(), w.rdispl.data());
    }

    // 4. Owner sums in compact per-owner space (positions 0..|I_me|-1), sources in rank order; the
    //    first contribution of a position is copied, later ones added (accumulation type).
    const uint64_t m = m_me;
    uint64_t received = 0, K = 0;
    for (int p = 0; p < n; ++p) received += w.rcount[p];
    {
      Phase pa(*this, "aggregate");
      w.segs.resize(un);
      w.rseg.resize(un);
      for (int p = 0; p < n; ++p) w.rseg[p] = p == me ? sbuf + w.sdispl[me] : rbuf + w.rdispl[p];
      plan::received_segments(n, me, w.rseg.data(), w.rcount.data(), w.renc.data(), w.rib.data(), m, isz, w.rkeys,
                              w.segs.data(), "balanced");
      K = merge ? plan::owner_merge<T>(w.owner, w.segs.data(), n, isz, D, m, tp, me, "balanced")
                : plan::owner_accumulate<T>(w.owner, w.segs.data(), n, isz, D, m, tp, me, "balanced");
    }

    // 5. Choose this owner's pull encoding and publish (K_i, pushed_i, encoding_i).
    const uint8_t enc = plan::pick_encoding(opt_.pull, m, K, isz);
    w.mine = OwnerMeta{K, received, enc};
    bound += static_cast<double>(n - 1) * (static_cast<double>(K * rb) + encode::log2_binomial(m, K) / 8.0);
    report_.bound_bytes = bound;
    w.meta.resize(un);
    {
      Phase ph(*this, "meta");
      comm_.allgather(&w.mine, sizeof(OwnerMeta), w.meta.data());
    }
    w.pbytes.resize(un);
    w.pdispl.resize(un);
    w.loads_push.resize(un);
    w.owner_k.resize(un);
    size_t ptotal = 0;
    bool same = true;
    for (int p = 0; p < n; ++p) {
      const uint64_t mp = part_.owner_size(static_cast<uint32_t>(p));
      const uint8_t ep = static_cast<uint8_t>(std::min<uint64_t>(w.meta[p].encoding, 255));
      w.pbytes[p] = plan::index_part_bytes(ep, mp, w.meta[p].result_rows, isz) + w.meta[p].result_rows * rb;
      w.pdispl[p] = ptotal;
      ptotal += w.pbytes[p];
      w.loads_push[p] = w.meta[p].pushed_rows;
      w.owner_k[p] = w.meta[p].result_rows;
      same = same && w.meta[p].encoding == w.meta[0].encoding;
    }
    report_.push_imbalance = detail::imbalance(w.loads_push);
    report_.pull_imbalance = detail::imbalance(w.owner_k);
    report_.encoding = same ? plan::encoding_name(static_cast<uint8_t>(w.meta[0].encoding)) : "mixed";
    report_.global_rows = 0;
    for (int p = 0; p < n; ++p) report_.global_rows += w.meta[p].result_rows;
    uint8_t* all = plan::grow(w.all, ptotal);

    // 6. Write this owner's message in place in the pull buffer (index part, then values in position
    //    order); clears the presence bits.
    {
      Phase pe(*this, "encode");
      plan::owner_write<T>(w.owner, isz, D, enc, all + w.pdispl[me], tp);
    }

    // 7. Pull: allgatherv of every owner's (index encoding + values), in place.
    {
      Phase ph(*this, "pull");
      comm_.allgatherv(all + w.pdispl[me], w.pbytes[me], all, w.pbytes.data(), w.pdispl.data());
    }

    // 8. Decode: positions -> global rows (pi^-1), then scatter (dense) or sort (sparse).
    Phase ph(*this, "decode");
    w.owner_base.resize(un + 1);
    w.val_off.resize(un);
    w.owner_base[0] = 0;
    for (int p = 0; p < n; ++p) {
      const uint8_t* msg = all + w.pdispl[p];
      const uint64_t mp = part_.owner_size(static_cast<uint32_t>(p));
      const uint64_t Kp = w.meta[p].result_rows;
      const uint8_t ep = static_cast<uint8_t>(std::min<uint64_t>(w.meta[p].encoding, 255));
      plan::check_pull_message(msg, ep, mp, Kp, isz, me, p, "balanced");
      w.val_off[p] = w.pdispl[p] + plan::index_part_bytes(ep, mp, Kp, isz);
      w.owner_base[p + 1] = w.owner_base[p] + Kp;
    }
    const uint64_t total = w.owner_base[un];
    report_.result_nnz = total;
    // f(global row, owner p, k-th row of p) for every result row of the owners in task t's share.
    const int tasks = std::min<int>(tp.tasks_for(total * D, size_t{1} << 15), n);
    auto owners = [&](int t, auto&& g) {
      const size_t b = detail::ThreadPool::chunk_begin(un, tasks, t), e = detail::ThreadPool::chunk_begin(un, tasks, t + 1);
      for (size_t p = b; p < e; ++p) g(static_cast<uint32_t>(p));
    };
    // The inverse table is read at a stride of n per owner: it streams when the result touches most
    // of its cache lines, and misses on every row when the result is sparser; then evaluating
    // pi^-1 (three multiply-add rounds) is the faster of the two.
    const bool table = !w.inv.empty() && total * kInverseDensity >= rows();
    const uint32_t* inv = table ? w.inv.data() : nullptr;
    if (!sparse_out) {
      // Dense output: zero the buffer, then each owner's rows go straight to their global rows
      // (owners are disjoint), in batches whose destinations are prefetched together: the zeroing
      // left them out of cache.
      auto* d = static_cast<uint8_t*>(dense_out);
      if (spec_.dense_len) plan::parallel_zero(d, spec_.dense_len * vs, &tp);
      tp.run(tasks, [&](int t) {
        owners(t, [&](uint32_t p) {
          constexpr int kBatch = 32;
          uint64_t dst[kBatch], src[kBatch];
          int c = 0;
          auto flush = [&] {
            for (int i = 0; i < c; ++i) __builtin_prefetch(d + dst[i] * rb, 1);
            for (int i = 0; i < c; ++i) std::memcpy(d + dst[i] * rb, all + src[i], rb);
            c = 0;
          };
          const uint64_t base = w.val_off[p];
          plan::for_positions(all + w.pdispl[p], static_cast<uint8_t>(w.meta[p].encoding), part_.owner_size(p),
                              w.meta[p].result_rows, isz,
                              [&](uint64_t q, uint64_t k) {
                                const uint64_t v = p + static_cast<uint64_t>(n) * q;
                                dst[c] = table ? inv[v] : part_.unpermute(v);
                                src[c] = base + k * rb;
                                if (++c == kBatch) flush();
                              },
                              me, static_cast<int>(p), "balanced");
          flush();
        });
      });
      return;
    }
    // (global row, offset of its values in the pull buffer) for every result row: first the pi
    // values p + n * position (ascending), then their preimages (table lookups prefetched ahead).
    // A sparse output that one task sorts anyway sorts 8-byte records (row << obits | byte offset of
    // its values in the pull buffer): half the traffic of (row, offset) pairs.
    const int rbits = plan::bits_for(rows()), obits = plan::bits_for(std::max<uint64_t>(ptotal, 1));
    const bool packed = rbits + obits <= 64 && tp.tasks_for(total, size_t{1} << 16) <= 1;
    plan::KV* kv = packed ? nullptr : plan::grow(w.kv, total);
    uint64_t* rec = packed ? plan::grow(w.rec, total) : nullptr;
    tp.run(tasks, [&](int t) {
      owners(t, [&](uint32_t p) {
        const uint64_t base = w.val_off[p];
        const uint64_t Kp = w.meta[p].result_rows;
        if (packed) {
          uint64_t* o = rec + w.owner_base[p];
          plan::for_positions(all + w.pdispl[p], static_cast<uint8_t>(w.meta[p].encoding), part_.owner_size(p), Kp, isz,
                              [&](uint64_t q, uint64_t k) { o[k] = p + static_cast<uint64_t>(n) * q; }, me,
                              static_cast<int>(p), "balanced");
          if (table) {
            for (uint64_t k = 0; k < Kp; ++k) {
              if (k + 16 < Kp) __builtin_prefetch(inv + o[k + 16]);
              o[k] = (static_cast<uint64_t>(inv[o[k]]) << obits) | (base + k * rb);
            }
          } else {
            for (uint64_t k = 0; k < Kp; ++k) o[k] = (part_.unpermute(o[k]) << obits) | (base + k * rb);
          }
          return;
        }
        plan::KV* o = kv + w.owner_base[p];
        plan::for_positions(all + w.pdispl[p], static_cast<uint8_t>(w.meta[p].encoding), part_.owner_size(p), Kp, isz,
                            [&](uint64_t q, uint64_t k) { o[k] = plan::KV{p + static_cast<uint64_t>(n) * q, base + k * rb}; },
                            me, static_cast<int>(p), "balanced");
        if (table) {
          for (uint64_t k = 0; k < Kp; ++k) {
            if (k + 16 < Kp) __builtin_prefetch(inv + o[k + 16].key);
            o[k].key = inv[o[k].key];
          }
        } else {
          for (uint64_t k = 0; k < Kp; ++k) o[k].key = part_.unpermute(o[k].key);
        }
      });
    });
    // Sparse output: sorted by row.
    if (packed) {
      plan::radix_sort_u64(rec, plan::grow(w.rec_tmp, total), total, obits, rbits);
      sparse_out->resize(total);
      int64_t* oi = sparse_out->indices.data();
      uint8_t* ov = sparse_out->values.data();
      const uint64_t omask = obits >= 64 ? ~uint64_t{0} : (uint64_t{1} << obits) - 1;
      auto copy_out = [&](auto width) {
        constexpr size_t W = decltype(width)::value;
        const size_t RB = W ? W : rb;
        for (size_t k = 0; k < total; ++k) {
          if (k + 8 < total) __builtin_prefetch(all + (rec[k + 8] & omask));
          oi[k] = static_cast<int64_t>(rec[k] >> obits);
          std::memcpy(ov + k * RB, all + (rec[k] & omask), RB);
        }
      };
      if (rb == 4) copy_out(std::integral_constant<size_t, 4>{});
      else if (rb == 8) copy_out(std::integral_constant<size_t, 8>{});
      else copy_out(std::integral_constant<size_t, 0>{});
      return;
    }
    w.sorter.sort(w.kv, w.kv_tmp, total, plan::bits_for(rows()), &tp);
    kv = w.kv.data();
    sparse_out->resize(total);
    int64_t* oi = sparse_out->indices.data();
    uint8_t* ov = sparse_out->values.data();
    tp.parallel_for(total, size_t{1} << 13, [&](size_t b, size_t e, int) {
      for (size_t k = b; k < e; ++k) {
        if (k + plan::kPrefetchAhead < e) plan::prefetch_row(all + kv[k + plan::kPrefetchAhead].val, rb);
        oi[k] = static_cast<int64_t>(kv[k].key);
        std::memcpy(ov + k * rb, all + kv[k].val, rb);
      }
    });
  }

  Partitioner part_;
  IndexType wire_;
  std::shared_ptr<Workspace> ws_;
};

}  // namespace

std::unique_ptr<SparseAllreduce> make_balanced(Communicator& c, const TensorSpec& s, const SchemeOptions& o) {
  return std::make_unique<Balanced>(c, s, o);
}

}  // namespace zen
