/** @file zen.h
 * zen C API: sparse allreduce over a communicator, NCCL style (every call returns a zenResult_t;
 * zenGetLastError() gives the message of the last failure on the calling thread).
 *
 * Errors poison the communicator: when a collective call (zenSparseAllreduceCreate, the Dense,
 * Sparse, SparseInto and DenseFromDense calls and their non-blocking Start forms, the zenComm*
 * collectives and send/recv) fails on one
 * rank, for whatever reason (bad argument, bad index, allocation, timeout), every peer is told at
 * once and its call returns zenRemoteError naming that rank; from then on the communicator refuses
 * every call on every rank (zenInvalidUsage). Destroy it and its operations and create new ones: a
 * call can never mix the data of two steps.
 *
 * Guide: docs/api.md (plans, versioned options, hierarchical mode, output options, caller-owned
 * output, non-blocking calls, the GPU path). */
#ifndef ZEN_ZEN_H
#define ZEN_ZEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "zen/version.h" /* ZEN_VERSION_MAJOR/MINOR/PATCH/STRING, generated from the CMake project version */

typedef enum {
  zenSuccess = 0,
  zenInvalidArgument = 1,
  zenInvalidUsage = 2,
  zenSystemError = 3,
  zenInternalError = 4,
  zenTimeout = 5,
  zenRemoteError = 6,
  zenCudaError = 7,
  zenUnsupported = 8,
  zenResultMaxEnum = 0x7FFFFFFF
} zenResult_t;

/* Every enum carries a *MaxEnum member: it makes the enum as wide as int in C and C++, so that an
 * out-of-range value a caller passes is a checked zenInvalidArgument, not undefined behaviour. */
typedef enum { zenFloat32 = 0, zenFloat64 = 1, zenFloat16 = 2, zenBfloat16 = 3, zenDataTypeMaxEnum = 0x7FFFFFFF } zenDataType_t;
typedef enum { zenInt32 = 0, zenInt64 = 1, zenIndexTypeMaxEnum = 0x7FFFFFFF } zenIndexType_t;
/** How index sets travel (docs/algorithms.md, "Index encodings"): zenPullAuto picks the smallest per
 *  message, zenPullEliasFano codes K positions out of m in about K * (2 + log2(m/K)) bits. The same
 *  values serve zenOptions_t::push. */
typedef enum { zenPullAuto = 0, zenPullCoo = 1, zenPullBitmap = 2, zenPullEliasFano = 3, zenPullEncodingMaxEnum = 0x7FFFFFFF } zenPullEncoding_t;

typedef struct zenComm* zenComm_t;
/** A plan: set up once per tensor shape (collectively), reused for every call; it owns its
 *  workspace and thread pool, and after its first call on a size allocates nothing on later calls of
 *  the same or a smaller size. */
typedef struct zenSparseAllreduce* zenSparseAllreduce_t;
/** A pending non-blocking call (zenSparseAllreduceDenseStart / SparseStart). */
typedef struct zenRequest* zenRequest_t;

/** Options of zenSparseAllreduceCreate. Versioned: `size` comes first and must be the caller's
 *  sizeof(zenOptions_t); fields past it keep their defaults, so the struct can grow without breaking
 *  callers built against an older zen.h. Call zenOptionsInit first: it sets `size` and every default. */
