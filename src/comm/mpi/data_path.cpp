// MPI backend: the data path. Point to point (buffered sends), the collectives on MPI's own
// non-blocking calls (allgather, alltoall, allreduce in pieces, the bitwise OR, broadcast, barrier),
// staging of caller memory, the split of large messages into int-sized requests, and the wait loop
// that drives an operation's requests (with the abort and timeout checks of failure.cpp).
// alltoallv / allgatherv and their schedule: schedule.cpp. The class and its state: mpi_comm.hpp.
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

// Largest message one MPI request or one native collective buffer carries: MPI counts are int.
// ZEN_MPI_MAX_MESSAGE_BYTES lowers the limit (tests use it to exercise the large-message paths).
size_t max_message_bytes() {
  static const size_t v = [] {
    size_t lim = size_t{1} << 30;
    if (const char* e = std::getenv("ZEN_MPI_MAX_MESSAGE_BYTES")) {
      char* end = nullptr;
      unsigned long long x = std::strtoull(e, &end, 10);
      if (end && *end == '\0' && x >= 1 && x <= lim) lim = static_cast<size_t>(x);
    }
    return lim;
  }();
  return v;
}

// Pieces of a large blocking MPI_Allreduce (bytes) when all ranks share one host. One 16 MiB
// MPI_Allreduce over shared memory leaves the cache at every step of its ring; in pieces of 1 MiB
// each piece's steps stay in cache (2 cores, Open MPI 4.1, f32, zen_perf dense_native against
// mpi_allreduce at 16 MiB: 1.06-1.09x whole, 0.75-0.85x in 1 MiB pieces). Across hosts the network
// sets the pace and every piece would pay the ring's latency again: one call per max_message_bytes().
// ZEN_MPI_ALLREDUCE_CHUNK_BYTES overrides both (the same on every rank: launcher environment).
size_t allreduce_piece_bytes(bool multi_host) {
  static const size_t env = [] {
    size_t c = 0;
    if (const char* e = std::getenv("ZEN_MPI_ALLREDUCE_CHUNK_BYTES")) {
      char* end = nullptr;
      unsigned long long x = std::strtoull(e, &end, 10);
      if (end && *end == '\0' && x >= 1) c = static_cast<size_t>(x);
    }
    return c;
  }();
  const size_t c = env ? env : (multi_host ? max_message_bytes() : size_t{1} << 20);
  return std::min(c, max_message_bytes());
}

namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    default: return MPI_UINT16_T;
  }
}

template <typename T, ReduceOp OP>
void reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    T x, y;
    std::memcpy(static_cast<void*>(&x), a + i, 2);
    std::memcpy(static_cast<void*>(&y), b + i, 2);
    float fx = static_cast<float>(x), fy = static_cast<float>(y);
    float r = OP == ReduceOp::Sum ? fx + fy : (OP == ReduceOp::Max ? std::max(fx, fy) : std::min(fx, fy));
    T out = static_cast<T>(r);
    std::memcpy(b + i, &out, 2);
  }
}

}  // namespace

// ---------------- point to point ----------------
// Buffered (eager) send: the bytes are copied and the call returns; MPI delivers them while later
// operations run (two ranks that send to each other before receiving never deadlock). Outstanding
// sends are completed by later calls and, at the latest, by the destructor (bounded by the timeout).
void MpiComm::do_send(const void* buf, size_t bytes, int peer, int tag) {
  progress_sends();
  auto ps = take_send_buffer(bytes);
  if (bytes) std::memcpy(ps->data.data(), buf, bytes);
  q_.clear();
  isend(ps->data.data(), bytes, peer, tag);
  ps->rq.assign(q_.rq.begin(), q_.rq.end());
  q_.clear();
  pending_.push_back(std::move(ps));
}

void MpiComm::do_recv(void* buf, size_t bytes, int peer, int tag) {
  progress_sends();
  const Mem m = owner() ? Mem::Owned : (bytes <= kStageLimit ? Mem::Staged : Mem::Caller);
  void* dst = m == Mem::Staged ? stage_bytes(stage_->r, bytes) : buf;
  q_.clear();
  irecv(dst, bytes, peer, tag);
  wait(m);
  if (m == Mem::Staged && bytes) std::memcpy(buf, dst, bytes);
}

