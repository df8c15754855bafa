// A peer that sends malformed index parts (a corrupted push or pull message of balanced / sparse_ps,
// every index code) is caught by the receiver's decoder: a clear error naming the receiving rank,
// the scheme, the phase and the peer, reaching every rank at once (no hang, no crash, no wrong
// result handed back). The corruption is made by a communicator decorator over the loopback one
// that flips bits in one rank's outgoing alltoallv (push) or allgatherv (pull) bytes.
//
// "At once": the communicator's timeout is 10 s and every rank must fail within 2 s of entering the
// call (the abort takes milliseconds; a rank that waited for its timeout instead fails this bound
// and reports a Timeout, not the RemoteError required below). docs/reliability.md, "Timing bounds".
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "zen/comm/loopback.hpp"
#include "zen/error.hpp"
#include "zen/schemes/scheme.hpp"

using namespace zen;

namespace {

// Forwards every collective to `in`, except that rank `bad`'s outgoing bytes of the chosen
// collective get byte `at` (of the first non-empty block) XORed with `mask`.
class Tamper final : public Communicator {
 public:
  enum class Where { Push, Pull };
  Tamper(Communicator& in, int bad, Where w, size_t at, uint8_t mask) : in_(in), bad_(bad), where_(w), at_(at), mask_(mask) {}
  ~Tamper() override { finish_calls(); }
  int rank() const override { return in_.rank(); }
  int size() const override { return in_.size(); }
  const char* backend_name() const override { return "tamper"; }

 protected:
  void do_send(const void* b, size_t n, int p, int t) override { in_.send(b, n, p, t); }
  void do_recv(void* b, size_t n, int p, int t) override { in_.recv(b, n, p, t); }
  void do_sendrecv(const void* sb, size_t sn, int d, void* rb, size_t rn, int s, int t) override {
    in_.sendrecv(sb, sn, d, rb, rn, s, t);
  }
  void do_alltoallv(const void* sb, const size_t* sc, const size_t* sd, void* rb, const size_t* rc, const size_t* rd) override {
    if (where_ == Where::Push && rank() == bad_) {
      size_t total = 0;
      for (int p = 0; p < size(); ++p) total = std::max(total, sd[p] + sc[p]);
      std::vector<uint8_t> copy(static_cast<const uint8_t*>(sb), static_cast<const uint8_t*>(sb) + total);
      for (int p = 0; p < size(); ++p)
        if (sc[p] > at_) {
          copy[sd[p] + at_] ^= mask_;
          break;
        }
      in_.alltoallv(copy.data(), sc, sd, rb, rc, rd);
      return;
    }
    in_.alltoallv(sb, sc, sd, rb, rc, rd);
  }
  void do_allgatherv(const void* sb, size_t sn, void* rb, const size_t* rc, const size_t* rd) override {
    if (where_ == Where::Pull && rank() == bad_ && sn > at_) {
      std::vector<uint8_t> copy(static_cast<const uint8_t*>(sb), static_cast<const uint8_t*>(sb) + sn);
      copy[at_] ^= mask_;
      in_.allgatherv(copy.data(), sn, rb, rc, rd);  // in place or not: the others get the bad bytes
      return;
    }
    in_.allgatherv(sb, sn, rb, rc, rd);
  }
  void do_allgather(const void* sb, size_t n, void* rb) override { in_.allgather(sb, n, rb); }
  void do_alltoall(const void* sb, size_t n, void* rb) override { in_.alltoall(sb, n, rb); }
  void do_allreduce(void* b, size_t c, DType t, ReduceOp op) override { in_.allreduce(b, c, t, op); }
  void do_broadcast(void* b, size_t n, int root) override { in_.broadcast(b, n, root); }
  void do_barrier() override { in_.barrier(); }
  void do_abort(const std::string& reason) override { in_.abort(reason); }