typedef struct {
  size_t size;               /**< sizeof(zenOptions_t) as the caller compiled it */
  zenPullEncoding_t pull;    /**< balanced / sparse_ps pull encoding (default zenPullAuto) */
  int reject_duplicates;     /**< 0: duplicate indices are summed (default); 1: they are an error */
  uint64_t seed;             /**< h0 seed (rank 0's is used; default 0) */
  int threads;               /**< CPU threads of the plan (0 = cores / ranks on the node; default) */
  int hash_functions;        /**< balanced: k second-level hashes (default 3) */
  double parallel_factor;    /**< balanced: parallel region = factor * nnz (default 2) */
  double serial_fraction;    /**< balanced: serial region = fraction * parallel region (default 0.1) */
  int validate;              /**< check index ranges on input (default 1) */
  double sparcml_dense_switch; /**< sparcml: density where it switches to dense (0 = byte break-even) */
  uint32_t block_size;       /**< omnireduce block size in elements (default 256) */
  /* Output. */
  int average;               /**< 1: divide the sum by the number of ranks (rounded once more in the dtype) */
  int accumulate;            /**< 1: Dense calls add the result into dense_out instead of overwriting it */
  /* Hierarchical mode: scheme "hierarchical" (inter-node scheme `inter_scheme`) or "hier_<scheme>";
     node_size also sets the nodes of scheme "hierarchical_sparse". */
  int node_size;             /**< ranks per node, consecutive ranks form a node (0: the ranks sharing this
                                  rank's node, or the size of `intra` when given) */
  const char* inter_scheme;  /**< scheme across nodes (NULL: "balanced"); "hier_<scheme>" names it instead */
  zenComm_t intra;           /**< optional: this rank's node (e.g. zenCommInitMpi of MPI_Comm_split_type), */
  zenComm_t inter;           /**< and the ranks with its local index (MPI_Comm_split by local rank); both or
                                  neither; they must outlive the plan */
  /* Scheme "auto" (docs/algorithms.md). */
  const char* auto_candidates; /**< comma-separated scheme names (NULL: balanced, allgather, sparcml,
                                    sparse_ps, omnireduce, dense_native) */
  int auto_reevaluate_every; /**< calls between re-evaluations (0: never; default 500) */
  double auto_drift;         /**< re-evaluate when the agreed size moves by this fraction (default 0.25) */
  double auto_explore_within; /**< measure candidates predicted within this factor of the best (default 1.5) */
  int auto_max_explore;      /**< measure at most this many candidates (default 4) */
  int auto_trials;           /**< calls per measured candidate (default 3) */
  uint64_t auto_sample_rows; /**< most rows of a rank's hash sample for the statistics (default 1024) */
  double auto_alpha_s;       /**< model latency per message round, seconds (default 20e-6) */
  double auto_message_s;     /**< model overhead per message, seconds (default 1e-6) */
  double auto_bytes_per_s;   /**< model per-rank bandwidth, bytes/s (default 25e9/8) */
  double auto_entry_s;       /**< model compute per row touched, seconds (default 0) */
  /* Device plans (a device communicator; CUDA builds). recv_capacity and pull_rows are agreed at
   * creation: every rank uses the largest value any rank gives (0 gives the default). */
  uint64_t device_max_nnz;   /**< largest local nnz (rows) per call on this rank (0: every row) */
  uint64_t device_recv_capacity; /**< most entries a rank may receive in the push (0: the sum of all ranks' max_nnz) */
  uint64_t device_pull_rows; /**< largest result support summed over all owners, in rows (0: min(rows, the sum of
                                  all ranks' max_nnz)) */
  /* Appended later: callers built against a zen.h without it get the default. */
  zenPullEncoding_t push;    /**< balanced / sparse_ps push encoding (default zenPullAuto: COO unless a sorted
                                  code saves at least 1/8 of the message); CPU plans only */
  /* Scheme "auto", appended later (docs/cost-model.md, "Scheme auto"). */
  double auto_explore_budget; /**< measure while the trial calls' predicted extra time is within this many
                                   calls of the best (default 1) */
  double auto_explore_share; /**< ... plus this many calls of the best per call since the last decision (default 0.1) */
  double auto_cold_calls;    /**< a candidate's first call costs this many times its predicted CPU time (default 8) */
  int auto_cores;            /**< cores one machine's ranks share, for the model's CPU time (0: found from the
                                  kernel's boot id and affinity masks; > 0: set; < 0: never shared; default 0) */
  double auto_learn_link;    /**< learn a slower link when the chosen scheme's calls take more than this many
                                  times its prediction (<= 1: never; default 2) */
  const char* auto_cache;    /**< a file of remembered decisions: a later plan in the same situation starts with
                                  the choice remembered there, checked against its calls (NULL: none; default) */
} zenOptions_t;

const char* zenGetErrorString(zenResult_t result);
/** Message of the last failed call on this thread (names rank, peer, operation, sequence number). */
const char* zenGetLastError(void);
void zenGetVersion(int* major, int* minor);
/** "major.minor.patch", the same string as ZEN_VERSION_STRING and the CMake package version. */
const char* zenGetVersionString(void);

/** Fill `opts` with the defaults and set opts->size = sizeof(zenOptions_t). */
zenResult_t zenOptionsInit(zenOptions_t* opts);

/** n in-process communicators (ranks are threads); comms[i] is rank i. */
zenResult_t zenCommInitLoopback(zenComm_t* comms, int n);
/** Wrap an MPI communicator: `mpi_comm` points to an MPI_Comm (any communicator, not only WORLD;
 *  zen duplicates it). MPI must be initialized by the caller; the non-blocking calls need
 *  MPI_THREAD_SERIALIZED or higher. Returns zenUnsupported when zen was built without MPI. */
