// Concurrency under mpirun (docs/api.md, "Concurrency"). MPI is initialized with the thread level in
// ZEN_TEST_THREAD_LEVEL ("multiple" or "serialized", default multiple):
//  - AgreedOrder: four plans of one communicator in agreed order, each driven from its own thread,
//    requests started, tested and waited in orders that differ per rank: exact under either level
//    (every MPI call runs on the communicator's call-queue thread);
//  - SeveralCommunicators: that communicator plus two more (a duplicate of MPI_COMM_WORLD and a split
//    with the ranks reversed), each driven from its own thread at the same time. Under
//    MPI_THREAD_MULTIPLE every result is exact; under MPI_THREAD_SERIALIZED zen refuses to call MPI
//    from two threads at once: some rank gets Unsupported naming MPI_THREAD_MULTIPLE, a communicator
//    that fails on one rank fails on every rank, no result is wrong and nothing hangs;
//  - CreatedFromTwoThreadsAtOnce: two threads per rank each create a communicator (from their own
//    duplicate of MPI_COMM_WORLD) at the same time, in opposite orders on even and odd ranks (the
//    second starts while the first waits inside its creation for peers that are creating the other
//    one), then drive a plan on it. Both creations complete under either level; the calls are exact
//    (MULTIPLE) or refused clearly, on every rank of a communicator alike (SERIALIZED); nothing hangs.
//    Before the fix of the creation under SERIALIZED (a blocking MPI_Comm_dup inside the gate, the
//    other thread's creation refused) this hung in every run.
//  - DestroyedFromTwoThreadsCrossed: two communicators per rank, destroyed on two threads in opposite
//    orders on even and odd ranks (the second 200 ms after the first). A destruction waits for its
//    peers' "closing" (at most twice the timeout, here 10 s); it must not hold the process-wide gate
//    while it waits, or each rank's first destruction waits for a peer whose matching destruction
//    waits for that peer's gate, held by its own first destruction: every destruction ran out its
//    bound and freed its communicator with the peers' messages still to come (python_faults_np3
//    `threads` hung in CI that way). Every destruction ends well within its bound, and communicators
//    created afterwards work.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "concurrency.hpp"
#include "zen/comm/mpi.hpp"

using namespace zen;
using namespace zen::conctest;

