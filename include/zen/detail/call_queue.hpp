#pragma once
/// @file
/// The call queue behind non-blocking calls (SparseAllreduce::start / start_dense): one thread per
/// communicator runs them (named CallQueue, not "progress", which is the tools' progress bar).
///
/// One queue per communicator, created at the first non-blocking call: a single thread runs the
/// submitted calls one after another, so calls on one communicator never interleave. By default it
/// runs them in submission order, and every rank runs its collectives in the order it started them
/// (which must be the same on every rank, as for any collective). A blocking call issued while
/// non-blocking calls are pending on the same communicator is queued behind them. Nothing of this
/// exists (no thread, no cost) for callers that only block.
///
/// Agreed order (Communicator::set_call_order(CallOrder::Agreed), docs/api.md "Concurrency"): calls
/// carry a key (plan, call number) and the ranks agree on which one runs next: the call-queue thread
/// calls Agreement::agree with the key of its oldest pending call, which returns the key every rank
/// runs (rank 0's, by a broadcast), and then runs that call once it has been submitted here too.
/// So threads of one rank may start the calls of different plans in any order.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace zen::detail {

/// Completion state of one submitted call.
struct AsyncState {
  std::mutex m;
  std::condition_variable cv;
  std::atomic<bool> done{false};
  std::exception_ptr error;
};

/// What a call is, the same on every rank: (plan, call number of that plan). plan 0 is reserved for
/// plan setups (call = the communicator's setup count). Key{} (0, 0) marks a local item that needs no
/// agreement (it runs when it reaches the front).
struct CallKey {
  uint64_t plan = 0;
  uint64_t call = 0;
  bool local() const { return plan == 0 && call == 0; }
  bool operator==(const CallKey& o) const { return plan == o.plan && call == o.call; }
};

/// How the ranks agree on the next call (installed by Communicator::set_call_order).
struct Agreement {
  /// Collective among the ranks: given this rank's oldest pending call, return the call every rank
  /// runs next. Throws when the communicator fails.
  std::function<CallKey(CallKey mine)> agree;
  /// Called once when this rank cannot follow the agreement (the chosen call was not started here
  /// within `timeout`): poisons the communicator with the message. Queued calls then fail fast.
  std::function<void(const std::string&)> give_up;
  std::function<std::chrono::milliseconds()> timeout;  ///< the communicator's timeout
  std::string who;  ///< "rank r/n backend" for messages
};

class CallQueue {
 public:
  CallQueue();
  /// Runs what is still queued, then joins the thread.
  ~CallQueue();
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;

  /// Queue `task`; the returned state completes (with the task's exception, if any) once it has run.
  std::shared_ptr<AsyncState> submit(std::function<void()> task, CallKey key = {});
  /// True when calls are queued or running and the caller is not the call-queue thread itself.
  bool busy_for_caller() const;
  /// True on the call-queue thread (a call running there is already in order).
  bool on_call_thread() const { return std::this_thread::get_id() == thread_.get_id(); }
  /// Install the agreement (agreed order). Only while nothing is queued.
  void set_agreement(std::shared_ptr<Agreement> a);

 private:
  void loop();
  struct Item {
    std::function<void()> task;
    std::shared_ptr<AsyncState> state;
    CallKey key;
  };
  // Agreed order: take the item every rank runs next (false: run the front in submission order).
  bool take_agreed(Item& it);
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::atomic<int> pending_{0};
  std::shared_ptr<Agreement> agreement_;
  bool agreement_failed_ = false;  // call-queue thread only
  std::thread thread_;
};

/// Block until `s` completes.
void wait_state(AsyncState& s);

}  // namespace zen::detail
