// join.hpp -- fork/join of processes: spawn the children through a Join,
// then `co_await join.wait()` resumes once none of them is running (at once
// when none is). It counts the children it spawned itself, so a caller never
// sets a count by hand, and children may be spawned while others have
// already ended (a waiter only counts what is running when it waits).
//
//   sim::Join j(sim);
//   j.spawn("read", read_task(), &read_chain.last);   // tag: read as the child ends
//   j.spawn("write", write_task(), &write_chain.last);
//   co_await j.wait();
//   j.last();                                          // the tag of the child that ended last
//
// The tag is opaque here (the runtime's recorder passes the op-log node a
// child's chain ended with, for the critical path).
#pragma once

#include <coroutine>
#include <cstdint>
#include <string>
#include <utility>

#include "sim/process.hpp"
#include "sim/simulation.hpp"

namespace kernbench::sim {

class Join {
 public:
  explicit Join(Simulation& sim) : sim_(sim) {}
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;

  /// Spawns `child` as a process called `name`; it counts as running until it
  /// ends. `tag`, when given, is read as the child ends (last()).
  void spawn(std::string name, Task<void> child, const std::int32_t* tag = nullptr) {
    ++running_;
    sim_.spawn(std::move(name), run(std::move(child), tag));
  }

  /// `co_await j.wait()`: resumes once no child spawned through `j` is running
  /// (at once when none is). One waiter at a time.
  auto wait() {
    struct Awaiter {
      Join& j;
      bool await_ready() const noexcept { return j.running_ == 0; }
      void await_suspend(std::coroutine_handle<> h) noexcept { j.waiter_ = h; }
      void await_resume() const noexcept {}
    };
    return Awaiter{*this};
  }

  int running() const { return running_; }
  /// The tag of the child that ended last (-1 before any with a tag ended).
  std::int32_t last() const { return last_; }

 private:
  Process run(Task<void> child, const std::int32_t* tag) {
    co_await std::move(child);
    if (tag) last_ = *tag;
    if (--running_ == 0 && waiter_) sim_.schedule(0, Target::resume(std::exchange(waiter_, {})));
  }

  Simulation& sim_;
  int running_ = 0;
  std::int32_t last_ = -1;
  std::coroutine_handle<> waiter_;
};

}  // namespace kernbench::sim
