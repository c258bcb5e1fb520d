// server.hpp -- the one queueing primitive.
//
// A Server has `capacity` identical units (an engine, a DMA channel pool,
// one direction of a link, a memory controller). Requests that find every
// unit busy wait; a released unit is handed straight to the next waiter, so
// nobody can barge in between. Waiters are served FIFO, or round-robin over
// request ports (one port per requester class, e.g. per input of a router).
// Busy time, queue length and wait time are integrated as the run goes, so
// queuing delay is measured, never assumed. A waiter may also ask who
// handed its unit over (acquire_handed): the releasing side names itself in
// release(by), and the critical-path walks follow that hand-over.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/event.hpp"
#include "sim/ring_queue.hpp"
#include "sim/simulation.hpp"

namespace kernbench::sim {

enum class Arbitration { Fifo, RoundRobin };

/// What a Server has measured so far (up to the last state change or now()).
struct ServerStats {
  std::uint64_t grants = 0;  ///< units handed out
  std::uint64_t waited = 0;  ///< grants that had to queue (wait > 0)
  Time total_wait = 0;       ///< sum of queue waits over all grants
  Time max_wait = 0;
  double busy_unit_time = 0.0;  ///< integral of units in use over time (ps)
  double queue_area = 0.0;      ///< integral of queue length over time (ps)
  std::size_t max_queue = 0;

  double mean_wait() const { return grants ? static_cast<double>(total_wait) / static_cast<double>(grants) : 0.0; }
};

class Server {
 public:
  Server(Simulation& sim, std::string name, int capacity = 1, Arbitration arbitration = Arbitration::Fifo,
         int ports = 1);
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Awaitable: `co_await server.acquire()` returns holding one unit.
  auto acquire(int port = 0) {
    struct Awaiter {
      Server& server;
      int port;
      bool await_ready() { return server.try_acquire(); }
      void await_suspend(std::coroutine_handle<> h) { server.enqueue(Target::resume(h), 0, port); }
      void await_resume() const noexcept {}
    };
    return Awaiter{*this, check_port(port)};
  }

  /// Awaitable like acquire(), that also says who handed the unit over: after a wait, `holder` is the `by` of the
  /// release() that granted it (untouched when the unit was free at once).
  auto acquire_handed(std::int32_t& holder, int port = 0) {
    struct Awaiter {
      Server& server;
      int port;
      std::int32_t& holder;
      bool await_ready() { return server.try_acquire(); }
      void await_suspend(std::coroutine_handle<> h) { server.enqueue(Target::resume(h), 0, port, &holder); }
      void await_resume() const noexcept {}
    };
    return Awaiter{*this, check_port(port), holder};
  }

  /// Callback form: returns true if a unit was free and is now held by the
  /// caller; otherwise queues the request and `handler.on_event(arg)` fires
  /// (at the release time) once the unit has been handed over.
  bool request(Handler& handler, std::uint64_t arg = 0, int port = 0) {
    if (try_acquire()) return true;
    enqueue(Target::call(handler), arg, check_port(port));
    return false;
  }

  /// Takes a unit if one is free now.
  bool try_acquire() {
    if (in_use_ >= capacity_) return false;
    account();
    ++in_use_;
    ++stats_.grants;
    return true;
  }

  /// Returns a unit; the next waiter (if any) gets it at the current time. `by` names the releaser (an op, a run
  /// graph node) to a waiter that asked with acquire_handed.
  void release(std::int32_t by = -1);

  const std::string& name() const { return name_; }
  int capacity() const { return capacity_; }
  int in_use() const { return in_use_; }
  std::size_t queue_length() const { return waiting_; }
  Arbitration arbitration() const { return arbitration_; }

  /// Statistics integrated up to now().
  ServerStats stats() const;
  /// Just the busy integral (unit-ps) up to now(): the cheap query hot paths use.
  double busy_unit_time() const {
    return stats_.busy_unit_time + static_cast<double>(sim_.now() - last_change_) * in_use_;
  }
  /// Busy fraction of the capacity since the server was created.
  double utilization() const;

 private:
  struct Waiter {
    Target target;
    std::uint64_t arg;
    Time since;
    std::int32_t* holder;  ///< acquire_handed's: told who released the unit it gets
  };

  int check_port(int port) const;
  void enqueue(Target target, std::uint64_t arg, int port, std::int32_t* holder = nullptr);
  void account() {
    const Time now = sim_.now();
    const auto dt = static_cast<double>(now - last_change_);
    stats_.busy_unit_time += dt * in_use_;
    stats_.queue_area += dt * static_cast<double>(waiting_);
    last_change_ = now;
  }

  RingQueue<Waiter>& queue(std::size_t port) { return port == 0 ? first_ : more_[port - 1]; }
  int ports() const { return 1 + static_cast<int>(more_.size()); }

  // Hot fields first: a request, grant or release touches only the first
  // cache line or two (fabrics keep thousands of lanes).
  Simulation& sim_;
  int in_use_ = 0;
  int capacity_;
  std::size_t waiting_ = 0;
  Time last_change_ = 0;
  RingQueue<Waiter> first_;  // port 0's queue, inline: the only one under FIFO
  ServerStats stats_;
  // Cold.
  Arbitration arbitration_;
  int last_port_ = -1;  // round-robin pointer
  Time created_ = 0;
  std::vector<RingQueue<Waiter>> more_;  // ports 1.. (round-robin only)
  std::string name_;
};

}  // namespace kernbench::sim
