#pragma once
// The CUDA kernels of the Balanced-Parallelism path, callable from plain C++ (no CUDA headers).
//
// Conventions (CUB style):
//  - every pointer argument named d_* or documented "device" is device memory;
//  - `stream` is a cudaStream_t (nullptr = legacy default stream); every call only enqueues work;
//  - scratch comes from a caller-provided workspace whose size the matching *_workspace() query
//    returns for the largest problem the caller will pass (two-phase: query, allocate once, call
//    many times); no call allocates memory.
// Wire formats are those of the CPU scheme (src/schemes/balanced.cpp): push segments are
// [count keys (isz bytes each)][count value rows], pull messages are [bitmap | keys][value rows];
// device code reads and writes them with alignment-checked accesses, so any byte offset works.
#include <cstddef>
#include <cstdint>

#include "zen/hash/hash.hpp"
#include "zen/types.hpp"

namespace zen::cuda {

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
// Hierarchical hashing (Zen §4) on the GPU: one thread per non-zero; owner p = h0(idx) and the
// owner-local position come from zen::Partitioner (the CPU code, unchanged); k second-level hashes
// (the CPU's seeds and multiply-high reduction) try atomicCAS on p's parallel region (cap1 slots
// holding entry ids, EMPTY = 0xFFFFFFFF); the rest take a slot of p's serial region (cap2) from an
// atomic counter; when that is full the entry goes to a spill buffer (nnz slots, one atomic
// counter): overflow is detected and counted, nothing is written past a region, nothing is lost
// (spilled entries are appended to their owner's segment at compaction, as on the CPU).
// Compaction (CUB): DeviceSelect::If over the slot space (parallel | serial | spill) keeps the
// occupied slots, DeviceRadixSort::SortPairs (stable, by owner) groups them into contiguous
// per-owner segments: parallel-region entries first, then serial, then spilled, each in slot order.
struct HashParams {
  int hash_functions = 3;        ///< k in [1, 16]
  double parallel_factor = 2.0;  ///< r1 = factor * nnz slots over all owners
  double serial_fraction = 0.1;  ///< r2 = fraction * r1
  uint64_t seed = 0;             ///< seed of h_1..h_k
};
struct HashCaps {
  size_t cap1 = 0;  ///< parallel slots per owner: max(16, ceil(r1 / n))
  size_t cap2 = 0;  ///< serial slots per owner: max(8, ceil(r2 / n))
};
HashCaps hash_caps(size_t nnz, uint32_t n_owners, const HashParams& hp);

size_t hash_partition_workspace(size_t max_nnz, uint32_t n_owners, const HashParams& hp);

/// Partition `nnz` device indices (int32 or int64, < 2^32 entries) over part.n_owners owners.
/// Outputs (device): d_entry[nnz] input entry ids grouped by owner, d_pos[nnz] owner-local position
/// of input entry e (indexed by e), d_counts[n] entries per owner, d_serial[n] serial-region
/// requests per owner (> cap2 means the owner overflowed), d_spilled[1] spilled entries.
/// d_err (optional) receives kErrIndexRange for an index outside [0, part.n_items) (the entry is
/// then hashed as index 0) and kErrHashLost if compaction does not find every entry exactly once.
void hash_partition(const void* d_indices, IndexType it, size_t nnz, const Partitioner& part, const HashParams& hp,
                    void* d_ws, size_t ws_bytes, uint32_t* d_entry, uint64_t* d_pos, uint64_t* d_counts,
                    uint32_t* d_serial, uint64_t* d_spilled, DeviceError* d_err, void* stream);

/// Dense-gradient variant, first pass: the rows (D values each) holding a value != 0 (-0.0 counts
/// as zero, NaN as non-zero), ascending, via cub::DeviceSelect::If over the row ids.
/// nonzero_rows_workspace covers both count_nonzero_rows and nonzero_rows. count_nonzero_rows
/// (cub::DeviceReduce::Sum of the predicate) lets the caller check the count against its buffer
/// before nonzero_rows writes the rows.
size_t nonzero_rows_workspace(uint64_t rows);
void count_nonzero_rows(const void* d_dense, DType t, uint64_t rows, uint32_t D, uint64_t* d_count, void* d_ws,
                        size_t ws_bytes, void* stream);
void nonzero_rows(const void* d_dense, DType t, uint64_t rows, uint32_t D, int64_t* d_rows, uint64_t* d_count,
                  void* d_ws, size_t ws_bytes, void* stream);

/// Gather value rows: out[k] = values[(d_value_row ? d_value_row[entry[k]] : entry[k])] (D values each).
/// Used by the push packer; exposed for tests and for dense -> COO extraction.
void gather_rows(const void* d_values, const int64_t* d_value_row, const uint32_t* d_entry, size_t k, uint32_t D,
                 DType t, void* d_out, void* stream);

/// Byte displacements of the push segments: displ[p] = sum_{q<p} counts[q] * entry_bytes, and
/// (optional) item offsets item_off[p] = sum_{q<p} counts[q], item_off[n] = total (one thread).
void segment_displacements(const uint64_t* d_counts, uint32_t n, size_t entry_bytes, uint64_t* d_displ,
                           uint64_t* d_item_off, void* stream);

/// Pack the push message: owner p's segment (grouped entries d_entry[item_off[p] .. item_off[p+1]))
/// is written as [keys: d_pos[e] as isz-byte integers][value rows] at d_sbuf + d_displ[p]. Value row
/// of entry e: row (d_value_row ? d_value_row[e] : e) of d_values.
void pack_push(const uint32_t* d_entry, const uint64_t* d_pos, size_t nnz, const uint64_t* d_item_off,
               const uint64_t* d_displ, uint32_t n, const void* d_values, const int64_t* d_value_row, uint32_t D,
               DType t, int isz, uint8_t* d_sbuf, void* stream);

// ---------------------------------------------------------------------------------------------
// Owner aggregation in compact per-owner space. The received buffer holds n segments in source-rank
// order (segment src at byte d_rdispl[src]: d_rcount[src] keys, then the value rows). Positions are
// decoded and range-checked, a stable cub::DeviceRadixSort orders (position, arrival) pairs by
// position keeping the source-rank order of equal positions, cub::DeviceSelect::Flagged finds the
// runs, and one thread per (run, column) sums the run in order: first contribution assigned, the
// rest added in accum_of<T> (fp32 for f16/bf16), rounded once. Bit-identical to the CPU owner sum.
// Outputs: d_res_pos[K] ascending positions, d_res_val[K*D], d_num_runs = K (device).
size_t aggregate_workspace(size_t recv_capacity, uint64_t m);
void owner_aggregate(const uint8_t* d_rbuf, const uint64_t* d_rcount, const uint64_t* d_rdispl, uint32_t n,
                     size_t received, uint64_t m, uint32_t D, DType t, int isz, void* d_ws, size_t ws_bytes,
                     uint64_t* d_res_pos, void* d_res_val, uint64_t* d_num_runs, DeviceError* d_err, void* stream);

// ---------------------------------------------------------------------------------------------
// Hash-bitmap encoding (Zen §5), LSB-first, bitmap_bytes(m) = ceil(m/8) bytes.
/// Encode: presence flags (d_flags, m bytes of scratch) from the k strictly increasing positions,
/// then one warp ballot per 32 positions writes one word (the last word only its existing bytes).
void bitmap_encode(const uint64_t* d_pos, size_t k, uint64_t m, uint8_t* d_flags, uint8_t* d_out, void* stream);
/// Write k positions as isz-byte keys (COO pull encoding).
void coo_encode_keys(const uint64_t* d_pos, size_t k, int isz, uint8_t* d_out, void* stream);

/// Decode owner `owner`'s bitmap (m bits at d_bm, values after it at d_values) and scatter into the
/// dense output: popcount per 32-bit word, cub::DeviceScan::ExclusiveSum gives each word's first
/// value slot, then one thread per word writes its set bits' rows to d_dense[index_at(owner, j)].
/// Checks: padding bits zero, set bits == announced (else d_err).
size_t bitmap_scatter_workspace(uint64_t m_max);
void bitmap_scatter(const uint8_t* d_bm, uint64_t m, const uint8_t* d_values, uint64_t announced,
                    const Partitioner& part, uint32_t owner, uint32_t D, DType t, void* d_dense, void* d_ws,
                    size_t ws_bytes, DeviceError* d_err, void* stream);
/// Decode k COO keys of owner `owner` (isz bytes each, then the value rows) into the dense output.
void coo_scatter(const uint8_t* d_keys, size_t k, int isz, const uint8_t* d_values, const Partitioner& part,
                 uint32_t owner, uint32_t D, DType t, void* d_dense, DeviceError* d_err, void* stream);

// ---------------------------------------------------------------------------------------------
// Dense helpers.
/// dst[i] = op over p = 0..n-1 in rank order of srcs[p][i] (accum_of<T>, rounded once); n <= 64.
/// Element-wise: dst may be one of the sources (in place).
void reduce_rank_order(const void* const* srcs, int n, size_t count, DType t, ReduceOp op, void* d_dst, void* stream);
/// Synthetic gradient: row r is non-zero with probability `density` (hash of r and seed); its D
/// values are deterministic non-zero floats in [-1, 1] (the same for the same (r, seed)); other rows 0.
/// `hot_fraction` > 0 skews towards low rows (row r < rows*hot_fraction is non-zero with
/// probability min(1, 4*density)).
void fill_sparse_gradient(void* d_dense, DType t, uint64_t rows, uint32_t D, double density, double hot_fraction,
                          uint64_t seed, void* stream);

}  // namespace zen::cuda
