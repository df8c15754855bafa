#pragma once
// The kernels of the device Balanced-Parallelism path, callable from plain C++ (no CUDA headers).
//
// One code path, two backends (docs/gpu.md, "The kernels on the CPU"): every kernel body is a
// __host__ __device__ function behind one launch helper, and the five CUB primitives it uses sit
// behind one small interface. Kernels<Gpu> launches them as CUDA kernels with CUB (CUDA builds);
// Kernels<Host> runs the same bodies as loops on this process's threads, with host memory and the
// standard library (every build), so that CI checks the logic without a GPU.
//
// Conventions (CUB style):
//  - every pointer argument named d_* is memory of the backend (Gpu: device memory; Host: host memory);
//  - `stream` is a cudaStream_t for Gpu (nullptr = legacy default stream) and every call only enqueues
//    work; Host runs the work before returning and ignores `stream`;
//  - scratch comes from a caller-provided workspace. Each kernel family with scratch has a *_prepare()
//    call that does the size queries once (CUB's temp-storage queries, each one checked) for the largest
//    problem the caller will pass and returns the workspace bytes; the calls take that prepared record
//    and do no query (two-phase: prepare, allocate once, call many times); no call allocates memory.
// Wire formats are those of the CPU scheme (src/schemes/balanced.cpp): push segments are
// [count keys (isz bytes each)][count value rows], pull messages are [bitmap | keys][value rows];
// the kernels read and write them with alignment-checked accesses, so any byte offset works.
#include <cstddef>
#include <cstdint>

#include "zen/hash/hash.hpp"
#include "zen/types.hpp"