void MpiComm::do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag) {
  progress_sends();
  const bool owned = owner() != nullptr;
  const Mem m = owned ? Mem::Owned : (rbytes <= kStageLimit ? Mem::Staged : Mem::Caller);
  void* rdst = m == Mem::Staged ? stage_bytes(stage_->r, rbytes) : rbuf;
  const void* ssrc = sbuf;
  if (!owned) {  // the send part of caller memory goes from our own copy
    void* s = stage_bytes(stage_->s, sbytes);
    if (sbytes) std::memcpy(s, sbuf, sbytes);
    ssrc = s;
  }
  q_.clear();
  irecv(rdst, rbytes, src, tag);
  isend(ssrc, sbytes, dst, tag);
  wait(m);
  if (m == Mem::Staged && rbytes) std::memcpy(rbuf, rdst, rbytes);
}

void MpiComm::do_allgather(const void* sbuf, size_t bytes, void* rbuf) {
  const size_t total = bytes * static_cast<size_t>(size_);
  if (total > max_message_bytes()) {
    Communicator::do_allgather(sbuf, bytes, rbuf);  // pieces over point to point
    return;
  }
  native_fixed(MPI_Iallgather, "MPI_Iallgather", sbuf, bytes, bytes, rbuf, total);
}

void MpiComm::do_alltoall(const void* sbuf, size_t bytes, void* rbuf) {
  const size_t n = static_cast<size_t>(size_), total = bytes * n;
  if (bytes > max_message_bytes() / n) {
    Communicator::do_alltoall(sbuf, bytes, rbuf);
    return;
  }
  native_fixed(MPI_Ialltoall, "MPI_Ialltoall", sbuf, total, bytes, rbuf, total);
}

// One native collective of fixed block size (`block` bytes per peer): `sbytes` bytes of `sbuf`
// in, `rbytes` bytes into `rbuf`; where the buffers live (Mem: owned, staged up to kStageLimit, or
// the caller's after a handshake) decides how a failure is made memory-safe.
void MpiComm::native_fixed(NativeFixed fn, const char* what, const void* sbuf, size_t sbytes, size_t block, void* rbuf,
                           size_t rbytes) {
  progress_sends();
  coll_tag();
  const Mem m = owner() ? Mem::Owned : (rbytes <= kStageLimit ? Mem::Staged : Mem::Caller);
  if (m == Mem::Caller) handshake();
  const void* s = sbuf;
  void* r = rbuf;
  if (m == Mem::Staged) {
    s = stage_bytes(stage_->s, sbytes);
    if (sbytes) std::memcpy(const_cast<void*>(s), sbuf, sbytes);
    r = stage_bytes(stage_->r, rbytes);
  }
  q_.clear();
  post_native(fn(s, static_cast<int>(block), MPI_BYTE, r, static_cast<int>(block), MPI_BYTE, comm_, native_slot()), what);
  wait(m);
  if (m == Mem::Staged && rbytes) std::memcpy(rbuf, r, rbytes);
}

void MpiComm::do_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) {
  progress_sends();
  coll_tag();
  if (size_ == 1 || count == 0) return;
  const size_t es = dtype_size(dtype), total = count * es;
  const size_t per = std::max<size_t>(1, max_message_bytes() / es);
  if (total > kStageLimit) {
    // Large: Open MPI's blocking MPI_Allreduce (coll/tuned) is markedly faster than MPI_Iallreduce
    // (libnbc). Every rank first shows it is here (the handshake: cancellable, names a missing
    // rank); then the blocking call can only fail to finish if the transport itself is stuck, which
    // the watchdog turns into a job abort with the message (a blocking call cannot be withdrawn).
    handshake();
    blocking_allreduce(buf, count, dtype, op);
    return;
  }
  const Mem m = owner() ? Mem::Owned : Mem::Staged;
  uint8_t* b = static_cast<uint8_t*>(buf);
  if (m == Mem::Staged) {
    b = stage_bytes(stage_->r, total);
    std::memcpy(b, buf, total);
  }
  for (size_t off = 0; off < count; off += per) {
    const size_t c = std::min(per, count - off);
    q_.clear();
    post_native(MPI_Iallreduce(MPI_IN_PLACE, b + off * es, static_cast<int>(c), mpi_type(dtype), mpi_op(dtype, op), comm_,
                               native_slot()),
                "MPI_Iallreduce");
    wait(m);
  }
  if (m == Mem::Staged) std::memcpy(buf, b, total);
}

