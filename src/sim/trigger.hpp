// trigger.hpp -- a one-shot signal between processes.
#pragma once

#include <coroutine>

#include "sim/ring_queue.hpp"
#include "sim/simulation.hpp"

namespace kernbench::sim {

/// A one-shot signal: processes `co_await trigger.wait()` until someone
/// calls fire(); waits after the fire return at once.
class Trigger {
 public:
  explicit Trigger(Simulation& sim) : sim_(sim) {}
  Trigger(const Trigger&) = delete;
  Trigger& operator=(const Trigger&) = delete;

  auto wait() {
    struct Awaiter {
      Trigger& trigger;
      bool await_ready() const noexcept { return trigger.fired_; }
      void await_suspend(std::coroutine_handle<> h) { trigger.waiters_.push_back(h); }
      void await_resume() const noexcept {}
    };
    return Awaiter{*this};
  }

  /// Wakes every waiter at the current time, in the order they waited.
  void fire() {
    if (fired_) return;
    fired_ = true;
    while (!waiters_.empty()) sim_.schedule(0, Target::resume(waiters_.pop_front()));
  }
  bool fired() const { return fired_; }

 private:
  Simulation& sim_;
  bool fired_ = false;
  RingQueue<std::coroutine_handle<>> waiters_;
};

}  // namespace kernbench::sim