namespace zen::cuda {

/// Backend tags. Gpu: CUDA kernels and CUB on a stream (CUDA builds). Host: the same kernel bodies
/// run on the CPU over host memory (every build; docs/gpu.md lists what it cannot show).
struct Gpu {};
struct Host {};

/// Errors found by kernels, copied to the host at the next count synchronization.
struct DeviceError {
  uint32_t code;   ///< 0 = none; see DeviceErrorCode
  uint32_t owner;  ///< source rank (push) or owner (pull)
  uint64_t a, b;   ///< details (value found, limit / expected)
};
enum DeviceErrorCode : uint32_t {
  kErrNone = 0,
  kErrPushKeyRange = 1,      ///< a pushed position a >= |I_me| = b (ranks disagree on N or seed)
  kErrBitmapPadding = 2,     ///< owner's bitmap has a padding bit set (a = bit index)
  kErrBitmapCount = 3,       ///< owner's bitmap has a set bits, b announced
  kErrCooKeyRange = 4,       ///< owner's COO key a >= |I_owner| = b
  kErrHashLost = 5,          ///< hashing compaction found a occupied slots for b entries (a bug)
  kErrIndexRange = 6,        ///< an input index a is outside [0, N/D = b) (owner = input position, low 32 bits)
};
/// Human-readable description of a device error ("" for none).
const char* device_error_name(uint32_t code);

// ---------------------------------------------------------------------------------------------
// Region hashing (Zen §4): one thread per non-zero; owner p = h0(idx) and the owner-local
// position come from zen::Partitioner (the CPU code, unchanged); k second-level hashes (the CPU's
// seeds and multiply-high reduction) try a compare-and-swap on p's parallel region (cap1 slots
// holding entry ids, EMPTY = 0xFFFFFFFF); the rest take a slot of p's serial region (cap2) from
// p's counter; when that is full the entry goes to a spill buffer (nnz slots): overflow is detected
// and counted, nothing is written past a region, nothing is lost (spilled entries are appended to
// their owner's segment at compaction, as on the CPU). Counters are per block: each block of
// threads counts owners, serial requests and spills in shared memory and reserves its ranges with
// one atomic per (block, owner), so no global address takes an atomic per entry.
// Compaction: select-if over the slot space (parallel | serial | spill) keeps the occupied slots, a
// stable radix sort by owner groups them into contiguous per-owner segments: parallel-region
// entries first, then serial, then spilled, each in slot order.
struct HashParams {
  int hash_functions = 3;        ///< k in [1, 16]
  double parallel_factor = 2.0;  ///< r1 = factor * nnz slots over all owners (capped by max_table_bytes)
  double serial_fraction = 0.1;  ///< r2 = fraction * r1
  uint64_t seed = 0;             ///< seed of h_1..h_k
  /// Upper bound of the parallel region (all owners, 4 bytes a slot): the compare-and-swap table
  /// stays in the GPU's L2 cache (50 MB on H100, 60 MB on H200) instead of spreading random
  /// atomics over HBM; entries beyond it take the serial region or spill (lossless).
  size_t max_table_bytes = size_t{32} << 20;
};
/// With r1' = min(r1, max_table_bytes / 4) parallel slots over all owners:
struct HashCaps {
  size_t cap1 = 0;  ///< parallel slots per owner: max(16, ceil(r1' / n))
  size_t cap2 = 0;  ///< serial slots per owner: max(8, ceil(serial_fraction * r1' / n))
};
HashCaps hash_caps(size_t nnz, uint32_t n_owners, const HashParams& hp);
/// Most owners hash_partition takes (2 counters of 4 bytes per owner, 32 KiB at 4096, in a block's 48 KiB of
/// shared memory).
constexpr uint32_t kMaxHashOwners = 4096;

/// Size queries of hash_partition for at most `max_nnz` entries over `n_owners` owners.
struct HashPrepared {
  size_t max_nnz = 0;
  uint32_t n_owners = 1;
  HashParams hp;
  size_t temp_bytes = 0;  ///< primitives' scratch (select over the slots, sort by owner)
  size_t bytes = 0;       ///< workspace bytes for any nnz <= max_nnz
};

/// Dense-gradient scan: count_nonzero_rows and nonzero_rows for up to `rows` rows.
struct NonzeroPrepared {
  uint64_t rows = 0;
  size_t bytes = 0;
};

/// Owner aggregation of up to `capacity` received entries with positions < m.
struct AggregatePrepared {
  size_t capacity = 0;
  uint64_t m = 0;
  size_t temp_bytes = 0;
  size_t bytes = 0;
};

/// Bitmap decode of owner sets of up to m_max positions.
struct ScatterPrepared {
  uint64_t m_max = 0;
  size_t temp_bytes = 0;
  size_t bytes = 0;
};

template <class B>
struct Kernels {
  /// Partition `nnz` indices (int32 or int64, < 2^32 entries) over part.n_owners owners.
  /// Outputs: d_entry[nnz] input entry ids grouped by owner, d_pos[nnz] owner-local position of
  /// input entry e (indexed by e), d_counts[n] entries per owner, d_serial[n] serial-region requests
  /// per owner (> cap2 means the owner overflowed), d_spilled[1] spilled entries.
  /// d_err (optional) receives kErrIndexRange for an index outside [0, part.n_items) (the entry is
  /// then hashed as index 0) and kErrHashLost if compaction does not find every entry exactly once.
  static HashPrepared hash_prepare(size_t max_nnz, uint32_t n_owners, const HashParams& hp);
  static void hash_partition(const HashPrepared& prep, const void* d_indices, IndexType it, size_t nnz,
                             const Partitioner& part, void* d_ws, size_t ws_bytes, uint32_t* d_entry, uint64_t* d_pos,
                             uint64_t* d_counts, uint32_t* d_serial, uint64_t* d_spilled, DeviceError* d_err,
                             void* stream);

  /// Dense gradient: the rows (D values each) holding a value != 0 (-0.0 counts as zero, NaN as
  /// non-zero), ascending (select-if over the row ids). count_nonzero_rows (a sum of the predicate)
  /// lets the caller check the count against its buffer before nonzero_rows writes the rows.
  static NonzeroPrepared nonzero_prepare(uint64_t rows);
  static void count_nonzero_rows(const NonzeroPrepared& prep, const void* d_dense, DType t, uint64_t rows, uint32_t D,
                                 uint64_t* d_count, void* d_ws, size_t ws_bytes, void* stream);
  static void nonzero_rows(const NonzeroPrepared& prep, const void* d_dense, DType t, uint64_t rows, uint32_t D,
                           int64_t* d_rows, uint64_t* d_count, void* d_ws, size_t ws_bytes, void* stream);

