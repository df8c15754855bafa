// The C API under mpirun, error codes one by one and the poisoning rule (include/zen/zen.h): a rank's
// error reaches every peer as zenRemoteError at once, and no later call on any rank can succeed on
// the poisoned communicator (the retry-after-error case: never a sum mixing two steps). Needs >= 2
// ranks for the cross-rank cases (skipped at 1).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "zen/zen.h"

namespace {

struct Comm {
  zenComm_t c = nullptr;
  Comm() {
    MPI_Comm w = MPI_COMM_WORLD;
    EXPECT_EQ(zenCommInitMpi(&c, &w), zenSuccess) << zenGetLastError();
  }
  ~Comm() { zenCommDestroy(c); }
};

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
constexpr uint64_t kN = 1000;

}  // namespace

TEST(CapiMpi, UnknownSchemeDtypeEncodingAndIndexTypeAreInvalidArgument) {
  {
    Comm c;
    zenSparseAllreduce_t op = nullptr;
    EXPECT_EQ(zenSparseAllreduceCreate(&op, c.c, "nope", kN, 1, zenFloat32, nullptr), zenInvalidArgument);
    EXPECT_NE(std::string(zenGetLastError()).find("unknown scheme 'nope'"), std::string::npos) << zenGetLastError();
  }
  {
    Comm c;
    zenSparseAllreduce_t op = nullptr;
    EXPECT_EQ(zenSparseAllreduceCreate(&op, c.c, "balanced", kN, 1, static_cast<zenDataType_t>(9), nullptr), zenInvalidArgument);
    EXPECT_NE(std::string(zenGetLastError()).find("unknown dtype 9"), std::string::npos) << zenGetLastError();
  }
  {
    Comm c;
    zenSparseAllreduce_t op = nullptr;
    zenOptions_t o;
    zenOptionsInit(&o);
    o.pull = static_cast<zenPullEncoding_t>(7);
    EXPECT_EQ(zenSparseAllreduceCreate(&op, c.c, "balanced", kN, 1, zenFloat32, &o), zenInvalidArgument);
    EXPECT_NE(std::string(zenGetLastError()).find("unknown pull encoding 7"), std::string::npos) << zenGetLastError();
  }
  {
    Comm c;
    zenSparseAllreduce_t op = nullptr;
    zenOptions_t o;
    zenOptionsInit(&o);
    EXPECT_EQ(o.push, zenPullAuto);
    o.push = static_cast<zenPullEncoding_t>(4);
    EXPECT_EQ(zenSparseAllreduceCreate(&op, c.c, "balanced", kN, 1, zenFloat32, &o), zenInvalidArgument);
    EXPECT_NE(std::string(zenGetLastError()).find("unknown push encoding 4"), std::string::npos) << zenGetLastError();
  }
  {
    Comm c;
    zenSparseAllreduce_t op = nullptr;
    ASSERT_EQ(zenSparseAllreduceCreate(&op, c.c, "allgather", kN, 1, zenFloat32, nullptr), zenSuccess) << zenGetLastError();
    // Every rank has finished its setup before any rank fails the call below: a fast rank's error
    // (poisoning the communicator) must not reach a slow rank still inside its setup collectives.
    MPI_Barrier(MPI_COMM_WORLD);
    int64_t idx[1] = {1};
    float val[1] = {1.0f};
    std::vector<float> out(kN);
    EXPECT_EQ(zenSparseAllreduceDense(op, 1, idx, static_cast<zenIndexType_t>(5), val, out.data()), zenInvalidArgument);
    zenSparseAllreduceDestroy(op);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CapiMpi, StatsCallsAndNullArguments) {
  Comm c;
  int r = -1, n = -1;
  EXPECT_EQ(zenCommRank(c.c, &r), zenSuccess);
  EXPECT_EQ(zenCommSize(c.c, &n), zenSuccess);
  EXPECT_EQ(r, rank());
  EXPECT_EQ(n, size());
  EXPECT_EQ(zenCommRank(c.c, nullptr), zenInvalidArgument);
  EXPECT_EQ(zenCommSetTimeout(c.c, 0), zenInvalidArgument);
  zenSparseAllreduce_t op = nullptr;
  ASSERT_EQ(zenSparseAllreduceCreate(&op, c.c, "balanced", kN, 1, zenFloat64, nullptr), zenSuccess) << zenGetLastError();
  int64_t idx[2] = {static_cast<int64_t>(rank()), static_cast<int64_t>(kN - 1)};
  double val[2] = {1.0, 2.0};
  size_t k = 0;
  ASSERT_EQ(zenSparseAllreduceSparse(op, 2, idx, zenInt64, val, &k), zenSuccess) << zenGetLastError();
  EXPECT_EQ(k, static_cast<size_t>(size()) + (kN - 1 < static_cast<uint64_t>(size()) ? 0 : 1));
  uint64_t sent = 0, recv = 0, cs = 0, cr = 0;
  double sec = -1;
  EXPECT_EQ(zenSparseAllreduceLastStats(op, &sent, &recv, &sec), zenSuccess);
  EXPECT_EQ(zenCommTraffic(c.c, &cs, &cr), zenSuccess);
  EXPECT_GE(sec, 0.0);
  if (size() > 1) {
    EXPECT_GT(sent, 0u);
    EXPECT_GE(cs, sent);  // the communicator also counts the setup exchange
  }
  EXPECT_EQ(zenSparseAllreduceLastStats(nullptr, &sent, &recv, &sec), zenInvalidArgument);
  zenSparseAllreduceDestroy(op);
  MPI_Barrier(MPI_COMM_WORLD);
}

// Destroying a communicator exchanges "closing" with every peer; a peer's closing that the
// pre-posted abort receive caught just before it was cancelled must count, or the destructor
// waits out its bound (10 s at the default timeout; it did at n = 3 before the fix).
TEST(CapiMpi, DestroyingCommunicatorsDoesNotWaitOutTheClosingBound) {
  for (int it = 0; it < 6; ++it) {
    zenComm_t c = nullptr;
    MPI_Comm w = MPI_COMM_WORLD;
    ASSERT_EQ(zenCommInitMpi(&c, &w), zenSuccess) << zenGetLastError();
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(zenCommDestroy(c), zenSuccess);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 5.0) << "destroy #" << it << " took " << s << " s";
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CapiMpi, AutoRunsOneSchemeOnEveryRankAndExplainsIt) {
  Comm c;
  zenSparseAllreduce_t op = nullptr;
  ASSERT_EQ(zenSparseAllreduceCreate(&op, c.c, "auto", kN, 1, zenFloat64, nullptr), zenSuccess) << zenGetLastError();
  int64_t idx[2] = {static_cast<int64_t>(rank()), static_cast<int64_t>(kN - 1)};
  double val[2] = {1.0, 2.0};
  std::vector<double> out(kN);
  for (int call = 0; call < 15; ++call) {
    ASSERT_EQ(zenSparseAllreduceDense(op, 2, idx, zenInt64, val, out.data()), zenSuccess) << zenGetLastError();
    for (uint64_t i = 0; i < kN; ++i) {
      double want = (i < static_cast<uint64_t>(size()) ? 1.0 : 0.0) + (i == kN - 1 ? 2.0 * size() : 0.0);
      ASSERT_EQ(out[i], want) << "call " << call << " element " << i;
    }
    const char* scheme = nullptr;
    const char* why = nullptr;
    ASSERT_EQ(zenSparseAllreduceLastScheme(op, &scheme, &why), zenSuccess);
    ASSERT_NE(scheme, nullptr);
    EXPECT_NE(std::string(why).find("auto"), std::string::npos) << why;
    // The same scheme on every rank: compare the name's hash.
    uint64_t h = std::hash<std::string>{}(scheme), lo = 0, hi = 0;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(lo, hi) << "call " << call << ": ranks ran different schemes (this one: " << scheme << ")";
  }
  const char* scheme = nullptr;
  EXPECT_EQ(zenSparseAllreduceLastScheme(nullptr, &scheme, nullptr), zenInvalidArgument);
  zenSparseAllreduceDestroy(op);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CapiMpi, TimeoutNamesTheMissingRank) {
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int missing = size() - 1;
  {
    Comm c;
    ASSERT_EQ(zenCommSetTimeout(c.c, 300), zenSuccess);
    zenSparseAllreduce_t op = nullptr;
    ASSERT_EQ(zenSparseAllreduceCreate(&op, c.c, "balanced", kN, 1, zenFloat32, nullptr), zenSuccess) << zenGetLastError();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank() != missing) {
      int64_t idx[1] = {3};
      float val[1] = {1.0f};
      std::vector<float> out(kN);
      const auto t0 = std::chrono::steady_clock::now();
      EXPECT_EQ(zenSparseAllreduceDense(op, 1, idx, zenInt64, val, out.data()), zenTimeout);
      EXPECT_LT(ms_since(t0), 2 * 300.0);
      EXPECT_NE(std::string(zenGetLastError()).find("peer " + std::to_string(missing)), std::string::npos) << zenGetLastError();
    }
    MPI_Barrier(MPI_COMM_WORLD);  // the missing rank is alive but elsewhere meanwhile
    zenSparseAllreduceDestroy(op);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A rank that destroys its communicator while the others wait in an operation on it: they time out
// naming it and saying that it destroyed its communicator (its "closing" message reached them).
TEST(CapiMpi, PeerThatDestroysItsCommunicatorIsNamed) {
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int leaver = size() - 1;
  {
    Comm c;
    ASSERT_EQ(zenCommSetTimeout(c.c, 300), zenSuccess);
    zenSparseAllreduce_t op = nullptr;
    ASSERT_EQ(zenSparseAllreduceCreate(&op, c.c, "balanced", kN, 1, zenFloat32, nullptr), zenSuccess) << zenGetLastError();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank() != leaver) {
      int64_t idx[1] = {3};
      float val[1] = {1.0f};
      std::vector<float> out(kN);
      const auto t0 = std::chrono::steady_clock::now();
      EXPECT_EQ(zenSparseAllreduceDense(op, 1, idx, zenInt64, val, out.data()), zenTimeout);
      EXPECT_LT(ms_since(t0), 2 * 300.0 + 200.0);
      const std::string m = zenGetLastError();
      EXPECT_NE(m.find("peer " + std::to_string(leaver)), std::string::npos) << m;
      EXPECT_NE(m.find("destroyed their communicator"), std::string::npos) << m;
    }
    zenSparseAllreduceDestroy(op);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Rank 1 passes an index outside [0, N): it gets zenInvalidArgument, every other rank zenRemoteError
// naming it at once (not after the 60 s timeout). Rank 1 then retries with valid input, everyone
// calls again: every call fails (the communicator is poisoned), none returns a sum.
TEST(CapiMpi, ErrorReachesEveryRankAndRetryNeverMixesSteps) {
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  for (const char* scheme : {"balanced", "allgather", "sparse_ps", "dense_native", "dense", "sparcml", "omnireduce"}) {
    SCOPED_TRACE(scheme);
    Comm c;
    ASSERT_EQ(zenCommSetTimeout(c.c, 60000), zenSuccess);
    zenSparseAllreduce_t op = nullptr;
    ASSERT_EQ(zenSparseAllreduceCreate(&op, c.c, scheme, kN, 1, zenFloat32, nullptr), zenSuccess) << zenGetLastError();
    MPI_Barrier(MPI_COMM_WORLD);  // every rank has finished the setup before rank 1 fails
    std::vector<float> out(kN, -1.0f);
    int64_t good[1] = {5};
    int64_t bad[1] = {static_cast<int64_t>(kN)};
    float val[1] = {1.0f};
    const auto t0 = std::chrono::steady_clock::now();
    const zenResult_t first = zenSparseAllreduceDense(op, 1, rank() == 1 ? bad : good, zenInt64, val, out.data());
    const double ms = ms_since(t0);
    const std::string msg = zenGetLastError();
    if (rank() == 1) {
      EXPECT_EQ(first, zenInvalidArgument) << msg;
      EXPECT_NE(msg.find("index 1000"), std::string::npos) << msg;
    } else {
      EXPECT_EQ(first, zenRemoteError) << msg;
      EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
      EXPECT_NE(msg.find("index 1000"), std::string::npos) << msg;
      EXPECT_LT(ms, 5000.0) << "the peer's error did not arrive at once";
    }
    const zenResult_t again = zenSparseAllreduceDense(op, 1, good, zenInt64, val, out.data());
    EXPECT_EQ(again, zenInvalidUsage) << zenGetLastError();
    EXPECT_NE(std::string(zenGetLastError()).find("refuses further use"), std::string::npos) << zenGetLastError();
    zenSparseAllreduceDestroy(op);
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// The C API on MPI communicators the caller made: the hierarchical mode over an MPI split (intra:
// consecutive blocks of L ranks, inter: ranks with the same local index), a sub-communicator of
// WORLD (not WORLD itself), and the non-blocking forms while the caller computes.
TEST(CapiMpiApi, HierarchicalOverAnMpiSplitSubCommunicatorsAndNonBlocking) {
  const int n = size(), r = rank();
  const int L = n % 2 == 0 ? 2 : 1;
  MPI_Comm intra_m, inter_m, odd_m;
  MPI_Comm_split(MPI_COMM_WORLD, r / L, r, &intra_m);
  MPI_Comm_split(MPI_COMM_WORLD, r % L, r, &inter_m);
  {
    Comm w;
    zenComm_t intra = nullptr, inter = nullptr;
    ASSERT_EQ(zenCommInitMpi(&intra, &intra_m), zenSuccess) << zenGetLastError();
    ASSERT_EQ(zenCommInitMpi(&inter, &inter_m), zenSuccess) << zenGetLastError();
    zenOptions_t o;
    ASSERT_EQ(zenOptionsInit(&o), zenSuccess);
    o.intra = intra;
    o.inter = inter;
    o.inter_scheme = "sparcml";
    zenSparseAllreduce_t op = nullptr;
    ASSERT_EQ(zenSparseAllreduceCreate(&op, w.c, "hierarchical", kN, 1, zenFloat64, &o), zenSuccess) << zenGetLastError();
    int64_t idx[3] = {0, static_cast<int64_t>(kN - 1), 10 + r};
    double val[3] = {1.0, 2.0, 4.0};
    std::vector<double> want(kN, 0.0), out(kN, -1.0), out2(kN, -1.0);
    for (int p = 0; p < n; ++p) {
      want[0] += 1.0;
      want[kN - 1] += 2.0;
      want[10 + static_cast<size_t>(p)] += 4.0;
    }
    ASSERT_EQ(zenSparseAllreduceDense(op, 3, idx, zenInt64, val, out.data()), zenSuccess) << zenGetLastError();
    EXPECT_EQ(out, want);
    zenRequest_t q = nullptr;
    ASSERT_EQ(zenSparseAllreduceDenseStart(op, 3, idx, zenInt64, val, out2.data(), &q), zenSuccess) << zenGetLastError();
    volatile double s = 0;
    for (int i = 1; i < 200000; ++i) s = s + 1.0 / i;  // the caller's own work meanwhile
    int done = 0;
    while (!done) ASSERT_EQ(zenRequestTest(&q, &done), zenSuccess) << zenGetLastError();
    EXPECT_EQ(out2, want);
    zenSparseAllreduceDestroy(op);
    zenCommDestroy(intra);
    zenCommDestroy(inter);
  }
  // A sub-communicator (the odd ranks, or everyone at n = 1): average, sparse non-blocking.
  MPI_Comm_split(MPI_COMM_WORLD, n > 1 ? r % 2 : 0, r, &odd_m);
  if (n == 1 || r % 2 == 1) {
    int m = 0;
    MPI_Comm_size(odd_m, &m);
    zenComm_t c = nullptr;
    ASSERT_EQ(zenCommInitMpi(&c, &odd_m), zenSuccess) << zenGetLastError();
    zenOptions_t o;
    zenOptionsInit(&o);
    o.average = 1;
    zenSparseAllreduce_t op = nullptr;
    ASSERT_EQ(zenSparseAllreduceCreate(&op, c, "balanced", kN, 1, zenFloat32, &o), zenSuccess) << zenGetLastError();
    int64_t idx[1] = {7};
    float val[1] = {static_cast<float>(m) * 2.0f};
    zenRequest_t q = nullptr;
    ASSERT_EQ(zenSparseAllreduceSparseStart(op, 1, idx, zenInt64, val, &q), zenSuccess) << zenGetLastError();
    ASSERT_EQ(zenRequestWait(&q), zenSuccess) << zenGetLastError();
    size_t k = 0;
    ASSERT_EQ(zenSparseAllreduceResultSize(op, &k), zenSuccess);
    ASSERT_EQ(k, 1u);
    int64_t oi = -1;
    float ov = -1;
    ASSERT_EQ(zenSparseAllreduceResult(op, &oi, &ov), zenSuccess);
    EXPECT_EQ(oi, 7);
    EXPECT_EQ(ov, static_cast<float>(m) * 2.0f);  // the average of m equal values
    zenSparseAllreduceDestroy(op);
    zenCommDestroy(c);
  }
  MPI_Comm_free(&intra_m);
  MPI_Comm_free(&inter_m);
  MPI_Comm_free(&odd_m);
  MPI_Barrier(MPI_COMM_WORLD);
}

// MPI initialized below MPI_THREAD_SERIALIZED (ZEN_TEST_MPI_THREAD=funneled): the non-blocking form
// refuses with a message saying what to change; the blocking form works.
TEST(CapiMpiApi, NonBlockingNeedsSerializedThreads) {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided >= MPI_THREAD_SERIALIZED) GTEST_SKIP() << "MPI runs at MPI_THREAD_SERIALIZED or higher";
  Comm c;
  zenSparseAllreduce_t op = nullptr;
  ASSERT_EQ(zenSparseAllreduceCreate(&op, c.c, "balanced", kN, 1, zenFloat32, nullptr), zenSuccess) << zenGetLastError();
  int64_t idx[1] = {3};
  float val[1] = {1.0f};
  std::vector<float> out(kN);
  ASSERT_EQ(zenSparseAllreduceDense(op, 1, idx, zenInt64, val, out.data()), zenSuccess) << zenGetLastError();
  EXPECT_EQ(out[3], static_cast<float>(size()));
  // The refused start poisons the communicator: a rank that gets there while a slower peer is still
  // in the blocking call's last exchange would fail that call (seen under load).
  MPI_Barrier(MPI_COMM_WORLD);
  zenRequest_t q = nullptr;
  EXPECT_EQ(zenSparseAllreduceDenseStart(op, 1, idx, zenInt64, val, out.data(), &q), zenUnsupported);
  EXPECT_NE(std::string(zenGetLastError()).find("MPI_THREAD_SERIALIZED"), std::string::npos) << zenGetLastError();
  EXPECT_EQ(q, nullptr);
  zenSparseAllreduceDestroy(op);
  MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  const char* lvl = std::getenv("ZEN_TEST_MPI_THREAD");
  int provided = 0;
  MPI_Init_thread(&argc, &argv, lvl && std::string(lvl) == "funneled" ? MPI_THREAD_FUNNELED : MPI_THREAD_SERIALIZED,
                  &provided);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank() != 0) {
    auto& l = ::testing::UnitTest::GetInstance()->listeners();
    delete l.Release(l.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
