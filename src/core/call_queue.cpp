// The call queue of non-blocking calls (include/zen/detail/call_queue.hpp): submission order, or
// the order the ranks agree on (agreed order).
#include "zen/detail/call_queue.hpp"

#include <algorithm>

namespace zen::detail {

CallQueue::CallQueue() : thread_([this] { loop(); }) {}

CallQueue::~CallQueue() {
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<AsyncState> CallQueue::submit(std::function<void()> task, CallKey key) {
  auto state = std::make_shared<AsyncState>();
  {
    std::lock_guard<std::mutex> lk(m_);
    queue_.push_back(Item{std::move(task), state, key});
    pending_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_all();
  return state;
}

void CallQueue::set_agreement(std::shared_ptr<Agreement> a) {
  std::lock_guard<std::mutex> lk(m_);
  agreement_ = std::move(a);
}

bool CallQueue::busy_for_caller() const {
  return pending_.load(std::memory_order_acquire) > 0 && !on_call_thread();
}

// Only this thread removes items, so the front seen here stays the front until it is taken.
bool CallQueue::take_agreed(Item& it) {
  std::shared_ptr<Agreement> a;
  CallKey mine;
  {
    std::lock_guard<std::mutex> lk(m_);
    if (!agreement_ || agreement_failed_ || queue_.front().key.local()) return false;
    a = agreement_;
    mine = queue_.front().key;
  }
  CallKey next;
  try {
    next = a->agree(mine);
  } catch (...) {
    // The communicator failed (it poisoned itself and told the peers): the queued calls run in
    // submission order and each fails at once with the communicator's first error.
    agreement_failed_ = true;
    return false;
  }
  std::unique_lock<std::mutex> lk(m_);
  const auto wait = a->timeout();
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    auto f = std::find_if(queue_.begin(), queue_.end(), [&](const Item& x) { return x.key == next; });
    if (f != queue_.end()) {
      it = std::move(*f);
      queue_.erase(f);
      return true;
    }
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout &&
        std::none_of(queue_.begin(), queue_.end(), [&](const Item& x) { return x.key == next; }))
      break;
  }
  lk.unlock();
  agreement_failed_ = true;
  a->give_up(a->who + ": the ranks agreed to run call " + std::to_string(next.call) + " of plan " +
             std::to_string(next.plan) + (next.plan == 0 ? " (a plan setup)" : "") +
             " next (rank 0 started it), which this rank did not start within " + std::to_string(wait.count()) +
             " ms; in agreed order every rank must start the same calls of every plan");
  return false;
}

void CallQueue::loop() {
  for (;;) {
    Item it;
    {
      std::unique_lock<std::mutex> lk(m_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
    }
    if (!take_agreed(it)) {
      std::lock_guard<std::mutex> lk(m_);
      it = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      it.task();
    } catch (...) {
      it.state->error = std::current_exception();
    }
    it.task = nullptr;  // release what the task captured before completing
    {
      std::lock_guard<std::mutex> lk(it.state->m);
      // The queue is idle for a blocking caller only once the task has fully returned.
      pending_.fetch_sub(1, std::memory_order_acq_rel);
      it.state->done.store(true, std::memory_order_release);
    }
    it.state->cv.notify_all();
  }
}

void wait_state(AsyncState& s) {
  if (s.done.load(std::memory_order_acquire)) return;
  std::unique_lock<std::mutex> lk(s.m);
  s.cv.wait(lk, [&] { return s.done.load(std::memory_order_acquire); });
}

}  // namespace zen::detail
