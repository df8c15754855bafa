/* zen C API: sparse allreduce over a communicator, NCCL style (every call returns a zenResult_t;
 * zenGetLastError() gives the message of the last failure on the calling thread).
 *
 * Errors poison the communicator: when a collective call (zenSparseAllreduceCreate / Dense /
 * Sparse) fails on one rank, for whatever reason (bad argument, bad index, allocation, timeout),
 * every peer is told at once and its call returns zenRemoteError naming that rank; from then on
 * the communicator refuses every call on every rank (zenInvalidUsage). Destroy it and its
 * operations and create new ones: a call can never mix the data of two steps. */
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
typedef enum { zenPullAuto = 0, zenPullCoo = 1, zenPullBitmap = 2, zenPullEncodingMaxEnum = 0x7FFFFFFF } zenPullEncoding_t;

typedef struct zenComm* zenComm_t;
typedef struct zenSparseAllreduce* zenSparseAllreduce_t;

typedef struct {
  zenPullEncoding_t pull;  /* balanced / sparse_ps pull encoding */
  int reject_duplicates;   /* 0: duplicate indices are summed; 1: they are an error */
  uint64_t seed;           /* h0 seed (rank 0's is used) */
  int threads;             /* CPU threads (0 = all) */
} zenOptions_t;

const char* zenGetErrorString(zenResult_t result);
/* Message of the last failed call on this thread (names rank, peer, operation, sequence number). */
const char* zenGetLastError(void);
void zenGetVersion(int* major, int* minor);

/* n in-process communicators (ranks are threads); comms[i] is rank i. */
zenResult_t zenCommInitLoopback(zenComm_t* comms, int n);
/* Wrap an MPI communicator: `mpi_comm` points to an MPI_Comm. MPI must be initialized by the
 * caller. Returns zenUnsupported when zen was built without MPI. */
zenResult_t zenCommInitMpi(zenComm_t* comm, const void* mpi_comm);
zenResult_t zenCommDestroy(zenComm_t comm);
zenResult_t zenCommRank(zenComm_t comm, int* rank);
zenResult_t zenCommSize(zenComm_t comm, int* size);
zenResult_t zenCommSetTimeout(zenComm_t comm, int milliseconds);
/* Bytes this rank sent and received since the communicator was created. */
zenResult_t zenCommTraffic(zenComm_t comm, uint64_t* sent, uint64_t* recv);

/* Collective (all ranks of `comm`): set up `scheme` ("balanced", "dense", "dense_native",
 * "allgather", "sparcml", "omnireduce", "sparse_ps", or "auto": chosen by zen's cost model and by
 * measuring the close candidates, the same on every rank) for tensors of dense length n_elems, row
 * width row_width (indices name rows) and dtype. opts may be NULL. */
zenResult_t zenSparseAllreduceCreate(zenSparseAllreduce_t* op, zenComm_t comm, const char* scheme, uint64_t n_elems,
                                     uint32_t row_width, zenDataType_t dtype, const zenOptions_t* opts);
/* Sum the sparse input over ranks into dense_out (n_elems values, overwritten). */
zenResult_t zenSparseAllreduceDense(zenSparseAllreduce_t op, size_t nnz, const void* indices, zenIndexType_t itype,
                                    const void* values, void* dense_out);
/* Sum into a sparse result kept inside `op`; *out_nnz receives its row count. Fetch it with
 * zenSparseAllreduceResult (indices ascending, int64; values nnz*row_width of dtype). */
zenResult_t zenSparseAllreduceSparse(zenSparseAllreduce_t op, size_t nnz, const void* indices, zenIndexType_t itype,
                                     const void* values, size_t* out_nnz);
zenResult_t zenSparseAllreduceResult(zenSparseAllreduce_t op, int64_t* indices, void* values);
/* Bytes sent/received by this rank and seconds of the last call. */
zenResult_t zenSparseAllreduceLastStats(zenSparseAllreduce_t op, uint64_t* sent, uint64_t* recv, double* seconds);
/* The scheme the last call ran and, for "auto", what it chose and why (empty otherwise). The
 * strings stay valid until the next call on `op`. Either pointer may be NULL. */
zenResult_t zenSparseAllreduceLastScheme(zenSparseAllreduce_t op, const char** scheme, const char** decision);
zenResult_t zenSparseAllreduceDestroy(zenSparseAllreduce_t op);

#ifdef __cplusplus
}
#endif
#endif /* ZEN_ZEN_H */