namespace {
int g_level = MPI_THREAD_SINGLE;
constexpr uint64_t kCalls = 20;

struct Shared {
  int rank = 0, n = 1;
};
Shared g;

std::vector<DriveResult> drive_plans(Communicator& c, const std::vector<PlanSpec>& specs, uint64_t first_pid, uint64_t seed) {
  std::vector<std::unique_ptr<SparseAllreduce>> plans;
  for (const auto& s : specs) plans.push_back(make_scheme(s.scheme, c, s.spec));
  std::vector<DriveResult> out(specs.size());
  std::vector<std::thread> th;
  for (size_t p = 0; p < specs.size(); ++p)
    th.emplace_back([&, p] { out[p] = drive(*plans[p], specs[p], first_pid + p, c.rank(), c.size(), kCalls, seed); });
  for (auto& t : th) t.join();
  return out;
}

// One verdict per communicator, gathered over the ranks: (clean drivers, failed drivers, wrong elements).
struct Verdict {
  int64_t clean, failed, wrong, unsupported;
};
Verdict gather(const std::vector<DriveResult>& rs) {
  int64_t mine[4] = {0, 0, 0, 0};
  for (const auto& r : rs) {
    (r.error.empty() ? mine[0] : mine[1])++;
    mine[2] += static_cast<int64_t>(r.wrong);
    if (r.error.find("MPI_THREAD_MULTIPLE") != std::string::npos) mine[3]++;
  }
  int64_t all[4];
  MPI_Allreduce(mine, all, 4, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  return Verdict{all[0], all[1], all[2], all[3]};
}
}  // namespace

TEST(ConcurrencyMpi, AgreedOrderPlansOfOneCommunicatorFromThreads) {
  auto c = mpi::create(MPI_COMM_WORLD);
  c->set_timeout(Communicator::Ms(30000));
  c->set_call_order(CallOrder::Agreed);
  const auto rs = drive_plans(*c, plan_specs(), 1, 100 + static_cast<uint64_t>(g.rank));
  for (size_t p = 0; p < rs.size(); ++p) {
    EXPECT_EQ(rs[p].error, "") << "rank " << g.rank << " plan " << p;
    EXPECT_EQ(rs[p].wrong, 0u) << "rank " << g.rank << " plan " << p;
    EXPECT_EQ(rs[p].calls, kCalls) << "rank " << g.rank << " plan " << p;
  }
}

TEST(ConcurrencyMpi, SeveralCommunicatorsEachFromItsOwnThread) {
  const bool multiple = g_level >= MPI_THREAD_MULTIPLE;
  const auto specs = plan_specs();
  // Created on this thread, in the same order on every rank; then used from their own threads.
  auto agreed = mpi::create(MPI_COMM_WORLD);
  auto dup = mpi::create(MPI_COMM_WORLD);
  MPI_Comm rev;
  MPI_Comm_split(MPI_COMM_WORLD, 0, g.n - g.rank, &rev);
  auto split = mpi::create(rev);
  MPI_Comm_free(&rev);
  const Communicator::Ms tmo(multiple ? 30000 : 1000);
  for (Communicator* c : {agreed.get(), dup.get(), split.get()}) c->set_timeout(tmo);
  agreed->set_call_order(CallOrder::Agreed);
  std::vector<DriveResult> ra, rd(1), rsp(1);
  std::thread ta([&] {
    try {
      ra = drive_plans(*agreed, {specs[0], specs[1]}, 1, 200 + static_cast<uint64_t>(g.rank));
    } catch (const std::exception& e) {
      ra.assign(1, DriveResult{});
      ra[0].error = e.what();
    }
  });
  auto one = [&](Communicator& c, const PlanSpec& ps, DriveResult& out, uint64_t seed) {
    try {
      auto plan = make_scheme(ps.scheme, c, ps.spec);
      out = drive(*plan, ps, 7, c.rank(), c.size(), kCalls, seed);
    } catch (const std::exception& e) {
      out.error = e.what();
    }
  };
  std::thread td([&] { one(*dup, specs[2], rd[0], 300 + static_cast<uint64_t>(g.rank)); });
  std::thread ts([&] { one(*split, specs[3], rsp[0], 400 + static_cast<uint64_t>(g.rank)); });
  ta.join();
  td.join();
  ts.join();
  const Verdict va = gather(ra), vd = gather(rd), vs = gather(rsp);
  if (g.rank == 0)
    std::printf("[ concurrency ] %s: agreed comm %lld clean / %lld failed drivers, dup %lld / %lld, split %lld / %lld, "
                "Unsupported errors %lld\n",
                mpi::thread_level_name(g_level), static_cast<long long>(va.clean), static_cast<long long>(va.failed),
                static_cast<long long>(vd.clean), static_cast<long long>(vd.failed), static_cast<long long>(vs.clean),
                static_cast<long long>(vs.failed), static_cast<long long>(va.unsupported + vd.unsupported + vs.unsupported));
  for (const Verdict* v : {&va, &vd, &vs}) EXPECT_EQ(v->wrong, 0);
  if (multiple) {
    for (const Verdict* v : {&va, &vd, &vs}) EXPECT_EQ(v->failed, 0);
    for (const auto& r : ra) EXPECT_EQ(r.error, "") << "rank " << g.rank;
    EXPECT_EQ(rd[0].error, "") << "rank " << g.rank;
    EXPECT_EQ(rsp[0].error, "") << "rank " << g.rank;
    return;
  }
  // SERIALIZED: the refusal is reported, and a communicator that failed anywhere failed everywhere.
  EXPECT_GT(va.unsupported + vd.unsupported + vs.unsupported, 0) << "no rank reported the missing MPI_THREAD_MULTIPLE";
  EXPECT_TRUE(va.failed == 0 || va.clean == 0) << "agreed communicator failed on some ranks only";
  EXPECT_TRUE(vd.failed == 0 || vd.clean == 0) << "duplicate failed on some ranks only";
  EXPECT_TRUE(vs.failed == 0 || vs.clean == 0) << "split failed on some ranks only";
  for (const auto* r : {&rd[0], &rsp[0]})
    if (!r->error.empty() && g.rank == 0) std::printf("[ concurrency ] rank 0: %s\n", r->error.c_str());
}

TEST(ConcurrencyMpi, CommunicatorsCreatedFromTwoThreadsAtOnce) {
  const bool multiple = g_level >= MPI_THREAD_MULTIPLE;
  const auto specs = plan_specs();
  MPI_Comm parent[2];
  MPI_Comm_dup(MPI_COMM_WORLD, &parent[0]);
  MPI_Comm_dup(MPI_COMM_WORLD, &parent[1]);
  const int first = g.rank % 2;  // even ranks create communicator 0 first, odd ranks communicator 1
  std::atomic<bool> started{false};
  std::vector<DriveResult> res(2);
  std::vector<int> created(2, 0);
  auto body = [&](int k) {
    if (k == first) {
      started = true;
    } else {  // starts while the other thread is inside its creation, waiting for the other ranks
      while (!started) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    try {
      auto c = mpi::create(parent[k]);
      created[k] = 1;
      c->set_timeout(Communicator::Ms(multiple ? 30000 : 2000));
      auto plan = make_scheme(specs[k].scheme, *c, specs[k].spec);
      res[k] = drive(*plan, specs[k], 11 + static_cast<uint64_t>(k), c->rank(), c->size(), kCalls, 500 + static_cast<uint64_t>(g.rank));
    } catch (const std::exception& e) {
      res[k].error = e.what();
    }
  };
  std::thread t0(body, 0), t1(body, 1);
  t0.join();
  t1.join();
  MPI_Comm_free(&parent[0]);
  MPI_Comm_free(&parent[1]);
  int made[2] = {created[0], created[1]}, made_all[2];
  MPI_Allreduce(made, made_all, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const Verdict v0 = gather({res[0]}), v1 = gather({res[1]});
  if (g.rank == 0)
    std::printf("[ concurrency ] %s, created from two threads: communicator 0 created on %d ranks, %lld clean / %lld failed, "
                "communicator 1 on %d, %lld / %lld; Unsupported errors %lld\n",
                mpi::thread_level_name(g_level), made_all[0], static_cast<long long>(v0.clean), static_cast<long long>(v0.failed),
                made_all[1], static_cast<long long>(v1.clean), static_cast<long long>(v1.failed),
                static_cast<long long>(v0.unsupported + v1.unsupported));
  EXPECT_EQ(made_all[0], g.n) << "communicator 0 not created on every rank";
  EXPECT_EQ(made_all[1], g.n) << "communicator 1 not created on every rank";
  for (const Verdict* v : {&v0, &v1}) EXPECT_EQ(v->wrong, 0);
  if (multiple) {
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(res[k].error, "") << "rank " << g.rank << " communicator " << k;
      EXPECT_EQ(res[k].calls, kCalls) << "rank " << g.rank << " communicator " << k;
    }
    return;
  }
  // SERIALIZED: a communicator that failed anywhere failed everywhere, each error the refusal
  // (naming MPI_THREAD_MULTIPLE) or a peer's abort quoting it.
  EXPECT_TRUE(v0.failed == 0 || v0.clean == 0) << "communicator 0 failed on some ranks only";
  EXPECT_TRUE(v1.failed == 0 || v1.clean == 0) << "communicator 1 failed on some ranks only";
  for (int k = 0; k < 2; ++k) {
    if (!res[k].error.empty()) {
      EXPECT_NE(res[k].error.find("MPI_THREAD_MULTIPLE"), std::string::npos) << "rank " << g.rank << ": " << res[k].error;
    }
  }
}

TEST(ConcurrencyMpi, DestroyedFromTwoThreadsCrossed) {
  constexpr int kRounds = 2;
  const auto timeout = Communicator::Ms(5000);  // close bound: min(max(2T, 1 s), 10 s) = 10 s
  double worst = 0;
  for (int round = 0; round < kRounds; ++round) {
    MPI_Comm parent[2];
    MPI_Comm_dup(MPI_COMM_WORLD, &parent[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &parent[1]);
    std::unique_ptr<Communicator> c[2];
    for (int k = 0; k < 2; ++k) {
      c[k] = mpi::create(parent[k]);
      c[k]->set_timeout(timeout);
    }
    const int first = g.rank % 2;  // even ranks destroy communicator 0 first, odd ranks communicator 1
    double took[2] = {0, 0};
    auto body = [&](int k) {
      if (k != first) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const auto t0 = std::chrono::steady_clock::now();
      c[k].reset();
      took[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    std::thread t0(body, 0), t1(body, 1);
    t0.join();
    t1.join();
    // Communicators created after the crossed destructions still agree and work.
    for (int k = 0; k < 2; ++k) {
      auto again = mpi::create(parent[k]);
      again->set_timeout(timeout);
      const auto specs = plan_specs();
      auto plan = make_scheme(specs[k].scheme, *again, specs[k].spec);
      const DriveResult r = drive(*plan, specs[k], 31 + static_cast<uint64_t>(k), again->rank(), again->size(), 3, 700 + static_cast<uint64_t>(g.rank));
      EXPECT_EQ(r.error, "") << "rank " << g.rank << " round " << round << " communicator " << k;
      EXPECT_EQ(r.wrong, 0u) << "rank " << g.rank << " round " << round << " communicator " << k;
    }
    MPI_Comm_free(&parent[0]);
    MPI_Comm_free(&parent[1]);
    double mine = std::max(took[0], took[1]), all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    worst = std::max(worst, all);
  }
  if (g.rank == 0)
    std::printf("[ concurrency ] %s, destroyed from two threads, crossed: the longest destruction took %.3f s (bound 10 s)\n",
                mpi::thread_level_name(g_level), worst);
  // Far from a speed goal: a destruction that waited for its bound takes 10 s; one that did not, milliseconds.
  EXPECT_LT(worst, 4.0) << "a destruction waited for its peers' closing until its bound";
}

int main(int argc, char** argv) {
  const char* lv = std::getenv("ZEN_TEST_THREAD_LEVEL");
  const int want = lv && std::string(lv) == "serialized" ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE;
  mpi::Environment env(&argc, &argv, want);
  g_level = env.provided();
  ::testing::InitGoogleTest(&argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g.n);
  if (g.rank != 0) {
    auto& l = ::testing::UnitTest::GetInstance()->listeners();
    delete l.Release(l.default_result_printer());
  }
  if (want == MPI_THREAD_MULTIPLE && g_level < MPI_THREAD_MULTIPLE && g.rank == 0)
    std::printf("[ concurrency ] this MPI gives %s only: the several-communicator test checks the refusal\n",
                mpi::thread_level_name(g_level));
  int rc = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}
