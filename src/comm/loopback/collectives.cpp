// Loopback backend: the collectives. Each rank publishes a descriptor of its buffers, receivers copy
// straight out of the poster's memory, and a rank leaves only when every peer is done with its
// buffers; the dense allreduce is a shared-memory reduce-scatter (rank r sums chunk r over all ranks
// in rank order) + allgather. The class: loopback_comm.hpp.
#include "../ring_chunk.hpp"
#include "loopback_comm.hpp"

namespace zen::loopback::impl {

template <typename T>
void LoopbackComm::reduce_chunk(const std::vector<const uint8_t*>& bufs, size_t lo, size_t len, ReduceOp op, uint8_t* out) {
  using A = typename accum_of<T>::type;
  constexpr size_t kBlock = 1024;
  A tmp[kBlock];
  const size_t n = bufs.size();
  for (size_t b = 0; b < len; b += kBlock) {
    const size_t m = std::min(kBlock, len - b);
    const T* s0 = reinterpret_cast<const T*>(bufs[0]) + lo + b;
    for (size_t i = 0; i < m; ++i) tmp[i] = static_cast<A>(s0[i]);
    for (size_t p = 1; p < n; ++p) {
      const T* s = reinterpret_cast<const T*>(bufs[p]) + lo + b;
      if (op == ReduceOp::Sum) {
        for (size_t i = 0; i < m; ++i) tmp[i] += static_cast<A>(s[i]);
      } else if (op == ReduceOp::Max) {
        for (size_t i = 0; i < m; ++i) tmp[i] = static_cast<A>(s[i]) > tmp[i] ? static_cast<A>(s[i]) : tmp[i];
      } else {
        for (size_t i = 0; i < m; ++i) tmp[i] = static_cast<A>(s[i]) < tmp[i] ? static_cast<A>(s[i]) : tmp[i];
      }
    }
    T* d = reinterpret_cast<T*>(out) + lo + b;
    for (size_t i = 0; i < m; ++i) d[i] = static_cast<T>(tmp[i]);
  }
}

// ---------------- collectives ----------------
void LoopbackComm::do_alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf,
                                const size_t* rcounts, const size_t* rdispls) {
  const int n = size();
  if (scounts[rank_] != rcounts[rank_])
    fail(Result::InvalidArgument, rank_, "send count to self " + std::to_string(scounts[rank_]) +
                                             " != receive count from self " + std::to_string(rcounts[rank_]));
  Collective c(*this, CommOp::Alltoallv);
  c.mine.sbuf = static_cast<const uint8_t*>(sbuf);
  c.mine.scounts = scounts;
  c.mine.sdispls = sdispls;
  c.publish();
  auto* r = static_cast<uint8_t*>(rbuf);
  if (rcounts[rank_]) std::memmove(r + rdispls[rank_], c.mine.sbuf + sdispls[rank_], rcounts[rank_]);
  for (int k = 1; k < n; ++k) {
    const int p = (rank_ - k + n) % n;
    c.read(p, [&](const Post& q) {
      const size_t got = q.scounts[rank_];
      if (got != rcounts[p]) return mismatch(p, got, rcounts[p]);
      if (got) std::memcpy(r + rdispls[p], q.sbuf + q.sdispls[rank_], got);
      return true;
    });
  }
  c.finish();
}

void LoopbackComm::do_allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts, const size_t* rdispls) {
  const int n = size();
  Collective c(*this, current_op());
  c.mine.sbuf = static_cast<const uint8_t*>(sbuf);
  c.mine.sbytes = sbytes;
  c.publish();
  auto* r = static_cast<uint8_t*>(rbuf);
  if (sbytes && r + rdispls[rank_] != sbuf) std::memmove(r + rdispls[rank_], sbuf, sbytes);
  for (int k = 1; k < n; ++k) {
    const int p = (rank_ - k + n) % n;
    c.read(p, [&](const Post& q) {
      if (q.sbytes != rcounts[p]) return mismatch(p, q.sbytes, rcounts[p]);
      if (q.sbytes) std::memcpy(r + rdispls[p], q.sbuf, q.sbytes);
      return true;
    });
  }
  c.finish();
}

void LoopbackComm::do_allgather(const void* sbuf, size_t bytes, void* rbuf) {
  const int n = size();
  Collective c(*this, CommOp::Allgather);
  c.mine.sbuf = static_cast<const uint8_t*>(sbuf);
  c.mine.sbytes = bytes;
  c.publish();
  auto* r = static_cast<uint8_t*>(rbuf);
  if (bytes) std::memmove(r + bytes * static_cast<size_t>(rank_), sbuf, bytes);
  for (int k = 1; k < n; ++k) {
    const int p = (rank_ - k + n) % n;
    c.read(p, [&](const Post& q) {
      if (q.sbytes != bytes) return mismatch(p, q.sbytes, bytes);
      if (bytes) std::memcpy(r + bytes * static_cast<size_t>(p), q.sbuf, bytes);
      return true;
    });
  }
  c.finish();
}

