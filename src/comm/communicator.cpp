#include "zen/comm/communicator.hpp"

#include <algorithm>
#include <numeric>

#include "ring.hpp"
#include "ring_chunk.hpp"
#include "zen/detail/call_queue.hpp"

namespace zen {

const char* comm_op_name(CommOp op) noexcept {
  switch (op) {
    case CommOp::Send: return "send";
    case CommOp::Recv: return "recv";
    case CommOp::SendRecv: return "sendrecv";
    case CommOp::Alltoallv: return "alltoallv";
    case CommOp::Allgatherv: return "allgatherv";
    case CommOp::Allreduce: return "allreduce";
    case CommOp::Broadcast: return "broadcast";
    case CommOp::Barrier: return "barrier";
    case CommOp::Allgather: return "allgather";
    case CommOp::Alltoall: return "alltoall";
    case CommOp::Count: break;
  }
  return "?";
}

uint64_t TrafficStats::total_sent() const { return std::accumulate(sent.begin(), sent.end(), uint64_t{0}); }
uint64_t TrafficStats::total_recv() const { return std::accumulate(recv.begin(), recv.end(), uint64_t{0}); }
TrafficStats TrafficStats::operator-(const TrafficStats& o) const {
  TrafficStats r;
  for (size_t i = 0; i < kOps; ++i) {
    r.sent[i] = sent[i] - o.sent[i];
    r.recv[i] = recv[i] - o.recv[i];
    r.calls[i] = calls[i] - o.calls[i];
  }
  return r;
}

size_t ring_chunk_bytes(size_t count, size_t elem, int n, int i) {
  size_t un = static_cast<size_t>(n);
  size_t ui = static_cast<size_t>(i);
  return (count / un + (ui < count % un ? 1 : 0)) * elem;
}

Communicator::Communicator() = default;
Communicator::~Communicator() { finish_calls(); }

detail::CallQueue& Communicator::call_queue() {
  if (auto* q = queue_ptr_.load(std::memory_order_acquire)) return *q;
  std::lock_guard<std::mutex> lk(queue_mu_);  // several threads may start the first call at once
  if (!queue_) {
    queue_ = std::make_unique<detail::CallQueue>();
    queue_ptr_.store(queue_.get(), std::memory_order_release);
  }
  return *queue_;
}
bool Communicator::queue_busy() const {
  const auto* q = queue_ptr_.load(std::memory_order_acquire);
  return q && q->busy_for_caller();
}
bool Communicator::on_call_thread() const {
  const auto* q = queue_ptr_.load(std::memory_order_acquire);
  return q && q->on_call_thread();
}
void Communicator::finish_calls() {
  queue_ptr_.store(nullptr, std::memory_order_release);
  queue_.reset();
}

// Agreed order: before each call the call-queue thread broadcasts rank 0's oldest pending call (a
// 16-byte broadcast on this communicator), and every rank runs that one next.
void Communicator::set_call_order(CallOrder order) {
  if (order == order_) return;
  if (queue_busy())
    ZEN_THROW(Result::InvalidUsage, "rank " + std::to_string(rank()) + " " + backend_name() +
                                        " set_call_order: calls are pending; set it on every rank before they start");
  order_ = order;
  if (order == CallOrder::Submitted) {
    call_queue().set_agreement(nullptr);
    return;
  }
  auto a = std::make_shared<detail::Agreement>();
  a->agree = [this](detail::CallKey mine) {
    uint64_t k[2] = {mine.plan, mine.call};
    broadcast(k, sizeof k, 0);
    return detail::CallKey{k[0], k[1]};
  };
  a->give_up = [this](const std::string& why) { abort(why); };
  a->timeout = [this] { return timeout_; };
  a->who = "rank " + std::to_string(rank()) + "/" + std::to_string(size()) + " " + backend_name() + " agreed order";
  call_queue().set_agreement(std::move(a));
}

void Communicator::fail(Result code, int peer, const std::string& detail) const {
  std::string msg = "rank " + std::to_string(rank()) + "/" + std::to_string(size()) + " " + backend_name() + " " +
                    comm_op_name(op_) + " #" + std::to_string(seq_);
  if (peer >= 0) msg += " peer " + std::to_string(peer);
  msg += ": " + detail;
  ZEN_THROW(code, msg);
}

void Communicator::check_peer(int peer) const {
  if (peer < 0 || peer >= size()) fail(Result::InvalidArgument, -1, "peer " + std::to_string(peer) + " is outside [0, " + std::to_string(size()) + ")");
}

template <typename F>
void Communicator::run_op(CommOp op, F&& body) {
  op_ = op;
  ++seq_;
  if (failed_) fail(Result::InvalidUsage, -1, "communicator already failed and refuses further use (first error: " + failure_ + ")");
  struct Around {  // begin_op / end_op around the body (begin_op's error fails the operation)
    Communicator& c;
    bool in = false;
    ~Around() {
      if (in) c.end_op();
    }
  } around{*this};
  try {
    begin_op();
    around.in = true;
    body();
  } catch (const Error& e) {
    failed_ = true;
    failure_ = e.what();
    if (owner_) quarantine_.push_back(owner_);
    throw;
  } catch (const std::exception& e) {
    failed_ = true;
    failure_ = e.what();
    if (owner_) quarantine_.push_back(owner_);
    fail(Result::SystemError, -1, e.what());
  }
  stats_.calls[static_cast<size_t>(op)]++;
}

void Communicator::send(const void* buf, size_t bytes, int peer, int tag) {
  run_op(CommOp::Send, [&] {
    check_peer(peer);
    if (tag < 0 || tag > 16383) fail(Result::InvalidArgument, peer, "tag " + std::to_string(tag) + " outside [0, 16383]");
    do_send(buf, bytes, peer, tag);
    stats_.sent[static_cast<size_t>(CommOp::Send)] += bytes;
  });
}

void Communicator::recv(void* buf, size_t bytes, int peer, int tag) {
  run_op(CommOp::Recv, [&] {
    check_peer(peer);
    if (tag < 0 || tag > 16383) fail(Result::InvalidArgument, peer, "tag " + std::to_string(tag) + " outside [0, 16383]");
    do_recv(buf, bytes, peer, tag);
    stats_.recv[static_cast<size_t>(CommOp::Recv)] += bytes;
  });
}

void Communicator::sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag) {
  run_op(CommOp::SendRecv, [&] {
    check_peer(dst);
    check_peer(src);
    if (tag < 0 || tag > 16383) fail(Result::InvalidArgument, dst, "tag " + std::to_string(tag) + " outside [0, 16383]");
    do_sendrecv(sbuf, sbytes, dst, rbuf, rbytes, src, tag);
    stats_.sent[static_cast<size_t>(CommOp::SendRecv)] += sbytes;
    stats_.recv[static_cast<size_t>(CommOp::SendRecv)] += rbytes;
  });
}

