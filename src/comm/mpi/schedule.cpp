// MPI backend: the schedule of alltoallv and allgatherv. Within one host MPI's native non-blocking
// collectives (one round; blocks too large for an int count travel point to point in pieces); across
// hosts, large exchanges in n-1 pairwise steps (MpiComm::Schedule in mpi_comm.hpp: no incast).
// ZEN_MPI_SCHEDULE (native | pairwise | auto) chooses, read at creation (setup.cpp).
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "mpi_comm.hpp"

namespace zen::mpi::impl {

// ---------------- collectives ----------------
void MpiComm::do_alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf,
                           const size_t* rcounts, const size_t* rdispls) {
  progress_sends();
  if (scounts[rank_] != rcounts[rank_])
    fail(Result::InvalidArgument, rank_, "send count to self " + std::to_string(scounts[rank_]) +
                                             " != receive count from self " + std::to_string(rcounts[rank_]));
  const int tag = coll_tag();
  const auto* s = static_cast<const uint8_t*>(sbuf);
  auto* r = static_cast<uint8_t*>(rbuf);
  size_t stotal = 0, rtotal = 0;
  for (int p = 0; p < size_; ++p) {
    stotal = std::max(stotal, sdispls[p] + scounts[p]);
    rtotal = std::max(rtotal, rdispls[p] + rcounts[p]);
  }
  Mem m = Mem::Owned;
  if (!owner()) {
    // Send sizes differ per rank, so the decision to handshake cannot depend on them: every
    // caller-memory alltoallv checks presence first (it is not on zen's fast path).
    handshake();
    m = std::max(stotal, rtotal) <= kStageLimit ? Mem::Staged : Mem::Caller;
  }
  if (m == Mem::Staged) {
    uint8_t* ss = stage_bytes(stage_->s, stotal);
    if (stotal) std::memcpy(ss, s, stotal);
    s = ss;
    r = stage_bytes(stage_->r, rtotal);
  }
  if (schedule_ != Schedule::Native) {
    // Point to point: all at once below kPairwiseBytes (Auto), else in n-1 pairwise steps. Both
    // forms post one message (in pieces) per pair and direction with the same tag, so ranks that
    // choose differently (each decides from its own sizes) still match.
    const bool steps = schedule_ == Schedule::Pairwise || std::max(stotal, rtotal) > kPairwiseBytes;
    if (scounts[rank_]) std::memmove(r + rdispls[rank_], s + sdispls[rank_], scounts[rank_]);
    q_.clear();
    for (int k = 1; k < size_; ++k) {
      const int src = (rank_ - k + size_) % size_, dst = (rank_ + k) % size_;
      if (rcounts[src]) irecv(r + rdispls[src], rcounts[src], src, tag);
      if (scounts[dst]) isend(s + sdispls[dst], scounts[dst], dst, tag);
      if (steps) wait(m);
    }
    wait(m);
    if (m == Mem::Staged)
      for (int p = 0; p < size_; ++p)
        if (rcounts[p]) std::memcpy(static_cast<uint8_t*>(rbuf) + rdispls[p], r + rdispls[p], rcounts[p]);
    return;
  }
  // A block of more than lim/n bytes travels point to point in pieces (both ends of a pair see the
  // same block size, so they agree); the remaining blocks span at most lim bytes per side and go
  // through one MPI_Ialltoallv (packed into our staging buffers if their span exceeds int).
  const size_t lim = max_message_bytes(), blim = std::max<size_t>(1, lim / static_cast<size_t>(size_));
  q_.clear();
  icount_s_.assign(static_cast<size_t>(size_), 0);
  icount_r_.assign(static_cast<size_t>(size_), 0);
  idispl_s_.assign(static_cast<size_t>(size_), 0);
  idispl_r_.assign(static_cast<size_t>(size_), 0);
  bool big = false;
  size_t slo = SIZE_MAX, shi = 0, rlo = SIZE_MAX, rhi = 0;
  for (int p = 0; p < size_; ++p) {
    if (scounts[p] > blim || rcounts[p] > blim) big = true;
    if (scounts[p] && scounts[p] <= blim) slo = std::min(slo, sdispls[p]), shi = std::max(shi, sdispls[p] + scounts[p]);
    if (rcounts[p] && rcounts[p] <= blim) rlo = std::min(rlo, rdispls[p]), rhi = std::max(rhi, rdispls[p] + rcounts[p]);
  }
  if (slo == SIZE_MAX) slo = shi = 0;
  if (rlo == SIZE_MAX) rlo = rhi = 0;
  const bool pack_s = big && shi - slo > lim, pack_r = big && rhi - rlo > lim;
  const uint8_t* sbase = s + slo;
  uint8_t* rbase = r + rlo;
  if (pack_s) {
    uint8_t* pk = stage_bytes(stage_->ps, static_cast<size_t>(size_) * blim);
    size_t o = 0;
    for (int p = 0; p < size_; ++p)
      if (scounts[p] <= blim) {
        if (scounts[p]) std::memcpy(pk + o, s + sdispls[p], scounts[p]);
        icount_s_[p] = static_cast<int>(scounts[p]);
        idispl_s_[p] = static_cast<int>(o);
        o += scounts[p];
      }
    sbase = pk;
  } else {
    for (int p = 0; p < size_; ++p)
      if (scounts[p] <= blim) {
        icount_s_[p] = static_cast<int>(scounts[p]);
        idispl_s_[p] = static_cast<int>(scounts[p] ? sdispls[p] - slo : 0);
      }
  }
  size_t o = 0;
  for (int p = 0; p < size_; ++p)
    if (rcounts[p] <= blim) {
      icount_r_[p] = static_cast<int>(rcounts[p]);
      idispl_r_[p] = static_cast<int>(pack_r ? o : (rcounts[p] ? rdispls[p] - rlo : 0));
      o += rcounts[p];
    }
  if (pack_r) rbase = stage_bytes(stage_->pr, o);
  q_.rq.emplace_back();
  q_.peer.push_back(-1);
  q_.expect.push_back(kNoCheck);
  check(MPI_Ialltoallv(sbase, icount_s_.data(), idispl_s_.data(), MPI_BYTE, rbase, icount_r_.data(), idispl_r_.data(),
                       MPI_BYTE, comm_, &q_.rq.back()),
        -1, "MPI_Ialltoallv");
  if (big) {
    for (int k = 1; k < size_; ++k) {
      const int p = (rank_ - k + size_) % size_;
      if (rcounts[p] > blim) irecv(r + rdispls[p], rcounts[p], p, tag);
    }
    for (int k = 1; k < size_; ++k) {
      const int p = (rank_ + k) % size_;
      if (scounts[p] > blim) isend(s + sdispls[p], scounts[p], p, tag);
    }
    if (scounts[rank_] > blim) std::memmove(r + rdispls[rank_], s + sdispls[rank_], scounts[rank_]);
  }
  wait(m);
  if (pack_r) {
    size_t off = 0;
    for (int p = 0; p < size_; ++p)
      if (rcounts[p] <= blim) {
        if (rcounts[p]) std::memcpy(r + rdispls[p], rbase + off, rcounts[p]);
        off += rcounts[p];
      }
  }
  if (m == Mem::Staged)
    for (int p = 0; p < size_; ++p)
      if (rcounts[p]) std::memcpy(static_cast<uint8_t*>(rbuf) + rdispls[p], r + rdispls[p], rcounts[p]);
}

