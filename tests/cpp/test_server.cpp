// test_server.cpp -- capacity, hand-off, arbitration and accounting.
#include <catch2/catch.hpp>

#include <vector>

#include "sim/errors.hpp"
#include "sim/process.hpp"
#include "sim/server.hpp"

using namespace kernbench::sim;

namespace {

struct Job {
  int id;
  Time arrive;
  Time service;
  int port;
};

// Runs jobs through a server; returns (id, start) pairs in start order.
std::vector<std::pair<int, Time>> run_jobs(Server& server, Simulation& sim, const std::vector<Job>& jobs) {
  std::vector<std::pair<int, Time>> starts;
  auto job = [&](Job j) -> Process {
    co_await sim.delay(j.arrive);
    co_await server.acquire(j.port);
    starts.emplace_back(j.id, sim.now());
    co_await sim.delay(j.service);
    server.release();
  };
  for (const Job& j : jobs) sim.spawn("job" + std::to_string(j.id), job(j));
  sim.run();
  return starts;
}

}  // namespace

TEST_CASE("a capacity-2 server runs two jobs at once and queues the third", "[server]") {
  Simulation sim;
  Server s(sim, "engine", 2);
  auto starts = run_jobs(s, sim, {{0, 0, 10, 0}, {1, 0, 10, 0}, {2, 0, 10, 0}, {3, 1, 10, 0}});
  REQUIRE(starts.size() == 4);
  CHECK(starts[0] == std::make_pair(0, Time{0}));
  CHECK(starts[1] == std::make_pair(1, Time{0}));
  CHECK(starts[2] == std::make_pair(2, Time{10}));  // hand-off at the release time
  CHECK(starts[3] == std::make_pair(3, Time{10}));
  const ServerStats st = s.stats();
  CHECK(st.grants == 4);
  CHECK(st.waited == 2);
  CHECK(st.total_wait == 10 + 9);
  CHECK(st.max_wait == 10);
  CHECK(st.busy_unit_time == Approx(40.0));  // 4 jobs x 10 ps
  CHECK(sim.now() == 20);
  CHECK(s.utilization() == Approx(40.0 / (20.0 * 2)));
  CHECK(st.max_queue == 2);
}

TEST_CASE("FIFO serves waiters in arrival order", "[server]") {
  Simulation sim;
  Server s(sim, "fifo", 1);
  auto starts = run_jobs(s, sim, {{0, 0, 100, 0}, {1, 3, 1, 0}, {2, 1, 1, 0}, {3, 2, 1, 0}});
  std::vector<int> order;
  for (auto& [id, t] : starts) order.push_back(id);
  CHECK(order == std::vector<int>{0, 2, 3, 1});
}

TEST_CASE("round-robin alternates between ports whatever the arrival order", "[server]") {
  Simulation sim;
  Server s(sim, "rr", 1, Arbitration::RoundRobin, 2);
  // Port 0 floods first, port 1 arrives later; RR must interleave them.
  auto starts =
      run_jobs(s, sim, {{0, 0, 10, 0}, {1, 1, 10, 0}, {2, 1, 10, 0}, {3, 1, 10, 0}, {4, 2, 10, 1}, {5, 2, 10, 1}});
  std::vector<int> order;
  for (auto& [id, t] : starts) order.push_back(id);
  // After job 0: the pointer starts before port 0, so port 0 (job 1), then
  // port 1 (job 4), port 0 (job 2), port 1 (job 5), port 0 (job 3).
  CHECK(order == std::vector<int>{0, 1, 4, 2, 5, 3});
}

TEST_CASE("callback requests get the unit at the release time", "[server]") {
  Simulation sim;
  Server s(sim, "cb", 1);
  struct Waiter final : Handler {
    explicit Waiter(Simulation& s) : sim(s) {}
    void on_event(std::uint64_t arg) override { granted.emplace_back(arg, sim.now()); }
    Simulation& sim;
    std::vector<std::pair<std::uint64_t, Time>> granted;
  } w(sim);
  CHECK(s.request(w, 1));        // free: granted synchronously
  CHECK_FALSE(s.request(w, 2));  // queued
  CHECK_FALSE(s.request(w, 3));
  CHECK(s.queue_length() == 2);
  struct Releaser final : Handler {
    explicit Releaser(Server& s) : server(s) {}
    void on_event(std::uint64_t) override { server.release(); }
    Server& server;
  } rel(s);
  sim.schedule(50, rel);
  sim.schedule(70, rel);
  sim.run();
  CHECK(w.granted == std::vector<std::pair<std::uint64_t, Time>>{{2, 50}, {3, 70}});
  CHECK(s.in_use() == 1);
}

TEST_CASE("server misuse is a clear error", "[server]") {
  Simulation sim;
  CHECK_THROWS_WITH(Server(sim, "x", 0), Catch::Contains("server 'x': capacity must be >= 1"));
  CHECK_THROWS_WITH(Server(sim, "y", 1, Arbitration::Fifo, 3), Catch::Contains("single queue"));
  Server s(sim, "z", 1);
  CHECK_THROWS_WITH(s.release(), Catch::Contains("server 'z': release() without a unit held"));
  Server rr(sim, "rr", 1, Arbitration::RoundRobin, 2);
  struct Nop final : Handler {
    void on_event(std::uint64_t) override {}
  } nop;
  CHECK(rr.request(nop, 0, 1));
  CHECK_THROWS_WITH(rr.request(nop, 0, 2), Catch::Contains("port 2 out of range [0, 2)"));
}