zenResult_t zenCommInitMpi(zenComm_t* comm, const void* mpi_comm);
zenResult_t zenCommDestroy(zenComm_t comm);
zenResult_t zenCommRank(zenComm_t comm, int* rank);
zenResult_t zenCommSize(zenComm_t comm, int* size);
zenResult_t zenCommSetTimeout(zenComm_t comm, int milliseconds);
/** How calls on a communicator are ordered (docs/api.md, "Concurrency"): zenCallOrderSubmitted (default)
 *  runs them in the order this rank starts them (the same on every rank); zenCallOrderAgreed lets
 *  several threads of a rank drive plans of the communicator, the ranks agreeing on the order. Set it
 *  on every rank before the first plan of the communicator. */
typedef enum { zenCallOrderSubmitted = 0, zenCallOrderAgreed = 1, zenCallOrderMaxEnum = 0x7FFFFFFF } zenCallOrder_t;
zenResult_t zenCommSetCallOrder(zenComm_t comm, zenCallOrder_t order);
/** Bytes this rank sent and received since the communicator was created. */
zenResult_t zenCommTraffic(zenComm_t comm, uint64_t* sent, uint64_t* recv);

/* GPU path (CUDA builds; otherwise these return zenUnsupported). Device communicators take device
 * buffers and order every operation on their stream (zenCommSetStream, a cudaStream_t; NULL = the
 * legacy default stream); calls return once the work is enqueued. */
/** n device communicators of one process on CUDA device `device` (ranks are threads, one stream each). */
zenResult_t zenCommInitDeviceLoopback(zenComm_t* comms, int n, int device);
/** NCCL: rank 0 creates the id (zenNcclGetUniqueId) and sends it to the others out of band. */
typedef struct {
  char internal[128];
} zenNcclUniqueId;
zenResult_t zenNcclGetUniqueId(zenNcclUniqueId* id);
/** ncclCommInitRank on the current CUDA device; the communicator owns the NCCL communicator. */
zenResult_t zenCommInitNccl(zenComm_t* comm, const zenNcclUniqueId* id, int nranks, int rank);
/** Wrap the caller's ncclComm_t (passed as a pointer to it); not owned. */
zenResult_t zenCommInitNcclWrap(zenComm_t* comm, const void* nccl_comm);
/** ncclCommSplit (collective over `comm`): ranks with equal color form *out, ordered by key. */
zenResult_t zenCommSplitNccl(zenComm_t* out, zenComm_t comm, int color, int key);
/** The stream the device communicator orders its work on (a cudaStream_t). Host communicators ignore it. */
zenResult_t zenCommSetStream(zenComm_t comm, void* stream);

/** Collective (all ranks of `comm`): set up `scheme` ("balanced", "dense", "dense_native",
 *  "allgather", "sparcml", "omnireduce", "sparse_ps", "auto": chosen by zen's cost model and by
 *  measuring the close candidates, the same on every rank; "hierarchical" or "hier_<scheme>": the
 *  hierarchical mode, see zenOptions_t) for tensors of dense length n_elems, row width row_width
 *  (indices name rows) and dtype. opts may be NULL (defaults). The plan is reused across calls. */
zenResult_t zenSparseAllreduceCreate(zenSparseAllreduce_t* op, zenComm_t comm, const char* scheme, uint64_t n_elems,
                                     uint32_t row_width, zenDataType_t dtype, const zenOptions_t* opts);
/** Sum the sparse input over ranks into dense_out (n_elems values; overwritten, or added to with
 *  opts->accumulate). */
zenResult_t zenSparseAllreduceDense(zenSparseAllreduce_t op, size_t nnz, const void* indices, zenIndexType_t itype,
                                    const void* values, void* dense_out);
/** Sum into a sparse result kept inside `op`; *out_nnz receives its row count. Fetch it with
 *  zenSparseAllreduceResult (indices ascending, int64; values nnz*row_width of dtype). A device plan
 *  refuses it (and SparseInto, DenseStart, SparseStart) with zenUnsupported on every rank before
 *  any communication; the communicator stays usable. */
zenResult_t zenSparseAllreduceSparse(zenSparseAllreduce_t op, size_t nnz, const void* indices, zenIndexType_t itype,
                                     const void* values, size_t* out_nnz);
/** Sum dense gradients (n_elems values each; a row is an input entry iff one of its values is not 0)
 *  into dense_out. Host plans scan for the non-zero rows; device plans (balanced, hierarchical) take
 *  device buffers and run it on the stream. */
