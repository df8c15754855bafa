// Loopback backend: waiting for peers and failing well. Collective-sequence checks (mismatched
// operations), size mismatches, aborts from peers, and timeouts that follow the wait chain to the
// rank that did not take part. The class: loopback_comm.hpp.
#include "loopback_comm.hpp"

namespace zen::loopback::impl {

bool LoopbackComm::mismatch(int peer, size_t got, size_t want) {
  if (!first_error_.empty()) return false;
  first_peer_ = peer;
  first_error_ = "peer sent " + std::to_string(got) + " bytes, this rank expected " + std::to_string(want);
  return false;
}

void LoopbackComm::check_kind(const Post& q, int p, uint64_t cs, CommOp kind) {
  if (q.cs > cs)
    fail(Result::InvalidUsage, p, "collective mismatch: peer is already at collective #" + std::to_string(q.cs) +
                                      " while this rank is at #" + std::to_string(cs) + " (" + comm_op_name(kind) +
                                      "): the ranks called different sequences of collectives");
  if (q.kind != static_cast<uint8_t>(kind))
    fail(Result::InvalidUsage, p, std::string("collective mismatch: peer called ") +
                                      comm_op_name(static_cast<CommOp>(q.kind)) + " where this rank called " +
                                      comm_op_name(kind));
}

void LoopbackComm::throw_first_error() {
  if (!first_error_.empty()) {
    const std::string e = first_error_;
    first_error_.clear();
    fail(Result::InvalidUsage, first_peer_, e);
  }
}

// Wait until `want` peers arrived at stage st of our own post; names the first missing peer.
void LoopbackComm::wait_on_own(Slot& s, int st, int want) {
  const auto deadline = Clock::now() + timeout_;
  std::unique_lock<std::mutex> lk(s.m);
  auto missing = [&] {
    for (int p = 0; p < size(); ++p)
      if (p != rank_ && !s.post.from[st][static_cast<size_t>(p)]) return p;
    return -1;
  };
  Waiting waiting(*w_, rank_, -1);
  for (;;) {
    if (s.post.arrived[st] >= want) return;
    const int m = missing();
    w_->set_waiting(rank_, m);
    check_abort(lk, m);
    if (s.cv.wait_until(lk, deadline) == std::cv_status::timeout && s.post.arrived[st] < want) {
      const int who = missing();
      lk.unlock();
      timeout_error(who);
    }
  }
}

void LoopbackComm::check_abort(std::unique_lock<std::mutex>& lk, int peer) {
  if (!w_->aborted()) return;
  auto info = w_->abort_info();
  // A peer that gave up on a timeout is no news (it was stuck like us): keep waiting until our own
  // deadline, so that every waiting rank reports the missing rank as a timeout (1x the timeout
  // after it entered). Any other abort fails fast.
  if (info.missing >= 0) return;
  lk.unlock();
  fail(Result::RemoteError, info.rank, "rank " + std::to_string(info.rank) + " aborted while this rank waited for peer " +
                                           std::to_string(peer) + " (" + info.reason + ")");
}

void LoopbackComm::timeout_error(int src) {
  // src may itself be blocked on another rank (rings, trees): name the end of the wait chain.
  std::string chain;
  const int root = w_->root_of(src, chain);
  timed_out_on_ = root >= 0 ? root : src;
  w_->set_blamed(rank_, timed_out_on_);
  if (root == src)
    fail(Result::Timeout, src, "timed out after " + std::to_string(timeout_.count()) + " ms waiting for peer " +
                                   std::to_string(src) + " (it did not take part)");
  if (root < 0)
    fail(Result::Timeout, src, "timed out after " + std::to_string(timeout_.count()) + " ms waiting for peer " +
                                   std::to_string(src) + "; the ranks wait for each other in a cycle (" + chain +
                                   "): mismatched operations");
  fail(Result::Timeout, root, "timed out after " + std::to_string(timeout_.count()) + " ms waiting for peer " +
                                  std::to_string(src) + ", which waits for rank " + std::to_string(root) +
                                  " (wait chain " + chain + "); rank " + std::to_string(root) + " did not take part");
}

}  // namespace zen::loopback::impl
