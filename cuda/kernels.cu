// CUDA kernels of the Balanced-Parallelism path (see include/zen/cuda/kernels.hpp and docs/gpu.md).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "check.cuh"
#include "zen/cuda/kernels.hpp"
#include "zen/error.hpp"

namespace zen::cuda {

const char* device_error_name(uint32_t code) {
  switch (code) {
    case kErrNone: return "";
    case kErrPushKeyRange: return "pushed position outside the owner's index set";
    case kErrBitmapPadding: return "hash bitmap has a padding bit set";
    case kErrBitmapCount: return "hash bitmap set-bit count differs from the announced result count";
    case kErrCooKeyRange: return "COO pull key outside the owner's index set";
    case kErrHashLost: return "hierarchical hashing compaction lost or duplicated entries";
    case kErrIndexRange: return "input index outside [0, N/D)";
  }
  return "unknown device error";
}

namespace {

constexpr uint32_t kEmpty = 0xFFFFFFFFu;
constexpr unsigned kThreads = 256;

cudaStream_t S(void* s) { return static_cast<cudaStream_t>(s); }

unsigned blocks_for(uint64_t n) {
  const uint64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<uint64_t>(1, std::min<uint64_t>(b, 0x7FFFFFFFull)));
}
#define ZEN_GRID_STRIDE(i, n) \
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<uint64_t>(gridDim.x) * blockDim.x)

// ---- workspace carving (query mode when base == nullptr) ----
struct Carver {
  uint8_t* base;
  size_t off = 0;
  template <typename T>
  T* take(size_t count) {
    off = (off + 255) & ~size_t{255};
    T* p = base ? reinterpret_cast<T*>(base + off) : nullptr;
    off += count * sizeof(T);
    return p;
  }
  size_t bytes() const { return (off + 255) & ~size_t{255}; }
};

void need_ws(size_t have, size_t need, const char* what) {
  ZEN_CHECK_CODE(have >= need, Result::InvalidArgument,
                 std::string(what) + ": workspace of " + std::to_string(have) + " bytes is smaller than the " +
                     std::to_string(need) + " bytes this call needs (query the workspace size for the largest problem)");
}

// ---- value types: storage S, accumulator A, conversions matching Eigen's host conversions ----
struct F32 {
  using S = float;
  using A = float;
  __device__ static A up(S v) { return v; }
  __device__ static S down(A v) { return v; }
  __device__ static bool nonzero(S v) { return v != 0.0f; }
};
struct F64 {
  using S = double;
  using A = double;
  __device__ static A up(S v) { return v; }
  __device__ static S down(A v) { return v; }
  __device__ static bool nonzero(S v) { return v != 0.0; }
};
struct F16 {
  using S = uint16_t;
  using A = float;
  __device__ static A up(S v) { return __half2float(__ushort_as_half(v)); }
  // IEEE round-to-nearest-even; NaN -> 0x7e00 | sign (as Eigen::half's portable conversion).
  __device__ static S down(A f) {
    if (isnan(f)) return static_cast<uint16_t>(signbit(f) ? 0xfe00u : 0x7e00u);
    return __half_as_ushort(__float2half_rn(f));
  }
  __device__ static bool nonzero(S v) { return (v & 0x7fffu) != 0; }
};
struct BF16 {
  using S = uint16_t;
  using A = float;
  __device__ static A up(S v) { return __uint_as_float(static_cast<uint32_t>(v) << 16); }
  // Round to nearest even on the upper 16 bits; NaN -> 0x7fc0 | sign (as Eigen::bfloat16).
  __device__ static S down(A f) {
    if (isnan(f)) return static_cast<uint16_t>(signbit(f) ? 0xffc0u : 0x7fc0u);
    uint32_t u = __float_as_uint(f);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
  __device__ static bool nonzero(S v) { return (v & 0x7fffu) != 0; }
};

template <typename F>
void dispatch_vt(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(F32{}); return;
    case DType::F64: f(F64{}); return;
    case DType::F16: f(F16{}); return;
    case DType::BF16: f(BF16{}); return;
  }
  ZEN_THROW(Result::InvalidArgument, std::string("CUDA kernels: unsupported dtype ") + dtype_name(t));
}