// Large, after the presence check: Open MPI's blocking MPI_Allreduce in pieces of at most
// allreduce_piece_bytes() (cache-sized on one host, see there), each under the watchdog.
// Each finished piece goes to `done` (outside the watchdog's watch); a throwing `done` is
// called no more, and its exception is rethrown after the last piece.
void MpiComm::blocking_allreduce(void* buf, size_t count, DType dtype, ReduceOp op, PieceDone done) {
  blocking_allreduce_pieces(buf, count, dtype_size(dtype), mpi_type(dtype), mpi_op(dtype, op),
                            allreduce_piece_bytes(multi_host_), done);
}

void MpiComm::blocking_allreduce_pieces(void* buf, size_t count, size_t es, MPI_Datatype type, MPI_Op mop, size_t piece_bytes,
                                        PieceDone done) {
  const size_t per = std::max<size_t>(1, piece_bytes / es);
  auto* b = static_cast<uint8_t*>(buf);
  std::exception_ptr err;
  for (size_t off = 0; off < count; off += per) {
    const size_t c = std::min(per, count - off);
    {
      Watch w(*this, "MPI_Allreduce");
      check(MPI_Allreduce(MPI_IN_PLACE, b + off * es, static_cast<int>(c), type, mop, comm_), -1, "MPI_Allreduce");
    }
    if (done.fn && !err) {
      try {
        done.fn(done.ctx, off, c);
      } catch (...) {
        err = std::current_exception();
      }
    }
  }
  if (err) std::rethrow_exception(err);
}

// Bitwise OR through MPI_Iallreduce and the wait loop (time-out and abort checks), on the buffer
// when it is a plan's, else on a staged copy. bytes <= max_message_bytes().
void MpiComm::nonblocking_or(void* buf, size_t bytes) {
  const Mem m = owner() ? Mem::Owned : Mem::Staged;
  auto* b = static_cast<uint8_t*>(buf);
  uint8_t* d = m == Mem::Staged ? stage_bytes(stage_->r, bytes) : b;
  if (m == Mem::Staged) std::memcpy(d, b, bytes);
  q_.clear();
  post_native(MPI_Iallreduce(MPI_IN_PLACE, d, static_cast<int>(bytes), MPI_BYTE, MPI_BOR, comm_, native_slot()),
              "MPI_Iallreduce");
  wait(m);
  if (m == Mem::Staged) std::memcpy(b, d, bytes);
}

void MpiComm::do_allreduce_or(void* buf, size_t bytes) {
  progress_sends();
  coll_tag();
  if (size_ == 1 || bytes == 0) return;
  if (bytes > kStageLimit) {  // as do_allreduce: handshake, then the blocking call under the watchdog
    handshake();
    blocking_allreduce_pieces(buf, bytes, 1, MPI_BYTE, MPI_BOR, max_message_bytes(), PieceDone{});
    return;
  }
  nonblocking_or(buf, bytes);
}

// A sum and its support bitmap: when the sum takes the blocking path (large), the OR goes first,
// non-blocking, waited for with the time-out and abort checks of every wait. Its completion shows
// that every rank has entered the operation, so it stands in for the presence check before the
// blocking MPI_Allreduce of the values. Otherwise the two calls one after the other. The choice
// depends only on the sizes: the same on every rank.
void MpiComm::do_allreduce_sum_or(void* buf, size_t count, DType dtype, void* bits, size_t bytes, PieceDone done) {
  if (size_ == 1 || count == 0 || bytes == 0 || count * dtype_size(dtype) <= kStageLimit || bytes > max_message_bytes()) {
    do_allreduce(buf, count, dtype, ReduceOp::Sum);
    do_allreduce_or(bits, bytes);
    return;
  }
  progress_sends();
  coll_tag();
  nonblocking_or(bits, bytes);
  refuse_if_a_peer_gave_up();
  blocking_allreduce(buf, count, dtype, ReduceOp::Sum, done);
}

