// AGsparse baseline (PyTorch-Gloo sparse allreduce, Horovod IndexedSlices): allgather of the
// per-rank entry counts, allgatherv of every rank's coalesced COO (wire index width from N/D),
// then every rank sums all n contributions locally (rank order, one rounding). A dense f32/f64
// result needs no unique rows (the scatter-add sums duplicates in order), so there each rank sends its
// entries as given, unsorted and with duplicates, as the hand-written allgatherv + scatter-add does:
// no coalescing pass; its bytes count entries, not distinct rows (Counts::entries).
// See docs/algorithms.md, "allgather". A plan: its workspace only grows, so steady-state calls
// allocate nothing.
#include <algorithm>
#include <cstring>

#include "owner_stage.hpp"
#include "plan_util.hpp"
#include "scheme_row.hpp"
#include "zen/encode/coo.hpp"
#include "zen/error.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

struct Workspace {
  plan::Coalescer co;
  std::vector<uint64_t> counts;
  std::vector<size_t> bytes, displ;
  std::vector<uint8_t> all;
  std::vector<plan::KV> kv, kv_tmp;
  plan::RadixSort sorter;
  std::vector<uint64_t> added;  // dense output: rows each scatter task added
};

using wire::load_as;
using wire::store_as;

/// Which of a rank's entries travel (the run and the cost model both ask this): for a dense f32/f64
/// result the entries as given (duplicates included; the sum is exact in the result's own type),
/// else its distinct rows (f16/bf16 sum in f32 before one rounding, a sparse result must be coalesced).
bool sends_as_given(bool sparse_out, DType t) { return !sparse_out && (t == DType::F32 || t == DType::F64); }

class Allgather : public plan::Typed<Allgather, Workspace> {
 public:
  Allgather(Communicator& c, const TensorSpec& s, const SchemeOptions& o)
      : Typed(c, s, o), wire_(encode::wire_index_type(s.dense_len / s.row_width)) {}
  static constexpr const char* kName = "allgather";

 private:
  friend plan::Access;

