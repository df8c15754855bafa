#include <algorithm>
#include <cstring>
#include <thread>

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
  void do_send(const void* buf, size_t bytes, int peer, int tag) override {
    std::vector<MPI_Request> rq(1);
    std::vector<int> peers{peer};
    isend(buf, bytes, peer, tag, &rq[0]);
    wait_all(rq, peers, 0);
  }
  void do_recv(void* buf, size_t bytes, int peer, int tag) override {
    std::vector<MPI_Request> rq(1);
    std::vector<int> peers{peer};
    irecv(buf, bytes, peer, tag, &rq[0]);
    wait_all(rq, peers, 1, {bytes});
  }
  void do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int tag) override {
    std::vector<MPI_Request> rq(2);
    std::vector<int> peers{src, dst};
    irecv(rbuf, rbytes, src, tag, &rq[0]);
    isend(sbuf, sbytes, dst, tag, &rq[1]);
    wait_all(rq, peers, 1, {rbytes});
  }
  void do_alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf,
                    const size_t* rcounts, const size_t* rdispls) override {
    const int tag = coll_tag();
    std::vector<MPI_Request> rq;
    std::vector<int> peers;
    std::vector<size_t> expect;
    rq.reserve(2 * static_cast<size_t>(size_));
    for (int k = 1; k < size_; ++k) {
      int p = (rank_ - k + size_) % size_;
      rq.emplace_back();
      irecv(static_cast<uint8_t*>(rbuf) + rdispls[p], rcounts[p], p, tag, &rq.back());
      peers.push_back(p);
      expect.push_back(rcounts[p]);
    }
    const size_t nrecv = rq.size();
    for (int k = 1; k < size_; ++k) {
      int p = (rank_ + k) % size_;
      rq.emplace_back();
      isend(static_cast<const uint8_t*>(sbuf) + sdispls[p], scounts[p], p, tag, &rq.back());
      peers.push_back(p);
    }
    if (scounts[rank_] != rcounts[rank_])
      fail(Result::InvalidArgument, rank_, "send count to self " + std::to_string(scounts[rank_]) + " != receive count from self " + std::to_string(rcounts[rank_]));
    if (rcounts[rank_])
      std::memmove(static_cast<uint8_t*>(rbuf) + rdispls[rank_], static_cast<const uint8_t*>(sbuf) + sdispls[rank_], rcounts[rank_]);
    wait_all(rq, peers, nrecv, expect);
  }
  void do_allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts, const size_t* rdispls) override {
    const int tag = coll_tag();
    std::vector<MPI_Request> rq;
    std::vector<int> peers;
    std::vector<size_t> expect;
    for (int k = 1; k < size_; ++k) {
      int p = (rank_ - k + size_) % size_;
      rq.emplace_back();
      irecv(static_cast<uint8_t*>(rbuf) + rdispls[p], rcounts[p], p, tag, &rq.back());
      peers.push_back(p);
      expect.push_back(rcounts[p]);
    }
    const size_t nrecv = rq.size();
    for (int k = 1; k < size_; ++k) {
      int p = (rank_ + k) % size_;
      rq.emplace_back();
      isend(sbuf, sbytes, p, tag, &rq.back());
      peers.push_back(p);
    }
    if (sbytes) std::memmove(static_cast<uint8_t*>(rbuf) + rdispls[rank_], sbuf, sbytes);
    wait_all(rq, peers, nrecv, expect);
  }
  void do_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) override {
    coll_tag();
    if (size_ == 1 || count == 0) return;
    if (count > static_cast<size_t>(INT32_MAX)) fail(Result::InvalidArgument, -1, "allreduce count " + std::to_string(count) + " exceeds MPI's int count");
    std::vector<MPI_Request> rq(1);
    std::vector<int> peers{-1};
    MPI_Iallreduce(MPI_IN_PLACE, buf, static_cast<int>(count), mpi_type(dtype), mpi_op(dtype, op), comm_, &rq[0]);
    wait_all(rq, peers, 1);
  }
  void do_broadcast(void* buf, size_t bytes, int root) override {
    const int tag = coll_tag();
    std::vector<MPI_Request> rq;
    std::vector<int> peers;
    if (rank_ == root) {
      for (int p = 0; p < size_; ++p) {
        if (p == root) continue;
        rq.emplace_back();
        isend(buf, bytes, p, tag, &rq.back());
        peers.push_back(p);
      }
      wait_all(rq, peers, 0);
    } else {
      rq.emplace_back();
      irecv(buf, bytes, root, tag, &rq.back());
      peers.push_back(root);
      wait_all(rq, peers, 1, {bytes});
    }
  }
  void do_barrier() override {
    const int tag = coll_tag();
    // Direct exchange of empty messages: a timeout names exactly the ranks that did not arrive.
    std::vector<MPI_Request> rq;
    std::vector<int> peers;
    for (int k = 1; k < size_; ++k) {
      int p = (rank_ - k + size_) % size_;
      rq.emplace_back();
      irecv(nullptr, 0, p, tag, &rq.back());
      peers.push_back(p);
    }
    const size_t nrecv = rq.size();
    for (int k = 1; k < size_; ++k) {
      int p = (rank_ + k) % size_;
      rq.emplace_back();
      isend(nullptr, 0, p, tag, &rq.back());
      peers.push_back(p);
    }
    wait_all(rq, peers, nrecv);
  }
  void do_abort(const std::string& reason) override { (void)reason; }

 private:
  int coll_tag() { return kCollTagBase + static_cast<int>((cseq_++) & 0x3FFF); }

  void check(int rc, int peer, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fail(Result::SystemError, peer, std::string(what) + " failed: " + std::string(msg, static_cast<size_t>(len)));
  }
  void isend(const void* buf, size_t bytes, int peer, int tag, MPI_Request* r) {
    if (bytes > static_cast<size_t>(INT32_MAX)) fail(Result::InvalidArgument, peer, "message of " + std::to_string(bytes) + " bytes exceeds 2^31-1 (split it)");
    check(MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, r), peer, "MPI_Isend");
  }
  void irecv(void* buf, size_t bytes, int peer, int tag, MPI_Request* r) {
    if (bytes > static_cast<size_t>(INT32_MAX)) fail(Result::InvalidArgument, peer, "message of " + std::to_string(bytes) + " bytes exceeds 2^31-1 (split it)");
    check(MPI_Irecv(buf, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, r), peer, "MPI_Irecv");
  }

  // Wait for all requests until the deadline. The first `nrecv` requests are receives whose sizes are
  // checked against `expect`. On timeout, name the peers whose requests are still pending.
  void wait_all(std::vector<MPI_Request>& rq, const std::vector<int>& peers, size_t nrecv,
                const std::vector<size_t>& expect = {}) {
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
        if (rc != MPI_SUCCESS) check(rc, peers[i], "MPI_Test");
        if (!flag) continue;
        done[i] = 1;
        --remaining;
        if (i < nrecv && i < expect.size()) {
          int got = 0;
          MPI_Get_count(&st, MPI_BYTE, &got);
          if (static_cast<size_t>(got) != expect[i])
            fail(Result::InvalidUsage, peers[i], "peer sent " + std::to_string(got) + " bytes, this rank expected " + std::to_string(expect[i]));
        }
      }
      if (remaining == 0) break;
      if (std::chrono::steady_clock::now() > deadline) {
        std::string who;
        for (size_t i = 0; i < rq.size(); ++i)
          if (!done[i]) {
            if (peers[i] < 0) { who = "unknown (native collective)"; break; }
            if (!who.empty()) who += ",";
            who += std::to_string(peers[i]);
          }
        int first = -1;
        for (size_t i = 0; i < rq.size(); ++i)
          if (!done[i]) { first = peers[i]; break; }
        fail(Result::Timeout, first, "timed out after " + std::to_string(timeout_.count()) +
                                         " ms; still waiting for peer(s) " + who + " (they did not take part)");
      }
      if (++spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(spins > 4096 ? 200 : 20));
      else std::this_thread::yield();
    }
  }

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
  MPI_Op ops16_[6] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
};

}  // namespace

std::unique_ptr<Communicator> create(MPI_Comm comm) { return std::make_unique<MpiComm>(comm); }

}  // namespace zen::mpi
