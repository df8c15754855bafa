#pragma once
/// @file
/// The progress thread behind non-blocking calls (SparseAllreduce::start / start_dense).
///
/// One queue per communicator, created at the first non-blocking call: a single thread runs the
/// submitted calls one after another in submission order, so calls on one communicator never
/// interleave and every rank runs its collectives in the order it started them (the same order on
/// every rank, as for any collective). A blocking call issued while non-blocking calls are pending
/// on the same communicator is queued behind them. Nothing of this exists (no thread, no cost) for
/// callers that only block.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace zen::detail {

/// Completion state of one submitted call.
struct AsyncState {
  std::mutex m;
  std::condition_variable cv;
  std::atomic<bool> done{false};
  std::exception_ptr error;
};

class ProgressQueue {
 public:
  ProgressQueue();
  /// Runs what is still queued, then joins the thread.
  ~ProgressQueue();
  ProgressQueue(const ProgressQueue&) = delete;
  ProgressQueue& operator=(const ProgressQueue&) = delete;

  /// Queue `task`; the returned state completes (with the task's exception, if any) once it has run.
  std::shared_ptr<AsyncState> submit(std::function<void()> task);
  /// True when calls are queued or running and the caller is not the progress thread itself.
  bool busy_for_caller() const;
  /// True on the progress thread (a call running there is already in order).
  bool on_progress_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void loop();
  struct Item {
    std::function<void()> task;
    std::shared_ptr<AsyncState> state;
  };
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::atomic<int> pending_{0};
  std::thread thread_;
};

/// Block until `s` completes.
void wait_state(AsyncState& s);

}  // namespace zen::detail
