// The persistent thread pool: every task runs exactly once per call, the workers are created once
// (counted at pthread_create, tests/plans/thread_counter.cpp) and run the tasks of every later call,
// a worker's exception reaches the caller (no std::terminate) and the pool stays usable.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "thread_counter.hpp"
#include "zen/detail/thread_pool.hpp"

using zen::detail::ThreadPool;

TEST(ThreadPool, EveryTaskOnceAndWorkersPersist) {
  const uint64_t before = zen::test::threads_created();
  ThreadPool pool(4);
  EXPECT_EQ(pool.threads(), 4);
  EXPECT_EQ(zen::test::threads_created() - before, 3u) << "the pool starts threads() - 1 workers";
  std::mutex m;
  std::set<std::thread::id> ids;
  for (int call = 0; call < 200; ++call) {
    const int tasks = 1 + call % 6;  // more than threads() is clamped
    std::vector<std::atomic<int>> hits(8);
    pool.run(tasks, [&](int t) {
      hits[static_cast<size_t>(t)].fetch_add(1);
      std::lock_guard<std::mutex> lk(m);
      ids.insert(std::this_thread::get_id());
    });
    for (int t = 0; t < 8; ++t) EXPECT_EQ(hits[static_cast<size_t>(t)].load(), t < std::min(tasks, 4) ? 1 : 0) << "call " << call;
  }
  EXPECT_LE(ids.size(), 4u);
  // Thread ids are reused by the system, so the count of creations is the evidence: none per call.
  EXPECT_EQ(zen::test::threads_created() - before, 3u) << "run() created threads";
}

// Every call's tasks run at the same time on threads() distinct threads, and they are the workers
// made at construction: a rendezvous inside the tasks only completes when all four run concurrently.
TEST(ThreadPool, EveryWorkerTakesPartInEveryCall) {
  const uint64_t before = zen::test::threads_created();
  ThreadPool pool(4);
  const uint64_t made = zen::test::threads_created() - before;
  std::set<std::thread::id> all;
  for (int call = 0; call < 50; ++call) {
    std::atomic<int> arrived{0};
    std::mutex m;
    std::set<std::thread::id> ids;
    bool met = true;
    pool.run(4, [&](int) {
      arrived.fetch_add(1);
      // Bounded (a missing worker must fail the test, not hang it); a pool whose workers take part
      // meets here within microseconds.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (arrived.load() < 4 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      std::lock_guard<std::mutex> lk(m);
      if (arrived.load() < 4) met = false;
      ids.insert(std::this_thread::get_id());
    });
    ASSERT_TRUE(met) << "call " << call << ": the four tasks never ran at the same time";
    EXPECT_EQ(ids.size(), 4u) << "call " << call;
    all.insert(ids.begin(), ids.end());
  }
  EXPECT_EQ(all.size(), 4u) << "the same four threads (caller + 3 workers) every call";
  EXPECT_EQ(made, 3u);
  EXPECT_EQ(zen::test::threads_created() - before, made) << "run() created threads";
}

TEST(ThreadPool, ParallelForCoversTheRangeExactlyOnce) {
  ThreadPool pool(3);
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{100003}}) {
    std::vector<std::atomic<int>> seen(n);
    pool.parallel_for(n, 10, [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; ++i) seen[i].fetch_add(1);
    });
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPool, WorkerExceptionReachesTheCallerAndThePoolStaysUsable) {
  ThreadPool pool(4);
  for (int bad : {0, 2, 3}) {
    std::atomic<int> ran{0};
    try {
      pool.run(4, [&](int t) {
        ran.fetch_add(1);
        if (t == bad || t == 3) throw std::runtime_error("task " + std::to_string(t) + " failed");
      });
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      // The lowest failing task's exception, after every task ran.
      EXPECT_EQ(std::string(e.what()), "task " + std::to_string(std::min(bad, 3)) + " failed");
      EXPECT_EQ(ran.load(), 4);
    }
    std::atomic<int> after{0};
    pool.run(4, [&](int) { after.fetch_add(1); });
    EXPECT_EQ(after.load(), 4);
  }
}

TEST(ThreadPool, SizingFromAffinityAndRanksOnTheNode) {
  const int cores = zen::detail::affinity_cores();
  EXPECT_GE(cores, 1);
  EXPECT_EQ(zen::detail::default_plan_threads(1), cores);
  EXPECT_EQ(zen::detail::default_plan_threads(cores * 2), 1);
  EXPECT_EQ(zen::detail::default_plan_threads(0), cores);
  ThreadPool one(1);
  std::thread::id caller = std::this_thread::get_id(), seen;
  one.run(3, [&](int) { seen = std::this_thread::get_id(); });
  EXPECT_EQ(seen, caller);  // one thread: inline on the caller
}
