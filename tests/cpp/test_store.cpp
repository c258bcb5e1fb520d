// test_store.cpp -- blocking put/get between processes.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "sim/process.hpp"
#include "sim/store.hpp"

using namespace kernbench::sim;

TEST_CASE("a bounded store blocks the producer and hands items over in order", "[store]") {
  Simulation sim;
  Store<int> ch(sim, "ch", 2);
  std::vector<std::pair<int, Time>> got;
  std::vector<Time> put_done;
  auto producer = [&]() -> Process {
    for (int i = 0; i < 5; ++i) {
      co_await ch.put(i);
      put_done.push_back(sim.now());
    }
  };
  auto consumer = [&]() -> Process {
    co_await sim.delay(100);
    for (int i = 0; i < 5; ++i) {
      int v = co_await ch.get();
      got.emplace_back(v, sim.now());
      co_await sim.delay(10);
    }
  };
  sim.spawn("producer", producer());
  sim.spawn("consumer", consumer());
  sim.run();
  CHECK(got == std::vector<std::pair<int, Time>>{{0, 100}, {1, 110}, {2, 120}, {3, 130}, {4, 140}});
  // Two fit at once; each later put completes when a get frees a slot.
  CHECK(put_done == std::vector<Time>{0, 0, 100, 110, 120});
  CHECK(ch.size() == 0);
}

TEST_CASE("a getter waiting on an empty store receives the next put directly", "[store]") {
  Simulation sim;
  Store<std::string> ch(sim, "mail");
  std::string received;
  Time when = -1;
  auto getter = [&]() -> Process {
    received = co_await ch.get();
    when = sim.now();
  };
  auto putter = [&]() -> Process {
    co_await sim.delay(42);
    co_await ch.put("hello");
  };
  sim.spawn("getter", getter());
  sim.spawn("putter", putter());
  sim.run();
  CHECK(received == "hello");
  CHECK(when == 42);
  CHECK(ch.try_get() == std::nullopt);
  CHECK(ch.try_put("x"));
  CHECK(ch.try_get() == std::optional<std::string>("x"));
}