  /// Gather value rows: out[k] = values[(d_value_row ? d_value_row[entry[k]] : entry[k])] (D values each).
  static void gather_rows(const void* d_values, const int64_t* d_value_row, const uint32_t* d_entry, size_t k,
                          uint32_t D, DType t, void* d_out, void* stream);

  /// Byte displacements of the push segments: displ[p] = sum_{q<p} counts[q] * entry_bytes, and
  /// (optional) item offsets item_off[p] = sum_{q<p} counts[q], item_off[n] = total.
  static void segment_displacements(const uint64_t* d_counts, uint32_t n, size_t entry_bytes, uint64_t* d_displ,
                                    uint64_t* d_item_off, void* stream);

  /// Pack the push message: owner p's segment (grouped entries d_entry[item_off[p] .. item_off[p+1]))
  /// is written as [keys: d_pos[e] as isz-byte integers][value rows] at d_sbuf + d_displ[p]. Value
  /// row of entry e: row (d_value_row ? d_value_row[e] : e) of d_values.
  static void pack_push(const uint32_t* d_entry, const uint64_t* d_pos, size_t nnz, const uint64_t* d_item_off,
                        const uint64_t* d_displ, uint32_t n, const void* d_values, const int64_t* d_value_row,
                        uint32_t D, DType t, int isz, uint8_t* d_sbuf, void* stream);

  /// Owner aggregation in compact per-owner space. The received buffer holds n segments in
  /// source-rank order (segment src at byte d_rdispl[src]: d_rcount[src] keys, then the value rows).
  /// Positions are decoded and range-checked, a stable radix sort orders (position, arrival) pairs
  /// by position keeping the source-rank order of equal positions, select-flagged finds the runs,
  /// and one thread per (run, column) sums the run in order: first contribution assigned, the rest
  /// added in accum_of<T> (fp32 for f16/bf16), rounded once. Bit-identical to the CPU owner sum.
  /// Outputs: d_res_pos[K] ascending positions, d_res_val[K*D], d_num_runs = K.
  static AggregatePrepared aggregate_prepare(size_t capacity, uint64_t m);
  static void owner_aggregate(const AggregatePrepared& prep, const uint8_t* d_rbuf, const uint64_t* d_rcount,
                              const uint64_t* d_rdispl, uint32_t n, size_t received, uint64_t m, uint32_t D, DType t,
                              int isz, void* d_ws, size_t ws_bytes, uint64_t* d_res_pos, void* d_res_val,
                              uint64_t* d_num_runs, DeviceError* d_err, void* stream);

  /// Hash-bitmap encoding (Zen §5), LSB-first, bitmap_bytes(m) = ceil(m/8) bytes: presence flags
  /// (d_flags, m bytes of scratch) from the k strictly increasing positions, then one warp ballot
  /// per 32 positions writes one word (the last word only its existing bytes).
  static void bitmap_encode(const uint64_t* d_pos, size_t k, uint64_t m, uint8_t* d_flags, uint8_t* d_out,
                            void* stream);
  /// Write k positions as isz-byte keys (COO pull encoding).
  static void coo_encode_keys(const uint64_t* d_pos, size_t k, int isz, uint8_t* d_out, void* stream);

