// park.hpp -- `co_await sim::Park{slot}`: suspend the running coroutine and
// leave its handle in `slot`; whoever completes what it waits for resumes it
// from the event loop (`sim.schedule(0, Target::resume(std::exchange(slot,
// {})))`), so the stack never grows with the waits. The IPCQ's recvs waiting
// for segments and a switch reduction waiting for its legs both park so.
#pragma once

#include <coroutine>

namespace kernbench::sim {

struct Park {
  std::coroutine_handle<>& slot;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) noexcept { slot = h; }
  void await_resume() const noexcept {}
};

}  // namespace kernbench::sim
