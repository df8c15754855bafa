#include <algorithm>
#include <memory>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "zen/comm/mpi.hpp"

namespace zen::mpi {

Environment::Environment(int* argc, char*** argv) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    owns_ = true;
  }
}

Environment::~Environment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

namespace {

constexpr int kCollTagBase = 16384;  // tags below are the user's point-to-point tags
constexpr int kCollTags = 16383;     // collective tags are kCollTagBase + (seq mod kCollTags)
constexpr int kDiagTag = kCollTagBase + kCollTags;  // 32767 (<= MPI_TAG_UB by the standard): presence check

// Largest message one MPI request carries: MPI counts are int. Larger messages travel as several
// consecutive requests with the same tag (MPI keeps their order). ZEN_MPI_MAX_MESSAGE_BYTES lowers
// the limit (tests use it to exercise the split path with small buffers).
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

class MpiComm final : public Communicator {
 public:
  explicit MpiComm(MPI_Comm comm) {
    MPI_Comm_dup(comm, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiComm() override {
    if (!failed() && !pending_.empty()) {
      try {
        for (auto& ps : pending_) wait_all(ps->q);
      } catch (const std::exception&) {
        // A peer that never received: nothing more can be done at destruction.
      }
    }
    pending_.clear();
    for (auto& op : ops16_)
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !failed()) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend_name() const override { return "mpi"; }

 protected:
  // Buffered (eager) send, as on the loopback backend: the bytes are copied and the call returns;
  // MPI delivers them while later operations run. Two ranks that send to each other before
  // receiving therefore never deadlock. Outstanding sends are completed by later calls and, at the
  // latest, by the destructor (bounded by the timeout).
  void do_send(const void* buf, size_t bytes, int peer, int tag) override {
    progress_sends();
    auto ps = std::make_unique<PendingSend>();
    ps->data.assign(static_cast<const uint8_t*>(buf), static_cast<const uint8_t*>(buf) + bytes);
    isend(ps->q, ps->data.data(), bytes, peer, tag);
    pending_.push_back(std::move(ps));
  }
  void do_recv(void* buf, size_t bytes, int peer, int tag) override {
    Reqs q;
    irecv(q, buf, bytes, peer, tag);
    wait_all(q);
  }
  void do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag) override {
    Reqs q;
    irecv(q, rbuf, rbytes, src, tag);
    isend(q, sbuf, sbytes, dst, tag);
    wait_all(q);
  }
  void do_alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf,
                    const size_t* rcounts, const size_t* rdispls) override {
    const int tag = coll_tag();
    Reqs q;
    for (int k = 1; k < size_; ++k) {
      int p = (rank_ - k + size_) % size_;
      irecv(q, static_cast<uint8_t*>(rbuf) + rdispls[p], rcounts[p], p, tag);
    }
    for (int k = 1; k < size_; ++k) {
      int p = (rank_ + k) % size_;
      isend(q, static_cast<const uint8_t*>(sbuf) + sdispls[p], scounts[p], p, tag);
    }
    if (scounts[rank_] != rcounts[rank_])
      fail(Result::InvalidArgument, rank_, "send count to self " + std::to_string(scounts[rank_]) + " != receive count from self " + std::to_string(rcounts[rank_]));
    if (rcounts[rank_])
      std::memmove(static_cast<uint8_t*>(rbuf) + rdispls[rank_], static_cast<const uint8_t*>(sbuf) + sdispls[rank_], rcounts[rank_]);
    wait_all(q);
  }
  void do_allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts, const size_t* rdispls) override {
    const int tag = coll_tag();
    Reqs q;
    for (int k = 1; k < size_; ++k) {
      int p = (rank_ - k + size_) % size_;
      irecv(q, static_cast<uint8_t*>(rbuf) + rdispls[p], rcounts[p], p, tag);
    }
    for (int k = 1; k < size_; ++k) isend(q, sbuf, sbytes, (rank_ + k) % size_, tag);
    if (sbytes) std::memmove(static_cast<uint8_t*>(rbuf) + rdispls[rank_], sbuf, sbytes);
    wait_all(q);
  }
  void do_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) override {
    coll_tag();
    if (size_ == 1 || count == 0) return;
    // Counts beyond one request's limit run as consecutive native allreduces over slices.
    const size_t es = dtype_size(dtype), per = std::max<size_t>(1, max_message_bytes() / es);
    for (size_t off = 0; off < count; off += per) {
      const size_t c = std::min(per, count - off);
      Reqs q;
      q.rq.emplace_back();
      q.peers.push_back(-1);
      q.expect.push_back(kNoCheck);  // a native collective: no size check, cannot be cancelled
      check(MPI_Iallreduce(MPI_IN_PLACE, static_cast<uint8_t*>(buf) + off * es, static_cast<int>(c), mpi_type(dtype),
                           mpi_op(dtype, op), comm_, &q.rq[0]),
            -1, "MPI_Iallreduce");
      wait_all(q);
    }
  }
  void do_broadcast(void* buf, size_t bytes, int root) override {
    const int tag = coll_tag();
    Reqs q;
    if (rank_ == root) {
      for (int p = 0; p < size_; ++p)
        if (p != root) isend(q, buf, bytes, p, tag);
    } else {
      irecv(q, buf, bytes, root, tag);
    }
    wait_all(q);
  }
  void do_barrier() override {
    const int tag = coll_tag();
    // Direct exchange of empty messages: a timeout names exactly the ranks that did not arrive.
    Reqs q;
    for (int k = 1; k < size_; ++k) irecv(q, nullptr, 0, (rank_ - k + size_) % size_, tag);
    for (int k = 1; k < size_; ++k) isend(q, nullptr, 0, (rank_ + k) % size_, tag);
    wait_all(q);
  }
  void do_abort(const std::string& reason) override { (void)reason; }

 private:
  static constexpr size_t kNoCheck = ~size_t{0};
  static constexpr size_t kSend = ~size_t{0} - 1;
  // Outstanding requests of one operation: the peer of each (-1: native collective) and, for
  // receives, the byte count the message must have (kSend marks sends).
  struct Reqs {
    std::vector<MPI_Request> rq;
    std::vector<int> peers;
    std::vector<size_t> expect;
  };

  struct PendingSend {
    Reqs q;
    std::vector<uint8_t> data;
  };
  // Complete the buffered sends that MPI has finished with (MPI_Test also drives progress).
  void progress_sends() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      int flag = 0;
      check(MPI_Testall(static_cast<int>((*it)->q.rq.size()), (*it)->q.rq.data(), &flag, MPI_STATUSES_IGNORE), -1,
            "MPI_Testall (buffered sends)");
      it = flag ? pending_.erase(it) : it + 1;
    }
  }
  std::vector<std::unique_ptr<PendingSend>> pending_;

  int coll_tag() { return kCollTagBase + static_cast<int>((cseq_++) % kCollTags); }

  void check(int rc, int peer, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fail(Result::SystemError, peer, std::string(what) + " failed: " + std::string(msg, static_cast<size_t>(len)));
  }
  // A message of any size: split into requests of at most max_message_bytes() (both sides split the
  // same way; a size disagreement shows up as a size mismatch of some piece).
  void isend(Reqs& q, const void* buf, size_t bytes, int peer, int tag) {
    const size_t lim = max_message_bytes();
    size_t off = 0;
    do {
      const size_t b = std::min(lim, bytes - off);
      q.rq.emplace_back();
      q.peers.push_back(peer);
      q.expect.push_back(kSend);
      check(MPI_Isend(static_cast<const uint8_t*>(buf) + off, static_cast<int>(b), MPI_BYTE, peer, tag, comm_, &q.rq.back()),
            peer, "MPI_Isend");
      off += b;
    } while (off < bytes);
  }
  void irecv(Reqs& q, void* buf, size_t bytes, int peer, int tag) {
    const size_t lim = max_message_bytes();
    size_t off = 0;
    do {
      const size_t b = std::min(lim, bytes - off);
      q.rq.emplace_back();
      q.peers.push_back(peer);
      q.expect.push_back(b);
      check(MPI_Irecv(static_cast<uint8_t*>(buf) + off, static_cast<int>(b), MPI_BYTE, peer, tag, comm_, &q.rq.back()),
            peer, "MPI_Irecv");
      off += b;
    } while (off < bytes);
  }

  // Wait for all requests until the deadline; received sizes are checked against q.expect. On
  // timeout, name the peers whose requests are still pending (for a native collective: the peers
  // that a presence check finds absent), cancel pending receives and fail.
  void wait_all(Reqs& q) {
    auto& rq = q.rq;
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    std::vector<int> done(rq.size(), 0);
    size_t remaining = rq.size();
    unsigned spins = 0;
    while (remaining > 0) {
      for (size_t i = 0; i < rq.size(); ++i) {
        if (done[i]) continue;
        int flag = 0;
        MPI_Status st;
        int rc = MPI_Test(&rq[i], &flag, &st);
        if (rc != MPI_SUCCESS) {
          int cls = 0;
          MPI_Error_class(rc, &cls);
          if (cls == MPI_ERR_TRUNCATE)
            fail(Result::InvalidUsage, q.peers[i], "peer sent more than the " + std::to_string(q.expect[i]) + " bytes this rank expected");
          check(rc, q.peers[i], "MPI_Test");
        }
        if (!flag) continue;
        done[i] = 1;
        --remaining;
        if (q.expect[i] != kSend && q.expect[i] != kNoCheck) {
          int got = 0;
          MPI_Get_count(&st, MPI_BYTE, &got);
          if (static_cast<size_t>(got) != q.expect[i])
            fail(Result::InvalidUsage, q.peers[i], "peer sent " + std::to_string(got) + " bytes, this rank expected " + std::to_string(q.expect[i]));
        }
      }
      if (remaining == 0) break;
      if (std::chrono::steady_clock::now() > deadline) {
        std::vector<int> direct;
        bool native = false;
        for (size_t i = 0; i < rq.size(); ++i) {
          if (done[i]) continue;
          if (q.peers[i] < 0) native = true;
          else if (std::find(direct.begin(), direct.end(), q.peers[i]) == direct.end()) direct.push_back(q.peers[i]);
        }
        // Pending receives must not land in the caller's buffers after we return: cancel them.
        for (size_t i = 0; i < rq.size(); ++i)
          if (!done[i] && q.expect[i] != kSend && q.expect[i] != kNoCheck) {
            MPI_Cancel(&rq[i]);
            MPI_Wait(&rq[i], MPI_STATUS_IGNORE);
          }
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
        fail(Result::Timeout, named.empty() ? -1 : named[0],
             "timed out after " + std::to_string(timeout_.count()) + " ms waiting for " +
                 (native ? std::string("a native collective") : "peer(s) " + list(direct)) +
                 "; presence check: no answer from rank(s) " + list(absent) + "; rank(s) " + list(named) +
                 " did not take part");
      }
      if (++spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(spins > 4096 ? 200 : 20));
      else std::this_thread::yield();
    }
  }

  // After a timeout: this rank sends its collective sequence number to every peer (tag kDiagTag) and
  // listens for timeout/2 (at least 20 ms); the ranks that time out in the same situation do the same,
  // so the peers not heard from are the ones that did not take part. Costs nothing unless a timeout
  // happens; detection takes 1.5x the timeout.
  std::vector<int> presence_check() {
    const uint64_t my = seq_of_current();
    diag_out_ = my;
    diag_in_.assign(static_cast<size_t>(size_), ~0ULL);
    std::vector<MPI_Request> rs, rr(static_cast<size_t>(size_), MPI_REQUEST_NULL);
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      MPI_Irecv(&diag_in_[p], 8, MPI_BYTE, p, kDiagTag, comm_, &rr[p]);
      rs.emplace_back();
      MPI_Isend(&diag_out_, 8, MPI_BYTE, p, kDiagTag, comm_, &rs.back());
    }
    const auto until = std::chrono::steady_clock::now() + std::max(Ms(20), timeout_ / 2);
    std::vector<int> heard(static_cast<size_t>(size_), 0);
    heard[rank_] = 1;
    int left = size_ - 1;
    while (left > 0 && std::chrono::steady_clock::now() < until) {
      for (int p = 0; p < size_; ++p) {
        if (heard[p]) continue;
        int flag = 0;
        MPI_Test(&rr[p], &flag, MPI_STATUS_IGNORE);
        if (flag) { heard[p] = 1; --left; }
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    std::vector<int> missing;
    for (int p = 0; p < size_; ++p) {
      if (!heard[p]) {
        missing.push_back(p);
        MPI_Cancel(&rr[p]);
        MPI_Wait(&rr[p], MPI_STATUS_IGNORE);
      }
    }
    for (auto& r : rs) MPI_Request_free(&r);  // 8-byte eager sends; diag_out_ lives as long as the communicator
    return missing;
  }
  uint64_t seq_of_current() const { return cseq_; }

  MPI_Op mpi_op(DType t, ReduceOp op) {
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

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  uint64_t cseq_ = 0;
  uint64_t diag_out_ = 0;
  std::vector<uint64_t> diag_in_;
  MPI_Op ops16_[6] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
};

}  // namespace

std::unique_ptr<Communicator> create(MPI_Comm comm) { return std::make_unique<MpiComm>(comm); }

}  // namespace zen::mpi