  template <typename T>
  void run_typed(const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
    using A = typename accum_of<T>::type;
    Workspace& w = *ws_;
    detail::ThreadPool& tp = pool();
    const int n = comm_.size(), me = comm_.rank();
    const size_t un = static_cast<size_t>(n);
    const uint64_t R = spec_.dense_len / spec_.row_width;
    const size_t D = spec_.row_width, vs = sizeof(T), rb = D * vs, isz = index_size(wire_);
    report_.encoding = "coo";
    // Dense f32/f64 result: the entries as given (see the top of the file); else coalesced.
    const bool as_given = sends_as_given(sparse_out != nullptr, spec_.dtype);
    static_assert(!(std::is_same_v<T, float> || std::is_same_v<T, double>) || std::is_same_v<A, T>);
    const plan::Coalesced loc = as_given ? plan::Coalesced{} : w.co.run(in, spec_, false, &tp);
    const uint64_t mine = as_given ? in.nnz : loc.k;
    w.counts.resize(un);
    {
      Phase ph(*this, "counts");
      comm_.allgather(&mine, sizeof(uint64_t), w.counts.data());
    }
    w.bytes.resize(un);
    w.displ.resize(un);
    size_t total = 0;
    uint64_t entries = 0;
    for (int p = 0; p < n; ++p) {
      w.bytes[p] = static_cast<size_t>(w.counts[p]) * (isz + rb);
      w.displ[p] = total;
      total += w.bytes[p];
      entries += w.counts[p];
    }
    report_.global_rows = entries;
    uint8_t* all = plan::grow(w.all, total);
    {
      // Encode in place: this rank's block of the gather buffer.
      uint8_t* msg = all + w.displ[me];
      if (as_given) {  // the range check (the plans check rows even without validation) in the same pass
        for (size_t i = 0; i < mine; ++i) {
          const int64_t x = in.index_at(i);
          plan::check_index(x, i, R);
          wire::store_key(msg, i, isz, static_cast<uint64_t>(x));
        }
      } else {
        for (size_t i = 0; i < mine; ++i) wire::store_key(msg, i, isz, static_cast<uint64_t>(loc.keys[i]));
      }
      if (mine) std::memcpy(msg + mine * isz, as_given ? in.values : static_cast<const void*>(loc.rows), mine * rb);
    }
    {
      Phase ph(*this, "allgatherv");
      comm_.allgatherv(all + w.displ[me], w.bytes[me], all, w.bytes.data(), w.displ.data());
    }
    Phase ph(*this, "reduce");
    if constexpr (std::is_same_v<A, T>) {
      if (!sparse_out) {  // one pass: the range check is the scatter's own
        dense_scatter<T>(dense_out, all, isz, rb, D, entries, tp);
        return;
      }
    }
    check_received(all, isz);

    // (row, offset of its value row) for every received entry in (rank, entry) order, stably sorted
    // by row: equal rows are then summed in rank order.
    plan::KV* kv = plan::grow(w.kv, entries);
    {
      size_t o = 0;
      for (int p = 0; p < n; ++p) {
        const uint8_t* keys = all + w.displ[p];
        const size_t vbase = w.displ[p] + w.counts[p] * isz;
        for (size_t i = 0; i < w.counts[p]; ++i) kv[o++] = plan::KV{wire::load_key(keys, i, isz), vbase + i * rb};
      }
    }
    w.sorter.sort(w.kv, w.kv_tmp, entries, plan::bits_for(R), &tp);
    kv = w.kv.data();
    size_t k = 0;
    for (size_t i = 0; i < entries; ++i) k += (i == 0 || kv[i].key != kv[i - 1].key);
    report_.result_nnz = k;
    auto emit = [&](uint8_t* dst, size_t i, size_t j) {  // sum of entries [i, j) (same row) into dst
      if (j == i + 1) {
        std::memcpy(dst, all + kv[i].val, rb);
        return;
      }
      for (size_t c = 0; c < D; ++c) {
        A acc = static_cast<A>(load_as<T>(all + kv[i].val + c * vs));
        for (size_t e = i + 1; e < j; ++e) acc += static_cast<A>(load_as<T>(all + kv[e].val + c * vs));
        store_as<T>(dst + c * vs, static_cast<T>(acc));
      }
    };
    if (sparse_out) {
      sparse_out->resize(k);
      size_t o = 0;
      for (size_t i = 0; i < entries;) {
        size_t j = i + 1;
        while (j < entries && kv[j].key == kv[i].key) ++j;
        sparse_out->indices[o] = static_cast<int64_t>(kv[i].key);
        emit(sparse_out->values.data() + o * rb, i, j);
        ++o;
        i = j;
      }
      return;
    }
    auto* d = static_cast<uint8_t*>(dense_out);
    if (spec_.dense_len) plan::parallel_zero(d, spec_.dense_len * vs, &tp);
    for (size_t i = 0; i < entries;) {
      size_t j = i + 1;
      while (j < entries && kv[j].key == kv[i].key) ++j;
      emit(d + kv[i].key * rb, i, j);
      i = j;
    }
  }

  /// Every received row in [0, R), or an error naming this rank and the peer that sent one outside.
  void check_received(const uint8_t* all, size_t isz) const {
    const Workspace& w = *ws_;
    const uint64_t R = spec_.dense_len / spec_.row_width;
    for (int p = 0; p < comm_.size(); ++p) {
      const uint8_t* keys = all + w.displ[p];
      for (size_t i = 0; i < w.counts[p]; ++i)
        if (wire::load_key(keys, i, isz) >= R)
          ZEN_THROW(Result::InvalidUsage, "rank " + std::to_string(comm_.rank()) + " allgather: peer " + std::to_string(p) +
                                              " sent row " + std::to_string(wire::load_key(keys, i, isz)) + " outside [0, " +
                                              std::to_string(R) + ")");
    }
  }

