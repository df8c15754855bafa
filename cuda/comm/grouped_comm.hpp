#pragma once
// The NCCL communicator's logic, written over a group-based point-to-point transport so that the
// CPU can check it (header only; no CUDA or NCCL here):
//   nccl_comm.cpp:              GroupedComm<NcclTransport> (ncclGroupStart/End, ncclSend/Recv, ...);
//   tests/device/nccl_model.hpp: a host model of NCCL's group semantics (rendezvous sends matched in
//                                issue order, a stream running its groups in order, collectives
//                                matched across ranks, a send to self needing its receive in the
//                                same group), on which CI runs the communicator suite.
//
// alltoallv: pairwise schedule (step k: send to rank+k, receive from rank-k) in groups of at most
// kOpsPerGroup operations (NCCL's per-group limit); a send and its matching receive are always in
// the same step, hence the same group on both sides. allgatherv: one broadcast per root.
//
// Point to point. send is buffered (the communicator contract): the bytes are copied into a
// stream-ordered staging buffer; then
//  - a send to this rank is matched locally by this rank's receive from itself (same tag, in order):
//    a stream-ordered copy, as the device loopback does. The transport never sees it (NCCL refuses a
//    send to self whose receive is not in the same group);
//  - a send to a peer is held back and issued inside the group of this rank's next operation of any
//    kind (receive, sendrecv, or the first group of a collective), so that it progresses together
//    with whatever the peer may be waiting on first: a ring of sends before receives, a send whose
//    peer receives before entering a collective, or a send before a collective that its peer
//    receives after, do not deadlock, as a send issued alone (a blocking rendezvous for large
//    messages) could. Not served, by any schedule NCCL's stream order allows: sends that every rank
//    makes before a collective and receives after it (each rank's group of that collective waits
//    for a receive that sits behind the peer's). Waiting for the stream does not issue a held-back
//    send (the staging copy is all a buffered send owes the caller); destroying the communicator
//    issues what is left.
// Tags are range-checked only: a pair's messages match in issue order.
//
// Transport T (a Communicator) provides, for this rank's stream: t_group_start / t_group_end;
// t_send / t_recv / t_broadcast / t_allreduce / t_barrier inside a group; t_stage (allocate a staging buffer and
// copy into it), t_copy, t_release (all stream-ordered); t_free_now (immediate; destruction);
// t_wait (wait for the stream, with the timeout); t_aborted.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "zen/comm/communicator.hpp"

namespace zen::cuda::detail {

template <class T>
class GroupedComm final : public T {
 public:
  static constexpr size_t kOpsPerGroup = 2048;
  static constexpr size_t kMaxPending = kOpsPerGroup / 2;  // held-back sends, at most half of a group

  using T::T;
  ~GroupedComm() override {
    if (!pending_.empty() && !this->t_aborted()) {
      try {  // what the caller sent must still reach its peers
        group([] {});
        this->t_wait();
      } catch (...) {
        // destroying: the peers see the timeout or the abort
      }
    }
    for (auto& p : pending_) this->t_free_now(p.staging);
    for (auto& m : self_) this->t_free_now(m.staging);
  }

  size_t pending_sends() const { return pending_.size(); }

