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

#include "owner_exchange.hpp"
#include "owner_stage.hpp"
#include "plan_util.hpp"
#include "scheme_row.hpp"
#include "zen/encode/bitmap.hpp"
#include "zen/encode/coo.hpp"
#include "zen/encode/elias_fano.hpp"
#include "zen/error.hpp"
#include "zen/hash/region_hash.hpp"
#include "zen/hash/sort_partition.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

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

// The exchange's buffers (owner_exchange.hpp) and what only balanced needs.
struct Workspace : plan::OwnerExchange {
  RegionHash hash;
  SortPartition sorter_part;
  HashPartition hp;
  std::vector<uint64_t> sort_a, sort_b;  // sorted pushes: per-slot records and radix scratch
  std::vector<float> dup_acc;     // 16-bit inputs with duplicates: fp32 sums per key
  std::vector<uint64_t> row_off;  // inputs with duplicates: push-buffer offset of each key's row
  std::vector<plan::KV> kv, kv_tmp;
  std::vector<uint64_t> rec, rec_tmp;  // sparse output sorted as packed (row << obits | offset) records
  plan::RadixSort sorter;
  std::vector<uint32_t> fwd, inv;  // pi and pi^-1 over rows (when cached)
  size_t max_nnz = 0;
};

using wire::load_as;
using wire::store_as;
using plan::StageCtx;

class Balanced : public plan::Typed<Balanced, Workspace, plan::OwnerExchangePlan> {
 public:
  Balanced(Communicator& c, const TensorSpec& s, const SchemeOptions& o)
      : Typed(c, s, o), part_(Partitioner::make(s.dense_len / s.row_width, static_cast<uint32_t>(c.size()), opt_.seed)) {
    // Partition policy: owner = pi(row) mod n, position = pi(row) div n (zen/hash/hash.hpp).
    std::vector<uint64_t> sets(static_cast<size_t>(c.size()));
    for (size_t p = 0; p < sets.size(); ++p) sets[p] = part_.owner_size(static_cast<uint32_t>(p));
    set_owner_sets(std::move(sets));
  }
  static constexpr const char* kName = "balanced";

 private:
  friend plan::Access;

  uint64_t rows() const { return spec_.dense_len / spec_.row_width; }

  // One call, stage by stage (the shared stages: owner_exchange.hpp).
  template <typename T>
  void run_typed(const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
    const StageCtx c = stage_ctx(sizeof(T));
    maybe_build_tables(in.nnz);
    // 1. Partition: owner and position of every entry, equal keys merged (hash, or a radix sort
    //    when the pushes will go sorted); the keys per owner become the push counts.
    partition(c, in);
    // 2. Layout: exchange the counts, pick each segment's index code by the push rule, size buffers.
    layout_push(c);
    // 3. When every peer pushes sorted, this owner sorts its own segment too and merges.
    const bool merge = merge_pushes(c);
    // 4. Encode: each owner's segment [index part][value rows], duplicates summed in input order.
    encode_push<T>(c, in, merge);
    // 5. Push: alltoallv of the segments.
    push(c);
    // 6. Reduce: owner sums in compact per-owner space, sources in rank order (or the merge).
    const uint64_t K = reduce<T>(c, merge);
    // 7. Publish (K, pushed rows, pull encoding) and lay out the pull buffer.
    publish_meta(c, K);
    // 8. Write this owner's pull message in place.
    write_pull<T>(c);
    // 9. Pull: allgatherv of every owner's message, in place.
    pull(c);
    // 10. Decode: check the messages, positions -> rows (pi^-1), scatter (dense) or sort (sparse).
    Phase ph(*this, "decode");
    const uint64_t total = open_pulled(c);
    const bool table = !ws_->inv.empty() && total * kInverseDensity >= rows();
    if (!sparse_out) decode_dense(c, table, dense_out);
    else decode_sparse(c, table, total, *sparse_out);
  }

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

