#pragma once
// How a ring splits a buffer (private to the library and its tests; it left the public
// zen/comm/communicator.hpp in issue 30): the chunk sizes of the ring allreduce, its traffic
// accounting and the cost model. Defined in src/comm/communicator.cpp.
#include <cstddef>

namespace zen {
/// Bytes of chunk i when `count` elements of `elem` bytes are split into n near-equal chunks
/// (the first count % n chunks one element longer).
size_t ring_chunk_bytes(size_t count, size_t elem, int n, int i);
}  // namespace zen
