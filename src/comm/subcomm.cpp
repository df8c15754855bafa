// Sub-communicator: a communicator over some ranks of a host parent, built on the parent's
// point-to-point calls (declared in include/zen/comm/subcomm.hpp; used by the hierarchical scheme's
// node split and by callers that have no MPI_Comm_split).
#include "zen/comm/subcomm.hpp"

#include <cstring>
#include <string>

#include "zen/error.hpp"

namespace zen {
namespace {

// Sub-communicator over a parent's point-to-point operations.
class SubComm final : public Communicator {
 public:
  SubComm(Communicator& parent, std::vector<int> members, int tag) : parent_(parent), members_(std::move(members)), tag_(tag) {
    const std::string where = "rank " + std::to_string(parent.rank()) + " make_subcommunicator: ";
    ZEN_ENFORCE(parent.memory_space() == MemSpace::Host,
                where + "parent backend '" + parent.backend_name() + "' is not a host backend");
    ZEN_ENFORCE(tag >= 0 && tag <= 16383, where + "tag " + std::to_string(tag) + " outside [0, 16383]");
    ZEN_ENFORCE(!members_.empty(), where + "empty member list");
    for (size_t k = 0; k < members_.size(); ++k) {
      const int m = members_[k];
      ZEN_ENFORCE(m >= 0 && m < parent.size(), where + "member " + std::to_string(m) + " outside [0, " +
                                                   std::to_string(parent.size()) + ")");
      for (size_t j = 0; j < k; ++j)
        ZEN_ENFORCE(members_[j] != m, where + "member " + std::to_string(m) + " listed twice");
      if (m == parent.rank()) rank_ = static_cast<int>(k);
    }
    ZEN_ENFORCE(rank_ >= 0, where + "the calling rank is not a member");
    timeout_ = parent.timeout();
  }
  ~SubComm() override { finish_calls(); }
  void check_async_support() const override { parent_.check_async_support(); }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  const char* backend_name() const override { return "sub"; }

 protected:
  void do_send(const void* buf, size_t bytes, int peer, int) override { parent_.send(buf, bytes, members_[peer], tag_); }
  void do_recv(void* buf, size_t bytes, int peer, int) override { parent_.recv(buf, bytes, members_[peer], tag_); }
  void do_sendrecv(const void* sbuf, size_t sbytes, int dst, void* rbuf, size_t rbytes, int src, int) override {
    parent_.sendrecv(sbuf, sbytes, members_[dst], rbuf, rbytes, members_[src], tag_);
  }
  // Pairwise exchange: in step k send to rank+k and receive from rank-k (no deadlock, any n).
  void do_alltoallv(const void* sbuf, const size_t* scounts, const size_t* sdispls, void* rbuf,
                    const size_t* rcounts, const size_t* rdispls) override {
    const int n = size();
    const auto* s = static_cast<const uint8_t*>(sbuf);
    auto* r = static_cast<uint8_t*>(rbuf);
    if (scounts[rank_] != rcounts[rank_])
      fail(Result::InvalidArgument, rank_, "send count to self " + std::to_string(scounts[rank_]) +
                                               " != receive count from self " + std::to_string(rcounts[rank_]));
    if (rcounts[rank_]) std::memmove(r + rdispls[rank_], s + sdispls[rank_], rcounts[rank_]);
    for (int k = 1; k < n; ++k) {
      const int dst = (rank_ + k) % n, src = (rank_ - k + n) % n;
      parent_.sendrecv(s + sdispls[dst], scounts[dst], members_[dst], r + rdispls[src], rcounts[src], members_[src], tag_);
    }
  }
  void do_allgatherv(const void* sbuf, size_t sbytes, void* rbuf, const size_t* rcounts, const size_t* rdispls) override {
    const int n = size();
    auto* r = static_cast<uint8_t*>(rbuf);
    if (sbytes) std::memmove(r + rdispls[rank_], sbuf, sbytes);
    for (int k = 1; k < n; ++k) {
      const int dst = (rank_ + k) % n, src = (rank_ - k + n) % n;
      parent_.sendrecv(sbuf, sbytes, members_[dst], r + rdispls[src], rcounts[src], members_[src], tag_);
    }
  }
  void do_allreduce(void* buf, size_t count, DType dtype, ReduceOp op) override {
    const int n = size();
    const size_t bytes = count * dtype_size(dtype);
    std::vector<uint8_t> all(bytes * static_cast<size_t>(n));
    std::vector<size_t> rc(static_cast<size_t>(n), bytes), rd(static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) rd[p] = bytes * static_cast<size_t>(p);
    do_allgatherv(buf, bytes, all.data(), rc.data(), rd.data());
    dispatch_dtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      using A = typename accum_of<T>::type;
      T* out = static_cast<T*>(buf);
      const T* in = reinterpret_cast<const T*>(all.data());
      for (size_t i = 0; i < count; ++i) {
        A acc = static_cast<A>(in[i]);
        for (int p = 1; p < n; ++p) {
          const A v = static_cast<A>(in[static_cast<size_t>(p) * count + i]);
          if (op == ReduceOp::Sum) acc += v;
          else if (op == ReduceOp::Max) acc = v > acc ? v : acc;
          else acc = v < acc ? v : acc;
        }
        out[i] = static_cast<T>(acc);
      }
    });
  }
  void do_broadcast(void* buf, size_t bytes, int root) override {
    if (rank_ == root) {
      for (int p = 0; p < size(); ++p)
        if (p != root) parent_.send(buf, bytes, members_[p], tag_);
    } else {
      parent_.recv(buf, bytes, members_[root], tag_);
    }
  }
  void do_barrier() override {
    const int n = size();
    uint8_t s = 1, r = 0;
    for (int k = 1; k < n; ++k) parent_.sendrecv(&s, 1, members_[(rank_ + k) % n], &r, 1, members_[(rank_ - k + n) % n], tag_);
  }
  void do_abort(const std::string& reason) override { parent_.abort(reason); }

 private:
  Communicator& parent_;
  std::vector<int> members_;
  int tag_;
  int rank_ = -1;
};

}  // namespace

std::unique_ptr<Communicator> make_subcommunicator(Communicator& parent, std::vector<int> members, int tag) {
  return std::make_unique<SubComm>(parent, std::move(members), tag);
}

}  // namespace zen