  // Hash partition: owner + position per entry, equal keys merged (smallest entry id kept). When the
  // pushes will go sorted (the push rule at the expected nnz / n keys per owner) and one task would
  // do the work anyway, a radix sort partitions instead: it yields the sorted segments those pushes
  // need (zen/hash/sort_partition.hpp). Fills the push counts.
  void partition(const StageCtx& c, const SparseView& in) {
    Workspace& w = *ws_;
    HashPartition& hp = w.hp;
    detail::ThreadPool& tp = c.tp;
    const bool sortable = c.n > 1 && opt_.push != IndexEncoding::Coo && SortPartition::fits(part_);
    const bool by_sort = sortable && tp.tasks_for(in.nnz, size_t{1} << 16) <= 1 &&
                         wire::pick_push_encoding(opt_.push, part_.owner_size(0), in.nnz / c.un, c.isz, c.rb) != wire::kEncCoo;
    const uint32_t* fwd = w.fwd.empty() ? nullptr : w.fwd.data();
    {
      Phase ph(*this, "hash");
      if (by_sort) {
        w.sorter_part.partition(in, part_, &tp, hp, fwd);
        report_.serial_overflows = 0;
      } else {
        RegionHashConfig cfg;
        cfg.hash_functions = opt_.hash_functions;
        cfg.parallel_factor = opt_.parallel_factor;
        cfg.serial_fraction = opt_.serial_fraction;
        cfg.seed = opt_.seed ^ (0x51ed2701ULL * static_cast<uint64_t>(c.me + 1));
        w.hash.partition(in, part_, cfg, &tp, hp, fwd);
        report_.serial_overflows = hp.overflowed_owners;
        // A later, smaller call may sort-partition (above: fewer than 2^17 entries with several
        // threads): its buffers grow with this call, so that it allocates nothing.
        if (sortable)
          w.sorter_part.reserve(tp.threads() > 1 ? std::min<size_t>(in.nnz, size_t{1} << 17) : in.nnz,
                                static_cast<uint32_t>(c.n), tp.threads(), hp);
      }
    }
    // The own segment stays local (count 0 to self in the push).
    w.scount.resize(c.un);
    for (int p = 0; p < c.n; ++p) w.scount[p] = hp.count(static_cast<size_t>(p));
  }

  // Every peer pushes to this owner sorted: sort the own segment too and merge instead of
  // accumulating over the owner set (plan::owner_merge). (Sorting takes (position << 32 | row)
  // records: owner sets of at most 2^32 positions.)
  bool merge_pushes(const StageCtx& c) const {
    const Workspace& w = *ws_;
    bool merge = c.n > 1 && c.n <= plan::kMaxMerge && c.m <= (uint64_t{1} << 32);
    for (int p = 0; p < c.n && merge; ++p) merge = p == c.me || w.renc[p] != wire::kEncCoo || w.rcount[p] == 0;
    return merge;
  }

  // Encode: per owner segment [index part][K_p value rows]; merged duplicates summed in entry order.
  // Segments pushed sorted (Elias-Fano / bitmap) take their keys in position order.
  template <typename T>
  void encode_push(const StageCtx& c, const SparseView& in, bool merge) {
    Workspace& w = *ws_;
    Phase pe(*this, "encode");
    auto sorted_seg = [&](int p) { return w.senc[p] != wire::kEncCoo || (merge && p == c.me); };
    const uint64_t* srt = sort_segments(c, sorted_seg);
    fill_rows(c, in, srt, sorted_seg);
    if (w.hp.duplicates) sum_duplicates<T>(c, in);
  }

