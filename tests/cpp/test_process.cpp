// test_process.cpp -- coroutine processes and tasks: timing, lifetime, errors.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "sim/errors.hpp"
#include "sim/join.hpp"
#include "sim/process.hpp"
#include "sim/trigger.hpp"

using namespace kernbench::sim;

namespace {

// Counts live coroutine frames through a local whose destructor runs when
// the frame is destroyed.
struct FrameCounter {
  explicit FrameCounter(int& n) : live(n) { ++live; }
  ~FrameCounter() { --live; }
  int& live;
};

Process sleeper(Simulation& sim, std::vector<Time>& wakeups, int& live) {
  FrameCounter guard(live);
  co_await sim.delay(5);
  wakeups.push_back(sim.now());
  co_await sim.delay(10);
  wakeups.push_back(sim.now());
}

Process waits_forever(Trigger& never, int& live) {
  FrameCounter guard(live);
  co_await never.wait();
}

Process throws_std(Simulation& sim) {
  co_await sim.delay(3);
  throw std::runtime_error("boom");
}

Process throws_config(Simulation& sim) {
  co_await sim.delay(4);
  throw kernbench::ConfigError("bad parameter");
}

Task<int> add_later(Simulation& sim, int a, int b) {
  co_await sim.delay(2);
  co_return a + b;
}

Task<int> add_now(int a, int b) { co_return a + b; }

Task<> fails_in_task(Simulation& sim) {
  co_await sim.delay(1);
  throw std::logic_error("inner");
}

}  // namespace

TEST_CASE("a process that finishes is freed and resumes at the right times", "[process]") {
  int live = 0;
  std::vector<Time> wakeups;
  {
    Simulation sim;
    sim.spawn("sleeper", sleeper(sim, wakeups, live));
    CHECK(live == 0);  // spawned processes first run from the event loop
    sim.run();
    CHECK(wakeups == std::vector<Time>{5, 15});
    CHECK(sim.live_processes().empty());
    CHECK(live == 0);
  }
}

TEST_CASE("a process that waits forever is reported and freed with the simulation", "[process]") {
  int live = 0;
  {
    Simulation sim;
    Trigger never(sim);
    sim.spawn("stuck", waits_forever(never, live));
    sim.run();
    CHECK(live == 1);
    CHECK(sim.live_processes() == std::vector<std::string>{"stuck"});
  }
  CHECK(live == 0);
}

TEST_CASE("an exception escaping a process surfaces with its name", "[process]") {
  Simulation sim;
  sim.spawn("worker-7", throws_std(sim));
  try {
    sim.run();
    FAIL("run() should have thrown");
  } catch (const kernbench::ProcessError& e) {
    CHECK_THAT(e.what(), Catch::Contains("process 'worker-7'") && Catch::Contains("boom") && Catch::Contains("t=3 ps"));
  }
  CHECK(sim.live_processes().empty());
}

TEST_CASE("a kernbench error keeps its type and gains the process name", "[process]") {
  Simulation sim;
  sim.spawn("loader", throws_config(sim));
  CHECK_THROWS_AS(sim.run(), kernbench::ConfigError);
  Simulation sim2;
  sim2.spawn("loader", throws_config(sim2));
  CHECK_THROWS_WITH(sim2.run(), Catch::StartsWith("process 'loader' at t=4 ps: bad parameter"));
}

TEST_CASE("tasks return values, synchronously or after waiting", "[process][task]") {
  Simulation sim;
  int got_later = 0, got_now = 0;
  Time when = -1;
  auto proc = [&](Simulation& s) -> Process {
    got_now = co_await add_now(1, 2);
    got_later = co_await add_later(s, 20, 22);
    when = s.now();
  };
  sim.spawn("caller", proc(sim));
  sim.run();
  CHECK(got_now == 3);
  CHECK(got_later == 42);
  CHECK(when == 2);
}

TEST_CASE("a long chain of synchronously completing tasks does not grow the stack", "[process][task]") {
  Simulation sim;
  long total = 0;
  auto proc = [&](Simulation&) -> Process {
    for (int i = 0; i < 1'000'000; ++i) total += co_await add_now(i, 1);
  };
  sim.spawn("chain", proc(sim));
  sim.run();
  CHECK(total == 1'000'000L * 999'999L / 2 + 1'000'000L);
}

TEST_CASE("an exception in a task propagates to the awaiting process", "[process][task]") {
  Simulation sim;
  std::string caught;
  auto proc = [&](Simulation& s) -> Process {
    try {
      co_await fails_in_task(s);
    } catch (const std::logic_error& e) {
      caught = e.what();
    }
  };
  sim.spawn("catcher", proc(sim));
  sim.run();
  CHECK(caught == "inner");
}

TEST_CASE("spawned processes start in spawn order, after events already due", "[process]") {
  Simulation sim;
  std::vector<int> order;
  auto proc = [&](int id) -> Process {
    order.push_back(id);
    co_return;
  };
  for (int i = 0; i < 5; ++i) sim.spawn(std::string("p").append(std::to_string(i)), proc(i));
  sim.run();
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
}

TEST_CASE("a trigger wakes every waiter, and later waits pass straight through", "[process][trigger]") {
  Simulation sim;
  Trigger go(sim);
  std::vector<std::pair<int, Time>> woke;
  auto waiter = [&](int id) -> Process {
    co_await go.wait();
    woke.emplace_back(id, sim.now());
  };
  auto firer = [&]() -> Process {
    co_await sim.delay(100);
    go.fire();
  };
  sim.spawn("w0", waiter(0));
  sim.spawn("w1", waiter(1));
  sim.spawn("firer", firer());
  sim.run();
  sim.spawn("late", waiter(2));
  sim.run();
  CHECK(woke == std::vector<std::pair<int, Time>>{{0, 100}, {1, 100}, {2, 100}});
}

TEST_CASE("sim::Join counts the children it spawns; a waiter counts what runs when it waits", "[process]") {
  kernbench::sim::Simulation sim(1);
  kernbench::sim::Join j(sim);
  std::int32_t tags[3] = {10, 20, 30};
  auto child = [&](kernbench::sim::Time d) -> kernbench::sim::Task<void> { co_await sim.delay(d); };
  kernbench::sim::Time woke = -1;
  auto parent = [&]() -> kernbench::sim::Process {
    co_await j.wait();  // nothing spawned yet: at once
    CHECK(sim.now() == 0);
    j.spawn("a", child(5), &tags[0]);
    co_await sim.delay(6);  // a has ended; b and c are spawned after it
    CHECK(j.running() == 0);
    j.spawn("b", child(10), &tags[1]);
    j.spawn("c", child(4), &tags[2]);
    CHECK(j.running() == 2);
    co_await j.wait();
    woke = sim.now();
  };
  sim.spawn("parent", parent());
  sim.run();
  CHECK(woke == 16);      // b, the later of b and c, ends at 6 + 10
  CHECK(j.last() == 20);  // the tag of the child that ended last
  CHECK(j.running() == 0);
}
