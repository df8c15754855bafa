// Loopback backend: point to point. A send is buffered in pooled per-channel buffers (steady-state
// traffic allocates nothing); sendrecv is zero-copy (the receiver copies straight from the sender's
// buffer, which is withdrawn on error before the call returns). The class: loopback_comm.hpp.
#include "loopback_comm.hpp"

namespace zen::loopback::impl {

void LoopbackComm::do_recv(void* buf, size_t bytes, int peer, int tag) {
  const auto deadline = Clock::now() + timeout_;
  take_p2p(buf, bytes, peer, tag, deadline);
}

// The send part is zero-copy: the receiver copies straight from sbuf, and the call returns once it
// has (everyone posts before receiving, so rings cannot deadlock). On an error the unread message
// is withdrawn first, so no peer reads sbuf after we return.
void LoopbackComm::do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag) {
  bool done = false;
  Channel& out = w_->channel(rank_, dst);
  {
    std::lock_guard<std::mutex> lk(out.m);
    Msg m;
    m.tag = tag;
    m.bytes = sbytes;
    m.ext = static_cast<const uint8_t*>(sbuf);
    m.done = &done;
    out.q.push_back(std::move(m));
  }
  out.cv.notify_all();
  struct Withdraw {
    Channel& c;
    bool& done;
    ~Withdraw() {
      std::lock_guard<std::mutex> lk(c.m);
      if (done) return;
      for (size_t i = 0; i < c.q.size(); ++i)
        if (c.q[i].done == &done) {
          c.q.erase(c.q.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
    }
  } withdraw{out, done};
  const auto deadline = Clock::now() + timeout_;
  take_p2p(rbuf, rbytes, src, tag, deadline);
  // Wait until dst has copied our bytes.
  Waiting waiting(*w_, rank_, dst);
  std::unique_lock<std::mutex> lk(out.m);
  while (!done) {
    check_abort(lk, dst);
    if (out.cv.wait_until(lk, deadline) == std::cv_status::timeout && !done) {
      lk.unlock();
      timeout_error(dst);
    }
  }
}

void LoopbackComm::post_p2p(const void* buf, size_t bytes, int peer, int tag) {
  Channel& c = w_->channel(rank_, peer);
  {
    std::lock_guard<std::mutex> lk(c.m);
    Msg m;
    m.tag = tag;
    m.bytes = bytes;
    // A pooled buffer that already has room (so steady-state traffic allocates nothing), else the
    // largest one, grown.
    if (!c.pool.empty()) {
      size_t pick = 0;
      for (size_t i = 0; i < c.pool.size(); ++i) {
        if (c.pool[i].capacity() >= bytes) {
          pick = i;
          break;
        }
        if (c.pool[i].capacity() > c.pool[pick].capacity()) pick = i;
      }
      m.data = std::move(c.pool[pick]);
      c.pool.erase(c.pool.begin() + static_cast<std::ptrdiff_t>(pick));
    }
    if (m.data.size() < bytes) m.data.resize(bytes);
    if (bytes) std::memcpy(m.data.data(), buf, bytes);
    c.q.push_back(std::move(m));
  }
  c.cv.notify_all();
}

void LoopbackComm::take_p2p(void* buf, size_t bytes, int src, int tag, Clock::time_point deadline) {
  Channel& c = w_->channel(src, rank_);
  Waiting waiting(*w_, rank_, src);
  std::unique_lock<std::mutex> lk(c.m);
  for (;;) {
    for (size_t i = 0; i < c.q.size(); ++i) {
      if (c.q[i].tag != tag) continue;
      Msg m = std::move(c.q[i]);
      c.q.erase(c.q.begin() + static_cast<std::ptrdiff_t>(i));
      const bool ok = m.bytes == bytes;
      if (ok && bytes) std::memcpy(buf, m.ext ? m.ext : m.data.data(), bytes);
      if (m.done) {
        *m.done = true;  // the sender may return (and free its buffer) once we release the lock
        c.cv.notify_all();
      } else {
        c.pool.push_back(std::move(m.data));
      }
      if (!ok) {
        lk.unlock();
        fail(Result::InvalidUsage, src, "peer sent " + std::to_string(m.bytes) + " bytes, this rank expected " + std::to_string(bytes));
      }
      return;
    }
    check_abort(lk, src);
    if (c.cv.wait_until(lk, deadline) == std::cv_status::timeout) {
      bool found = false;
      for (auto& m : c.q) found = found || m.tag == tag;
      if (found) continue;
      lk.unlock();
      timeout_error(src);
    }
  }
}

}  // namespace zen::loopback::impl