zenResult_t zenSparseAllreduceDenseFromDense(zenSparseAllreduce_t op, const void* grad, void* dense_out);
/** Wait for a device plan's enqueued work (with the communicator's timeout) and report device-side
 *  errors; a no-op for host plans. */
zenResult_t zenSparseAllreduceSynchronize(zenSparseAllreduce_t op);
/** Copy the last sparse result into caller memory (out_nnz rows and out_nnz*row_width values). */
zenResult_t zenSparseAllreduceResult(zenSparseAllreduce_t op, int64_t* indices, void* values);
/** Row count of the last sparse result (e.g. after a non-blocking SparseStart completed). */
zenResult_t zenSparseAllreduceResultSize(zenSparseAllreduce_t op, size_t* out_nnz);
/** CUB-style size query: the most rows a sparse result can have when no rank passes more than
 *  max_nnz indices: min(rows, ranks * max_nnz). Local, no communication. */
zenResult_t zenSparseAllreduceSparseBound(zenSparseAllreduce_t op, size_t max_nnz, size_t* max_out_nnz);
/** Sum into caller-owned sparse buffers: out_indices (capacity rows, int64, ascending) and
 *  out_values (capacity*row_width values of dtype); *out_nnz receives the row count. If the result
 *  has more than `capacity` rows (the same on every rank) the call returns zenInvalidArgument on
 *  every rank, writes nothing, and keeps the result in `op` (zenSparseAllreduceResult); the
 *  communicator stays usable. */
zenResult_t zenSparseAllreduceSparseInto(zenSparseAllreduce_t op, size_t nnz, const void* indices,
                                         zenIndexType_t itype, const void* values, int64_t* out_indices,
                                         void* out_values, size_t capacity, size_t* out_nnz);

/** Non-blocking forms: queue the call on the communicator's call-queue thread and return at once; the
 *  caller computes meanwhile and completes *req with zenRequestWait or zenRequestTest. Calls on one
 *  communicator run in the order they were started (start them in the same order on every rank);
 *  a blocking call queues behind pending ones. Input and output buffers must stay untouched until
 *  completion. Host backends only (loopback, MPI). */
zenResult_t zenSparseAllreduceDenseStart(zenSparseAllreduce_t op, size_t nnz, const void* indices, zenIndexType_t itype,
                                         const void* values, void* dense_out, zenRequest_t* req);
/** The result stays inside `op`: zenSparseAllreduceResultSize / zenSparseAllreduceResult after completion. */
zenResult_t zenSparseAllreduceSparseStart(zenSparseAllreduce_t op, size_t nnz, const void* indices, zenIndexType_t itype,
                                          const void* values, zenRequest_t* req);
/** Block until *req completes; returns the call's result and sets *req = NULL. NULL *req: zenSuccess. */
zenResult_t zenRequestWait(zenRequest_t* req);
/** *done = 1 once *req completed (then returns the call's result and sets *req = NULL), else 0. */
zenResult_t zenRequestTest(zenRequest_t* req, int* done);

/** Bytes sent/received by this rank and seconds of the last call. */
zenResult_t zenSparseAllreduceLastStats(zenSparseAllreduce_t op, uint64_t* sent, uint64_t* recv, double* seconds);
/** The scheme the last call ran and, for "auto", what it chose and why (empty otherwise). The
 *  strings stay valid until the next call on `op`. Either pointer may be NULL. */
zenResult_t zenSparseAllreduceLastScheme(zenSparseAllreduce_t op, const char** scheme, const char** decision);
/** Waits for the plan's pending non-blocking calls, then frees it. */
zenResult_t zenSparseAllreduceDestroy(zenSparseAllreduce_t op);

/* ---- Reports and communicator collectives (added after 0.1.0: a caller that loads libzen at run
 * time, such as the Python package, checks that these symbols exist) ---- */

/** The report of a plan's last completed call (zen::SyncReport). Versioned like zenOptions_t: set
 *  `size` = sizeof(zenReport_t) before the call; the library fills the first `size` bytes, so the
 *  struct can grow. The strings stay valid until the next call on the plan. */