void MpiComm::do_broadcast(void* buf, size_t bytes, int root) {
  progress_sends();
  coll_tag();
  const Mem m = owner() ? Mem::Owned : (bytes <= kStageLimit ? Mem::Staged : Mem::Caller);
  if (m == Mem::Caller) handshake();
  uint8_t* b = static_cast<uint8_t*>(buf);
  if (m == Mem::Staged) {
    b = stage_bytes(stage_->r, bytes);
    if (rank_ == root && bytes) std::memcpy(b, buf, bytes);
  }
  const size_t lim = max_message_bytes();
  size_t off = 0;
  do {
    const size_t c = std::min(lim, bytes - off);
    q_.clear();
    post_native(MPI_Ibcast(b + off, static_cast<int>(c), MPI_BYTE, root, comm_, native_slot()), "MPI_Ibcast");
    wait(m, root);
    off += c;
  } while (off < bytes);
  if (m == Mem::Staged && rank_ != root && bytes) std::memcpy(buf, b, bytes);
}

void MpiComm::do_barrier() {
  progress_sends();
  p2p_barrier();
}

std::unique_ptr<MpiComm::PendingSend> MpiComm::take_send_buffer(size_t bytes) {
  std::unique_ptr<PendingSend> ps;
  if (!free_sends_.empty()) {
    ps = std::move(free_sends_.back());
    free_sends_.pop_back();
  } else {
    ps = std::make_unique<PendingSend>();
  }
  ps->data.resize(bytes);
  return ps;
}

