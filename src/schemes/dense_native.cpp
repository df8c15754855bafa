// Dense baseline through the backend's native allreduce (MPI_Allreduce, ncclAllReduce, loopback).
// Dense output: the local rows are written into the caller's buffer and reduced there in place (one
// native allreduce, as a user's own MPI_Allreduce would). Sparse output: the same in the plan's
// buffer, and the support travels as an R-bit presence bitmap ORed with the sum in one
// Communicator::allreduce_sum_or. See docs/algorithms.md, "dense_native". A plan: no steady-state
// allocation.
#include <cstring>

#include "owner_stage.hpp"
#include "plan_util.hpp"
#include "scheme_row.hpp"
#include "zen/encode/bitmap.hpp"
#include "zen/schemes/scheme.hpp"

namespace zen {
namespace {

struct Workspace : plan::DenseWorkspace {
  std::vector<uint64_t> support;  ///< R bits: the local, then the global row support
};

class DenseNative : public plan::Named<DenseNative, Workspace> {
 public:
  using Named::Named;
  static constexpr const char* kName = "dense_native";

 protected:
  void execute(const SparseView& in, SparseTensor* sparse_out, void* dense_out) override {
    Workspace& w = *ws_;
    detail::ThreadPool& tp = pool();
    const uint64_t N = spec_.dense_len, R = N / spec_.row_width;
    const size_t vs = dtype_size(spec_.dtype);
    report_.encoding = "dense";
    uint8_t* buf = sparse_out ? plan::grow(w.dense, N * vs) : static_cast<uint8_t*>(dense_out);
    // The local support (R bits, whole words): which rows this rank brings.
    const size_t words = static_cast<size_t>((R + 63) / 64);
    uint64_t* bm = plan::grow(w.support, words);
    {
      Phase ph(*this, "densify");
      if (words) std::memset(bm, 0, words * 8);
      if (N) plan::parallel_zero(buf, N * vs, &tp);
      if (vs >= 4) {
        // f32 / f64: straight from the input into the zeroed buffer, no coalescing: a row's first
        // entry is copied, later ones added in input order (the coalescer's sums, bit for bit).
        dispatch_dtype(spec_.dtype, [&](auto tag) {
          if constexpr (sizeof(tag) >= 4) scatter<decltype(tag)>(in, buf, bm);
        });
      } else {
        // 16-bit values: duplicates are summed in fp32 and rounded once (the coalescer).
        const plan::Coalesced loc = w.co.run(in, spec_, false, &tp);
        plan::densify_rows(loc, spec_, buf);
        for (size_t i = 0; i < loc.k; ++i) plan::set_bit64(bm, static_cast<uint64_t>(loc.keys[i]));
      }
    }
    if (!sparse_out) {
      Phase ph(*this, "allreduce");
      // The caller's buffer, not the plan's: the backend keeps caller memory safe on failure itself.
      Communicator::OwnerScope caller(comm_, nullptr);
      if (comm_.size() > 1 && N) comm_.allreduce(buf, N, spec_.dtype, ReduceOp::Sum);
      return;
    }
    // The rows of the result as the sum's pieces become final (each while it is in cache), the
    // rest after the call.
    Extract ex{buf, reinterpret_cast<const uint8_t*>(bm), R, spec_.row_width, spec_.row_width * vs, sparse_out};
    {
      // The sum and its support in one operation (the backend may overlap them).
      Phase ph(*this, "allreduce");
      if (comm_.size() > 1 && N)
        comm_.allreduce_sum_or(buf, N, spec_.dtype, bm, static_cast<size_t>((R + 7) / 8),
                               Communicator::PieceDone{&Extract::piece, &ex});
    }
    Phase ph(*this, "extract");
    ex.upto(R);
  }

 private:
  // The sparse result, written in row order as the rows become final.
  struct Extract {
    const uint8_t* dense;
    const uint8_t* bm;
    uint64_t R;
    size_t D, rb;
    SparseTensor* out;
    bool sized = false;
    uint64_t row = 0;  // rows below are written
    size_t j = 0;      // entries written
    // Rows below `end` (the support is final from the first piece on).
    void upto(uint64_t end) {
      if (!sized) {
        out->resize(static_cast<size_t>(encode::bitmap_count(bm, R)));
        sized = true;
      }
      if (end <= row) return;
      j = plan::support_rows_range(dense, bm, R, row, end, rb, out->indices.data(), out->values.data(), j);
      row = end;
    }
    static void piece(void* ctx, size_t first, size_t count) {
      auto* e = static_cast<Extract*>(ctx);
      e->upto((first + count) / e->D);  // rows wholly inside the final elements
    }
  };

  // Rows of the input into the zeroed dense buffer; bit r of bm set for every row r present.
  // Byte pointers and unaligned row adds: neither the input nor a caller's buffer need be aligned.
  template <typename T>
  void scatter(const SparseView& in, uint8_t* buf, uint64_t* bm) {
    const size_t D = spec_.row_width, rb = D * sizeof(T);
    const uint64_t R = spec_.dense_len / D;
    const auto* v = static_cast<const uint8_t*>(in.values);
    for (size_t i = 0; i < in.nnz; ++i) {
      const int64_t x = in.index_at(i);
      plan::check_index(x, i, R);
      const uint64_t r = static_cast<uint64_t>(x), bit = uint64_t{1} << (r & 63);
      uint8_t* row = buf + r * rb;
      if (bm[r >> 6] & bit) {
        plan::row_add_bytes<T>(row, v + i * rb, D);
      } else {
        bm[r >> 6] |= bit;
        std::memcpy(row, v + i * rb, rb);
      }
    }
  }

};

void dense_native_traffic(model::TrafficBuilder& b) {
  const int n = b.n;
  const uint64_t N = b.N, vs = b.vs, Rb = b.Rb;
  b.t.encoding = "dense";
  b.phase("densify", 0, 0);
  // The sum (large: ring) and, for a sparse output, its support bitmap (small: recursive
  // doubling) in one allreduce_sum_or: one phase.
  const double sup = b.p.sparse_out ? 2 * b.lg : 0.0;
  model::PhaseTraffic& ar = b.phase("allreduce", 2 * b.nm1 + sup, 2 * b.nm1 + sup);
  if (n > 1 && N)
    for (int r = 0; r < n; ++r) {
      uint64_t x = 2 * (N * vs - ring_chunk_bytes(N, vs, n, r));
      if (b.p.sparse_out) x += 2 * (Rb - ring_chunk_bytes(Rb, 1, n, r));
      ar.sent[static_cast<size_t>(r)] = ar.recv[static_cast<size_t>(r)] = x;
    }
  if (b.p.sparse_out) b.phase("extract", 0, 0);
}

double dense_native_work(const model::Problem& p, const model::Counts& c, size_t r) {
  return static_cast<double>(c.k[r]) + static_cast<double>(p.rows);  // densify + reduce every row
}

}  // namespace

namespace detail {
extern const SchemeRow dense_native_row{DenseNative::kName, plan::factory<DenseNative>, dense_native_traffic, dense_native_work, /*auto_position=*/5, detail::kDense};
}  // namespace detail

}  // namespace zen
