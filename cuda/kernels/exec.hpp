#pragma once
// The launch helper and the primitives interface of the kernels (one per backend):
//   Exec<Gpu>  (exec_gpu.cuh, nvcc only): CUDA kernels on a stream, CUB for the primitives;
//   Exec<Host> (exec_host.hpp): loops over the same bodies on this thread and a few pool threads,
//              the C++ standard library for the primitives.
// Contract of Exec<B> (all calls stream-ordered on `stream`; Host ignores it and finishes first):
//   for_each(n, body, stream)        body(i) for i in [0, n)                       (bodies.hpp)
//   for_each_warp(words, body, s)    body(warp, w) for w in [0, words): 32 lanes each; warp.lanes(f)
//                                    runs f(lane) for the lanes, warp.ballot(var) is __ballot_sync
//   for_each_tile(n, body, s)        tile program over n items (HashInsert): blocks of
//                                    Body::kThreads x Body::kItems items with Body::shared_bytes()
//                                    of shared memory, Body::kPhases phases, each followed by a
//                                    barrier, a cooperative block_step and a barrier
// and the five primitives, each with a temp-storage size query (CUB's two-phase convention; every
// query's status is checked):
//   select_if        out[k++] = gen(i) for i in [0, n) with pred(gen(i)); *d_num = k   (stable)
//   select_flagged   out[k++] = i for i in [0, n) with flags[i] != 0; *d_num = k       (stable)
//   sort_pairs       stable sort of (key, value) pairs by key, keys < 2^end_bit
//   exclusive_sum    out[i] = in[0] + ... + in[i-1]
//   sum              *d_out = gen(0) + ... + gen(n-1)
namespace zen::cuda::detail {

template <class B>
struct Exec;

}  // namespace zen::cuda::detail
