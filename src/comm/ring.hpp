#pragma once
// The ring schedule, once: reduce-scatter then allgather over a buffer split by ring_chunk_bytes,
// and the bitwise OR built on them. Used by the communicator's default allreduce_or
// (communicator.cpp, on the backend's own sendrecv) and by the baseline schemes (dense ring, the
// support bitmaps; src/schemes/baseline_util.hpp, on the public sendrecv). Private to zen.
//
// `sendrecv(sbuf, sbytes, dst, rbuf, rbytes, src)` is one exchange with the neighbours (the caller
// binds the tag); in step s rank r sends to r+1 and receives from r-1.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ring_chunk.hpp"
#include "zen/comm/communicator.hpp"

namespace zen::ring {

inline int mod(int a, int n) { return ((a % n) + n) % n; }

/// Scratch of the ring (kept by a plan so that a call allocates nothing).
struct Scratch {
  std::vector<size_t> off;
  std::vector<uint8_t> tmp;
};

/// Ring reduce-scatter, in place, over `count` elements of `elem` bytes split by ring_chunk_bytes.
/// After it rank r holds the reduced chunk r. combine(dst, src, k) folds k received elements into
/// dst. With the allgather below, bytes per rank: sent (S - c_r) + (S - c_{r+1}), received
/// (S - c_{r-1}) + (S - c_r).
template <typename SendRecv, typename Combine>
void reduce_scatter(SendRecv&& sendrecv, int n, int r, uint8_t* buf, size_t count, size_t elem, Combine&& combine,
                    Scratch& rs) {
  if (n == 1) return;
  std::vector<size_t>& off = rs.off;
  off.assign(static_cast<size_t>(n) + 1, 0);
  size_t maxc = 0;
  for (int i = 0; i < n; ++i) {
    const size_t b = ring_chunk_bytes(count, elem, n, i);
    off[i + 1] = off[i] + b;
    maxc = std::max(maxc, b);
  }
  if (rs.tmp.size() < maxc) rs.tmp.resize(maxc);
  std::vector<uint8_t>& tmp = rs.tmp;
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    const int sc = mod(r - s - 1, n), rc = mod(r - s - 2, n);
    const size_t sb = off[sc + 1] - off[sc], rb = off[rc + 1] - off[rc];
    sendrecv(buf + off[sc], sb, right, tmp.data(), rb, left);
    combine(buf + off[rc], tmp.data(), rb / elem);
  }
}

/// Ring allgather, in place: rank i's chunk i (split by ring_chunk_bytes) reaches every rank.
template <typename SendRecv>
void allgather(SendRecv&& sendrecv, int n, int r, uint8_t* buf, size_t count, size_t elem, Scratch& rs) {
  if (n == 1) return;
  std::vector<size_t>& off = rs.off;
  off.assign(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i) off[i + 1] = off[i] + ring_chunk_bytes(count, elem, n, i);
  const int right = mod(r + 1, n), left = mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    const int sc = mod(r - s, n), rc = mod(r - s - 1, n);
    sendrecv(buf + off[sc], off[sc + 1] - off[sc], right, buf + off[rc], off[rc + 1] - off[rc], left);
  }
}

/// Bitwise OR of `bytes` bytes over the ring (reduce-scatter then allgather), in place.
template <typename SendRecv>
void bitwise_or(SendRecv&& sendrecv, int n, int r, uint8_t* bm, size_t bytes, Scratch& rs) {
  reduce_scatter(
      sendrecv, n, r, bm, bytes, 1,
      [](uint8_t* d, const uint8_t* s, size_t k) {
        for (size_t i = 0; i < k; ++i) d[i] = static_cast<uint8_t>(d[i] | s[i]);
      },
      rs);
  allgather(sendrecv, n, r, bm, bytes, 1, rs);
}

}  // namespace zen::ring