  /// Decode owner `owner`'s bitmap (m bits at d_bm, values after it at d_values) and scatter into
  /// the dense output: popcount per 32-bit word, an exclusive scan gives each word's first value
  /// slot, then one thread per word writes its set bits' rows to d_dense[index_at(owner, j)].
  /// Checks: padding bits zero, set bits == announced (else d_err).
  static ScatterPrepared scatter_prepare(uint64_t m_max);
  static void bitmap_scatter(const ScatterPrepared& prep, const uint8_t* d_bm, uint64_t m, const uint8_t* d_values,
                             uint64_t announced, const Partitioner& part, uint32_t owner, uint32_t D, DType t,
                             void* d_dense, void* d_ws, size_t ws_bytes, DeviceError* d_err, void* stream);
  /// Decode k COO keys of owner `owner` (isz bytes each, then the value rows) into the dense output.
  static void coo_scatter(const uint8_t* d_keys, size_t k, int isz, const uint8_t* d_values, const Partitioner& part,
                          uint32_t owner, uint32_t D, DType t, void* d_dense, DeviceError* d_err, void* stream);

  /// dst[i] = op over p = 0..n-1 in rank order of srcs[p][i] (accum_of<T>, rounded once); n <= 64.
  /// Element-wise: dst may be one of the sources (in place).
  static void reduce_rank_order(const void* const* srcs, int n, size_t count, DType t, ReduceOp op, void* d_dst,
                                void* stream);
  /// Rows of D values holding no value != 0 (only +0.0 / -0.0) become +0.0: the dense image of a
  /// sparse result, where such rows are absent.
  static void clear_zero_rows(void* d_dense, DType t, uint64_t rows, uint32_t D, void* stream);
  /// Synthetic gradient: row r is non-zero with probability `density` (hash of r and seed); its D
  /// values are deterministic non-zero floats in [-1, 1] (the same for the same (r, seed)); other
  /// rows 0. `hot_fraction` > 0 skews towards low rows (row r < rows*hot_fraction is non-zero with
  /// probability min(1, 4*density)).
  static void fill_sparse_gradient(void* d_dense, DType t, uint64_t rows, uint32_t D, double density,
                                   double hot_fraction, uint64_t seed, void* stream);
};

// Both live in zen_cuda: Kernels<Host> in every configuration, Kernels<Gpu> in CUDA builds.
extern template struct Kernels<Host>;
extern template struct Kernels<Gpu>;

/// Memory and stream operations of a backend (Gpu: the CUDA runtime; Host: host memory, every
/// operation done before it returns). Errors throw CudaError / SystemError.
template <class B>
struct Memory;
/// Host memory; every operation is done when it returns.
template <>
struct Memory<Host> {
  static void* alloc(size_t bytes);          ///< backend memory (Gpu: cudaMalloc), 256-byte aligned
  static void release(void* p) noexcept;     ///< frees alloc()'s memory (null: nothing)
  static void* alloc_staging(size_t bytes);  ///< host memory the backend copies fastest (Gpu: pinned)
  static void release_staging(void* p) noexcept;
  /// Stream-ordered copy between any two of the backend's and host memory.
  static void copy(void* dst, const void* src, size_t bytes, void* stream);
  static void fill(void* dst, int byte, size_t bytes, void* stream);  ///< stream-ordered memset
  /// Wait for the stream without a timeout; plans wait through their communicator instead
  /// (zen::cuda::stream_wait, with its timeout).
  static void synchronize(void* stream);
};
/// The CUDA runtime (defined in CUDA builds only).
template <>
struct Memory<Gpu> {
  static void* alloc(size_t bytes);          ///< backend memory (Gpu: cudaMalloc), 256-byte aligned
  static void release(void* p) noexcept;     ///< frees alloc()'s memory (null: nothing)
  static void* alloc_staging(size_t bytes);  ///< host memory the backend copies fastest (Gpu: pinned)
  static void release_staging(void* p) noexcept;
  /// Stream-ordered copy between any two of the backend's and host memory.
  static void copy(void* dst, const void* src, size_t bytes, void* stream);
  static void fill(void* dst, int byte, size_t bytes, void* stream);  ///< stream-ordered memset
  /// Wait for the stream without a timeout; plans wait through their communicator instead
  /// (zen::cuda::stream_wait, with its timeout).
  static void synchronize(void* stream);
};

}  // namespace zen::cuda
