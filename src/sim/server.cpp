// server.cpp -- hand-off, arbitration and accounting.
#include "sim/server.hpp"

#include <algorithm>

#include "sim/errors.hpp"

namespace kernbench::sim {

Server::Server(Simulation& sim, std::string name, int capacity, Arbitration arbitration, int ports)
    : sim_(sim),
      capacity_(capacity),
      last_change_(sim.now()),
      arbitration_(arbitration),
      created_(sim.now()),
      name_(std::move(name)) {
  if (capacity < 1) throw UsageError("server '" + name_ + "': capacity must be >= 1, got " + std::to_string(capacity));
  if (ports < 1) throw UsageError("server '" + name_ + "': ports must be >= 1, got " + std::to_string(ports));
  if (arbitration == Arbitration::Fifo && ports != 1)
    throw UsageError("server '" + name_ + "': FIFO arbitration has a single queue (ports = 1), got " +
                     std::to_string(ports) + " ports");
  more_.resize(static_cast<std::size_t>(ports - 1));
}

int Server::check_port(int port) const {
  if (port < 0 || port >= ports()) [[unlikely]]
    throw UsageError("server '" + name_ + "': port " + std::to_string(port) + " out of range [0, " +
                     std::to_string(ports()) + ")");
  return port;
}

void Server::enqueue(Target target, std::uint64_t arg, int port, std::int32_t* holder) {
  account();
  queue(static_cast<std::size_t>(port)).push_back(Waiter{target, arg, sim_.now(), holder});
  ++waiting_;
  stats_.max_queue = std::max(stats_.max_queue, waiting_);
}

void Server::release(std::int32_t by) {
  if (in_use_ <= 0) throw UsageError("server '" + name_ + "': release() without a unit held");
  account();
  if (waiting_ == 0) {
    --in_use_;
    return;
  }
  // Pick the next queue: the only one (FIFO) or the first non-empty port
  // after the last one served (round-robin).
  std::size_t q = 0;
  if (arbitration_ == Arbitration::RoundRobin) {
    const int n = ports();
    for (int k = 1; k <= n; ++k) {
      const int p = (last_port_ + k) % n;
      if (!queue(static_cast<std::size_t>(p)).empty()) {
        q = static_cast<std::size_t>(p);
        last_port_ = p;
        break;
      }
    }
  }
  const Waiter w = queue(q).pop_front();
  --waiting_;
  const Time wait = sim_.now() - w.since;
  ++stats_.grants;
  if (wait > 0) ++stats_.waited;
  stats_.total_wait += wait;
  stats_.max_wait = std::max(stats_.max_wait, wait);
  if (w.holder) *w.holder = by;
  // The unit changes hands without being freed; the waiter runs at the
  // current time, from the event loop.
  sim_.schedule(0, w.target, w.arg);
}

ServerStats Server::stats() const {
  ServerStats s = stats_;
  const auto dt = static_cast<double>(sim_.now() - last_change_);
  s.busy_unit_time += dt * in_use_;
  s.queue_area += dt * static_cast<double>(waiting_);
  return s;
}

double Server::utilization() const {
  const Time t = sim_.now() - created_;
  if (t <= 0) return 0.0;
  return stats().busy_unit_time / (static_cast<double>(t) * capacity_);
}

}  // namespace kernbench::sim