 private:
  Communicator& in_;
  int bad_;
  Where where_;
  size_t at_;
  uint8_t mask_;
};

struct Outcome {
  bool threw = false;
  Result code = Result::Success;
  std::string what;
  double ms = 0;  // from the call's entry to its error
};

constexpr auto kTimeout = std::chrono::milliseconds(10000);
constexpr double kAtOnceMs = 2000;

// n = 3, rank 1 tampers. Input: every rank holds ~10 % of the rows with small integer values.
std::vector<Outcome> run_tampered(const std::string& scheme, IndexEncoding code, Tamper::Where where, size_t at,
                                  uint8_t mask) {
  const int n = 3;
  const uint64_t R = 4000;
  std::vector<Outcome> out(n);
  std::mutex mu;
  loopback::run(n, [&](Communicator& base) {
    Tamper c(base, 1, where, at, mask);
    Outcome o;
    try {
      SchemeOptions opt;
      opt.push = code;
      opt.pull = code;
      opt.threads = 1;
      auto s = make_scheme(scheme, c, TensorSpec{R, 1, DType::F32}, opt);
      std::vector<int64_t> idx;
      std::vector<float> val;
      for (uint64_t r = static_cast<uint64_t>(c.rank()); r < R; r += 10) {
        idx.push_back(static_cast<int64_t>(r));
        val.push_back(1.0f);
      }
      SparseView v;
      v.dense_len = R;
      v.row_width = 1;
      v.nnz = idx.size();
      v.indices = idx.data();
      v.index_type = IndexType::I64;
      v.values = val.data();
      v.dtype = DType::F32;
      std::vector<float> dense(R);
      // Every rank has finished the setup before rank 1's bad bytes can fail anyone.
      c.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      try {
        s->run_dense(v, dense.data());
      } catch (const Error& e) {
        o.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        throw;
      }
    } catch (const Error& e) {
      o.threw = true;
      o.code = e.code();
      o.what = e.what();
    }
    std::lock_guard<std::mutex> lk(mu);
    out[static_cast<size_t>(base.rank())] = o;
  }, kTimeout);
  return out;
}

// Every rank failed within kAtOnceMs. The ranks whose own decoder rejected the bytes report the
// malformed part (`needle`); every other rank reports a RemoteError that names one of them and quotes
// that message. At least one rank found it. Returns false once the test has a failure.
bool error_reached_every_rank_at_once(const std::vector<Outcome>& got, const std::string& needle, const std::string& where) {
  std::vector<int> origins;
  for (size_t r = 0; r < got.size(); ++r)
    if (got[r].threw && got[r].code != Result::RemoteError && got[r].what.find(needle) != std::string::npos)
      origins.push_back(static_cast<int>(r));
  EXPECT_FALSE(origins.empty()) << where << ": no rank reported '" << needle << "'; rank 0: " << got[0].what;
  for (size_t r = 0; r < got.size(); ++r) {
    const Outcome& o = got[r];
    EXPECT_TRUE(o.threw) << where << ": rank " << r << " returned normally";
    if (!o.threw) continue;
    EXPECT_LT(o.ms, kAtOnceMs) << where << ": rank " << r << " failed after " << o.ms << " ms: " << o.what;
    if (std::find(origins.begin(), origins.end(), static_cast<int>(r)) != origins.end()) continue;
    EXPECT_EQ(o.code, Result::RemoteError) << where << ": rank " << r << ": " << o.what;
    bool names_origin = false;
    for (int q : origins) names_origin |= o.what.find("rank " + std::to_string(q) + " aborted") != std::string::npos;
    EXPECT_TRUE(names_origin) << where << ": rank " << r << " does not name the rank that found the bad bytes: " << o.what;
    EXPECT_NE(o.what.find(needle), std::string::npos) << where << ": rank " << r << " does not quote the error: " << o.what;
  }
  return !::testing::Test::HasFailure();
}

}  // namespace

// Elias-Fano and bitmap pushes: a flipped bit in the upper part / the bitmap changes the set-bit count.
TEST(WireCorruption, MalformedPushIndexPartNamesThePeer) {
  for (const char* scheme : {"balanced", "sparse_ps"})
    for (IndexEncoding code : {IndexEncoding::EliasFano, IndexEncoding::Bitmap}) {
      const std::string where = std::string(scheme) + " code " + std::to_string(static_cast<int>(code));
      const auto got = run_tampered(scheme, code, Tamper::Where::Push, 0, 0x01);
      // One failed case is enough (each later one would wait out the timeout again).
      if (!error_reached_every_rank_at_once(got, "push: peer 1 sent a malformed", where)) return;
    }
}

// Pull messages: the owner's index part is corrupted for every receiver.
TEST(WireCorruption, MalformedPullIndexPartNamesTheOwner) {
  for (const char* scheme : {"balanced", "sparse_ps"})
    for (IndexEncoding code : {IndexEncoding::EliasFano, IndexEncoding::Bitmap, IndexEncoding::Coo}) {
      const std::string where = std::string(scheme) + " code " + std::to_string(static_cast<int>(code));
      // COO: set the top bit of the first key (far outside the owner's set); the others: flip a bit.
      const size_t at = code == IndexEncoding::Coo ? 3 : 0;
      const uint8_t mask = code == IndexEncoding::Coo ? 0x40 : 0x01;
      const auto got = run_tampered(scheme, code, Tamper::Where::Pull, at, mask);
      if (!error_reached_every_rank_at_once(got, "pull: owner 1 sent", where)) return;
    }
}

// allgather with a dense result (the single scatter pass checks the range itself): rank 1's first key
// gets its top bit set; every receiver names the peer and the row, every other rank hears of it.
TEST(WireCorruption, AllgatherRowOutsideNamesThePeer) {
  const auto got = run_tampered("allgather", IndexEncoding::Coo, Tamper::Where::Pull, 3, 0x40);
  error_reached_every_rank_at_once(got, "allgather: peer 1 sent row", "allgather dense");
}

