// Balanced Parallelism (Zen): hash partition -> push (alltoallv of COO) -> owner sums in compact
// per-owner space -> pull (allgatherv of COO or hash bitmap + values). See docs/algorithms.md.
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>

#include "zen/detail/parallel.hpp"
#include "zen/encode/bitmap.hpp"
#include "zen/encode/coo.hpp"
#include "zen/error.hpp"
#include "zen/hash/hierarchical.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

// What every owner publishes before the pull (one small allgather).
struct OwnerMeta {
  uint64_t result_rows;   // K_i: positions in owner i's result
  uint64_t pushed_rows;   // entries owner i received in the push (for push imbalance)
  uint64_t encoding;      // 0 = COO positions, 1 = hash bitmap
};


class Balanced final : public SparseAllreduce {
 public:
  Balanced(Communicator& c, const TensorSpec& s, const SchemeOptions& o)
      : SparseAllreduce(c, s, o),
        part_(Partitioner::make(s.dense_len / s.row_width, static_cast<uint32_t>(c.size()), opt_.seed)),
        wire_(encode::wire_index_type(part_.owner_size(0))) {}
  const char* name() const override { return "balanced"; }

 protected:
  void execute(const SparseView& in, SparseTensor* sparse_out, void* dense_out) override {
    dispatch_dtype(spec_.dtype, [&](auto tag) { run_typed<decltype(tag)>(in, sparse_out, dense_out); });
  }

