#pragma once
// Private building blocks of the schemes' plans (not installed): grow-only buffers, a stable LSD
// radix sort of (key, value) records, and a coalescer that owns its workspace. Everything here
// allocates only when a call needs more room than any earlier call did.
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "common.hpp"
#include "zen/detail/radix_sort.hpp"
#include "zen/detail/thread_pool.hpp"
#include "zen/schemes/scheme.hpp"
#include "zen/tensor.hpp"

namespace zen::plan {

/// The final class of every host plan: the factory makes Quiesced<S>, whose destructor waits for the
/// non-blocking calls of this plan still pending (SparseAllreduce::quiesce) before any member of the
/// scheme S goes, so no scheme has to remember to (and none can forget). Schemes are made only
/// through make_plan.
template <class S>
class Quiesced final : public S {
 public:
  using S::S;
  ~Quiesced() override { this->quiesce(); }
};
template <class S, class... Args>
std::unique_ptr<SparseAllreduce> make_plan(Args&&... args) {
  return std::make_unique<Quiesced<S>>(std::forward<Args>(args)...);
}
/// The factory of a scheme's row (scheme_row.hpp): make_plan<S> with the registry's arguments.
template <class S>
std::unique_ptr<SparseAllreduce> factory(Communicator& c, const TensorSpec& s, const SchemeOptions& o) {
  return make_plan<S>(c, s, o);
}

/// What a scheme without a workspace of its own names as W (its buffers are its members).
struct NoWorkspace {};

/// The plan base of a host scheme S (written once, here): its name (S::kName, which S's row reads
/// too) and its workspace W, made here and held for Communicator::OwnerScope (holder_). Base is
/// SparseAllreduce or a shared skeleton (OwnerExchangePlan) that adopts the workspace.
template <class S, class W = NoWorkspace, class Base = SparseAllreduce>
class Named : public Base {
 public:
  Named(Communicator& c, const TensorSpec& s, const SchemeOptions& o) : Base(c, s, o) {
    if constexpr (!std::is_same_v<W, NoWorkspace>) {
      ws_ = std::make_shared<W>();
      this->holder_ = ws_;
      if constexpr (adopts<Base>(0)) Base::adopt_workspace(*ws_);
    }
  }
  const char* name() const override { return S::kName; }

 protected:
  std::shared_ptr<W> ws_;

 private:
  template <class B>
  static constexpr auto adopts(int) -> decltype(std::declval<B&>().adopt_workspace(std::declval<W&>()), bool()) {
    return true;
  }
  template <class B>
  static constexpr bool adopts(...) {
    return false;
  }
};

/// Named, and each call dispatched on the dtype to S::run_typed<T>(in, sparse_out, dense_out)
/// (S befriends plan::Access).
struct Access {
  template <typename T, class S>
  static void run_typed(S& s, const SparseView& in, SparseTensor* sparse_out, void* dense_out) {
    s.template run_typed<T>(in, sparse_out, dense_out);
  }
};
template <class S, class W = NoWorkspace, class Base = SparseAllreduce>
class Typed : public Named<S, W, Base> {
 public:
  using Named<S, W, Base>::Named;

 protected:
  void execute(const SparseView& in, SparseTensor* sparse_out, void* dense_out) override {
    dispatch_dtype(this->spec_.dtype, [&](auto tag) {
      Access::run_typed<decltype(tag)>(static_cast<S&>(*this), in, sparse_out, dense_out);
    });
  }
};

/// Make `v` hold at least `n` elements (grow only; contents of a grown vector are unspecified).
template <typename T>
inline T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

inline bool get_bit(const uint64_t* bm, uint64_t i) { return (bm[i >> 6] >> (i & 63)) & 1u; }
inline void set_bit(uint64_t* bm, uint64_t i) { bm[i >> 6] |= uint64_t{1} << (i & 63); }

/// Bits needed to represent every value below `n` (at least 1).
using detail::bits_for;

struct KV {
  uint64_t key;
  uint64_t val;
};

/// Stable LSD radix sort of records by key (keys < 2^key_bits). Result in `a`; `tmp` is scratch.
class RadixSort {
 public:
  void sort(std::vector<KV>& a, std::vector<KV>& tmp, size_t n, int key_bits, detail::ThreadPool* pool);

 private:
  std::vector<size_t> hist_;
};

/// Stable LSD radix sort of packed records (zen/detail/radix_sort.hpp).
using detail::radix_sort_u64;

/// Sorted unique rows of a SparseView, duplicates summed in input order (accumulation type, one
/// rounding), or the view itself when it already is sorted and unique.
struct Coalesced {
  size_t k = 0;
  const int64_t* keys = nullptr;  ///< ascending, unique
  const uint8_t* rows = nullptr;  ///< k * D values of the spec's dtype
  bool had_duplicates = false;
};

class Coalescer {
 public:
  /// `sorted`: the result must be in ascending key order (else any order, which lets unique
  /// unsorted input pass through without a sort when R is small enough for a presence bitmap).
  Coalesced run(const SparseView& in, const TensorSpec& spec, bool sorted, detail::ThreadPool* pool);

 private:
  std::vector<KV> kv_, tmp_;
  std::vector<int64_t> keys_;
  std::vector<uint8_t> rows_;
  std::vector<uint64_t> seen_;
  RadixSort sorter_;
};

/// Memset / memcpy of a large buffer split over the pool.
void parallel_zero(void* p, size_t bytes, detail::ThreadPool* pool);
void parallel_copy(void* dst, const void* src, size_t bytes, detail::ThreadPool* pool);

/// Zero `buf` (N values of the spec's dtype) and write the coalesced rows into it.
void densify(const Coalesced& loc, const TensorSpec& spec, uint8_t* buf, detail::ThreadPool* pool);
/// Row index x of entry i checked against [0, R) (the plans check it even when the caller skipped
/// validation: it indexes their buffers).
[[noreturn]] void throw_index_outside(int64_t x, size_t i, uint64_t R);
inline void check_index(int64_t x, size_t i, uint64_t R) {
  if (x < 0 || static_cast<uint64_t>(x) >= R) throw_index_outside(x, i, R);
}

/// densify into a buffer already zeroed.
void densify_rows(const Coalesced& loc, const TensorSpec& spec, uint8_t* buf);

inline void set_bit64(uint64_t* bm, uint64_t i) { bm[i >> 6] |= uint64_t{1} << (i & 63); }

/// The rows of a dense buffer (R rows of rb bytes) whose bit is set in bm (ceil(R/8) bytes, bit r
/// of byte r/8) as a sparse tensor, rows ascending. Words are read whole, rows prefetched ahead.
void support_rows_to_sparse(const uint8_t* dense, const uint8_t* bm, uint64_t R, size_t rb, SparseTensor& out);
/// The rows r0 <= r < r1 of a dense buffer whose bit is set in bm: indices to oi[j..], values to
/// ov + j * rb, rows ascending; returns j plus the rows written (support_rows_to_sparse by ranges).
size_t support_rows_range(const uint8_t* dense, const uint8_t* bm, uint64_t R, uint64_t r0, uint64_t r1, size_t rb,
                          int64_t* oi, uint8_t* ov, size_t j);

/// Workspace of the dense schemes (dense ring, dense_native).
struct DenseWorkspace {
  Coalescer co;
  std::vector<uint8_t> dense;  ///< N values (sparse output, or the ring's buffer)
  std::vector<uint8_t> bm;     ///< support bitmap, ceil(R/8) bytes
};

}  // namespace zen::plan
