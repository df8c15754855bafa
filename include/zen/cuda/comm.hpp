#pragma once
// Device communicators (memory_space() == MemSpace::Device): every buffer passed to them is device
// memory, and every operation is stream-ordered on the stream given by set_stream() (a
// cudaStream_t; nullptr = the legacy default stream). The host returns as soon as the work is
// enqueued, except where a backend must wait for its peers' host threads (device loopback: three
// host-side barriers per collective, no GPU synchronization).
//
//  - zen::cuda::loopback: n virtual ranks on one GPU, threads of one process, one stream each;
//    collectives are device-to-device cudaMemcpyAsync pulls ordered with CUDA events, allreduce
//    reduces in rank order (bitwise identical on every rank). NCCL refuses two ranks on one GPU,
//    so this is how the whole device path is tested on a single GPU.
//  - zen::cuda::nccl (built when NCCL is found; ZEN_HAVE_NCCL): grouped ncclSend/ncclRecv
//    alltoallv, grouped per-root ncclBroadcast allgatherv (at most 2048 operations per group),
//    ncclAllReduce, ncclBroadcast; send/recv match in issue order per peer (tags are range-checked
//    only, as NCCL has none); a send to self is matched locally by the receive from self, a send to
//    a peer travels in the NCCL group of the rank's next operation (docs/gpu.md).
//  Without CUDA these entry points throw Unsupported (device_count() is 0).
#include <array>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "zen/comm/communicator.hpp"

namespace zen::cuda {

/// Wait until all work on `stream` is done, without sleeping: cudaStreamSynchronize on the device
/// loopback (its waits on peers are bounded by host barriers with the timeout); on NCCL, polls
/// cudaStreamQuery and ncclCommGetAsyncError, yielding between polls, at most comm.timeout(), and on
/// timeout or an asynchronous error aborts the communicator (ncclCommAbort). Throws Timeout /
/// CudaError / RemoteError naming the rank and operation. This is the only way zen's device path
/// synchronizes with the host (for counts, see docs/gpu.md).
void stream_wait(Communicator& comm, void* stream);

namespace loopback {

/// n connected device communicators on CUDA device `device` (rank i = element i). The caller sets
/// each one's stream; each must be used by one host thread at a time (with that device current).
std::vector<std::unique_ptr<Communicator>> create(int n, int device = 0);

/// Run fn(comm) on n threads, one per rank: each thread makes `device` current, creates its own
/// non-blocking stream (comm.stream()), runs fn, waits for the stream and destroys it. When a rank
/// throws, the others are told (abort) and fail fast. Returns each rank's exception (or null).
std::vector<std::exception_ptr> run_collect(int n, const std::function<void(Communicator&)>& fn,
                                            Communicator::Ms timeout = Communicator::Ms(120000), int device = 0);

/// As run_collect, but rethrows the first failing rank's exception (original errors before echoes).
void run(int n, const std::function<void(Communicator&)>& fn, Communicator::Ms timeout = Communicator::Ms(120000),
         int device = 0);

/// Simulated nodes: n ranks, consecutive groups of `node_size` form a node. Besides the world
/// communicator each rank gets `intra` (its node, local-index order) and `inter` (the ranks with its
/// local index, node order), separate device-loopback worlds sharing the rank's stream.
using NodeFn = std::function<void(Communicator& world, Communicator& intra, Communicator& inter)>;
void run_nodes(int n, int node_size, const NodeFn& fn, Communicator::Ms timeout = Communicator::Ms(120000),
               int device = 0);

}  // namespace loopback

namespace nccl {

/// True when zen was built with NCCL.
bool available();

using UniqueId = std::array<char, 128>;
/// ncclGetUniqueId (rank 0 creates it and distributes it out of band).
UniqueId unique_id();
/// ncclCommInitRank on the current CUDA device; the communicator owns (and destroys) the NCCL comm.
std::unique_ptr<Communicator> create(const UniqueId& id, int nranks, int rank);
/// Wrap a caller's ncclComm_t (passed as void*); not owned.
std::unique_ptr<Communicator> wrap(void* nccl_comm);
/// ncclCommSplit of a zen NCCL communicator (collective over `comm`): ranks with equal `color` form a
/// communicator ordered by `key` (e.g. color = rank / L, key = rank % L for the intra-node one).
std::unique_ptr<Communicator> split(Communicator& comm, int color, int key);

}  // namespace nccl

}  // namespace zen::cuda
