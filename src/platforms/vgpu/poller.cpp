// poller.cpp -- tick, grid and interrupt observation of GSP messages.
#include "platforms/vgpu/poller.hpp"

namespace kernbench::platforms::vgpu {

Poller::Poller(sim::Simulation& sim, const VgpuPollConfig& config) : sim_(sim), config_(config) {}

sim::Time Poller::next_tick(sim::Time t) const {
  const sim::Time q = config_.quantum, phase = config_.phase;
  if (t <= phase) return phase;
  return phase + ((t - phase + q - 1) / q) * q;
}

void Poller::enqueue(std::coroutine_handle<> h) {
  switch (config_.mode) {
    case VgpuPollMode::Tick: sim_.schedule(config_.quantum, sim::Target::resume(h)); return;
    case VgpuPollMode::Interrupt: sim_.schedule(config_.interrupt_latency, sim::Target::resume(h)); return;
    case VgpuPollMode::Grid: break;
  }
  waiting_.push_back(h);
  if (!started_) {
    started_ = true;
    sim_.spawn("vgpu.poller", ticker());
  } else if (idle_) {
    sim_.schedule(0, sim::Target::resume(std::exchange(idle_, {})));
  }
}

sim::Process Poller::ticker() {
  struct Park {
    Poller& p;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) noexcept { p.idle_ = h; }
    void await_resume() const noexcept {}
  };
  for (;;) {
    if (waiting_.empty()) co_await Park{*this};
    co_await sim_.delay(next_tick(sim_.now()) - sim_.now());
    ++ticks_;
    // Everyone who waits now has a message that arrived at or before this tick.
    waking_.swap(waiting_);
    for (auto h : waking_) sim_.schedule(0, sim::Target::resume(h));
    waking_.clear();
  }
}

}  // namespace kernbench::platforms::vgpu