  // Sorted segments: one record per slot, (position << 32 | row), or (position << 32 | key) with
  // duplicates (their rows are summed by key), radix-sorted on the position bits per segment (the
  // push rule keeps owner sets above 2^32 positions on COO); their index parts are written here.
  // Returns the records (null when no segment goes sorted).
  template <typename Sorted>
  const uint64_t* sort_segments(const StageCtx& c, Sorted&& sorted_seg) {
    Workspace& w = *ws_;
    const HashPartition& hp = w.hp;
    size_t sorted_keys = 0, widest = 0;
    int nsorted = 0;
    for (int p = 0; p < c.n; ++p)
      if (sorted_seg(p)) {
        sorted_keys += w.scount[p];
        widest = std::max<size_t>(widest, w.scount[p]);
        ++nsorted;
      }
    if (!nsorted) return nullptr;
    uint64_t* srt = plan::grow(w.sort_a, hp.keys);
    const bool dups = hp.duplicates;
    const int stasks = std::max(1, std::min(c.n, c.tp.tasks_for(sorted_keys, size_t{1} << 14)));
    uint64_t* scratch = plan::grow(w.sort_b, widest * static_cast<size_t>(stasks));
    uint8_t* sbuf = w.sbuf.data();
    c.tp.run(stasks, [&](int t) {
      for (int p = t; p < c.n; p += stasks) {
        if (!sorted_seg(p)) continue;
        const size_t b = hp.offsets[p], e = hp.offsets[p + 1];
        const uint64_t mp = part_.owner_size(static_cast<uint32_t>(p));
        for (size_t k = b; k < e; ++k) srt[k] = (hp.pos[k] << 32) | (dups ? static_cast<uint64_t>(k) : hp.rep[k]);
        if (!hp.sorted) plan::radix_sort_u64(srt + b, scratch + static_cast<size_t>(t) * widest, e - b, 32, plan::bits_for(mp));
        wire::write_index_part(w.senc[p], sbuf + w.sdispl[p], mp, w.scount[p], c.isz,
                               [&](uint64_t j) { return srt[b + j] >> 32; });
      }
    });
    return srt;
  }

  // Keys of the COO segments, and the rows when every key has one entry; with duplicates the row
  // offsets of the keys (their rows are summed by sum_duplicates). A task's range is walked one
  // owner segment at a time.
  template <typename Sorted>
  void fill_rows(const StageCtx& c, const SparseView& in, const uint64_t* srt, Sorted&& sorted_seg) {
    Workspace& w = *ws_;
    const HashPartition& hp = w.hp;
    const auto* vals = static_cast<const uint8_t*>(in.values);
    const bool dups = hp.duplicates;
    const size_t isz = c.isz, rb = c.rb;
    uint8_t* sbuf = w.sbuf.data();
    uint64_t* rowoff = dups ? plan::grow(w.row_off, hp.keys) : nullptr;
    const uint64_t* pos = hp.pos.data();
    const uint32_t* rep = hp.rep.data();
    auto seg_of = [&](size_t k, uint32_t& p) {
      p = static_cast<uint32_t>(std::upper_bound(hp.offsets.begin(), hp.offsets.begin() + c.n + 1, k) - hp.offsets.begin() - 1);
      return k - hp.offsets[p];
    };
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
          for (size_t i = 0; i < cnt; ++i) wire::store_key(keys, i, isz, pos[k + i]);
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
    c.tp.parallel_for(hp.keys, size_t{1} << 12, [&](size_t b, size_t e, int) {
      if (rb == 4) fill(std::integral_constant<size_t, 4>{}, b, e);
      else if (rb == 8) fill(std::integral_constant<size_t, 8>{}, b, e);
      else fill(std::integral_constant<size_t, 0>{}, b, e);
    });
  }

