#include "zen/detail/thread_pool.hpp"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>

namespace zen::detail {

void affinity_mask(uint64_t* words, size_t nwords) {
  std::fill(words, words + nwords, uint64_t{0});
  const size_t cap = std::min<size_t>(64 * nwords, CPU_SETSIZE);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
    for (size_t c = 0; c < cap; ++c)
      if (CPU_ISSET(c, &set)) words[c / 64] |= uint64_t{1} << (c % 64);
    return;
  }
  const size_t hc = std::max(1u, std::thread::hardware_concurrency());
  for (size_t c = 0; c < std::min(hc, cap); ++c) words[c / 64] |= uint64_t{1} << (c % 64);
}

int affinity_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int c = CPU_COUNT(&set);
    if (c > 0) return c;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int default_plan_threads(int ranks_on_node) {
  const int local = std::max(1, ranks_on_node);
  return std::max(1, affinity_cores() / local);
}

ThreadPool::ThreadPool(int threads) {
  const int t = std::max(1, threads);
  errors_.resize(static_cast<size_t>(t));
  workers_.reserve(static_cast<size_t>(t - 1));
  for (int w = 1; w < t; ++w) workers_.emplace_back([this, w] { worker(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& w : workers_) w.join();
}

double clock_seconds(clockid_t id) {
  timespec ts{};
  if (clock_gettime(id, &ts) != 0) return 0.0;
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double ThreadPool::workers_cpu_seconds() const {
  double s = 0;
  for (const auto& w : workers_) {
    clockid_t id;
    // std::thread::native_handle is non-const: the handle is only read.
    if (pthread_getcpuclockid(const_cast<std::thread&>(w).native_handle(), &id) == 0) s += clock_seconds(id);
  }
  return s;
}

void ThreadPool::worker(int id) {
  uint64_t seen = 0;
  for (;;) {
    Fn fn;
    void* ctx;
    {
      std::unique_lock<std::mutex> lk(m_);
      cv_work_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (id >= ntasks_) continue;  // not needed this time
      fn = fn_;
      ctx = ctx_;
    }
    try {
      fn(ctx, id);
    } catch (...) {
      errors_[static_cast<size_t>(id)] = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lk(m_);
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

void ThreadPool::run_erased(int ntasks, Fn fn, void* ctx) {
  const int t = std::clamp(ntasks, 1, threads());
  if (t == 1) {
    fn(ctx, 0);
    return;
  }
  std::lock_guard<std::mutex> one(run_m_);
  for (int i = 0; i < t; ++i) errors_[static_cast<size_t>(i)] = nullptr;
  {
    std::lock_guard<std::mutex> lk(m_);
    fn_ = fn;
    ctx_ = ctx;
    ntasks_ = t;
    pending_ = t - 1;
    ++generation_;
  }
  cv_work_.notify_all();
  try {
    fn(ctx, 0);
  } catch (...) {
    errors_[0] = std::current_exception();
  }
  {
    std::unique_lock<std::mutex> lk(m_);
    cv_done_.wait(lk, [&] { return pending_ == 0; });
  }
  for (int i = 0; i < t; ++i)
    if (errors_[static_cast<size_t>(i)]) {
      std::exception_ptr e = errors_[static_cast<size_t>(i)];
      for (int j = 0; j < t; ++j) errors_[static_cast<size_t>(j)] = nullptr;
      std::rethrow_exception(e);
    }
}

}  // namespace zen::detail