// ---- alignment-checked access to wire buffers ----
template <typename T>
__device__ __forceinline__ T load_u(const uint8_t* p) {
  if ((reinterpret_cast<uintptr_t>(p) & (sizeof(T) - 1)) == 0) return *reinterpret_cast<const T*>(p);
  T v;
  uint8_t* d = reinterpret_cast<uint8_t*>(&v);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(T)); ++i) d[i] = p[i];
  return v;
}
template <typename T>
__device__ __forceinline__ void store_u(uint8_t* p, T v) {
  if ((reinterpret_cast<uintptr_t>(p) & (sizeof(T) - 1)) == 0) {
    *reinterpret_cast<T*>(p) = v;
    return;
  }
  const uint8_t* s = reinterpret_cast<const uint8_t*>(&v);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(T)); ++i) p[i] = s[i];
}
__device__ __forceinline__ uint64_t load_key(const uint8_t* p, int isz) {
  return isz == 4 ? static_cast<uint64_t>(load_u<uint32_t>(p)) : load_u<uint64_t>(p);
}
__device__ __forceinline__ void store_key(uint8_t* p, uint64_t k, int isz) {
  if (isz == 4) store_u<uint32_t>(p, static_cast<uint32_t>(k));
  else store_u<uint64_t>(p, k);
}
/// Copy n bytes using the widest access both pointers and n allow.
__device__ __forceinline__ void copy_bytes(uint8_t* d, const uint8_t* s, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s) | n;
  if ((a & 7) == 0) {
    for (size_t i = 0; i < n; i += 8) *reinterpret_cast<uint64_t*>(d + i) = *reinterpret_cast<const uint64_t*>(s + i);
  } else if ((a & 3) == 0) {
    for (size_t i = 0; i < n; i += 4) *reinterpret_cast<uint32_t*>(d + i) = *reinterpret_cast<const uint32_t*>(s + i);
  } else if ((a & 1) == 0) {
    for (size_t i = 0; i < n; i += 2) *reinterpret_cast<uint16_t*>(d + i) = *reinterpret_cast<const uint16_t*>(s + i);
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = s[i];
  }
}
/// First index i in [0, n] with off[i] > t, minus one: the segment holding item t.
__device__ __forceinline__ uint32_t segment_of(const uint64_t* off, uint32_t n, uint64_t t) {
  uint32_t lo = 0, hi = n;  // off[0] = 0 <= t < off[n]
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (off[mid] <= t) lo = mid;
    else hi = mid;
  }
  return lo;
}
__device__ void report_error(DeviceError* e, uint32_t code, uint32_t owner, uint64_t a, uint64_t b) {
  if (atomicCAS(&e->code, 0u, code) == 0u) {
    e->owner = owner;
    e->a = a;
    e->b = b;
  }
}

// ============================================================================================
// Hierarchical hashing
struct HashArgs {
  Partitioner part;
  uint64_t hseed[16];
  int k;
  uint64_t cap1, cap2;
  uint32_t* par;
  uint32_t* ser;
  uint32_t* serial_cnt;
  uint32_t* spill;
  unsigned long long* spill_cnt;
  unsigned long long* owner_counts;
  uint32_t* owner_of;
  uint64_t* pos_of;
  DeviceError* err;
};

template <typename I>
__global__ void hash_insert_kernel(const I* idx, uint64_t nnz, HashArgs a) {
  ZEN_GRID_STRIDE(i, nnz) {
    uint64_t x = static_cast<uint64_t>(idx[i]);  // int32 -1 becomes 2^64-1: caught below
    if (x >= a.part.n_items) {
      if (a.err) report_error(a.err, kErrIndexRange, static_cast<uint32_t>(i), x, a.part.n_items);
      x = 0;
    }
    uint32_t p;
    uint64_t pos;
    a.part.locate(x, &p, &pos);
    a.owner_of[i] = p;
    a.pos_of[i] = pos;
    // Warp-aggregated per-owner count (integer atomics: the result is deterministic).
    const unsigned active = __activemask();
    const unsigned peers = __match_any_sync(active, p);
    if ((threadIdx.x & 31u) == static_cast<unsigned>(__ffs(peers) - 1))
      atomicAdd(&a.owner_counts[p], static_cast<unsigned long long>(__popc(peers)));
    uint32_t* region = a.par + static_cast<uint64_t>(p) * a.cap1;
    bool placed = false;
    for (int j = 0; j < a.k && !placed; ++j) {
      const uint64_t s = reduce_range(hash64_mixed(x, a.hseed[j]), a.cap1);
      // compare-and-swap claims a slot for exactly one entry (no check-then-store race)
      placed = atomicCAS(region + s, kEmpty, static_cast<uint32_t>(i)) == kEmpty;
    }
    if (placed) continue;
    const uint32_t j = atomicAdd(&a.serial_cnt[p], 1u);
    if (j < a.cap2) {
      a.ser[static_cast<uint64_t>(p) * a.cap2 + j] = static_cast<uint32_t>(i);
    } else {
      const unsigned long long t = atomicAdd(a.spill_cnt, 1ull);  // serial region full: spill, never past it
      a.spill[t] = static_cast<uint32_t>(i);
    }
  }
}

// Slot s of (parallel | serial | spill) -> entry id, or EMPTY.
struct SlotEntry {
  const uint32_t* par;
  const uint32_t* ser;
  const uint32_t* serial_cnt;
  const uint32_t* spill;
  const unsigned long long* spill_cnt;
  uint64_t npar, nser, cap2;
  __device__ uint32_t operator()(uint64_t s) const {
    if (s < npar) return par[s];
    s -= npar;
    if (s < nser) {
      const uint64_t p = s / cap2, j = s - p * cap2;
      const uint64_t used = min(static_cast<uint64_t>(serial_cnt[p]), cap2);
      return j < used ? ser[s] : kEmpty;
    }
    s -= nser;
    return s < *spill_cnt ? spill[s] : kEmpty;
  }
};
struct NotEmpty {
  __device__ bool operator()(uint32_t v) const { return v != kEmpty; }
};

__global__ void check_selected_kernel(const uint64_t* num_sel, uint64_t nnz, DeviceError* err) {
  if (blockIdx.x == 0 && threadIdx.x == 0 && *num_sel != nnz) report_error(err, kErrHashLost, 0, *num_sel, nnz);
}

__global__ void owner_keys_kernel(const uint32_t* sel, const uint32_t* owner_of, uint64_t n, uint32_t* keys) {
  ZEN_GRID_STRIDE(i, n) keys[i] = owner_of[sel[i]];
}

int bits_for(uint64_t max_value) {
  int b = 0;
  while (b < 64 && (max_value >> b) != 0) ++b;
  return std::max(b, 1);
}

