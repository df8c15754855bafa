#pragma once
// A persistent fork-join thread pool for the CPU data path (hashing, encode, owner aggregation,
// decode). One pool per plan (scheme object): the workers are created once, sleep between calls and
// are joined when the plan is destroyed, so a call creates no thread and allocates nothing.
//
// Sizing: the cores this process may run on (sched_getaffinity) divided by the ranks of the job that
// share the node (Communicator::ranks_on_node()), at least 1; SchemeOptions::threads overrides it.
// With one thread the pool runs every task inline on the caller.
//
// Exceptions thrown by a task reach the caller of run(): every task of the call finishes, then the
// exception of the lowest-numbered failing task is rethrown (never std::terminate).
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include <time.h>

namespace zen::detail {

/// Seconds on a POSIX clock (e.g. CLOCK_THREAD_CPUTIME_ID, or a thread's pthread_getcpuclockid); 0 if unreadable.
double clock_seconds(clockid_t id);

/// The CPUs this thread may run on (sched_getaffinity; CPUs 0 .. hardware_concurrency - 1 where
/// that fails), as bits: CPU c is bit c % 64 of words[c / 64], for the first 64 x nwords CPUs.
void affinity_mask(uint64_t* words, size_t nwords);

/// Cores in this process's affinity mask (sched_getaffinity), at least 1.
int affinity_cores();

/// Default thread count of a plan: affinity_cores() / ranks_on_node, at least 1.
int default_plan_threads(int ranks_on_node);

class ThreadPool {
 public:
  /// `threads` >= 1 in total, the calling thread included (threads - 1 workers are started).
  explicit ThreadPool(int threads = 1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  /// CPU seconds the workers (not the caller) have run so far, summed (their thread CPU clocks; a
  /// system call per worker: for reports that ask for it, not for the data path).
  double workers_cpu_seconds() const;

  /// Run f(task) for task in [0, ntasks) (ntasks is clamped to [1, threads()]); the caller runs
  /// task 0. Returns when every task has finished; rethrows the lowest failing task's exception.
  template <typename F>
  void run(int ntasks, F&& f) {
    auto call = [](void* ctx, int task) { (*static_cast<std::remove_reference_t<F>*>(ctx))(task); };
    run_erased(ntasks, call, static_cast<void*>(&f));
  }

  /// Tasks for `n` items with at least `grain` items each (1 when n < 2 * grain).
  int tasks_for(size_t n, size_t grain) const {
    const size_t by_work = grain ? n / grain : n;
    const size_t t = by_work < 1 ? 1 : by_work;
    return static_cast<int>(t < static_cast<size_t>(threads()) ? t : static_cast<size_t>(threads()));
  }

  /// f(begin, end, task) over [0, n) split into contiguous chunks of at least `grain` items.
  template <typename F>
  void parallel_for(size_t n, size_t grain, F&& f) {
    const int t = tasks_for(n, grain);
    if (t <= 1) {
      f(size_t{0}, n, 0);
      return;
    }
    run(t, [&](int task) {
      const size_t b = chunk_begin(n, t, task), e = chunk_begin(n, t, task + 1);
      f(b, e, task);
    });
  }

  /// Start of chunk `i` of `t` near-equal contiguous chunks of [0, n).
  static size_t chunk_begin(size_t n, int t, int i) {
    const size_t ut = static_cast<size_t>(t), ui = static_cast<size_t>(i);
    return ui * (n / ut) + (ui < n % ut ? ui : n % ut);
  }

 private:
  using Fn = void (*)(void*, int);
  void run_erased(int ntasks, Fn fn, void* ctx);
  void worker(int id);

  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable cv_work_, cv_done_;
  uint64_t generation_ = 0;  // bumped per run(); workers wait for a new one
  Fn fn_ = nullptr;
  void* ctx_ = nullptr;
  int ntasks_ = 0;
  int pending_ = 0;  // worker tasks of the current run not finished yet
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;  // one slot per task, preallocated
  std::mutex run_m_;                        // one run() at a time
};

}  // namespace zen::detail
