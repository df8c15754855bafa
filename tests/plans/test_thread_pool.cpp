// The persistent thread pool: every task runs exactly once per call, the workers persist across
// calls, a worker's exception reaches the caller (no std::terminate) and the pool stays usable.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "zen/detail/thread_pool.hpp"

using zen::detail::ThreadPool;

TEST(ThreadPool, EveryTaskOnceAndWorkersPersist) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.threads(), 4);
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
  EXPECT_LE(ids.size(), 4u);  // the same threads every call, none created per call
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