struct HashLayout {
  uint32_t *owner_of, *par, *ser, *spill, *sel, *keys, *keys_sorted;
  uint64_t* num_sel;
  void* temp;
  size_t temp_bytes;
  size_t total;
};

HashLayout hash_layout(void* base, size_t max_nnz, uint32_t n, const HashParams& hp) {
  const HashCaps c = hash_caps(max_nnz, n, hp);
  Carver cv{static_cast<uint8_t*>(base)};
  HashLayout L{};
  L.owner_of = cv.take<uint32_t>(max_nnz);
  L.par = cv.take<uint32_t>(n * c.cap1);
  L.ser = cv.take<uint32_t>(n * c.cap2);
  L.spill = cv.take<uint32_t>(max_nnz);
  L.sel = cv.take<uint32_t>(max_nnz);
  L.keys = cv.take<uint32_t>(max_nnz);
  L.keys_sorted = cv.take<uint32_t>(max_nnz);
  L.num_sel = cv.take<uint64_t>(1);
  // CUB scratch: the larger of the select over all slots and the owner sort.
  size_t t1 = 0, t2 = 0;
  const uint64_t slots = n * c.cap1 + n * c.cap2 + max_nnz;
  auto it = thrust::make_transform_iterator(thrust::counting_iterator<uint64_t>(0), SlotEntry{});
  cub::DeviceSelect::If(nullptr, t1, it, static_cast<uint32_t*>(nullptr), static_cast<uint64_t*>(nullptr),
                        static_cast<int64_t>(slots), NotEmpty{}, cudaStream_t{});
  cub::DeviceRadixSort::SortPairs(nullptr, t2, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
                                  static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
                                  static_cast<int64_t>(std::max<size_t>(max_nnz, 1)), 0, bits_for(n ? n - 1 : 0), cudaStream_t{});
  L.temp_bytes = std::max(t1, t2);
  L.temp = cv.take<uint8_t>(L.temp_bytes);
  L.total = cv.bytes();
  return L;
}

// ============================================================================================
// Dense-gradient scan
template <typename V>
struct RowNonzero {
  const typename V::S* d;
  uint32_t D;
  __device__ bool operator()(int64_t r) const {
    const typename V::S* row = d + static_cast<uint64_t>(r) * D;
    for (uint32_t c = 0; c < D; ++c)
      if (V::nonzero(row[c])) return true;
    return false;
  }
};

template <typename V>
struct RowNonzeroCount {
  RowNonzero<V> pred;
  __device__ uint64_t operator()(int64_t r) const { return pred(r) ? 1 : 0; }
};

template <typename V>
__global__ void gather_rows_kernel(const typename V::S* values, const int64_t* value_row, const uint32_t* entry, uint64_t k,
                                   uint32_t D, typename V::S* out) {
  ZEN_GRID_STRIDE(t, k * D) {
    const uint64_t r = t / D, c = t - r * D;
    const uint64_t e = entry[r];
    const uint64_t src = value_row ? static_cast<uint64_t>(value_row[e]) : e;
    out[t] = values[src * D + c];
  }
}

__global__ void displacements_kernel(const uint64_t* counts, uint32_t n, uint64_t entry_bytes, uint64_t* displ,
                                     uint64_t* item_off) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  uint64_t b = 0, it = 0;
  for (uint32_t p = 0; p < n; ++p) {
    displ[p] = b;
    if (item_off) item_off[p] = it;
    b += counts[p] * entry_bytes;
    it += counts[p];
  }
  if (item_off) item_off[n] = it;
}

template <typename V>
__global__ void pack_push_kernel(const uint32_t* entry, const uint64_t* pos_of, uint64_t nnz, const uint64_t* item_off,
                                 const uint64_t* displ, uint32_t n, const typename V::S* values, const int64_t* value_row,
                                 uint32_t D, int isz, uint8_t* sbuf) {
  using Sv = typename V::S;
  ZEN_GRID_STRIDE(t, nnz) {
    const uint32_t p = segment_of(item_off, n, t);
    const uint64_t k = t - item_off[p], cnt = item_off[p + 1] - item_off[p];
    const uint32_t e = entry[t];
    uint8_t* seg = sbuf + displ[p];
    store_key(seg + k * isz, pos_of[e], isz);
    const uint64_t src = value_row ? static_cast<uint64_t>(value_row[e]) : e;
    const size_t rb = static_cast<size_t>(D) * sizeof(Sv);
    copy_bytes(seg + cnt * isz + k * rb, reinterpret_cast<const uint8_t*>(values + src * D), rb);
  }
}

// ============================================================================================
// Owner aggregation
__global__ void item_offsets_kernel(const uint64_t* rcount, uint32_t n, uint64_t* item_off) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  uint64_t it = 0;
  for (uint32_t p = 0; p < n; ++p) {
    item_off[p] = it;
    it += rcount[p];
  }
  item_off[n] = it;
}

__global__ void unpack_keys_kernel(const uint8_t* rbuf, const uint64_t* item_off, const uint64_t* rdispl, uint32_t n,
                                   uint64_t received, uint64_t m, int isz, uint64_t* keys, uint32_t* arrival,
                                   DeviceError* err) {
  ZEN_GRID_STRIDE(t, received) {
    const uint32_t src = segment_of(item_off, n, t);
    const uint64_t k = t - item_off[src];
    uint64_t key = load_key(rbuf + rdispl[src] + k * isz, isz);
    if (key >= m) {
      report_error(err, kErrPushKeyRange, src, key, m);
      key = 0;  // keep the sort in range; the call reports the error
    }
    keys[t] = key;
    arrival[t] = static_cast<uint32_t>(t);
  }
}

