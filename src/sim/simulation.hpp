// simulation.hpp -- the discrete-event core: clock, event queue, processes.
//
// Five verbs, as in SimPy: now(), schedule(), step(), peek(), run(until).
// Model code either registers plain Handlers (hottest paths) or is written
// as coroutine processes (see process.hpp) that co_await delays, servers and
// stores. Coroutines are always resumed from this event loop, never from
// inside another coroutine's await, so the C++ stack stays flat however long
// a process runs (see BUILD-NOTES: deep symmetric-transfer chains overflow
// GCC debug builds).
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "sim/errors.hpp"
#include "sim/event_queue.hpp"
#include "sim/op_log.hpp"
#include "sim/rng.hpp"
#include "sim/units.hpp"

namespace kernbench::sim {

class Process;
class Simulation;

namespace detail {
/// Bookkeeping every top-level process carries (its promise derives from
/// this): a name for error messages and a place in the live list, so the
/// simulation can name the processes still waiting and free their frames.
struct ProcessNode {
  ProcessNode* prev = nullptr;
  ProcessNode* next = nullptr;
  Simulation* sim = nullptr;
  std::string name;
  std::coroutine_handle<> handle;
};
}  // namespace detail

/// Awaitable returned by Simulation::delay().
struct DelayAwaiter;

/// One simulation run: the clock, the pending events, the seeded random
/// stream, the op log and the processes still alive. No globals: two
/// Simulations never share anything.
class Simulation {
 public:
  explicit Simulation(std::uint64_t seed = 1);
  ~Simulation();
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  /// Current simulated time (ps).
  Time now() const { return now_; }

  /// Wakes `target` after `delay` (>= 0); `arg` reaches a Handler. An event
  /// past the time range (now + delay > kMaxTime, 2^62 ps) is a UsageError
  /// naming the delay -- never an overflowed, negative event time.
  void schedule(Time delay, Target target, std::uint64_t arg = 0) {
    if (delay < 0 || delay > kMaxTime - now_) [[unlikely]]
      throw_bad_delay(delay);
    const Event e{now_ + delay, seq_++, target, arg};
    if (delay == 0) {
      queue_.push_now(e);
    } else {
      queue_.push_heap(e);
    }
  }
  void schedule(Time delay, Handler& handler, std::uint64_t arg = 0) { schedule(delay, Target::call(handler), arg); }
  /// Wakes `target` at absolute time `when` (>= now()).
  void schedule_at(Time when, Target target, std::uint64_t arg = 0) { schedule(when - now_, target, arg); }

  /// Lazy events. A model that knows when something will happen (a lane's
  /// hold ends) but rarely needs an event for it reserves the event's place
  /// in the order now -- exactly the place schedule() would have given it --
  /// and materialises it only if needed, with schedule_reserved(). Runs are
  /// then event-for-event the same as if every such event had been scheduled.
  std::uint64_t reserve_seq() { return seq_++; }
  /// Wakes `target` at `when` in the place of reserved `seq`; that place
  /// must not have passed: (when, seq) after the event being processed.
  void schedule_reserved(Time when, std::uint64_t seq, Target target, std::uint64_t arg = 0) {
    if (when < now_ || (when == now_ && seq <= current_seq_)) [[unlikely]]
      throw_reserved_passed(when, seq);
    if (when > kMaxTime) [[unlikely]]
      throw_bad_delay(when - now_);
    queue_.push_heap(Event{when, seq, target, arg});
  }
  void schedule_reserved(Time when, std::uint64_t seq, Handler& handler, std::uint64_t arg = 0) {
    schedule_reserved(when, seq, Target::call(handler), arg);
  }
  /// Whether the place (when, seq) in the event order has passed: the event
  /// being processed comes after it.
  bool passed(Time when, std::uint64_t seq) const { return when < now_ || (when == now_ && seq < current_seq_); }

  /// Awaitable: `co_await sim.delay(t)` resumes the process t ps later
  /// (t = 0 yields: the process goes behind everything already due now).
  DelayAwaiter delay(Time t);

  /// Time of the next event, or kTimeInfinity when none is pending.
  Time peek() const { return queue_.empty() ? kTimeInfinity : queue_.top().time; }