void LoopbackComm::do_alltoall(const void* sbuf, size_t bytes, void* rbuf) {
  const int n = size();
  Collective c(*this, CommOp::Alltoall);
  c.mine.sbuf = static_cast<const uint8_t*>(sbuf);
  c.mine.sbytes = bytes;
  c.publish();
  auto* r = static_cast<uint8_t*>(rbuf);
  if (bytes) std::memmove(r + bytes * static_cast<size_t>(rank_), c.mine.sbuf + bytes * static_cast<size_t>(rank_), bytes);
  for (int k = 1; k < n; ++k) {
    const int p = (rank_ - k + n) % n;
    c.read(p, [&](const Post& q) {
      if (q.sbytes != bytes) return mismatch(p, q.sbytes, bytes);
      if (bytes) std::memcpy(r + bytes * static_cast<size_t>(p), q.sbuf + bytes * static_cast<size_t>(rank_), bytes);
      return true;
    });
  }
  c.finish();
}

void LoopbackComm::allreduce_impl(void* buf, size_t count, DType dtype, ReduceOp op, bool bit_or) {
  const int n = size();
  Collective c(*this, CommOp::Allreduce);
  c.mine.buf = static_cast<uint8_t*>(buf);
  c.mine.count = count;
  c.mine.dtype = dtype;
  c.mine.op = op;
  c.mine.bit_or = bit_or;
  c.publish();
  if (n == 1) {
    c.finish();
    return;
  }
  const size_t es = bit_or ? 1 : dtype_size(dtype);
  // Everybody posted (and agrees on the size) before anybody reads.
  for (int p = 0; p < n; ++p)
    if (p != rank_) c.wait_post(p, [&](const Post& q) {
      const size_t qb = q.count * (q.bit_or ? 1 : dtype_size(q.dtype));
      if (qb != count * es)
        fail(Result::InvalidUsage, p, "peer contributed " + std::to_string(qb) + " bytes, this rank " + std::to_string(count * es));
      if (q.bit_or != bit_or || q.dtype != dtype || q.op != op)
        fail(Result::InvalidUsage, p, "peer's allreduce dtype/op differs from this rank's");
    });
  // Stage 0: reduce chunk rank_.
  size_t lo = 0;
  for (int i = 0; i < rank_; ++i) lo += ring_chunk_bytes(count, es, n, i) / es;
  const size_t len = ring_chunk_bytes(count, es, n, rank_) / es;
  {
    Readers all(*this, c);
    all.acquire();
    if (bit_or) {
      auto* out = static_cast<uint8_t*>(buf) + lo;
      for (size_t i = 0; i < len; ++i) {
        uint8_t x = 0;
        for (const uint8_t* b : all.bufs) x = static_cast<uint8_t>(x | b[lo + i]);
        out[i] = x;
      }
    } else {
      dispatch_dtype(dtype, [&](auto tag) { reduce_chunk<decltype(tag)>(all.bufs, lo, len, op, static_cast<uint8_t*>(buf)); });
    }
  }
  c.arrive(0);
  // Stage 1: copy every other chunk from its owner.
  {
    Readers all(*this, c);
    all.acquire();
    size_t off = 0;
    for (int p = 0; p < n; ++p) {
      const size_t b = ring_chunk_bytes(count, es, n, p);
      if (p != rank_ && b) std::memcpy(static_cast<uint8_t*>(buf) + off, all.bufs[static_cast<size_t>(p)] + off, b);
      off += b;
    }
  }
  c.arrive(1);
}

void LoopbackComm::do_broadcast(void* buf, size_t bytes, int root) {
  Collective c(*this, CommOp::Broadcast);
  if (rank_ == root) {
    c.mine.sbuf = static_cast<const uint8_t*>(buf);
    c.mine.sbytes = bytes;
    c.mine.root = root;
    c.publish();
    c.finish();  // every other rank takes the bytes
    return;
  }
  c.read(root, [&](const Post& q) {
    if (q.sbytes != bytes) return mismatch(root, q.sbytes, bytes);
    if (bytes) std::memcpy(buf, q.sbuf, bytes);
    return true;
  });
  c.done_reading();
}

void LoopbackComm::do_barrier() {
  const int n = size();
  Collective c(*this, CommOp::Barrier);
  c.publish();
  for (int k = 1; k < n; ++k) c.read((rank_ - k + n) % n, [](const Post&) { return true; });
  c.finish();
}

}  // namespace zen::loopback::impl