  // Inputs with duplicates: one pass over the entries in ascending order: a key's first entry (its
  // representative) is copied, the others added. Each task owns a range of keys and scans all
  // entries, so the order of every sum is the input order whatever the thread count.
  template <typename T>
  void sum_duplicates(const StageCtx& c, const SparseView& in) {
    using A = typename accum_of<T>::type;
    Workspace& w = *ws_;
    const HashPartition& hp = w.hp;
    const auto* vals = static_cast<const uint8_t*>(in.values);
    const size_t K = hp.keys, D = c.D, rb = c.rb;
    uint8_t* sbuf = w.sbuf.data();
    const uint64_t* rowoff = w.row_off.data();
    constexpr bool wide = !std::is_same_v<A, T>;
    float* fa = wide ? plan::grow(w.dup_acc, K * D) : nullptr;
    const int tasks = c.tp.tasks_for(in.nnz * D, size_t{1} << 16);
    const uint32_t* key_of = hp.key_of.data();
    const uint32_t* rep = hp.rep.data();
    c.tp.run(tasks, [&](int t) {
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

  // Tasks of the decode: owners split among them (each owner's rows go to disjoint rows).
  int decode_tasks(const StageCtx& c, uint64_t total) const {
    return std::min<int>(c.tp.tasks_for(total * c.D, size_t{1} << 15), c.n);
  }
  template <typename G>
  static void owners_of(const StageCtx& c, int tasks, int t, G&& g) {
    const size_t b = detail::ThreadPool::chunk_begin(c.un, tasks, t), e = detail::ThreadPool::chunk_begin(c.un, tasks, t + 1);
    for (size_t p = b; p < e; ++p) g(static_cast<uint32_t>(p));
  }
  // pi^-1 of the pi value v (the inverse table, when `table`).
  uint64_t unpermute(bool table, uint64_t v) const { return table ? ws_->inv[v] : part_.unpermute(v); }
  // f(q, k) for the positions of owner p's pull message.
  template <typename F>
  void positions_of(const StageCtx& c, uint32_t p, F&& f) {
    const Workspace& w = *ws_;
    wire::for_positions(w.all.data() + w.pdispl[p], static_cast<uint8_t>(w.meta[p].encoding), part_.owner_size(p),
                        w.meta[p].result_rows, c.isz, f, c.me, static_cast<int>(p), c.scheme);
  }

  // Dense output: zero the buffer, then each owner's rows go straight to their global rows (owners
  // are disjoint), in batches whose destinations are prefetched together: the zeroing left them out
  // of cache. The inverse table is read at a stride of n per owner: it streams when the result
  // touches most of its cache lines, and misses on every row when the result is sparser; then
  // evaluating pi^-1 (three multiply-add rounds) is the faster of the two.
  void decode_dense(const StageCtx& c, bool table, void* dense_out) {
    Workspace& w = *ws_;
    const size_t rb = c.rb;
    const uint8_t* all = w.all.data();
    auto* d = static_cast<uint8_t*>(dense_out);
    if (spec_.dense_len) plan::parallel_zero(d, spec_.dense_len * c.vs, &c.tp);
    const int tasks = decode_tasks(c, w.owner_base[c.un]);
    c.tp.run(tasks, [&](int t) {
      owners_of(c, tasks, t, [&](uint32_t p) {
        constexpr int kBatch = 32;
        uint64_t dst[kBatch], src[kBatch];
        int cnt = 0;
        auto flush = [&] {
          for (int i = 0; i < cnt; ++i) __builtin_prefetch(d + dst[i] * rb, 1);
          for (int i = 0; i < cnt; ++i) std::memcpy(d + dst[i] * rb, all + src[i], rb);
          cnt = 0;
        };
        const uint64_t base = w.val_off[p];
        positions_of(c, p, [&](uint64_t q, uint64_t k) {
          dst[cnt] = unpermute(table, p + static_cast<uint64_t>(c.n) * q);
          src[cnt] = base + k * rb;
          if (++cnt == kBatch) flush();
        });
        flush();
      });
    });
  }

  // Sparse output sorted by row: (global row, offset of its values in the pull buffer) for every
  // result row, first the pi values p + n * position (ascending), then their preimages (table
  // lookups prefetched ahead). A sparse output that one task sorts anyway sorts 8-byte records
  // (row << obits | byte offset of its values in the pull buffer): half the traffic of (row, offset) pairs.
  void decode_sparse(const StageCtx& c, bool table, uint64_t total, SparseTensor& out) {
    const int rbits = plan::bits_for(rows()), obits = plan::bits_for(std::max<uint64_t>(ws_->ptotal, 1));
    if (rbits + obits <= 64 && c.tp.tasks_for(total, size_t{1} << 16) <= 1) decode_sparse_packed(c, table, total, obits, out);
    else decode_sparse_pairs(c, table, total, out);
  }

  void decode_sparse_packed(const StageCtx& c, bool table, uint64_t total, int obits, SparseTensor& out) {
    Workspace& w = *ws_;
    const size_t rb = c.rb;
    const uint8_t* all = w.all.data();
    const uint32_t* inv = w.inv.data();
    uint64_t* rec = plan::grow(w.rec, total);
    const int tasks = decode_tasks(c, total);
    c.tp.run(tasks, [&](int t) {
      owners_of(c, tasks, t, [&](uint32_t p) {
        const uint64_t base = w.val_off[p], Kp = w.meta[p].result_rows;
        uint64_t* o = rec + w.owner_base[p];
        positions_of(c, p, [&](uint64_t q, uint64_t k) { o[k] = p + static_cast<uint64_t>(c.n) * q; });
        if (table) {
          for (uint64_t k = 0; k < Kp; ++k) {
            if (k + 16 < Kp) __builtin_prefetch(inv + o[k + 16]);
            o[k] = (static_cast<uint64_t>(inv[o[k]]) << obits) | (base + k * rb);
          }
        } else {
          for (uint64_t k = 0; k < Kp; ++k) o[k] = (part_.unpermute(o[k]) << obits) | (base + k * rb);
        }
      });
    });
    plan::radix_sort_u64(rec, plan::grow(w.rec_tmp, total), total, obits, plan::bits_for(rows()));
    out.resize(total);
    int64_t* oi = out.indices.data();
    uint8_t* ov = out.values.data();
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
  }

  void decode_sparse_pairs(const StageCtx& c, bool table, uint64_t total, SparseTensor& out) {
    Workspace& w = *ws_;
    const size_t rb = c.rb;
    const uint8_t* all = w.all.data();
    const uint32_t* inv = w.inv.data();
    plan::KV* kv = plan::grow(w.kv, total);
    const int tasks = decode_tasks(c, total);
    c.tp.run(tasks, [&](int t) {
      owners_of(c, tasks, t, [&](uint32_t p) {
        const uint64_t base = w.val_off[p], Kp = w.meta[p].result_rows;
        plan::KV* o = kv + w.owner_base[p];
        positions_of(c, p, [&](uint64_t q, uint64_t k) { o[k] = plan::KV{p + static_cast<uint64_t>(c.n) * q, base + k * rb}; });
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
    w.sorter.sort(w.kv, w.kv_tmp, total, plan::bits_for(rows()), &c.tp);
    kv = w.kv.data();
    out.resize(total);
    int64_t* oi = out.indices.data();
    uint8_t* ov = out.values.data();
    c.tp.parallel_for(total, size_t{1} << 13, [&](size_t b, size_t e, int) {
      for (size_t k = b; k < e; ++k) {
        if (k + plan::kPrefetchAhead < e) plan::prefetch_row(all + kv[k + plan::kPrefetchAhead].val, rb);
        oi[k] = static_cast<int64_t>(kv[k].key);
        std::memcpy(ov + k * rb, all + kv[k].val, rb);
      }
    });
  }

  Partitioner part_;
};

void balanced_traffic(model::TrafficBuilder& b) { plan::owner_exchange_traffic(b, plan::Partition::Hash); }

double balanced_work(const model::Problem& p, const model::Counts& c, size_t r) {
  return plan::owner_exchange_work(p, c, r, plan::Partition::Hash);
}

}  // namespace

namespace detail {
extern const SchemeRow balanced_row{Balanced::kName, plan::factory<Balanced>, balanced_traffic, balanced_work, /*auto_position=*/0, detail::kDevicePlan};
}  // namespace detail

}  // namespace zen
