#include "plan_util.hpp"

#include <algorithm>
#include <string>
#include <type_traits>

#include "zen/encode/bitmap.hpp"
#include "zen/error.hpp"

namespace zen::plan {

void RadixSort::sort(std::vector<KV>& a, std::vector<KV>& tmp, size_t n, int key_bits, detail::ThreadPool* pool) {
  if (n < 2) return;
  if (n <= 48) {  // insertion sort (stable)
    for (size_t i = 1; i < n; ++i) {
      const KV x = a[i];
      size_t j = i;
      while (j > 0 && a[j - 1].key > x.key) {
        a[j] = a[j - 1];
        --j;
      }
      a[j] = x;
    }
    return;
  }
  grow(tmp, n);
  const int digit = key_bits <= 16 ? 8 : 11;
  const size_t buckets = size_t{1} << digit, mask = buckets - 1;
  const int tasks = pool ? pool->tasks_for(n, size_t{1} << 16) : 1;
  grow(hist_, static_cast<size_t>(tasks) * buckets);
  KV* src = a.data();
  KV* dst = tmp.data();
  int passes = 0;
  for (int shift = 0; shift < key_bits; shift += digit) {
    std::fill(hist_.begin(), hist_.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(tasks) * buckets), 0);
    auto count = [&](int t) {
      size_t* h = hist_.data() + static_cast<size_t>(t) * buckets;
      const size_t b = detail::ThreadPool::chunk_begin(n, tasks, t), e = detail::ThreadPool::chunk_begin(n, tasks, t + 1);
      for (size_t i = b; i < e; ++i) ++h[(src[i].key >> shift) & mask];
    };
    if (tasks > 1) pool->run(tasks, count);
    else count(0);
    // Exclusive prefix over (digit, task): task-major within a digit keeps the sort stable.
    size_t sum = 0;
    for (size_t d = 0; d < buckets; ++d)
      for (int t = 0; t < tasks; ++t) {
        size_t& h = hist_[static_cast<size_t>(t) * buckets + d];
        const size_t c = h;
        h = sum;
        sum += c;
      }
    auto scatter = [&](int t) {
      size_t* h = hist_.data() + static_cast<size_t>(t) * buckets;
      const size_t b = detail::ThreadPool::chunk_begin(n, tasks, t), e = detail::ThreadPool::chunk_begin(n, tasks, t + 1);
      for (size_t i = b; i < e; ++i) dst[h[(src[i].key >> shift) & mask]++] = src[i];
    };
    if (tasks > 1) pool->run(tasks, scatter);
    else scatter(0);
    std::swap(src, dst);
    ++passes;
  }
  if (passes % 2) std::memcpy(a.data(), tmp.data(), n * sizeof(KV));
}

void parallel_zero(void* p, size_t bytes, detail::ThreadPool* pool) {
  if (bytes == 0) return;
  auto* b = static_cast<uint8_t*>(p);
  if (!pool || bytes < (size_t{1} << 20)) {
    std::memset(b, 0, bytes);
    return;
  }
  pool->parallel_for(bytes, size_t{1} << 19, [&](size_t lo, size_t hi, int) { std::memset(b + lo, 0, hi - lo); });
}

void parallel_copy(void* dst, const void* src, size_t bytes, detail::ThreadPool* pool) {
  if (bytes == 0) return;
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  if (!pool || bytes < (size_t{1} << 20)) {
    std::memcpy(d, s, bytes);
    return;
  }
  pool->parallel_for(bytes, size_t{1} << 19, [&](size_t lo, size_t hi, int) { std::memcpy(d + lo, s + lo, hi - lo); });
}

void densify(const Coalesced& loc, const TensorSpec& spec, uint8_t* buf, detail::ThreadPool* pool) {
  if (spec.dense_len) parallel_zero(buf, spec.dense_len * dtype_size(spec.dtype), pool);
  densify_rows(loc, spec, buf);
}

void throw_index_outside(int64_t x, size_t i, uint64_t R) {
  ZEN_THROW(Result::InvalidArgument,
            "index " + std::to_string(x) + " at entry " + std::to_string(i) + " is outside [0, " + std::to_string(R) + ")");
}

void densify_rows(const Coalesced& loc, const TensorSpec& spec, uint8_t* buf) {
  const size_t rb = spec.row_width * dtype_size(spec.dtype);
  for (size_t i = 0; i < loc.k; ++i) std::memcpy(buf + static_cast<size_t>(loc.keys[i]) * rb, loc.rows + i * rb, rb);
}