  /// Processes the next event. Returns false if there was none.
  bool step() {
    if (queue_.empty()) return false;
    const Event e = queue_.pop();
    if (!queue_.empty()) {  // warm the next event's state under this one's work
      const Event& next = queue_.top();
      next.target.prefetch(next.arg);
    }
    if (e.time < now_) [[unlikely]]
      throw_time_backwards(e.time);
    now_ = e.time;
    current_seq_ = e.seq;
    ++events_processed_;
    e.target.fire(e.arg);
    if (failure_) [[unlikely]]
      rethrow_failure();
    return true;
  }

  /// Runs until no event is pending or stop() is called.
  void run();
  /// Runs every event due strictly before `until`, then sets the clock to
  /// `until` (SimPy's semantics: events at `until` itself stay pending).
  /// A run cut short by stop() leaves the clock at the last event.
  void run(Time until);
  /// Asks the running run() to return after the current event.
  void stop() { stop_requested_ = true; }

  /// Guards against runaway models: run() throws LimitError once more than
  /// `max_events` events have been processed in all, or before processing an
  /// event later than `max_time`. kTimeInfinity / UINT64_MAX: no limit.
  void set_limits(std::uint64_t max_events, Time max_time);
  /// Calls `poll` from the run loops every `every` events (between events,
  /// never inside one): how the Python bindings notice Ctrl-C. `poll` may
  /// throw to abandon the run.
  void set_poll(std::uint64_t every, std::function<void()> poll);
  /// Calls `check` whenever a run finds the event queue empty, before it
  /// returns: a model whose work can wait without events (chunks waiting for
  /// buffer credits) checks there that nothing waits forever, and throws
  /// (DeadlockError) if something does. An empty function removes it.
  void set_idle_check(std::function<void()> check) { idle_check_ = std::move(check); }

  /// Starts a process: it first runs at the current time, after the events
  /// already due now. `name` appears in its errors and in live_processes().
  void spawn(std::string name, Process process);
  /// Names of processes started and not finished (e.g. waiting forever).
  std::vector<std::string> live_processes() const;

  std::uint64_t events_processed() const { return events_processed_; }
  std::size_t pending_events() const { return queue_.size(); }
  std::size_t peak_pending_events() const { return queue_.peak_size(); }
  const EventQueue& queue() const { return queue_; }
  EventQueue& queue() { return queue_; }

  Rng& rng() { return rng_; }
  std::uint64_t seed() const { return seed_; }
  OpLog& op_log() { return op_log_; }

  // Called by process promises; not for model code.
  void retire_process(detail::ProcessNode& node) noexcept;
  void fail_process(detail::ProcessNode& node, std::exception_ptr error) noexcept;

 private:
  [[noreturn]] void throw_bad_delay(Time delay) const;
  [[noreturn]] void throw_reserved_passed(Time when, std::uint64_t seq) const;
  [[noreturn]] void throw_time_backwards(Time t) const;
  void run_loop(Time until);
  void checkpoint();
  void arm_checkpoint();
  [[noreturn]] void rethrow_failure();

  Time now_ = 0;
  std::uint64_t seq_ = 0;
  std::uint64_t current_seq_ = 0;  // seq of the event being processed
  std::uint64_t events_processed_ = 0;
  bool stop_requested_ = false;
  std::uint64_t max_events_ = UINT64_MAX;
  Time max_time_ = kTimeInfinity;
  std::uint64_t poll_every_ = 0;
  std::function<void()> poll_;
  std::function<void()> idle_check_;
  std::uint64_t next_checkpoint_ = UINT64_MAX;  // events_processed_ at which to check limits / poll
  EventQueue queue_;
  std::exception_ptr failure_;
  detail::ProcessNode* live_head_ = nullptr;
  std::uint64_t seed_;
  Rng rng_;
  OpLog op_log_;
};

struct DelayAwaiter {
  Simulation& sim;
  Time duration;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const { sim.schedule(duration, Target::resume(h)); }
  void await_resume() const noexcept {}
};

inline DelayAwaiter Simulation::delay(Time t) { return DelayAwaiter{*this, t}; }

}  // namespace kernbench::sim