 protected:
  void do_send(const void* buf, size_t bytes, int peer, int tag) override {
    const int me = this->rank();
    if (peer != me && pending_.size() >= kMaxPending)
      this->fail(Result::InvalidUsage, peer,
                 std::to_string(kMaxPending) + " sends are pending: receive (or call a collective) first");
    Msg m{nullptr, bytes, peer, tag};
    if (bytes) m.staging = this->t_stage(buf, bytes, peer);
    if (peer == me) self_.push_back(m);
    else pending_.push_back(m);
  }
  void do_recv(void* buf, size_t bytes, int peer, int tag) override {
    if (peer == this->rank()) return take_self(buf, bytes, tag);  // a peer's tag is not checked: NCCL has none
    group([&] {
      if (bytes) this->t_recv(buf, bytes, peer);
    });
  }
  void do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag) override {
    const int me = this->rank();
    if (dst == me) do_send(sbuf, sbytes, dst, tag);
    if (src == me) take_self(rbuf, rbytes, tag);
    if (dst == me && src == me) return;
    group([&] {
      if (dst != me && sbytes) this->t_send(sbuf, sbytes, dst);
      if (src != me && rbytes) this->t_recv(rbuf, rbytes, src);
    });
  }
  void do_alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf, const size_t* rcounts,
                    const size_t* rdispls) override {
    const int n = this->size(), me = this->rank();
    const auto* s = static_cast<const uint8_t*>(sbuf);
    auto* r = static_cast<uint8_t*>(rbuf);
    if (scounts[me] != rcounts[me])
      this->fail(Result::InvalidArgument, me, "send count to self " + std::to_string(scounts[me]) +
                                                  " != receive count from self " + std::to_string(rcounts[me]));
    if (rcounts[me]) this->t_copy(r + rdispls[me], s + sdispls[me], rcounts[me], me);
    int k = 1;
    do {  // the first group also carries the held-back sends (at most half a group)
      const size_t room = (kOpsPerGroup - pending_.size()) / 2;
      const int k1 = static_cast<int>(std::min<size_t>(static_cast<size_t>(n), static_cast<size_t>(k) + room));
      group([&] {
        for (; k < k1; ++k) {
          const int dst = (me + k) % n, src = (me - k + n) % n;
          if (scounts[dst]) this->t_send(s + sdispls[dst], scounts[dst], dst);
          if (rcounts[src]) this->t_recv(r + rdispls[src], rcounts[src], src);
        }
      });
    } while (k < n);
  }
  void do_allgatherv(const void* sbuf, size_t, void* rbuf, const size_t* rcounts, const size_t* rdispls) override {
    const int n = this->size(), me = this->rank();
    auto* r = static_cast<uint8_t*>(rbuf);
    int p = 0;
    do {
      const size_t room = kOpsPerGroup - pending_.size();
      const int p1 = static_cast<int>(std::min<size_t>(static_cast<size_t>(n), static_cast<size_t>(p) + room));
      group([&] {
        for (; p < p1; ++p) {
          if (!rcounts[p]) continue;  // every rank knows every count: all skip the same roots
          this->t_broadcast(p == me ? sbuf : r + rdispls[p], r + rdispls[p], rcounts[p], p);
        }
      });
    } while (p < n);
  }
  void do_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) override {
    group([&] {
      if (count) this->t_allreduce(buf, count, dtype, op);
    });
  }
  void do_broadcast(void* buf, size_t bytes, int root) override {
    group([&] {
      if (bytes) this->t_broadcast(buf, buf, bytes, root);
    });
  }
  void do_barrier() override {
    group([&] { this->t_barrier(); });
    this->t_wait();
  }

 private:
  struct Msg {
    void* staging;
    size_t bytes;
    int peer;
    int tag;
  };
  // One group: the held-back sends, then body()'s operations; their staging buffers are released
  // in stream order afterwards.
  template <typename F>
  void group(F&& body) {
    this->t_group_start();
    for (auto& p : pending_)
      if (p.bytes) this->t_send(p.staging, p.bytes, p.peer);
    body();
    this->t_group_end();
    for (auto& p : pending_)
      if (p.staging) this->t_release(p.staging, p.peer);
    pending_.clear();
  }
  // This rank's receive from itself: the oldest send to self with the tag, copied on the stream.
  void take_self(void* buf, size_t bytes, int tag) {
    const int me = this->rank();
    auto it = std::find_if(self_.begin(), self_.end(), [&](const Msg& m) { return m.tag == tag; });
    if (it == self_.end())
      this->fail(Result::InvalidUsage, me, "receive from self (tag " + std::to_string(tag) +
                                               ") without an earlier send to self: it could never complete");
    const Msg m = *it;
    self_.erase(it);
    if (m.bytes != bytes) {
      if (m.staging) this->t_release(m.staging, me);
      this->fail(Result::InvalidUsage, me, "sent " + std::to_string(m.bytes) + " bytes to self, receiving " +
                                               std::to_string(bytes));
    }
    if (bytes) this->t_copy(buf, m.staging, bytes, me);
    if (m.staging) this->t_release(m.staging, me);
  }

  std::vector<Msg> pending_;  // sends to peers, issued with the next group
  std::deque<Msg> self_;      // sends to this rank, taken by its receives from itself
};

}  // namespace zen::cuda::detail