__global__ void run_heads_kernel(const uint64_t* keys, uint64_t n, uint8_t* heads) {
  ZEN_GRID_STRIDE(t, n) heads[t] = (t == 0 || keys[t] != keys[t - 1]) ? 1 : 0;
}

template <typename V>
__global__ void run_reduce_kernel(const uint8_t* rbuf, const uint64_t* item_off, const uint64_t* rdispl,
                                  const uint64_t* rcount, uint32_t n, uint64_t received, int isz, uint32_t D,
                                  const uint64_t* keys_sorted, const uint32_t* arrival_sorted, const uint32_t* starts,
                                  const uint64_t* num_runs, uint64_t* res_pos, typename V::S* res_val) {
  using Sv = typename V::S;
  using A = typename V::A;
  const uint64_t K = *num_runs;
  const size_t rb = static_cast<size_t>(D) * sizeof(Sv);
  ZEN_GRID_STRIDE(t, K * D) {
    const uint64_t r = t / D, c = t - r * D;
    const uint64_t b = starts[r], e = (r + 1 < K) ? starts[r + 1] : received;
    A acc{};
    for (uint64_t i = b; i < e; ++i) {
      const uint64_t a = arrival_sorted[i];
      const uint32_t src = segment_of(item_off, n, a);
      const uint64_t k = a - item_off[src];
      const uint8_t* vp = rbuf + rdispl[src] + rcount[src] * isz + k * rb + c * sizeof(Sv);
      const A v = V::up(load_u<Sv>(vp));
      acc = (i == b) ? v : acc + v;  // first contribution assigned, the rest added in arrival order
    }
    res_val[t] = V::down(acc);
    if (c == 0) res_pos[r] = keys_sorted[b];
  }
}

struct AggLayout {
  uint64_t *item_off, *keys, *keys_sorted;
  uint32_t *arrival, *arrival_sorted, *starts;
  uint8_t* heads;
  void* temp;
  size_t temp_bytes;
  size_t total;
};
AggLayout agg_layout(void* base, size_t cap, uint64_t m, uint32_t n_max) {
  Carver cv{static_cast<uint8_t*>(base)};
  AggLayout L{};
  L.item_off = cv.take<uint64_t>(n_max + 1);
  L.keys = cv.take<uint64_t>(cap);
  L.keys_sorted = cv.take<uint64_t>(cap);
  L.arrival = cv.take<uint32_t>(cap);
  L.arrival_sorted = cv.take<uint32_t>(cap);
  L.starts = cv.take<uint32_t>(cap);
  L.heads = cv.take<uint8_t>(cap);
  size_t t1 = 0, t2 = 0;
  const int64_t c = static_cast<int64_t>(std::max<size_t>(cap, 1));
  cub::DeviceRadixSort::SortPairs(nullptr, t1, static_cast<const uint64_t*>(nullptr), static_cast<uint64_t*>(nullptr),
                                  static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr), c, 0,
                                  bits_for(m ? m - 1 : 0), cudaStream_t{});
  cub::DeviceSelect::Flagged(nullptr, t2, thrust::counting_iterator<uint32_t>(0), static_cast<const uint8_t*>(nullptr),
                             static_cast<uint32_t*>(nullptr), static_cast<uint64_t*>(nullptr), c, cudaStream_t{});
  L.temp_bytes = std::max(t1, t2);
  L.temp = cv.take<uint8_t>(L.temp_bytes);
  L.total = cv.bytes();
  return L;
}
constexpr uint32_t kAggMaxRanks = 65536;  // the workspace reserves item offsets for this many sources

// ============================================================================================
// Hash bitmap
__global__ void set_flags_kernel(const uint64_t* pos, uint64_t k, uint8_t* flags) {
  ZEN_GRID_STRIDE(r, k) flags[pos[r]] = 1;
}
__global__ void ballot_kernel(const uint8_t* flags, uint64_t m, uint8_t* out) {
  const uint64_t padded = (m + 31) / 32 * 32;
  const uint64_t nbytes = (m + 7) / 8;
  // Whole warps iterate together so that every lane takes part in each ballot.
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t q = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; q - (threadIdx.x & 31u) < padded; q += stride) {
    const bool f = q < m && flags[q] != 0;
    const uint32_t word = __ballot_sync(0xFFFFFFFFu, f);
    if ((threadIdx.x & 31u) == 0) {
      const uint64_t w = q >> 5, b0 = w * 4;
      uint8_t* p = out + b0;
      if (b0 + 4 <= nbytes) {
        store_u<uint32_t>(p, word);
      } else {
        for (uint64_t b = b0; b < nbytes; ++b) p[b - b0] = static_cast<uint8_t>(word >> (8 * (b - b0)));
      }
    }
  }
}
__global__ void coo_keys_kernel(const uint64_t* pos, uint64_t k, int isz, uint8_t* out) {
  ZEN_GRID_STRIDE(r, k) store_key(out + r * isz, pos[r], isz);
}

