// MPI backend: failure handling (docs/reliability.md, "Timeouts"). The abort channel (a pre-posted
// receive that every wait loop polls; abort messages to every peer), the presence check that names
// the ranks missing after a timeout, the handshake before caller memory is handed to MPI, the
// quarantine of memory MPI still holds after a failure, the closing of the control channels before
// the communicator is freed, and the watchdog that ends the job when a blocking call is stuck.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "mpi_comm.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace zen::mpi::impl {

void MpiComm::Watchdog::loop() {
  std::unique_lock<std::mutex> lk(m);
  while (!stop) {
    const int64_t to = timeout_ns.load(std::memory_order_relaxed);
    cv.wait_for(lk, std::chrono::nanoseconds(std::max<int64_t>(to / 4, 1000000)));
    if (stop) return;
    const int64_t t = since.load(std::memory_order_acquire);
    if (t < 0 || now_ns() - t <= timeout_ns.load(std::memory_order_relaxed)) continue;
    std::fprintf(stderr,
                 "zen: fatal: %s %s: every rank had entered this operation, yet it did not finish within %lld ms: "
                 "the transport is stuck and a blocking MPI call cannot be withdrawn, so zen ends the job (raise the "
                 "timeout if the data is large for the link)\n",
                 prefix.c_str(), what.load(), static_cast<long long>(timeout_ns.load() / 1000000));
    std::fflush(stderr);
    std::_Exit(75);
  }
}

// Tell every peer that this rank gave up (the reason travels in the message). Peers waiting in any
// operation see it at once and fail with RemoteError, unless the reason is a timeout naming a
// missing rank: that is no news to them (they wait for the same rank until their own deadline).
void MpiComm::do_abort(const std::string& reason) {
  if (aborted_sent_ || size_ == 1) return;
  aborted_sent_ = true;
  // Below MULTIPLE: sent inside the gate, by this thread when the gate is free, else by the thread
  // that holds it (SerialGate: an abort never waits for another thread's operation).
  if (serial_) SerialGate::get().run_or_post([this, reason] { send_abort(reason); });
  else send_abort(reason);
}

void MpiComm::send_abort(const std::string& reason) {
  auto ps = take_send_buffer(sizeof(AbortHeader) + std::min(reason.size(), kAbortBytes));
  AbortHeader h{nonce_, rank_, timed_out_on_, static_cast<uint32_t>(std::min(reason.size(), kAbortBytes)), 0};
  std::memcpy(ps->data.data(), &h, sizeof h);
  std::memcpy(ps->data.data() + sizeof h, reason.data(), h.len);
  ps->rq.clear();
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    ps->rq.emplace_back();
    MPI_Isend(ps->data.data(), static_cast<int>(ps->data.size()), MPI_BYTE, p, kAbortTag, comm_, &ps->rq.back());
  }
  pending_.push_back(std::move(ps));
}

MpiComm::Watchdog& MpiComm::watchdog() {
  if (!dog_) {
    dog_ = std::make_unique<Watchdog>();
    dog_->prefix = "rank " + std::to_string(rank_) + "/" + std::to_string(size_) + " mpi";
    dog_->timeout_ns.store(Watchdog::ns_of(timeout_));
    Watchdog* d = dog_.get();
    dog_->th = std::thread([d] { d->loop(); });
  }
  return *dog_;
}

// Every rank of the communicator has entered this operation (zero-byte messages, cancellable):
// a missing rank is named exactly as a timeout names it, before any caller memory is handed to MPI.
void MpiComm::handshake() {
  p2p_barrier();
  refuse_if_a_peer_gave_up();
}