void Communicator::alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf,
                             const size_t* rcounts, const size_t* rdispls) {
  run_op(CommOp::Alltoallv, [&] {
    do_alltoallv(sbuf, scounts, sdispls, rbuf, rcounts, rdispls);
    const int me = rank();
    for (int p = 0; p < size(); ++p) {
      if (p == me) continue;
      stats_.sent[static_cast<size_t>(CommOp::Alltoallv)] += scounts[p];
      stats_.recv[static_cast<size_t>(CommOp::Alltoallv)] += rcounts[p];
    }
  });
}

void Communicator::allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts,
                              const size_t* rdispls) {
  run_op(CommOp::Allgatherv, [&] {
    const int me = rank();
    if (rcounts[me] != sbytes)
      fail(Result::InvalidArgument, -1, "allgatherv send size " + std::to_string(sbytes) + " != rcounts[own rank] " + std::to_string(rcounts[me]));
    do_allgatherv(sbuf, sbytes, rbuf, rcounts, rdispls);
    stats_.sent[static_cast<size_t>(CommOp::Allgatherv)] += sbytes * static_cast<uint64_t>(size() - 1);
    for (int p = 0; p < size(); ++p)
      if (p != me) stats_.recv[static_cast<size_t>(CommOp::Allgatherv)] += rcounts[p];
  });
}

void Communicator::do_allgather(const void* sbuf, size_t bytes, void* rbuf) {
  const size_t n = static_cast<size_t>(size());
  eq_counts_.assign(n, bytes);
  eq_displs_.resize(n);
  for (size_t p = 0; p < n; ++p) eq_displs_[p] = bytes * p;
  do_allgatherv(sbuf, bytes, rbuf, eq_counts_.data(), eq_displs_.data());
}

void Communicator::do_alltoall(const void* sbuf, size_t bytes, void* rbuf) {
  const size_t n = static_cast<size_t>(size());
  eq_counts_.assign(n, bytes);
  eq_displs_.resize(n);
  for (size_t p = 0; p < n; ++p) eq_displs_[p] = bytes * p;
  do_alltoallv(sbuf, eq_counts_.data(), eq_displs_.data(), rbuf, eq_counts_.data(), eq_displs_.data());
}