typedef struct {
  size_t size;             /**< sizeof(zenReport_t) as the caller compiled it (set by the caller) */
  uint64_t sent, recv;     /**< bytes this rank sent / received in the call */
  double seconds;          /**< wall time of the call on this rank */
  double push_imbalance;   /**< max/mean over owners of entries pushed (balanced, sparse_ps, omnireduce) */
  double pull_imbalance;   /**< max/mean over owners of result entries */
  uint64_t result_nnz;     /**< rows in the result support */
  double bound_bytes;      /**< balanced / sparse_ps: information content of what this rank sent (values plus
                                log2 C(m, K) / 8 per index set); sent / bound_bytes is zen_perf's bound_eff
                                (0 for the other schemes) */
  uint64_t serial_overflows; /**< balanced: owners whose serial region overflowed (handled losslessly) */
  uint64_t global_rows;    /**< a size every rank learned in the call (docs/api.md); 0 if none */
  int phases;              /**< number of phases (zenSparseAllreduceLastPhase) */
  const char* scheme;      /**< the scheme that ran (auto: the one it chose) */
  const char* decision;    /**< auto: what it chose and why ("" for fixed schemes) */
  const char* encoding;    /**< pull encoding: "coo", "bitmap", "ef", "mixed"; "dense" for dense schemes */
  const char* push_encoding; /**< balanced / sparse_ps push encoding ("" otherwise) */
} zenReport_t;
zenResult_t zenSparseAllreduceLastReport(zenSparseAllreduce_t op, zenReport_t* report);
/** Phase `phase` (0 .. report.phases-1) of the last call: its name, bytes and seconds on this rank.
 *  Any output pointer may be NULL. */
zenResult_t zenSparseAllreduceLastPhase(zenSparseAllreduce_t op, int phase, const char** name, uint64_t* sent,
                                        uint64_t* recv, double* seconds);

/** Dense collectives on the communicator itself, with the communicator's timeout, error messages
 *  (rank, peer, operation, sequence number) and poisoning rule: a failure on one rank aborts every
 *  peer's call at once (zenRemoteError) and the communicator refuses further use. Buffers live in
 *  the communicator's memory space. Each is collective (every rank calls it, in the same order as
 *  its other calls on `comm`); a call made while non-blocking calls are pending on `comm` queues
 *  behind them. Sizes must agree across ranks. */
typedef enum { zenSum = 0, zenMax = 1, zenMin = 2, zenReduceOpMaxEnum = 0x7FFFFFFF } zenReduceOp_t;
/** In place: `count` elements of `dtype` reduced with `op` by the backend's native allreduce. */
zenResult_t zenCommAllreduce(zenComm_t comm, void* buf, size_t count, zenDataType_t dtype, zenReduceOp_t op);
/** `bytes` bytes of rank `root`'s buf to every rank's buf. */
zenResult_t zenCommBroadcast(zenComm_t comm, void* buf, size_t bytes, int root);
/** Every rank's `bytes` bytes of sendbuf; recvbuf receives size * bytes, rank-major. */
zenResult_t zenCommAllgather(zenComm_t comm, const void* sendbuf, size_t bytes, void* recvbuf);
/** Bytes send_bytes[p] at sendbuf + send_displs[p] go to rank p, which receives them at its
 *  recvbuf + recv_displs[rank] (recv_bytes[rank] = the sender's send_bytes[p]). Arrays of `size`. */
zenResult_t zenCommAlltoallv(zenComm_t comm, const void* sendbuf, const size_t* send_bytes, const size_t* send_displs,
                             void* recvbuf, const size_t* recv_bytes, const size_t* recv_displs);
zenResult_t zenCommBarrier(zenComm_t comm);
/** Point to point, tag in [0, 16383]. Send is buffered (returns once the bytes are copied); recv
 *  takes exactly `bytes` bytes (a message of another size is an error). Messages of one pair and
 *  tag arrive in order. Failures poison the communicator as for collectives. */
zenResult_t zenCommSend(zenComm_t comm, const void* buf, size_t bytes, int peer, int tag);
zenResult_t zenCommRecv(zenComm_t comm, void* buf, size_t bytes, int peer, int tag);
/** Poison `comm` on purpose (e.g. the caller found an error of its own): marks it failed on this
 *  rank and tells every peer, whose pending and later calls fail with zenRemoteError quoting
 *  `reason` (may be NULL). The communicator stays allocated: destroy it with zenCommDestroy. */
zenResult_t zenCommAbort(zenComm_t comm, const char* reason);
/** *failed = 1 once `comm` refuses further use (an error, or an abort by this rank or a peer that
 *  this rank has seen), else 0. Local. */
zenResult_t zenCommFailed(zenComm_t comm, int* failed);

#ifdef __cplusplus
}
#endif
#endif /* ZEN_ZEN_H */