 private:
  template <typename T>
  void run_typed(const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
    using A = typename accum_of<T>::type;
    const int n = comm_.size(), me = comm_.rank();
    const size_t D = spec_.row_width, vs = sizeof(T), row_bytes = D * vs;
    const size_t isz = index_size(wire_);
    const size_t entry_bytes = isz + row_bytes;

    // 1. Hash partition.
    HashPartition hp;
    {
      Phase ph(*this, "hash");
      HierarchicalHashConfig cfg;
      cfg.hash_functions = opt_.hash_functions;
      cfg.parallel_factor = opt_.parallel_factor;
      cfg.serial_fraction = opt_.serial_fraction;
      cfg.threads = opt_.threads;
      cfg.seed = opt_.seed ^ (0x51ed2701ULL * static_cast<uint64_t>(me + 1));
      hierarchical_partition(in, part_, cfg, hp);
      report_.serial_overflows = hp.overflowed_owners;
    }

    // 2. Counts (alltoall) and push (alltoallv of COO: owner-local positions + value rows).
    std::vector<uint64_t> scount(n), rcount;
    for (int p = 0; p < n; ++p) scount[p] = hp.count(static_cast<size_t>(p));
    {
      Phase ph(*this, "counts");
      rcount = detail::alltoall_counts(comm_, scount);
    }
    std::vector<size_t> sbytes(n), sdispl(n), rbytes(n), rdispl(n);
    size_t stotal = 0, rtotal = 0;
    for (int p = 0; p < n; ++p) {
      sbytes[p] = scount[p] * entry_bytes;
      sdispl[p] = stotal;
      stotal += sbytes[p];
      rbytes[p] = rcount[p] * entry_bytes;
      rdispl[p] = rtotal;
      rtotal += rbytes[p];
    }
    std::vector<uint8_t> sbuf(stotal), rbuf(rtotal);
    {
      Phase pe(*this, "encode");
      const T* vals = static_cast<const T*>(in.values);
      for (int p = 0; p < n; ++p) {
        const size_t b = hp.offsets[p], cnt = hp.count(static_cast<size_t>(p));
        uint8_t* keys = sbuf.data() + sdispl[p];
        uint8_t* v = keys + cnt * isz;
        for (size_t k = 0; k < cnt; ++k) {
          const uint64_t pos = hp.pos[b + k];
          if (isz == 4) {
            uint32_t x = static_cast<uint32_t>(pos);
            std::memcpy(keys + 4 * k, &x, 4);
          } else {
            std::memcpy(keys + 8 * k, &pos, 8);
          }
          std::memcpy(v + k * row_bytes, vals + static_cast<size_t>(hp.entry[b + k]) * D, row_bytes);
        }
      }
    }
    {
      Phase ph(*this, "push");
      comm_.alltoallv(sbuf.data(), sbytes.data(), sdispl.data(), rbuf.data(), rbytes.data(), rdispl.data());
    }
    sbuf.clear();
    sbuf.shrink_to_fit();

    // 3. Owner sums in compact per-owner space (positions 0..|I_me|-1), sources in rank order.
    const uint64_t m = part_.owner_size(static_cast<uint32_t>(me));
    uint64_t received = 0;
    for (int p = 0; p < n; ++p) received += rcount[p];
    std::vector<uint64_t> res_pos;
    std::vector<T> res_val;
    {
      Phase pa(*this, "aggregate");
      auto key_at = [&](int src, size_t k) -> uint64_t {
        const uint8_t* keys = rbuf.data() + rdispl[src];
        if (isz == 4) {
          uint32_t x;
          std::memcpy(&x, keys + 4 * k, 4);
          return x;
        }
        uint64_t x;
        std::memcpy(&x, keys + 8 * k, 8);
        return x;
      };
      // Value rows sit after 4- or 8-byte keys in a byte buffer: they may be unaligned for their
      // type, so they are read with memcpy (plain loads after optimization).
      auto val_at = [&](int src, size_t k) -> const uint8_t* {
        return rbuf.data() + rdispl[src] + rcount[src] * isz + k * row_bytes;
      };
      auto load = [](const uint8_t* v, size_t c) {
        T x;
        std::memcpy(static_cast<void*>(&x), v + c * sizeof(T), sizeof(T));
        return static_cast<A>(x);
      };
      for (int src = 0; src < n; ++src)
        for (size_t k = 0; k < rcount[src]; ++k)
          if (key_at(src, k) >= m)
            ZEN_THROW(Result::InvalidUsage, "rank " + std::to_string(me) + " balanced push: peer " + std::to_string(src) +
                                                " sent position " + std::to_string(key_at(src, k)) + " outside owner set of size " +
                                                std::to_string(m) + " (ranks disagree on N or the h0 seed)");
      // Dense compact accumulator over I_me (N/n rows, never N) unless that is huge compared with
      // what was received; it is not zero-filled: the presence bitmap says which rows hold a value.
      const bool dense_acc = m * D * sizeof(A) <= (size_t{512} << 20) && m <= 64 * received + 65536;
      if (dense_acc) {
        std::unique_ptr<A[]> acc(new A[m * D]);
        std::vector<uint64_t> present((m + 63) / 64, 0);
        for (int src = 0; src < n; ++src)
          for (size_t k = 0; k < rcount[src]; ++k) {
            const uint64_t q = key_at(src, k);
            const uint8_t* v = val_at(src, k);
            A* a = &acc[q * D];
            if (!(present[q >> 6] >> (q & 63) & 1)) {
              present[q >> 6] |= 1ULL << (q & 63);
              for (size_t c = 0; c < D; ++c) a[c] = load(v, c);
            } else {
              for (size_t c = 0; c < D; ++c) a[c] += load(v, c);
            }
          }
        for (size_t w = 0; w < present.size(); ++w) {
          uint64_t x = present[w];
          while (x) {
            const uint64_t q = w * 64 + static_cast<uint64_t>(__builtin_ctzll(x));
            x &= x - 1;
            res_pos.push_back(q);
            for (size_t c = 0; c < D; ++c) res_val.push_back(static_cast<T>(acc[q * D + c]));
          }
        }
      } else {
        // Sparse owner space (huge N): stable sort by position keeps the source-rank order of adds.
        std::vector<std::pair<uint64_t, uint64_t>> items;  // (position, src<<40 | k)
        items.reserve(received);
        for (int src = 0; src < n; ++src)
          for (size_t k = 0; k < rcount[src]; ++k) items.emplace_back(key_at(src, k), (static_cast<uint64_t>(src) << 40) | k);
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        std::vector<A> acc(D);
        for (size_t i = 0; i < items.size();) {
          const uint64_t q = items[i].first;
          size_t j = i;
          for (; j < items.size() && items[j].first == q; ++j) {
            const uint8_t* v = val_at(static_cast<int>(items[j].second >> 40), items[j].second & ((1ULL << 40) - 1));
            for (size_t c = 0; c < D; ++c) acc[c] = (j == i) ? load(v, c) : acc[c] + load(v, c);
          }
          res_pos.push_back(q);
          for (size_t c = 0; c < D; ++c) res_val.push_back(static_cast<T>(acc[c]));
          i = j;
        }
      }
    }
    rbuf.clear();
    rbuf.shrink_to_fit();

    // 4. Choose this owner's pull encoding and publish (K_i, pushed_i, encoding_i).
    const uint64_t K = res_pos.size();
    const size_t bitmap_b = encode::bitmap_bytes(m), coo_b = K * isz;
    bool use_bitmap = opt_.pull == PullEncoding::Bitmap || (opt_.pull == PullEncoding::Auto && bitmap_b < coo_b);
    OwnerMeta mine{K, received, use_bitmap ? 1u : 0u};
    std::vector<OwnerMeta> meta;
    {
      Phase ph(*this, "meta");
      meta = comm_.allgather_value(mine);
    }
    std::vector<size_t> pbytes(n), pdispl(n);
    size_t ptotal = 0;
    std::vector<uint64_t> pushed(n), results(n);
    int nbitmap = 0;
    for (int p = 0; p < n; ++p) {
      const uint64_t mp = part_.owner_size(static_cast<uint32_t>(p));
      pbytes[p] = (meta[p].encoding ? encode::bitmap_bytes(mp) : meta[p].result_rows * isz) + meta[p].result_rows * row_bytes;
      pdispl[p] = ptotal;
      ptotal += pbytes[p];
      pushed[p] = meta[p].pushed_rows;
      results[p] = meta[p].result_rows;
      nbitmap += meta[p].encoding ? 1 : 0;
    }
    report_.push_imbalance = detail::imbalance(pushed);
    report_.pull_imbalance = detail::imbalance(results);
    report_.encoding = nbitmap == 0 ? "coo" : (nbitmap == n ? "bitmap" : "mixed");

    // 5. Pull: allgatherv of every owner's (index encoding + values).
    std::vector<uint8_t> mine_msg(pbytes[me]);
    if (use_bitmap) {
      encode::bitmap_encode(res_pos.data(), res_pos.size(), m, mine_msg.data());
      if (K) std::memcpy(mine_msg.data() + bitmap_b, res_val.data(), K * row_bytes);
    } else {
      std::vector<int64_t> keys(res_pos.begin(), res_pos.end());
      encode::coo_encode(keys.data(), res_val.data(), K, static_cast<uint32_t>(D), spec_.dtype, wire_, mine_msg.data());
    }
    std::vector<uint8_t> all(ptotal);
    {
      Phase ph(*this, "pull");
      comm_.allgatherv(mine_msg.data(), mine_msg.size(), all.data(), pbytes.data(), pdispl.data());
    }

    // 6. Decode every owner's part: positions -> global row indices (pi^-1), scatter or collect.
    Phase ph(*this, "decode");
    std::vector<std::vector<uint64_t>> pos_of(n);
    std::vector<size_t> val_off(n);
    for (int p = 0; p < n; ++p) {
      const uint8_t* msg = all.data() + pdispl[p];
      const uint64_t mp = part_.owner_size(static_cast<uint32_t>(p));
      auto& P = pos_of[p];
      if (meta[p].encoding) {
        encode::bitmap_decode(msg, mp, P);
        if (P.size() != meta[p].result_rows)
          ZEN_THROW(Result::InvalidUsage, "rank " + std::to_string(me) + " balanced pull: owner " + std::to_string(p) +
                                              " bitmap has " + std::to_string(P.size()) + " bits set but announced " +
                                              std::to_string(meta[p].result_rows) + " rows");
        val_off[p] = pdispl[p] + encode::bitmap_bytes(mp);
      } else {
        std::vector<int64_t> keys;
        std::vector<uint8_t> dummy;
        encode::coo_decode(msg, meta[p].result_rows * entry_bytes, mp, static_cast<uint32_t>(D), spec_.dtype, wire_, keys, dummy);
        P.assign(keys.begin(), keys.end());
        val_off[p] = pdispl[p] + meta[p].result_rows * isz;
      }
    }
    std::vector<uint64_t> base(n + 1, 0);
    for (int p = 0; p < n; ++p) base[p + 1] = base[p] + pos_of[p].size();
    const uint64_t total = base[n];
    report_.result_nnz = total;
    const int threads = detail::resolve_threads(opt_.threads, total, 1u << 14);
    // Walk the owners' positions in [b, e) of the concatenated result: f(global row, owner, k-th of owner).
    auto for_range = [&](size_t b, size_t e, auto&& f) {
      int p = static_cast<int>(std::upper_bound(base.begin(), base.end(), b) - base.begin()) - 1;
      for (size_t g = b; g < e; ++g) {
        while (g >= base[p + 1]) ++p;
        const size_t k = g - base[p];
        f(g, p, k, part_.index_at(static_cast<uint32_t>(p), pos_of[p][k]));
      }
    };
    if (!sparse_out) {
      // Dense output: zero the buffer, then each owner's rows land directly (owners are disjoint).
      auto* d = static_cast<uint8_t*>(dense_out);
      if (spec_.dense_len) std::memset(d, 0, spec_.dense_len * vs);
      detail::parallel_for(total, threads, [&](size_t b, size_t e, int) {
        for_range(b, e, [&](size_t, int p, size_t k, uint64_t idx) {
          std::memcpy(d + static_cast<size_t>(idx) * row_bytes, all.data() + val_off[p] + k * row_bytes, row_bytes);
        });
      });
    } else {
      // Sparse output: global indices of every owner's rows, then one sort into ascending order.
      std::vector<std::pair<int64_t, uint64_t>> rows(total);  // (index, value offset in `all`)
      detail::parallel_for(total, threads, [&](size_t b, size_t e, int) {
        for_range(b, e, [&](size_t g, int p, size_t k, uint64_t idx) {
          rows[g] = {static_cast<int64_t>(idx), val_off[p] + k * row_bytes};
        });
      });
      std::sort(rows.begin(), rows.end());
      sparse_out->resize(total);
      for (size_t k = 0; k < total; ++k) {
        sparse_out->indices[k] = rows[k].first;
        std::memcpy(sparse_out->values.data() + k * row_bytes, all.data() + rows[k].second, row_bytes);
      }
    }
  }

  Partitioner part_;
  IndexType wire_;
};

}  // namespace

std::unique_ptr<SparseAllreduce> make_balanced(Communicator& c, const TensorSpec& s, const SchemeOptions& o) {
  return std::make_unique<Balanced>(c, s, o);
}

}  // namespace zen
