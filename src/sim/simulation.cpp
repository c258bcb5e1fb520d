// simulation.cpp -- run loops, process bookkeeping and failure reporting.
#include "sim/simulation.hpp"

#include <new>
#include <string>

#include "sim/process.hpp"

namespace kernbench::sim {

Simulation::Simulation(std::uint64_t seed) : seed_(seed), rng_(seed) {}

Simulation::~Simulation() {
  // Free the frames of processes that never finished (waiting forever).
  while (live_head_ != nullptr) {
    detail::ProcessNode* node = live_head_;
    live_head_ = node->next;
    node->handle.destroy();
  }
}

void Simulation::run() { run_loop(kTimeInfinity); }

void Simulation::run(Time until) {
  if (until < now_)
    throw UsageError("run(until=" + std::to_string(until) + " ps) is before the current time " + std::to_string(now_) +
                     " ps");
  run_loop(until);
  if (!stop_requested_ && until != kTimeInfinity) now_ = until;
}

void Simulation::run_loop(Time until) {
  stop_requested_ = false;
  while (!stop_requested_) {
    const Time next = peek();
    if (next >= until) {  // also the empty queue: kTimeInfinity
      if (next == kTimeInfinity && idle_check_) idle_check_();
      break;
    }
    if (next > max_time_) [[unlikely]]
      throw LimitError("simulated-time limit: the next event is at t=" + std::to_string(next) + " ps, past max_time " +
                       std::to_string(max_time_) + " ps (" + std::to_string(events_processed_) + " events processed)");
    if (events_processed_ >= next_checkpoint_) [[unlikely]]
      checkpoint();
    step();
  }
}

void Simulation::set_limits(std::uint64_t max_events, Time max_time) {
  if (max_time < 0) throw UsageError("set_limits: max_time must be >= 0 ps");
  max_events_ = max_events;
  max_time_ = max_time;
  arm_checkpoint();
}

void Simulation::set_poll(std::uint64_t every, std::function<void()> poll) {
  poll_every_ = poll ? std::max<std::uint64_t>(every, 1) : 0;
  poll_ = std::move(poll);
  arm_checkpoint();
}

void Simulation::arm_checkpoint() {
  next_checkpoint_ = max_events_;
  if (poll_every_ > 0) next_checkpoint_ = std::min(next_checkpoint_, events_processed_ + poll_every_);
}

void Simulation::checkpoint() {
  if (events_processed_ >= max_events_)
    throw LimitError("event limit: " + std::to_string(max_events_) + " events processed by t=" + std::to_string(now_) +
                     " ps and the model is still running (max_events)");
  if (poll_) poll_();  // may throw (e.g. Ctrl-C)
  arm_checkpoint();
}

void Simulation::throw_time_backwards(Time t) const {
  throw InternalError("time went backwards: an event at t=" + std::to_string(t) +
                      " ps came after t=" + std::to_string(now_) + " ps");
}

void Simulation::spawn(std::string name, Process process) {
  auto h = process.release();
  if (!h) throw UsageError("spawn('" + name + "'): this Process was already spawned");
  auto& node = h.promise();
  node.sim = this;
  node.name = std::move(name);
  node.handle = h;
  node.next = live_head_;
  if (live_head_ != nullptr) live_head_->prev = &node;
  live_head_ = &node;
  schedule(0, Target::resume(h));
}

std::vector<std::string> Simulation::live_processes() const {
  std::vector<std::string> names;
  for (const detail::ProcessNode* n = live_head_; n != nullptr; n = n->next) names.push_back(n->name);
  return {names.rbegin(), names.rend()};  // in spawn order
}

void Simulation::retire_process(detail::ProcessNode& node) noexcept {
  if (node.prev != nullptr) node.prev->next = node.next;
  if (node.next != nullptr) node.next->prev = node.prev;
  if (live_head_ == &node) live_head_ = node.next;
  node.handle.destroy();
}

void Simulation::fail_process(detail::ProcessNode& node, std::exception_ptr error) noexcept {
  const std::string where = "process '" + node.name + "' at t=" + std::to_string(now_) + " ps";
  try {
    std::rethrow_exception(error);
  } catch (Error& e) {
    e.add_context(where);
    failure_ = std::current_exception();
  } catch (const std::bad_alloc&) {
    failure_ = std::make_exception_ptr(CapacityError(where + ": out of memory (the model asked for more memory than "
                                                             "this machine has)"));
  } catch (const std::exception& e) {
    failure_ = std::make_exception_ptr(ProcessError(where + ": " + e.what()));
  } catch (...) {
    failure_ = std::make_exception_ptr(ProcessError(where + ": unknown exception"));
  }
}

void Simulation::throw_bad_delay(Time delay) const {
  if (delay < 0) throw UsageError("schedule: negative delay " + std::to_string(delay) + " ps");
  throw UsageError("schedule: a delay of " + std::to_string(delay) + " ps at t=" + std::to_string(now_) +
                   " ps goes past the simulator's time range (2^62 ps, ~53 days)");
}

void Simulation::throw_reserved_passed(Time when, std::uint64_t seq) const {
  throw InternalError("schedule_reserved: place (t=" + std::to_string(when) + " ps, seq " + std::to_string(seq) +
                      ") has passed; now t=" + std::to_string(now_) + " ps, seq " + std::to_string(current_seq_));
}

void Simulation::rethrow_failure() {
  std::exception_ptr e = std::exchange(failure_, nullptr);
  std::rethrow_exception(e);
}

}  // namespace kernbench::sim