__device__ __forceinline__ uint32_t load_bitmap_word(const uint8_t* bm, uint64_t w, uint64_t nbytes) {
  const uint64_t b0 = w * 4;
  if (b0 + 4 <= nbytes) return load_u<uint32_t>(bm + b0);
  uint32_t v = 0;
  for (uint64_t b = b0; b < nbytes; ++b) v |= static_cast<uint32_t>(bm[b]) << (8 * (b - b0));
  return v;
}
__global__ void word_popc_kernel(const uint8_t* bm, uint64_t m, uint32_t owner, uint64_t* counts, DeviceError* err) {
  const uint64_t W = (m + 31) / 32, nbytes = (m + 7) / 8;
  ZEN_GRID_STRIDE(w, W) {
    const uint32_t v = load_bitmap_word(bm, w, nbytes);
    const uint32_t tail = static_cast<uint32_t>(m & 31);
    if (w == W - 1 && tail != 0 && (v >> tail) != 0) report_error(err, kErrBitmapPadding, owner, w * 32 + tail + (__ffs(v >> tail) - 1), m);
    counts[w] = static_cast<uint64_t>(__popc(v));
  }
}
template <typename V>
__global__ void bitmap_scatter_kernel(const uint8_t* bm, uint64_t m, const uint8_t* values, uint64_t announced,
                                      Partitioner part, uint32_t owner, uint32_t D, const uint64_t* prefix,
                                      const uint64_t* counts, typename V::S* dense, DeviceError* err) {
  using Sv = typename V::S;
  const uint64_t W = (m + 31) / 32, nbytes = (m + 7) / 8;
  const size_t rb = static_cast<size_t>(D) * sizeof(Sv);
  ZEN_GRID_STRIDE(w, W) {
    uint32_t v = load_bitmap_word(bm, w, nbytes);
    const uint32_t tail = static_cast<uint32_t>(m & 31);
    if (w == W - 1) {
      if (tail != 0) v &= (1u << tail) - 1u;  // padding bits were reported by word_popc_kernel
      const uint64_t total = prefix[w] + counts[w];
      if (total != announced) report_error(err, kErrBitmapCount, owner, total, announced);
    }
    uint64_t slot = prefix[w];
    while (v) {
      const uint32_t b = static_cast<uint32_t>(__ffs(v) - 1);
      v &= v - 1;
      if (slot >= announced) break;  // never read past the announced values
      const uint64_t idx = part.index_at(owner, w * 32 + b);
      copy_bytes(reinterpret_cast<uint8_t*>(dense + idx * D), values + slot * rb, rb);
      ++slot;
    }
  }
}
template <typename V>
__global__ void coo_scatter_kernel(const uint8_t* keys, uint64_t k, int isz, const uint8_t* values, Partitioner part,
                                   uint32_t owner, uint32_t D, typename V::S* dense, DeviceError* err) {
  using Sv = typename V::S;
  const uint64_t m = part.owner_size(owner);
  const size_t rb = static_cast<size_t>(D) * sizeof(Sv);
  ZEN_GRID_STRIDE(r, k) {
    const uint64_t key = load_key(keys + r * isz, isz);
    if (key >= m) {
      report_error(err, kErrCooKeyRange, owner, key, m);
      continue;
    }
    const uint64_t idx = part.index_at(owner, key);
    copy_bytes(reinterpret_cast<uint8_t*>(dense + idx * D), values + r * rb, rb);
  }
}

// ============================================================================================
// Dense helpers
struct PtrPack {
  const void* p[64];
};
template <typename V>
__global__ void reduce_rank_order_kernel(PtrPack srcs, int n, uint64_t count, int op, typename V::S* dst) {
  using Sv = typename V::S;
  using A = typename V::A;
  ZEN_GRID_STRIDE(i, count) {
    A acc = V::up(static_cast<const Sv*>(srcs.p[0])[i]);
    for (int p = 1; p < n; ++p) {
      const A v = V::up(static_cast<const Sv*>(srcs.p[p])[i]);
      if (op == 0) acc += v;
      else if (op == 1) acc = v > acc ? v : acc;
      else acc = v < acc ? v : acc;
    }
    dst[i] = V::down(acc);
  }
}

template <typename V>
__global__ void fill_gradient_kernel(typename V::S* d, uint64_t rows, uint32_t D, double density, double hot_rows,
                                     double hot_density, uint64_t seed) {
  ZEN_GRID_STRIDE(t, rows * D) {
    const uint64_t r = t / D;
    const double u = static_cast<double>(hash64(r, seed) >> 11) * (1.0 / 9007199254740992.0);
    const double th = static_cast<double>(r) < hot_rows ? hot_density : density;
    float v = 0.0f;
    if (u < th) {
      v = static_cast<float>(hash64(t, seed ^ 0xabcdef12345ULL) >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
      if (v == 0.0f) v = 0.5f;
    }
    d[t] = V::down(static_cast<typename V::A>(v));
  }
}

}  // namespace

// ============================================================================================
// Host entry points

HashCaps hash_caps(size_t nnz, uint32_t n, const HashParams& hp) {
  const double r1 = std::max(0.0, hp.parallel_factor) * static_cast<double>(nnz);
  HashCaps c;
  c.cap1 = std::max<size_t>(16, static_cast<size_t>(std::ceil(r1 / n)));
  c.cap2 = std::max<size_t>(8, static_cast<size_t>(std::ceil(r1 * hp.serial_fraction / n)));
  return c;
}

size_t hash_partition_workspace(size_t max_nnz, uint32_t n, const HashParams& hp) {
  return hash_layout(nullptr, max_nnz, n == 0 ? 1 : n, hp).total;
}