  // Dense output (f32/f64), the hand-written allgatherv + scatter-add's single pass: zero the output,
  // then add every received row into it, rank by rank in entry order (0 + x is x exactly, so a row's
  // value is the rank-order sum, the same on every rank). Above 2^16 values of work the rows are split
  // into ranges, one task each (every task reads all keys and adds the rows of its range: a row's sum
  // order stays the rank order). A row outside [0, R) falls in no range; the entries added are counted
  // and a shortfall names the peer that sent it.
  template <typename T>
  void dense_scatter(void* dense_out, const uint8_t* all, size_t isz, size_t rb, size_t D, uint64_t entries,
                     detail::ThreadPool& tp) {
    Workspace& w = *ws_;
    const int n = comm_.size();
    const uint64_t R = spec_.dense_len / spec_.row_width;
    auto* d = static_cast<uint8_t*>(dense_out);
    if (spec_.dense_len) plan::parallel_zero(d, spec_.dense_len * sizeof(T), &tp);
    const int tasks = tp.tasks_for(entries * D, size_t{1} << 16);
    uint64_t* added = plan::grow(w.added, static_cast<size_t>(tasks));
    tp.run(tasks, [&](int t) {
      const uint64_t lo = tasks == 1 ? 0 : (R * static_cast<uint64_t>(t) / static_cast<uint64_t>(tasks)) & ~uint64_t{63};
      const uint64_t hi = t + 1 == tasks ? R : (R * static_cast<uint64_t>(t + 1) / static_cast<uint64_t>(tasks)) & ~uint64_t{63};
      uint64_t hits = 0;
      // Key width and row width known at compile time (4/8-byte keys; one-value rows).
      auto scatter = [&](auto key_size, auto width) {
        constexpr size_t KS = decltype(key_size)::value, W = decltype(width)::value;
        const size_t rw = W ? W : rb;
        auto key = [](const uint8_t* keys, size_t i) -> uint64_t {
          return KS == 4 ? uint64_t{wire::load_as<uint32_t>(keys + 4 * i)} : wire::load_as<uint64_t>(keys + 8 * i);
        };
        for (int p = 0; p < n; ++p) {
          const uint8_t* keys = all + w.displ[p];
          const uint8_t* rows = keys + w.counts[p] * KS;
          const size_t cnt = w.counts[p];
          for (size_t i = 0; i < cnt; ++i) {
            if (i + 16 < cnt) __builtin_prefetch(d + std::min(key(keys, i + 16), R - 1) * rw, 1);
            const uint64_t row = key(keys, i);
            if (row - lo >= hi - lo) continue;  // another task's range, or outside [0, R)
            ++hits;
            if constexpr (W == sizeof(T)) {
              T x, y;
              std::memcpy(&x, d + row * W, W);
              std::memcpy(&y, rows + i * W, W);
              x += y;
              std::memcpy(d + row * W, &x, W);
            } else {
              plan::row_add_bytes<T>(d + row * rw, rows + i * rw, D);
            }
          }
        }
      };
      auto by_width = [&](auto key_size) {
        if (rb == sizeof(T)) scatter(key_size, std::integral_constant<size_t, sizeof(T)>{});
        else scatter(key_size, std::integral_constant<size_t, 0>{});
      };
      if (isz == 4) by_width(std::integral_constant<size_t, 4>{});
      else by_width(std::integral_constant<size_t, 8>{});
      added[t] = hits;
    });
    uint64_t total = 0;
    for (int t = 0; t < tasks; ++t) total += added[t];
    if (total != entries) check_received(all, isz);  // throws: some row was outside [0, R)
    ZEN_CHECK_CODE(total == entries, Result::InternalError,
                   "rank " + std::to_string(comm_.rank()) + " allgather: scattered " + std::to_string(total) + " of " +
                       std::to_string(entries) + " rows");
  }

  IndexType wire_;
};

/// Entries rank r sends (sends_as_given).
uint64_t sent_rows(const model::Problem& p, const model::Counts& c, size_t r) {
  return sends_as_given(p.sparse_out, p.dtype) ? c.entries_of(r) : c.k[r];
}

void allgather_traffic(model::TrafficBuilder& b) {
  const auto& c = b.c;
  const size_t un = b.un;
  b.t.encoding = "coo";
  const uint64_t e = model::key_width(b.R) + b.D * b.vs;
  std::vector<uint64_t> k(un);
  uint64_t tot = 0;
  for (size_t r = 0; r < un; ++r) tot += k[r] = sent_rows(b.p, c, r);
  model::PhaseTraffic& cn = b.phase("counts", b.lg, b.lg);
  model::PhaseTraffic& ag = b.phase("allgatherv", b.one, b.nm1);
  b.phase("reduce", 0, 0);
  for (size_t r = 0; r < un; ++r) {
    cn.sent[r] = cn.recv[r] = 8 * (un - 1);
    ag.sent[r] = (un - 1) * k[r] * e;
    ag.recv[r] = (tot - k[r]) * e;
  }
}

double allgather_work(const model::Problem& p, const model::Counts& c, size_t r) {
  uint64_t tot = 0;
  for (size_t q = 0; q < c.k.size(); ++q) tot += sent_rows(p, c, q);
  return static_cast<double>(sent_rows(p, c, r) + tot);
}

}  // namespace

namespace detail {
extern const SchemeRow allgather_row{Allgather::kName, plan::factory<Allgather>, allgather_traffic, allgather_work, /*auto_position=*/1, detail::kSparse};
}  // namespace detail

}  // namespace zen