void MpiComm::do_allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts, const size_t* rdispls) {
  progress_sends();
  const int tag = coll_tag();
  auto* r = static_cast<uint8_t*>(rbuf);
  const bool in_place = sbuf == r + rdispls[rank_];
  size_t span = 0;
  for (int p = 0; p < size_; ++p) span = std::max(span, rdispls[p] + rcounts[p]);
  // Every rank knows every count: all decide alike.
  const Mem m = owner() ? Mem::Owned : (span <= kStageLimit ? Mem::Staged : Mem::Caller);
  if (m == Mem::Caller) handshake();
  const void* s = sbuf;
  if (m == Mem::Staged) {
    uint8_t* st = stage_bytes(stage_->r, span);
    if (sbytes) std::memcpy(st + rdispls[rank_], sbuf, sbytes);
    r = st;
    s = st + rdispls[rank_];
  }
  q_.clear();
  // Every rank knows every count, so all choose the same form.
  const bool steps = schedule_ == Schedule::Pairwise || (schedule_ == Schedule::Auto && span > kPairwiseBytes);
  if (steps) {
    // n-1 pairwise steps: in step k this rank sends its block to rank + k and receives rank - k's.
    for (int k = 1; k < size_; ++k) {
      const int src = (rank_ - k + size_) % size_, dst = (rank_ + k) % size_;
      if (rcounts[src]) irecv(r + rdispls[src], rcounts[src], src, tag);
      if (sbytes) isend(s, sbytes, dst, tag);
      wait(m);
    }
    if (sbytes && s != r + rdispls[rank_]) std::memmove(r + rdispls[rank_], s, sbytes);
  } else if (span <= max_message_bytes()) {
    icount_r_.resize(static_cast<size_t>(size_));
    idispl_r_.resize(static_cast<size_t>(size_));
    for (int p = 0; p < size_; ++p) {
      icount_r_[p] = static_cast<int>(rcounts[p]);
      idispl_r_[p] = static_cast<int>(rdispls[p]);
    }
    const bool place = in_place || m == Mem::Staged;
    q_.rq.emplace_back();
    q_.peer.push_back(-1);
    q_.expect.push_back(kNoCheck);
    check(MPI_Iallgatherv(place ? MPI_IN_PLACE : s, static_cast<int>(sbytes), MPI_BYTE, r, icount_r_.data(),
                          idispl_r_.data(), MPI_BYTE, comm_, &q_.rq.back()),
          -1, "MPI_Iallgatherv");
  } else {
    for (int k = 1; k < size_; ++k) {
      const int p = (rank_ - k + size_) % size_;
      irecv(r + rdispls[p], rcounts[p], p, tag);
    }
    for (int k = 1; k < size_; ++k) isend(s, sbytes, (rank_ + k) % size_, tag);
    if (sbytes && s != r + rdispls[rank_]) std::memmove(r + rdispls[rank_], s, sbytes);
  }
  wait(m);
  if (m == Mem::Staged)
    for (int p = 0; p < size_; ++p)
      if (rcounts[p] && (p != rank_ || !in_place)) std::memcpy(static_cast<uint8_t*>(rbuf) + rdispls[p], r + rdispls[p], rcounts[p]);
}

}  // namespace zen::mpi::impl
