// poller.hpp -- how the host backend notices a message from the GSP.
//
// The host never sees a GSP message when it arrives; it sees it when its
// poller next looks (or, in interrupt mode, after the interrupt latency):
//   tick      -- the backend's polled worker is re-armed one quantum after
//                the event it waits for, so every wait costs one full
//                quantum (a delayed-work poll; this reading fits the
//                measured 22-23 ms round trips, see docs/vgpu.md)
//   grid      -- a free-running periodic process ticks at phase + k*quantum
//                and wakes every waiter whose message has arrived: a wait
//                costs the time to the next tick (0 .. quantum)
//   interrupt -- each wait costs the interrupt latency
// `co_await poller.observe()` returns when the message that arrived now is
// seen. The grid ticker is one long-lived process that sleeps while nobody
// waits (no allocation per tick or per wait).
#pragma once

#include <coroutine>
#include <vector>

#include "sim/process.hpp"
#include "sim/simulation.hpp"
#include "platforms/vgpu/config.hpp"

namespace kernbench::platforms::vgpu {

class Poller {
 public:
  Poller(sim::Simulation& sim, const VgpuPollConfig& config);
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  /// Awaitable: resumes when a message that arrived at now() is seen.
  auto observe() {
    struct Awaiter {
      Poller& p;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<> h) { p.enqueue(h); }
      void await_resume() const noexcept {}
    };
    return Awaiter{*this};
  }

  /// Grid mode: the first tick at or after `t`.
  sim::Time next_tick(sim::Time t) const;
  std::uint64_t ticks() const { return ticks_; }
  const VgpuPollConfig& config() const { return config_; }

 private:
  void enqueue(std::coroutine_handle<> h);
  sim::Process ticker();

  sim::Simulation& sim_;
  VgpuPollConfig config_;
  std::vector<std::coroutine_handle<>> waiting_;  // grid mode
  std::vector<std::coroutine_handle<>> waking_;
  std::coroutine_handle<> idle_;  // the ticker, parked while nobody waits
  bool started_ = false;
  std::uint64_t ticks_ = 0;
};

}  // namespace kernbench::platforms::vgpu