void hash_partition(const void* d_indices, IndexType it, size_t nnz, const Partitioner& part, const HashParams& hp,
                    void* d_ws, size_t ws_bytes, uint32_t* d_entry, uint64_t* d_pos, uint64_t* d_counts,
                    uint32_t* d_serial, uint64_t* d_spilled, DeviceError* d_err, void* stream) {
  const uint32_t n = part.n_owners;
  ZEN_ENFORCE(nnz < 0xFFFFFFFFull, "cuda hash_partition: " + std::to_string(nnz) + " entries exceed 2^32-1 per call");
  ZEN_ENFORCE(hp.hash_functions >= 1 && hp.hash_functions <= 16,
              "cuda hash_partition: hash function count " + std::to_string(hp.hash_functions) + " outside [1, 16]");
  cudaStream_t s = S(stream);
  // Lay the workspace out for exactly this nnz (sizes are monotone in nnz, so the query for the
  // largest nnz covers it).
  HashLayout L = hash_layout(nullptr, nnz, n, hp);
  need_ws(ws_bytes, L.total, "cuda hash_partition");
  L = hash_layout(d_ws, nnz, n, hp);
  const HashCaps c = hash_caps(nnz, n, hp);
  ZEN_CUDA_CHECK(cudaMemsetAsync(d_counts, 0, n * sizeof(uint64_t), s));
  ZEN_CUDA_CHECK(cudaMemsetAsync(d_serial, 0, n * sizeof(uint32_t), s));
  ZEN_CUDA_CHECK(cudaMemsetAsync(d_spilled, 0, sizeof(uint64_t), s));
  if (nnz == 0) return;
  ZEN_CUDA_CHECK(cudaMemsetAsync(L.par, 0xFF, n * c.cap1 * sizeof(uint32_t), s));
  HashArgs a{};
  a.part = part;
  a.k = hp.hash_functions;
  // The CPU's h_1..h_k seeds (src/schemes/hierarchical_hash.cpp), pre-mixed.
  for (int j = 0; j < hp.hash_functions; ++j)
    a.hseed[j] = mix_seed(mix64(hp.seed * 0x100000001b3ULL + static_cast<uint64_t>(j) + 1));
  a.cap1 = c.cap1;
  a.cap2 = c.cap2;
  a.par = L.par;
  a.ser = L.ser;
  a.serial_cnt = d_serial;
  a.spill = L.spill;
  a.spill_cnt = reinterpret_cast<unsigned long long*>(d_spilled);
  a.owner_counts = reinterpret_cast<unsigned long long*>(d_counts);
  a.owner_of = L.owner_of;
  a.pos_of = d_pos;
  a.err = d_err;
  if (it == IndexType::I32)
    hash_insert_kernel<<<blocks_for(nnz), kThreads, 0, s>>>(static_cast<const int32_t*>(d_indices), nnz, a);
  else
    hash_insert_kernel<<<blocks_for(nnz), kThreads, 0, s>>>(static_cast<const int64_t*>(d_indices), nnz, a);
  ZEN_CUDA_CHECK(cudaGetLastError());
  // Compaction: occupied slots in slot order, then grouped by owner with a stable radix sort.
  SlotEntry se{L.par, L.ser, d_serial, L.spill, a.spill_cnt, n * c.cap1, n * c.cap2, c.cap2};
  auto in = thrust::make_transform_iterator(thrust::counting_iterator<uint64_t>(0), se);
  const uint64_t slots = n * c.cap1 + n * c.cap2 + nnz;
  size_t tb = L.temp_bytes;
  ZEN_CUDA_CHECK(cub::DeviceSelect::If(L.temp, tb, in, L.sel, L.num_sel, static_cast<int64_t>(slots), NotEmpty{}, s));
  if (d_err) check_selected_kernel<<<1, 1, 0, s>>>(L.num_sel, nnz, d_err);
  owner_keys_kernel<<<blocks_for(nnz), kThreads, 0, s>>>(L.sel, L.owner_of, nnz, L.keys);
  ZEN_CUDA_CHECK(cudaGetLastError());
  tb = L.temp_bytes;
  ZEN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(L.temp, tb, L.keys, L.keys_sorted, L.sel, d_entry,
                                                 static_cast<int64_t>(nnz), 0, bits_for(n - 1), s));
}

size_t nonzero_rows_workspace(uint64_t rows) {
  size_t t = 0, t2 = 0;
  const int64_t r = static_cast<int64_t>(std::max<uint64_t>(rows, 1));
  cub::DeviceSelect::If(nullptr, t, thrust::counting_iterator<int64_t>(0), static_cast<int64_t*>(nullptr),
                        static_cast<uint64_t*>(nullptr), r, RowNonzero<F32>{nullptr, 1}, cudaStream_t{});
  auto it = thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0), RowNonzeroCount<F32>{{nullptr, 1}});
  cub::DeviceReduce::Sum(nullptr, t2, it, static_cast<uint64_t*>(nullptr), r, cudaStream_t{});
  return (std::max(t, t2) + 255) & ~size_t{255};
}

void count_nonzero_rows(const void* d_dense, DType t, uint64_t rows, uint32_t D, uint64_t* d_count, void* d_ws,
                        size_t ws_bytes, void* stream) {
  cudaStream_t s = S(stream);
  if (rows == 0) {
    ZEN_CUDA_CHECK(cudaMemsetAsync(d_count, 0, sizeof(uint64_t), s));
    return;
  }
  dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    auto it = thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0),
                                              RowNonzeroCount<V>{{static_cast<const typename V::S*>(d_dense), D}});
    size_t tb = 0;
    cub::DeviceReduce::Sum(nullptr, tb, it, d_count, static_cast<int64_t>(rows), s);
    need_ws(ws_bytes, tb, "cuda count_nonzero_rows");
    tb = ws_bytes;
    ZEN_CUDA_CHECK(cub::DeviceReduce::Sum(d_ws, tb, it, d_count, static_cast<int64_t>(rows), s));
  });
}