// A peer that already gave up on this operation (its presence check reached us) will never take
// part: do not start a collective that cannot finish.
void MpiComm::refuse_if_a_peer_gave_up() {
  for (;;) {
    int flag = 0;
    MPI_Message msg;
    MPI_Status st;
    MPI_Improbe(MPI_ANY_SOURCE, kDiagTag, comm_, &flag, &msg, &st);
    if (!flag) return;
    Diag d{};
    MPI_Mrecv(&d, sizeof d, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    if (d.nonce != nonce_) continue;  // stale: a freed communicator's
    fail(Result::Timeout, st.MPI_SOURCE,
         "rank " + std::to_string(st.MPI_SOURCE) + " timed out on this communicator before this rank arrived; "
         "the operation was not started");
  }
}

// An abort message from a peer: fail at once (a timeout abort is no news: keep waiting).
void MpiComm::poll_abort() {
  if (abort_rq_ == MPI_REQUEST_NULL) return;
  int flag = 0;
  MPI_Status st;
  MPI_Test(&abort_rq_, &flag, &st);
  if (!flag) return;
  AbortHeader h{};
  std::memcpy(&h, abort_in_.data(), sizeof h);
  const std::string reason(reinterpret_cast<const char*>(abort_in_.data()) + sizeof h, std::min<size_t>(h.len, kAbortBytes));
  abort_rq_ = MPI_REQUEST_NULL;
  if (h.nonce == nonce_ && h.missing == kClosing) {
    // The peer destroyed its communicator after finishing its operations: what it contributed
    // can still complete here. Remember it (a timeout then says so) and keep waiting.
    closed_[static_cast<size_t>(h.rank)] = 1;
  }
  if (h.missing >= 0 || h.nonce != nonce_ || h.missing == kClosing) {
    // A timeout (no news) or a stale message of a freed communicator: re-arm, more may follow.
    MPI_Irecv(abort_in_.data(), static_cast<int>(abort_in_.size()), MPI_BYTE, MPI_ANY_SOURCE, kAbortTag, comm_, &abort_rq_);
    return;
  }
  orphan_pending();
  fail(Result::RemoteError, h.rank, "rank " + std::to_string(h.rank) + " aborted (" + reason + ")");
}

// Pending requests of a failed owned/staged operation stay with MPI; the memory they use is kept.
void MpiComm::orphan_pending() {
  for (size_t i = 0; i < q_.rq.size(); ++i) {
    if (q_.rq[i] == MPI_REQUEST_NULL) continue;
    int flag = 0;
    MPI_Test(&q_.rq[i], &flag, MPI_STATUS_IGNORE);
    if (!flag) orphans_.push_back(q_.rq[i]);
  }
  q_.clear();
}

void MpiComm::on_timeout(Mem m, int root) {
  // Which requests are still pending (MPI_Test completes the finished ones individually)?
  std::vector<int> direct;
  bool native = false;
  for (size_t i = 0; i < q_.rq.size(); ++i) {
    int flag = 0;
    if (q_.rq[i] != MPI_REQUEST_NULL) MPI_Test(&q_.rq[i], &flag, MPI_STATUS_IGNORE);
    if (q_.rq[i] == MPI_REQUEST_NULL) continue;  // completed
    if (q_.peer[i] < 0) native = true;
    else if (std::find(direct.begin(), direct.end(), q_.peer[i]) == direct.end()) direct.push_back(q_.peer[i]);
    // Pending receives must not land in buffers after we return: withdraw them.
    if (q_.expect[i] != kSend && q_.expect[i] != kNoCheck) MPI_Cancel(&q_.rq[i]);
  }
  if (root >= 0 && native && std::find(direct.begin(), direct.end(), root) == direct.end()) direct.push_back(root);
  // Who is missing? A direct peer may itself be stuck waiting for another rank (rings, trees,
  // native collectives), so ask everyone: the ranks that do not answer the presence check are
  // the ones that did not take part. Name absent direct peers first, else the absent ranks.
  const std::vector<int> absent = presence_check();
  std::vector<int> named;
  for (int p : direct)
    if (std::find(absent.begin(), absent.end(), p) != absent.end()) named.push_back(p);
  if (named.empty()) named = absent;
  if (named.empty()) named = direct;
  auto list = [](const std::vector<int>& v) {
    std::string s;
    for (int p : v) s += (s.empty() ? "" : ",") + std::to_string(p);
    return s.empty() ? std::string("none") : s;
  };
  std::vector<int> gone;
  for (int p = 0; p < size_; ++p)
    if (closed_[static_cast<size_t>(p)]) gone.push_back(p);
  const std::string what = "timed out after " + std::to_string(timeout_.count()) + " ms waiting for " +
                           (native ? std::string("a native collective") : "peer(s) " + list(direct)) +
                           "; presence check: no answer from rank(s) " + list(absent) + "; rank(s) " + list(named) +
                           " did not take part" +
                           (gone.empty() ? std::string() : "; rank(s) " + list(gone) + " destroyed their communicator");
  // What MPI still holds after the cancellations had the presence check's time to complete.
  bool caller_held = false;
  for (size_t i = 0; i < q_.rq.size(); ++i) {
    if (q_.rq[i] == MPI_REQUEST_NULL) continue;
    int flag = 0;
    MPI_Test(&q_.rq[i], &flag, MPI_STATUS_IGNORE);
    if (flag) continue;
    if (m == Mem::Caller) caller_held = true;
    orphans_.push_back(q_.rq[i]);
  }
  q_.clear();
  timed_out_on_ = named.empty() ? -1 : named[0];
  if (caller_held)
    escalate(what + ". Every rank had entered this operation, yet it did not finish: MPI cannot withdraw a "
                    "started operation from the caller's buffer, so zen ends the job instead of returning while "
                    "MPI may still write it (raise the timeout if the data is large for the link)");
  fail(Result::Timeout, named.empty() ? -1 : named[0], what);
}

void MpiComm::escalate(const std::string& why) {
  try {
    fail(Result::Timeout, -1, why);
  } catch (const Error& e) {
    std::fprintf(stderr, "zen: fatal: %s\n", e.what());
    std::fflush(stderr);
  }
  MPI_Abort(comm_, 75);
  std::abort();
}

// After a timeout: this rank sends its collective sequence number to every peer (tag kDiagTag) and
// listens for timeout/2 (at least 20 ms); the ranks that time out in the same situation do the same,
// so the peers not heard from are the ones that did not take part. Costs nothing unless a timeout
// happens; detection takes 1.5x the timeout.
std::vector<int> MpiComm::presence_check() {
  diag_out_ = Diag{nonce_, cseq_};
  diag_in_.assign(static_cast<size_t>(size_), Diag{});
  std::vector<MPI_Request> rs, rr(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    MPI_Irecv(&diag_in_[p], sizeof(Diag), MPI_BYTE, p, kDiagTag, comm_, &rr[p]);
    rs.emplace_back();
    MPI_Isend(&diag_out_, sizeof(Diag), MPI_BYTE, p, kDiagTag, comm_, &rs.back());
  }
  const auto until = std::chrono::steady_clock::now() + std::max(Ms(20), timeout_ / 2);
  std::vector<int> heard(static_cast<size_t>(size_), 0);
  heard[rank_] = 1;
  int left = size_ - 1;
  while (left > 0 && std::chrono::steady_clock::now() < until) {
    if (serial_) SerialGate::get().run_posted();
    for (int p = 0; p < size_; ++p) {
      if (heard[p]) continue;
      int flag = 0;
      MPI_Test(&rr[p], &flag, MPI_STATUS_IGNORE);
      if (!flag) continue;
      if (diag_in_[p].nonce != nonce_) {  // stale: listen again
        MPI_Irecv(&diag_in_[p], sizeof(Diag), MPI_BYTE, p, kDiagTag, comm_, &rr[p]);
        continue;
      }
      if (diag_in_[p].seq == ~uint64_t{0}) {  // its "closing": it destroyed its communicator, it is gone
        closed_[static_cast<size_t>(p)] = 1;
        heard[p] = 2;
        --left;
        continue;
      }
      heard[p] = 1;
      --left;
    }
    // Keep the other pending requests moving too (and the abort watch).
    for (auto& q : q_.rq)
      if (q != MPI_REQUEST_NULL) {
        int f = 0;
        MPI_Test(&q, &f, MPI_STATUS_IGNORE);
      }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::vector<int> missing;
  for (int p = 0; p < size_; ++p) {
    if (heard[p] == 2) missing.push_back(p);
    if (!heard[p]) {
      missing.push_back(p);
      MPI_Cancel(&rr[p]);
      int flag = 0;
      for (int i = 0; i < 1000 && !flag; ++i) MPI_Test(&rr[p], &flag, MPI_STATUS_IGNORE);
      if (!flag) orphans_.push_back(rr[p]);
    }
  }
  for (auto& r : rs) MPI_Request_free(&r);  // 16-byte eager sends; diag_out_ lives as long as the communicator
  return missing;
}

// Before the communicator is freed, no control message (abort, presence check) may still be on
// its way: MPI recycles context ids, and Open MPI's next communicator creation can stall on
// messages addressed to a freed one. Every rank sends "closing" to every peer on both control
// tags and consumes what arrives on them until it has every peer's "closing" (MPI keeps a sender's
// messages in order, so its earlier control messages are consumed first), waiting at most twice
// the timeout (1..10 s): communicators are freed collectively, so peers arrive together, and a
// peer still inside an operation on this communicator (this rank left it) fails within 1.5x the
// timeout (T + the presence check's T/2) and then closes too. A bound of one timeout freed the
// communicator before such a peer's messages arrived; Open MPI later crashed (mca_pml_ob1_add_comm)
// creating a communicator that reused the context id (tests/capi/test_capi_mpi.cpp, n = 3, T = 1 s).
// Below MULTIPLE each sweep runs inside the gate and the wait between sweeps outside it (SerialGate).
void MpiComm::close_control_channels() {
  if (size_ == 1) return;
  const Gated gated{serial_};
  auto bufs = std::make_unique<std::pair<AbortHeader, Diag>>(AbortHeader{nonce_, rank_, kClosing, 0, 0},
                                                             Diag{nonce_, ~uint64_t{0}});
  std::vector<MPI_Request> sends;
  sends.reserve(static_cast<size_t>(2 * size_));
  gated([&] {
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      sends.emplace_back();
      MPI_Isend(&bufs->first, sizeof(AbortHeader), MPI_BYTE, p, kAbortTag, comm_, &sends.back());
      sends.emplace_back();
      MPI_Isend(&bufs->second, sizeof(Diag), MPI_BYTE, p, kDiagTag, comm_, &sends.back());
    }
  });
  std::vector<uint8_t> seen(static_cast<size_t>(size_) * 2, 0), sink(sizeof(AbortHeader) + kAbortBytes);
  int left = 2 * (size_ - 1);
  for (int p = 0; p < size_; ++p)  // peers whose "closing" an operation already consumed
    if (p != rank_ && closed_[static_cast<size_t>(p)]) {
      seen[static_cast<size_t>(p) * 2] = 1;
      --left;
    }
  // One sweep: consume what arrived on both control tags, count the peers' "closing".
  auto sweep = [&] {
    bool got = false;
    for (int k = 0; k < 2; ++k) {
      const int tag = k == 0 ? kAbortTag : kDiagTag;
      int flag = 0;
      MPI_Message msg;
      MPI_Status st;
      MPI_Improbe(MPI_ANY_SOURCE, tag, comm_, &flag, &msg, &st);
      if (!flag) continue;
      got = true;
      int bytes = 0;
      MPI_Get_count(&st, MPI_BYTE, &bytes);
      if (sink.size() < static_cast<size_t>(bytes)) sink.resize(static_cast<size_t>(bytes));
      MPI_Mrecv(sink.data(), bytes, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
      bool is_closing = false;
      if (k == 0 && bytes >= static_cast<int>(sizeof(AbortHeader))) {
        AbortHeader h{};
        std::memcpy(&h, sink.data(), sizeof h);
        is_closing = h.nonce == nonce_ && h.missing == kClosing;
      } else if (k == 1 && bytes == static_cast<int>(sizeof(Diag))) {
        Diag d{};
        std::memcpy(&d, sink.data(), sizeof d);
        is_closing = d.nonce == nonce_ && d.seq == ~uint64_t{0};
      }
      uint8_t& s = seen[static_cast<size_t>(st.MPI_SOURCE) * 2 + static_cast<size_t>(k)];
      if (is_closing && !s) {
        s = 1;
        --left;
      }
    }
    return got;
  };
  const auto bound = std::min(std::max(2 * timeout_, Ms(1000)), Ms(10000));
  const auto until = std::chrono::steady_clock::now() + bound;
  while (left > 0 && std::chrono::steady_clock::now() < until) {
    bool got = false;
    gated([&] { got = sweep(); });
    if (!got && (serial_ || oversubscribed_)) sched_yield();
  }
  int done = 0;
  gated([&] { MPI_Testall(static_cast<int>(sends.size()), sends.data(), &done, MPI_STATUSES_IGNORE); });
  if (!done) {  // small eager sends: practically never; then their buffers stay alive
    (void)bufs.release();
    for (auto& r : sends)
      if (r != MPI_REQUEST_NULL) orphans_.push_back(r);
  }
}

void MpiComm::leak_everything() {
  // Deliberately never freed: MPI may still hold requests on any of these.
  auto* keep = new std::vector<std::shared_ptr<void>>(take_quarantine());
  keep->push_back(stage_);
  (void)keep;
  auto* sends = new std::vector<std::unique_ptr<PendingSend>>(std::move(pending_));
  (void)sends;
  auto* abort_buf = new std::vector<uint8_t>(std::move(abort_in_));
  (void)abort_buf;
  auto* diag = new std::vector<Diag>(std::move(diag_in_));
  (void)diag;
#if defined(__SANITIZE_ADDRESS__)
  // Deliberate: LeakSanitizer treats these as reachable (and what they hold with them).
  __lsan_ignore_object(keep);
  __lsan_ignore_object(sends);
  __lsan_ignore_object(abort_buf);
  __lsan_ignore_object(diag);
#endif
}

}  // namespace zen::mpi::impl