// Complete the buffered sends that MPI has finished with (MPI_Testall also drives progress).
void MpiComm::progress_sends() {
  for (size_t i = 0; i < pending_.size();) {
    int flag = 0;
    auto& ps = pending_[i];
    check(MPI_Testall(static_cast<int>(ps->rq.size()), ps->rq.data(), &flag, MPI_STATUSES_IGNORE), -1,
          "MPI_Testall (buffered sends)");
    if (flag) {
      free_sends_.push_back(std::move(ps));
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void MpiComm::check(int rc, int peer, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail(Result::SystemError, peer, std::string(what) + " failed: " + std::string(msg, static_cast<size_t>(len)));
}

// A message of any size: split into requests of at most max_message_bytes() (both sides split the
// same way; a size disagreement shows up as a size mismatch of some piece).
void MpiComm::isend(const void* buf, size_t bytes, int peer, int tag) {
  const size_t lim = max_message_bytes();
  size_t off = 0;
  do {
    const size_t b = std::min(lim, bytes - off);
    q_.rq.emplace_back();
    q_.peer.push_back(peer);
    q_.expect.push_back(kSend);
    check(MPI_Isend(static_cast<const uint8_t*>(buf) + off, static_cast<int>(b), MPI_BYTE, peer, tag, comm_, &q_.rq.back()),
          peer, "MPI_Isend");
    off += b;
  } while (off < bytes);
}

void MpiComm::irecv(void* buf, size_t bytes, int peer, int tag) {
  const size_t lim = max_message_bytes();
  size_t off = 0;
  do {
    const size_t b = std::min(lim, bytes - off);
    q_.rq.emplace_back();
    q_.peer.push_back(peer);
    q_.expect.push_back(b);
    check(MPI_Irecv(static_cast<uint8_t*>(buf) + off, static_cast<int>(b), MPI_BYTE, peer, tag, comm_, &q_.rq.back()),
          peer, "MPI_Irecv");
    off += b;
  } while (off < bytes);
}

void MpiComm::p2p_barrier() {
  const int tag = coll_tag();
  q_.clear();
  for (int k = 1; k < size_; ++k) irecv(nullptr, 0, (rank_ - k + size_) % size_, tag);
  for (int k = 1; k < size_; ++k) isend(nullptr, 0, (rank_ + k) % size_, tag);
  wait(Mem::Owned);  // zero-byte messages: nothing of the caller's is involved
}

// Drive the requests in q_ to completion. Never sleeps: spins on MPI_Testall (which runs MPI's
// progress engine), yields the core when oversubscribed, checks the abort message every sweep and
// the clock every 64 sweeps. `root` (>= 0) names the rank a rooted collective waits for.
void MpiComm::wait(Mem m, int root) {
  const int k = static_cast<int>(q_.rq.size());
  if (k == 0) return;
  st_.resize(static_cast<size_t>(k));
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (uint32_t spin = 0;; ++spin) {
    int flag = 0;
    const int rc = MPI_Testall(k, q_.rq.data(), &flag, st_.data());
    if (rc != MPI_SUCCESS) status_error(rc);
    if (flag) {
      for (int i = 0; i < k; ++i) {
        const size_t want = q_.expect[static_cast<size_t>(i)];
        if (want == kSend || want == kNoCheck) continue;
        int got = 0;
        MPI_Get_count(&st_[static_cast<size_t>(i)], MPI_BYTE, &got);
        if (static_cast<size_t>(got) != want)
          fail(Result::InvalidUsage, q_.peer[static_cast<size_t>(i)],
               "peer sent " + std::to_string(got) + " bytes, this rank expected " + std::to_string(want));
      }
      q_.clear();
      return;
    }
    poll_abort();
    if (serial_) SerialGate::get().run_posted();  // another thread's abort message (SerialGate)
    if ((spin & 63) == 63 && std::chrono::steady_clock::now() > deadline) on_timeout(m, root);
    if (oversubscribed_) sched_yield();
  }
}

// MPI_ERR_IN_STATUS: find the failing request (truncation = the peer sent more than expected).
void MpiComm::status_error(int rc) {
  int cls = 0;
  MPI_Error_class(rc, &cls);
  if (cls == MPI_ERR_IN_STATUS) {
    for (size_t i = 0; i < q_.rq.size(); ++i) {
      const int e = st_[i].MPI_ERROR;
      if (e == MPI_SUCCESS || e == MPI_ERR_PENDING) continue;
      int c2 = 0;
      MPI_Error_class(e, &c2);
      if (c2 == MPI_ERR_TRUNCATE)
        fail(Result::InvalidUsage, q_.peer[i], "peer sent more than the " + std::to_string(q_.expect[i]) + " bytes this rank expected");
      check(e, q_.peer[i], "MPI request");
    }
  }
  if (cls == MPI_ERR_TRUNCATE) fail(Result::InvalidUsage, -1, "a peer sent more bytes than this rank expected");
  check(rc, -1, "MPI_Testall");
}

MPI_Op MpiComm::mpi_op(DType t, ReduceOp op) {
  if (t == DType::F32 || t == DType::F64)
    return op == ReduceOp::Sum ? MPI_SUM : (op == ReduceOp::Max ? MPI_MAX : MPI_MIN);
  int slot = (t == DType::F16 ? 0 : 3) + static_cast<int>(op);
  if (ops16_[slot] == MPI_OP_NULL) {
    MPI_User_function* fn = nullptr;
    if (t == DType::F16)
      fn = op == ReduceOp::Sum ? &reduce16<half, ReduceOp::Sum> : (op == ReduceOp::Max ? &reduce16<half, ReduceOp::Max> : &reduce16<half, ReduceOp::Min>);
    else
      fn = op == ReduceOp::Sum ? &reduce16<bfloat16, ReduceOp::Sum> : (op == ReduceOp::Max ? &reduce16<bfloat16, ReduceOp::Max> : &reduce16<bfloat16, ReduceOp::Min>);
    MPI_Op_create(fn, 1, &ops16_[slot]);
  }
  return ops16_[slot];
}

}  // namespace zen::mpi::impl