void nonzero_rows(const void* d_dense, DType t, uint64_t rows, uint32_t D, int64_t* d_rows, uint64_t* d_count,
                  void* d_ws, size_t ws_bytes, void* stream) {
  cudaStream_t s = S(stream);
  if (rows == 0) {
    ZEN_CUDA_CHECK(cudaMemsetAsync(d_count, 0, sizeof(uint64_t), s));
    return;
  }
  dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    RowNonzero<V> pred{static_cast<const typename V::S*>(d_dense), D};
    size_t tb = 0;
    cub::DeviceSelect::If(nullptr, tb, thrust::counting_iterator<int64_t>(0), d_rows, d_count, static_cast<int64_t>(rows), pred, s);
    need_ws(ws_bytes, tb, "cuda nonzero_rows");
    tb = ws_bytes;
    ZEN_CUDA_CHECK(cub::DeviceSelect::If(d_ws, tb, thrust::counting_iterator<int64_t>(0), d_rows, d_count,
                                         static_cast<int64_t>(rows), pred, s));
  });
}

void gather_rows(const void* d_values, const int64_t* d_value_row, const uint32_t* d_entry, size_t k, uint32_t D,
                 DType t, void* d_out, void* stream) {
  if (k == 0 || D == 0) return;
  dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    gather_rows_kernel<V><<<blocks_for(k * D), kThreads, 0, S(stream)>>>(
        static_cast<const typename V::S*>(d_values), d_value_row, d_entry, k, D, static_cast<typename V::S*>(d_out));
  });
  ZEN_CUDA_CHECK(cudaGetLastError());
}

void segment_displacements(const uint64_t* d_counts, uint32_t n, size_t entry_bytes, uint64_t* d_displ,
                           uint64_t* d_item_off, void* stream) {
  displacements_kernel<<<1, 1, 0, S(stream)>>>(d_counts, n, entry_bytes, d_displ, d_item_off);
  ZEN_CUDA_CHECK(cudaGetLastError());
}

void pack_push(const uint32_t* d_entry, const uint64_t* d_pos, size_t nnz, const uint64_t* d_item_off,
               const uint64_t* d_displ, uint32_t n, const void* d_values, const int64_t* d_value_row, uint32_t D,
               DType t, int isz, uint8_t* d_sbuf, void* stream) {
  if (nnz == 0) return;
  dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    pack_push_kernel<V><<<blocks_for(nnz), kThreads, 0, S(stream)>>>(d_entry, d_pos, nnz, d_item_off, d_displ, n,
                                                                      static_cast<const typename V::S*>(d_values),
                                                                      d_value_row, D, isz, d_sbuf);
  });
  ZEN_CUDA_CHECK(cudaGetLastError());
}

size_t aggregate_workspace(size_t recv_capacity, uint64_t m) {
  return agg_layout(nullptr, recv_capacity, m, kAggMaxRanks).total;
}

void owner_aggregate(const uint8_t* d_rbuf, const uint64_t* d_rcount, const uint64_t* d_rdispl, uint32_t n,
                     size_t received, uint64_t m, uint32_t D, DType t, int isz, void* d_ws, size_t ws_bytes,
                     uint64_t* d_res_pos, void* d_res_val, uint64_t* d_num_runs, DeviceError* d_err, void* stream) {
  cudaStream_t s = S(stream);
  ZEN_ENFORCE(n <= kAggMaxRanks, "cuda owner_aggregate: " + std::to_string(n) + " sources exceed " + std::to_string(kAggMaxRanks));
  ZEN_ENFORCE(received < 0xFFFFFFFFull, "cuda owner_aggregate: " + std::to_string(received) + " received entries exceed 2^32-1");
  ZEN_ENFORCE(isz == 4 || isz == 8, "cuda owner_aggregate: key width " + std::to_string(isz) + " is not 4 or 8");
  AggLayout L = agg_layout(nullptr, received, m, kAggMaxRanks);
  need_ws(ws_bytes, L.total, "cuda owner_aggregate");
  L = agg_layout(d_ws, received, m, kAggMaxRanks);
  ZEN_CUDA_CHECK(cudaMemsetAsync(d_num_runs, 0, sizeof(uint64_t), s));
  if (received == 0) return;
  item_offsets_kernel<<<1, 1, 0, s>>>(d_rcount, n, L.item_off);
  unpack_keys_kernel<<<blocks_for(received), kThreads, 0, s>>>(d_rbuf, L.item_off, d_rdispl, n, received, m, isz, L.keys,
                                                               L.arrival, d_err);
  ZEN_CUDA_CHECK(cudaGetLastError());
  size_t tb = L.temp_bytes;
  // Stable LSD radix sort: equal positions keep their arrival (= source-rank) order.
  ZEN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(L.temp, tb, L.keys, L.keys_sorted, L.arrival, L.arrival_sorted,
                                                 static_cast<int64_t>(received), 0, bits_for(m ? m - 1 : 0), s));
  run_heads_kernel<<<blocks_for(received), kThreads, 0, s>>>(L.keys_sorted, received, L.heads);
  ZEN_CUDA_CHECK(cudaGetLastError());
  tb = L.temp_bytes;
  ZEN_CUDA_CHECK(cub::DeviceSelect::Flagged(L.temp, tb, thrust::counting_iterator<uint32_t>(0), L.heads, L.starts,
                                            d_num_runs, static_cast<int64_t>(received), s));
  dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    run_reduce_kernel<V><<<blocks_for(received * D), kThreads, 0, s>>>(
        d_rbuf, L.item_off, d_rdispl, d_rcount, n, received, isz, D, L.keys_sorted, L.arrival_sorted, L.starts,
        d_num_runs, d_res_pos, static_cast<typename V::S*>(d_res_val));
  });
  ZEN_CUDA_CHECK(cudaGetLastError());
}