void Communicator::allgather(const void* sbuf, size_t bytes, void* rbuf) {
  const int n = size();
  run_op(CommOp::Allgather, [&] {
    do_allgather(sbuf, bytes, rbuf);
    stats_.sent[static_cast<size_t>(CommOp::Allgather)] += bytes * static_cast<uint64_t>(n - 1);
    stats_.recv[static_cast<size_t>(CommOp::Allgather)] += bytes * static_cast<uint64_t>(n - 1);
  });
}

void Communicator::alltoall(const void* sbuf, size_t bytes, void* rbuf) {
  const int n = size();
  run_op(CommOp::Alltoall, [&] {
    do_alltoall(sbuf, bytes, rbuf);
    stats_.sent[static_cast<size_t>(CommOp::Alltoall)] += bytes * static_cast<uint64_t>(n - 1);
    stats_.recv[static_cast<size_t>(CommOp::Alltoall)] += bytes * static_cast<uint64_t>(n - 1);
  });
}

void Communicator::count_allreduce(size_t count, size_t elem) {
  // Native algorithms hide their schedule: count what a bandwidth-optimal ring moves.
  if (size() > 1) {
    const size_t total = count * elem, own = ring_chunk_bytes(count, elem, size(), rank());
    stats_.sent[static_cast<size_t>(CommOp::Allreduce)] += 2 * (total - own);
    stats_.recv[static_cast<size_t>(CommOp::Allreduce)] += 2 * (total - own);
  }
}

void Communicator::allreduce(void* buf, size_t count, DType dtype, ReduceOp op) {
  run_op(CommOp::Allreduce, [&] {
    do_allreduce(buf, count, dtype, op);
    count_allreduce(count, dtype_size(dtype));
  });
}

void Communicator::do_allreduce_sum_or(void* buf, size_t count, DType dtype, void* bits, size_t bytes, PieceDone) {
  if (memory_space() != MemSpace::Host)  // the OR below is a host loop; refuse before summing anything
    fail(Result::Unsupported, -1, "allreduce_sum_or on device memory: this backend has no device bitwise OR");
  do_allreduce(buf, count, dtype, ReduceOp::Sum);
  do_allreduce_or(bits, bytes);
}

void Communicator::allreduce_sum_or(void* buf, size_t count, DType dtype, void* bits, size_t bytes, PieceDone done) {
  run_op(CommOp::Allreduce, [&] {
    do_allreduce_sum_or(buf, count, dtype, bits, bytes, done);
    count_allreduce(count, dtype_size(dtype));
    count_allreduce(bytes, 1);
  });
}

void Communicator::do_allreduce_or(void* buf, size_t bytes) {
  // The default runs a host loop over the bytes: not on device memory.
  if (memory_space() != MemSpace::Host)
    fail(Result::Unsupported, -1, "allreduce_or on device memory: this backend has no device bitwise OR");
  const int n = size(), r = rank();
  if (n == 1 || bytes == 0) return;
  // The ring of ring.hpp on this backend's own sendrecv (inside this operation: not counted again).
  constexpr int kTag = 16383;
  struct Keep {  // the scratch goes back to or_tmp_ (reused by the next call), failed or not
    std::vector<uint8_t>& keep;
    ring::Scratch rs;
    ~Keep() { keep.swap(rs.tmp); }
  } k{or_tmp_, {}};
  k.rs.tmp.swap(or_tmp_);
  ring::bitwise_or(
      [&](const void* sb, size_t sn, int dst, void* rb, size_t rn, int src) { do_sendrecv(sb, sn, dst, rb, rn, src, kTag); },
      n, r, static_cast<uint8_t*>(buf), bytes, k.rs);
}

void Communicator::allreduce_or(void* buf, size_t bytes) {
  run_op(CommOp::Allreduce, [&] {
    do_allreduce_or(buf, bytes);
    count_allreduce(bytes, 1);
  });
}

void Communicator::broadcast(void* buf, size_t bytes, int root) {
  run_op(CommOp::Broadcast, [&] {
    check_peer(root);
    do_broadcast(buf, bytes, root);
    if (rank() == root)
      stats_.sent[static_cast<size_t>(CommOp::Broadcast)] += bytes * static_cast<uint64_t>(size() - 1);
    else
      stats_.recv[static_cast<size_t>(CommOp::Broadcast)] += bytes;
  });
}

void Communicator::barrier() {
  run_op(CommOp::Barrier, [&] { do_barrier(); });
}

void Communicator::abort(const std::string& reason) {
  if (!failed_) {
    failed_ = true;
    failure_ = "aborted by rank " + std::to_string(rank()) + ": " + reason;
  }
  do_abort(reason);
}

}  // namespace zen
