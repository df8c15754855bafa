#include "zen/detail/progress.hpp"

namespace zen::detail {

ProgressQueue::ProgressQueue() : thread_([this] { loop(); }) {}

ProgressQueue::~ProgressQueue() {
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<AsyncState> ProgressQueue::submit(std::function<void()> task) {
  auto state = std::make_shared<AsyncState>();
  {
    std::lock_guard<std::mutex> lk(m_);
    queue_.push_back(Item{std::move(task), state});
    pending_.fetch_add(1, std::memory_order_acq_rel);
  }
  cv_.notify_one();
  return state;
}

bool ProgressQueue::busy_for_caller() const {
  return pending_.load(std::memory_order_acquire) > 0 && !on_progress_thread();
}

void ProgressQueue::loop() {
  for (;;) {
    Item it;
    {
      std::unique_lock<std::mutex> lk(m_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
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