void bitmap_encode(const uint64_t* d_pos, size_t k, uint64_t m, uint8_t* d_flags, uint8_t* d_out, void* stream) {
  cudaStream_t s = S(stream);
  if (m == 0) return;
  ZEN_CUDA_CHECK(cudaMemsetAsync(d_flags, 0, m, s));
  if (k) set_flags_kernel<<<blocks_for(k), kThreads, 0, s>>>(d_pos, k, d_flags);
  const uint64_t padded = (m + 31) / 32 * 32;
  ballot_kernel<<<blocks_for(padded), kThreads, 0, s>>>(d_flags, m, d_out);
  ZEN_CUDA_CHECK(cudaGetLastError());
}

void coo_encode_keys(const uint64_t* d_pos, size_t k, int isz, uint8_t* d_out, void* stream) {
  if (k == 0) return;
  coo_keys_kernel<<<blocks_for(k), kThreads, 0, S(stream)>>>(d_pos, k, isz, d_out);
  ZEN_CUDA_CHECK(cudaGetLastError());
}

size_t bitmap_scatter_workspace(uint64_t m_max) {
  const uint64_t W = std::max<uint64_t>((m_max + 31) / 32, 1);
  Carver cv{nullptr};
  cv.take<uint64_t>(W);
  cv.take<uint64_t>(W);
  size_t t = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, t, static_cast<const uint64_t*>(nullptr), static_cast<uint64_t*>(nullptr),
                                static_cast<int64_t>(W), cudaStream_t{});
  cv.take<uint8_t>(t);
  return cv.bytes();
}

void bitmap_scatter(const uint8_t* d_bm, uint64_t m, const uint8_t* d_values, uint64_t announced, const Partitioner& part,
                    uint32_t owner, uint32_t D, DType t, void* d_dense, void* d_ws, size_t ws_bytes, DeviceError* d_err,
                    void* stream) {
  cudaStream_t s = S(stream);
  if (m == 0) return;
  need_ws(ws_bytes, bitmap_scatter_workspace(m), "cuda bitmap_scatter");
  const uint64_t W = (m + 31) / 32;
  Carver cv{static_cast<uint8_t*>(d_ws)};
  uint64_t* counts = cv.take<uint64_t>(W);
  uint64_t* prefix = cv.take<uint64_t>(W);
  size_t tb = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, tb, counts, prefix, static_cast<int64_t>(W), s);
  void* temp = cv.take<uint8_t>(tb);
  word_popc_kernel<<<blocks_for(W), kThreads, 0, s>>>(d_bm, m, owner, counts, d_err);
  ZEN_CUDA_CHECK(cudaGetLastError());
  ZEN_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, tb, counts, prefix, static_cast<int64_t>(W), s));
  dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    bitmap_scatter_kernel<V><<<blocks_for(W), kThreads, 0, s>>>(d_bm, m, d_values, announced, part, owner, D, prefix,
                                                                counts, static_cast<typename V::S*>(d_dense), d_err);
  });
  ZEN_CUDA_CHECK(cudaGetLastError());
}

void coo_scatter(const uint8_t* d_keys, size_t k, int isz, const uint8_t* d_values, const Partitioner& part,
                 uint32_t owner, uint32_t D, DType t, void* d_dense, DeviceError* d_err, void* stream) {
  if (k == 0) return;
  dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    coo_scatter_kernel<V><<<blocks_for(k), kThreads, 0, S(stream)>>>(d_keys, k, isz, d_values, part, owner, D,
                                                                     static_cast<typename V::S*>(d_dense), d_err);
  });
  ZEN_CUDA_CHECK(cudaGetLastError());
}

void reduce_rank_order(const void* const* srcs, int n, size_t count, DType t, ReduceOp op, void* d_dst, void* stream) {
  ZEN_ENFORCE(n >= 1 && n <= 64, "cuda reduce_rank_order: " + std::to_string(n) + " sources outside [1, 64]");
  if (count == 0) return;
  PtrPack pk{};
  for (int p = 0; p < n; ++p) pk.p[p] = srcs[p];
  dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    reduce_rank_order_kernel<V><<<blocks_for(count), kThreads, 0, S(stream)>>>(pk, n, count, static_cast<int>(op),
                                                                                static_cast<typename V::S*>(d_dst));
  });
  ZEN_CUDA_CHECK(cudaGetLastError());
}

void fill_sparse_gradient(void* d_dense, DType t, uint64_t rows, uint32_t D, double density, double hot_fraction,
                          uint64_t seed, void* stream) {
  if (rows == 0 || D == 0) return;
  const double hot_rows = std::max(0.0, hot_fraction) * static_cast<double>(rows);
  const double hot_density = hot_fraction > 0 ? std::min(1.0, 4 * density) : density;
  dispatch_vt(t, [&](auto v) {
    using V = decltype(v);
    fill_gradient_kernel<V><<<blocks_for(rows * D), kThreads, 0, S(stream)>>>(static_cast<typename V::S*>(d_dense), rows,
                                                                              D, density, hot_rows, hot_density, seed);
  });
  ZEN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zen::cuda
