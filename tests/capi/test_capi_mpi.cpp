// The C API under mpirun, error codes one by one and the poisoning rule (include/zen/zen.h): a rank's
// error reaches every peer as zenRemoteError at once, and no later call on any rank can succeed on
// the poisoned communicator (the retry-after-error case: never a sum mixing two steps); timeouts at
// 1 s name the missing rank within 2 s; a started call is pending while its peers have not entered.
// Needs >= 2 ranks for the cross-rank cases (skipped at 1).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>
#include <mpi.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "zen/schemes/scheme.hpp"
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
// Timeout tests: 1 s, detection within 2x (docs/reliability.md, "Timing bounds in tests": shorter
// timeouts let the scheduling jitter of oversubscribed ranks decide the outcome).
constexpr int kTimeoutMs = 1000;

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

// The auto fields appended to zenOptions_t reach the plan: zenOptionsInit gives the C++ defaults;
// auto_cores = 1 makes every machine's ranks share one core (the explanation says so, n > 1);
// with a model link of 10^15 B/s the calls take far longer than predicted, so auto learns a slower
// link after its 3rd call unless auto_learn_link <= 1.
TEST(CapiMpi, AppendedAutoOptionsReachThePlan) {
  zenOptions_t d;
  ASSERT_EQ(zenOptionsInit(&d), zenSuccess);
  const zen::SchemeOptions::Auto a;
  EXPECT_EQ(d.auto_explore_budget, a.explore_budget);
  EXPECT_EQ(d.auto_explore_share, a.explore_share);
  EXPECT_EQ(d.auto_cold_calls, a.cold_calls);
  EXPECT_EQ(d.auto_cores, a.cores);
  EXPECT_EQ(d.auto_learn_link, a.learn_link);
  EXPECT_EQ(d.auto_cache, nullptr);
  if (size() == 1) return;  // one rank: no cores shared, no link
  Comm c;
  for (double learn : {2.0, 0.0}) {
    zenOptions_t o = d;
    o.auto_cores = 1;
    o.auto_explore_within = 1.0;  // model only
    o.auto_bytes_per_s = 1e15;
    o.auto_alpha_s = 1e-9;
    o.auto_message_s = 0;
    o.auto_learn_link = learn;
    o.node_size = 1;  // one rank per node: a link between them (mpirun runs them on one machine)
    zenSparseAllreduce_t op = nullptr;
    ASSERT_EQ(zenSparseAllreduceCreate(&op, c.c, "auto", kN, 1, zenFloat64, &o), zenSuccess) << zenGetLastError();
    int64_t idx[2] = {static_cast<int64_t>(rank()), static_cast<int64_t>(kN - 1)};
    double val[2] = {1.0, 2.0};
    std::vector<double> out(kN);
    std::string why;
    for (int call = 0; call < 5; ++call) {
      ASSERT_EQ(zenSparseAllreduceDense(op, 2, idx, zenInt64, val, out.data()), zenSuccess) << zenGetLastError();
      ASSERT_EQ(out[kN - 1], 2.0 * size());
      const char* scheme = nullptr;
      const char* w = nullptr;
      ASSERT_EQ(zenSparseAllreduceLastScheme(op, &scheme, &w), zenSuccess);
      why = w;
      if (call == 0) {
        EXPECT_NE(why.find("shared cores: " + std::to_string(size()) + " ranks per core"), std::string::npos) << why;
      }
    }
    EXPECT_EQ(why.find("link learned") != std::string::npos, learn > 1) << "auto_learn_link " << learn << ": " << why;
    zenSparseAllreduceDestroy(op);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// auto_cache reaches the plan: a first plan appends its choice to the file (one line per rank,
// after its 3rd call), a second plan with the same options takes it from there in its first call.
TEST(CapiMpi, AutoCacheRemembersAcrossPlans) {
  long pid = static_cast<long>(getpid());
  MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  const std::string path = "/tmp/zen-capi-auto-cache-" + std::to_string(pid);
  if (rank() == 0) std::remove(path.c_str());
  MPI_Barrier(MPI_COMM_WORLD);
  zenOptions_t o;
  ASSERT_EQ(zenOptionsInit(&o), zenSuccess);
  o.auto_explore_within = 1.0;  // the model decides the first plan
  o.auto_candidates = "allgather,balanced";
  o.auto_cache = path.c_str();
  Comm c;
  std::string why[2];
  for (int plan = 0; plan < 2; ++plan) {
    zenSparseAllreduce_t op = nullptr;
    ASSERT_EQ(zenSparseAllreduceCreate(&op, c.c, "auto", kN, 1, zenFloat64, &o), zenSuccess) << zenGetLastError();
    int64_t idx[2] = {static_cast<int64_t>(rank()), static_cast<int64_t>(kN - 1)};
    double val[2] = {1.0, 2.0};
    std::vector<double> out(kN);
    for (int call = 0; call < 3; ++call) {
      ASSERT_EQ(zenSparseAllreduceDense(op, 2, idx, zenInt64, val, out.data()), zenSuccess) << zenGetLastError();
      ASSERT_EQ(out[kN - 1], 2.0 * size());
      const char* scheme = nullptr;
      const char* w = nullptr;
      ASSERT_EQ(zenSparseAllreduceLastScheme(op, &scheme, &w), zenSuccess);
      if ((plan == 0 && call == 2) || (plan == 1 && call == 0)) why[plan] = w;
    }
    zenSparseAllreduceDestroy(op);
  }
  EXPECT_NE(why[0].find("; remembered in " + path), std::string::npos) << why[0];
  EXPECT_NE(why[1].find("(first call): remembered in " + path), std::string::npos) << why[1];
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) std::remove(path.c_str());
}

TEST(CapiMpi, TimeoutNamesTheMissingRank) {
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int missing = size() - 1;
  {
    Comm c;
    ASSERT_EQ(zenCommSetTimeout(c.c, kTimeoutMs), zenSuccess);
    zenSparseAllreduce_t op = nullptr;
    ASSERT_EQ(zenSparseAllreduceCreate(&op, c.c, "balanced", kN, 1, zenFloat32, nullptr), zenSuccess) << zenGetLastError();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank() != missing) {
      int64_t idx[1] = {3};
      float val[1] = {1.0f};
      std::vector<float> out(kN);
      const auto t0 = std::chrono::steady_clock::now();
      EXPECT_EQ(zenSparseAllreduceDense(op, 1, idx, zenInt64, val, out.data()), zenTimeout);
      EXPECT_LT(ms_since(t0), 2.0 * kTimeoutMs);
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
    ASSERT_EQ(zenCommSetTimeout(c.c, kTimeoutMs), zenSuccess);
    zenSparseAllreduce_t op = nullptr;
    ASSERT_EQ(zenSparseAllreduceCreate(&op, c.c, "balanced", kN, 1, zenFloat32, nullptr), zenSuccess) << zenGetLastError();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank() != leaver) {
      int64_t idx[1] = {3};
      float val[1] = {1.0f};
      std::vector<float> out(kN);
      const auto t0 = std::chrono::steady_clock::now();
      EXPECT_EQ(zenSparseAllreduceDense(op, 1, idx, zenInt64, val, out.data()), zenTimeout);
      EXPECT_LT(ms_since(t0), 2.0 * kTimeoutMs);
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
// consecutive blocks of L ranks, inter: ranks with the same local index), a split of WORLD (ranks
// 1..n-1 for n >= 3, not WORLD itself) with the average, and the non-blocking forms while the caller
// computes.
TEST(CapiMpiApi, HierarchicalOverAnMpiSplitSubCommunicatorsAndNonBlocking) {
  const int n = size(), r = rank();
  const int L = n % 2 == 0 ? 2 : 1;
  MPI_Comm intra_m, inter_m, sub_m;
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
  // A sub-communicator (ranks 1..n-1 for n >= 3, so never WORLD itself; everyone for n <= 2): average,
  // sparse non-blocking. It has m >= 2 ranks whenever n >= 2, and rank q gives 2q + 1, so the average
  // (m, an integer) differs from the sum (m^2).
  const bool sub = n >= 3;
  MPI_Comm_split(MPI_COMM_WORLD, sub && r == 0 ? 1 : 0, r, &sub_m);  // rank 0 alone in color 1 for n >= 3
  if (!(sub && r == 0)) {
    int m = 0, q = 0;
    MPI_Comm_size(sub_m, &m);
    MPI_Comm_rank(sub_m, &q);
    EXPECT_EQ(m, sub ? n - 1 : n);
    zenComm_t c = nullptr;
    ASSERT_EQ(zenCommInitMpi(&c, &sub_m), zenSuccess) << zenGetLastError();
    zenOptions_t o;
    zenOptionsInit(&o);
    o.average = 1;
    zenSparseAllreduce_t op = nullptr;
    ASSERT_EQ(zenSparseAllreduceCreate(&op, c, "balanced", kN, 1, zenFloat32, &o), zenSuccess) << zenGetLastError();
    int64_t idx[1] = {7};
    float val[1] = {static_cast<float>(2 * q + 1)};  // sum over q < m: m^2
    zenRequest_t q0 = nullptr;
    ASSERT_EQ(zenSparseAllreduceSparseStart(op, 1, idx, zenInt64, val, &q0), zenSuccess) << zenGetLastError();
    ASSERT_EQ(zenRequestWait(&q0), zenSuccess) << zenGetLastError();
    size_t k = 0;
    ASSERT_EQ(zenSparseAllreduceResultSize(op, &k), zenSuccess);
    ASSERT_EQ(k, 1u);
    int64_t oi = -1;
    float ov = -1;
    ASSERT_EQ(zenSparseAllreduceResult(op, &oi, &ov), zenSuccess);
    EXPECT_EQ(oi, 7);
    EXPECT_EQ(ov, static_cast<float>(m)) << "the average of 1, 3, ..., 2m-1 over m = " << m << " ranks";
    zenSparseAllreduceDestroy(op);
    zenCommDestroy(c);
  }
  MPI_Comm_free(&intra_m);
  MPI_Comm_free(&inter_m);
  MPI_Comm_free(&sub_m);
  MPI_Barrier(MPI_COMM_WORLD);
}

// The non-blocking form gives control back before the call can complete: ranks 1..n-1 enter only
// after rank 0 has started, seen the request pending (zenRequestTest: not done) and done its own
// work. The ranks are processes and rank 0 may not call MPI while its call is pending
// (MPI_THREAD_SERIALIZED), so rank 0 releases them through a file (the ranks share a host, as under
// ctest). A start that ran the call itself would block rank 0 until its 5 s timeout instead.
TEST(CapiMpiApi, StartReturnsBeforeALatePeerEnters) {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_SERIALIZED) GTEST_SKIP() << "the non-blocking form needs MPI_THREAD_SERIALIZED";
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  char dir[512] = {0};
  if (rank() == 0) {
    const char* tmp = std::getenv("TMPDIR");
    std::snprintf(dir, sizeof dir, "%s/zen_late_peer_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) dir[0] = 0;
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  ASSERT_NE(dir[0], 0) << "mkdtemp failed on rank 0";
  const std::string go = std::string(dir) + "/go";
  {
    Comm c;
    ASSERT_EQ(zenCommSetTimeout(c.c, 5000), zenSuccess);
    zenSparseAllreduce_t op = nullptr;
    ASSERT_EQ(zenSparseAllreduceCreate(&op, c.c, "balanced", kN, 1, zenFloat32, nullptr), zenSuccess) << zenGetLastError();
    MPI_Barrier(MPI_COMM_WORLD);
    int64_t idx[2] = {static_cast<int64_t>(rank()), static_cast<int64_t>(kN - 1)};
    float val[2] = {1.0f, 2.0f};
    std::vector<float> out(kN, -1.0f);
    if (rank() == 0) {
      struct Release {  // the peers enter in every case, so a failure here cannot hang them
        std::string path;
        ~Release() { std::ofstream(path) << "go\n"; }
      } release{go};
      zenRequest_t q = nullptr;
      ASSERT_EQ(zenSparseAllreduceDenseStart(op, 2, idx, zenInt64, val, out.data(), &q), zenSuccess) << zenGetLastError();
      int done = 1;
      EXPECT_EQ(zenRequestTest(&q, &done), zenSuccess) << zenGetLastError();
      EXPECT_EQ(done, 0) << "the started call finished although ranks 1.." << size() - 1 << " had not entered";
      volatile double s = 0;
      for (int i = 1; i < 200000; ++i) s = s + 1.0 / i;  // the caller's own work meanwhile
      done = 1;
      EXPECT_EQ(zenRequestTest(&q, &done), zenSuccess) << zenGetLastError();
      EXPECT_EQ(done, 0) << "finished after the caller's work, still without its peers";
      std::ofstream(go) << "go\n";
      EXPECT_EQ(zenRequestWait(&q), zenSuccess) << zenGetLastError();
    } else {
      // Bounded only as a safety net: rank 0 writes the file in every case.
      const auto t0 = std::chrono::steady_clock::now();
      while (access(go.c_str(), F_OK) != 0 && ms_since(t0) < 120000.0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_EQ(zenSparseAllreduceDense(op, 2, idx, zenInt64, val, out.data()), zenSuccess) << zenGetLastError();
    }
    for (uint64_t i = 0; i < kN; ++i) {
      const float want = (i < static_cast<uint64_t>(size()) ? 1.0f : 0.0f) + (i == kN - 1 ? 2.0f * size() : 0.0f);
      ASSERT_EQ(out[i], want) << "element " << i;
    }
    zenSparseAllreduceDestroy(op);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) {
    std::remove(go.c_str());
    rmdir(dir);
  }
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
  // The refused start fails this rank's communicator, and that reaches the peers at once: a rank
  // that got here first would abort a peer still finishing the blocking call above (seen under load:
  // rank 0's call failed with rank 1's RemoteError, its ASSERT skipped the final barrier, the job hung).
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
