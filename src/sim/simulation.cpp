// simulation.cpp -- run loops, process bookkeeping and failure reporting.
#include "sim/simulation.hpp"

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

void Simulation::run() {
  stop_requested_ = false;
  while (!stop_requested_ && step()) {
  }
}

void Simulation::run(Time until) {
  if (until < now_)
    throw UsageError("run(until=" + std::to_string(until) + " ps) is before the current time " +
                     std::to_string(now_) + " ps");
  stop_requested_ = false;
  while (!stop_requested_ && peek() < until) step();
  if (!stop_requested_ && until != kTimeInfinity) now_ = until;
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
  } catch (const std::exception& e) {
    failure_ = std::make_exception_ptr(ProcessError(where + ": " + e.what()));
  } catch (...) {
    failure_ = std::make_exception_ptr(ProcessError(where + ": unknown exception"));
  }
}

void Simulation::throw_negative_delay(Time delay) {
  throw UsageError("schedule: negative delay " + std::to_string(delay) + " ps");
}

void Simulation::rethrow_failure() {
  std::exception_ptr e = std::exchange(failure_, nullptr);
  std::rethrow_exception(e);
}

}  // namespace kernbench::sim