size_t support_rows_range(const uint8_t* dense, const uint8_t* bm, uint64_t R, uint64_t r0, uint64_t r1, size_t rb,
                          int64_t* oi, uint8_t* ov, size_t j) {
  r1 = std::min(r1, R);
  if (r0 >= r1) return j;
  const size_t nbytes = encode::bitmap_bytes(R);
  const size_t w0 = static_cast<size_t>(r0 / 64), w1 = static_cast<size_t>((r1 - 1) / 64) + 1;  // words [w0, w1)
  // Bits of word w inside [r0, r1).
  auto word = [&](size_t w) {
    uint64_t x = encode::bitmap_word(bm, nbytes, w);
    if (w == w0 && (r0 & 63)) x &= ~uint64_t{0} << (r0 & 63);
    if (w + 1 == w1 && (r1 & 63)) x &= ~(~uint64_t{0} << (r1 & 63));
    return x;
  };
  // The rows of word w + kAhead are prefetched while word w's are copied (the dense buffer may be
  // out of cache; at a few % density a word holds one or two rows).
  constexpr size_t kAhead = 16;
  auto copy_rows = [&](auto width) {
    constexpr size_t W = decltype(width)::value;
    const size_t RB = W ? W : rb;
    for (size_t w = w0; w < w1; ++w) {
      if (w + kAhead < w1)
        for (uint64_t y = word(w + kAhead); y; y &= y - 1)
          __builtin_prefetch(dense + ((w + kAhead) * 64 + static_cast<uint64_t>(__builtin_ctzll(y))) * RB);
      for (uint64_t x = word(w); x; x &= x - 1) {
        const uint64_t row = w * 64 + static_cast<uint64_t>(__builtin_ctzll(x));
        oi[j] = static_cast<int64_t>(row);
        std::memcpy(ov + j * RB, dense + row * RB, RB);
        ++j;
      }
    }
  };
  if (rb == 4) copy_rows(std::integral_constant<size_t, 4>{});
  else if (rb == 8) copy_rows(std::integral_constant<size_t, 8>{});
  else copy_rows(std::integral_constant<size_t, 0>{});
  return j;
}

void support_rows_to_sparse(const uint8_t* dense, const uint8_t* bm, uint64_t R, size_t rb, SparseTensor& out) {
  out.resize(static_cast<size_t>(encode::bitmap_count(bm, R)));
  support_rows_range(dense, bm, R, 0, R, rb, out.indices.data(), out.values.data(), 0);
}

Coalesced Coalescer::run(const SparseView& in, const TensorSpec& spec, bool sorted, detail::ThreadPool* pool) {
  Coalesced c;
  const size_t nnz = in.nnz;
  const uint64_t R = spec.dense_len / spec.row_width;
  const size_t rb = spec.row_width * dtype_size(spec.dtype);
  if (nnz == 0) return c;
  // Already sorted and unique? In range? (one pass; the range check holds even without validation)
  bool inc = true;
  {
    int64_t prev = -1;
    for (size_t i = 0; i < nnz; ++i) {
      const int64_t x = in.index_at(i);
      check_index(x, i, R);
      inc = inc && x > prev;
      prev = x;
    }
  }
  auto keys_of_input = [&]() -> const int64_t* {
    if (in.index_type == IndexType::I64) return static_cast<const int64_t*>(in.indices);
    int64_t* k = grow(keys_, nnz);
    for (size_t i = 0; i < nnz; ++i) k[i] = in.index_at(i);
    return k;
  };
  if (inc) {
    c.k = nnz;
    c.keys = keys_of_input();
    c.rows = static_cast<const uint8_t*>(in.values);
    return c;
  }
  // Unique but unsorted, and the caller does not need order: a presence bitmap tells (R small).
  if (!sorted && R <= (uint64_t{1} << 27)) {
    uint64_t* seen = grow(seen_, static_cast<size_t>((R + 63) / 64));
    bool dup = false;
    size_t i = 0;
    for (; i < nnz; ++i) {
      const uint64_t x = static_cast<uint64_t>(in.index_at(i));
      if (get_bit(seen, x)) {
        dup = true;
        break;
      }
      set_bit(seen, x);
    }
    for (size_t j = 0; j < i; ++j) {  // touched-only clearing
      const uint64_t x = static_cast<uint64_t>(in.index_at(j));
      seen[x >> 6] = 0;
    }
    if (!dup) {
      c.k = nnz;
      c.keys = keys_of_input();
      c.rows = static_cast<const uint8_t*>(in.values);
      return c;
    }
  }
  // Sort (key, entry) stably and sum runs in input order.
  KV* kv = grow(kv_, nnz);
  for (size_t i = 0; i < nnz; ++i) kv[i] = KV{static_cast<uint64_t>(in.index_at(i)), i};
  sorter_.sort(kv_, tmp_, nnz, bits_for(R), pool);
  kv = kv_.data();
  size_t k = 0;
  for (size_t i = 0; i < nnz; ++i) k += (i == 0 || kv[i].key != kv[i - 1].key);
  int64_t* keys = grow(keys_, k);
  uint8_t* rows = grow(rows_, k * rb);
  dispatch_dtype(spec.dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = typename accum_of<T>::type;
    const size_t D = spec.row_width;
    const auto* vals = static_cast<const uint8_t*>(in.values);
    size_t o = 0;
    for (size_t i = 0; i < nnz;) {
      size_t j = i + 1;
      while (j < nnz && kv[j].key == kv[i].key) ++j;
      keys[o] = static_cast<int64_t>(kv[i].key);
      uint8_t* out = rows + o * rb;
      if (j == i + 1) {
        std::memcpy(out, vals + kv[i].val * rb, rb);
      } else {
        for (size_t col = 0; col < D; ++col) {
          T x;
          std::memcpy(static_cast<void*>(&x), vals + kv[i].val * rb + col * sizeof(T), sizeof(T));
          A acc = static_cast<A>(x);
          for (size_t e = i + 1; e < j; ++e) {
            std::memcpy(static_cast<void*>(&x), vals + kv[e].val * rb + col * sizeof(T), sizeof(T));
            acc += static_cast<A>(x);
          }
          const T r = static_cast<T>(acc);
          std::memcpy(out + col * sizeof(T), &r, sizeof(T));
        }
        c.had_duplicates = true;
      }
      ++o;
      i = j;
    }
  });
  c.k = k;
  c.keys = keys;
  c.rows = rows;
  return c;
}

}  // namespace zen::plan
