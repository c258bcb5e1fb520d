// test_simulation.cpp -- clock, ordering, run(until), determinism.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "sim/errors.hpp"
#include "sim/simulation.hpp"

using namespace kernbench::sim;

namespace {

// Records (time, arg) of every event it receives.
struct Recorder final : Handler {
  explicit Recorder(Simulation& s) : sim(s) {}
  void on_event(std::uint64_t arg) override { seen.emplace_back(sim.now(), arg); }
  Simulation& sim;
  std::vector<std::pair<Time, std::uint64_t>> seen;
};

// Reschedules itself with random delays; its trace hash fingerprints a run.
struct Chain final : Handler {
  Chain(Simulation& s, int budget) : sim(s), left(budget) {}
  void on_event(std::uint64_t arg) override {
    hash = (hash ^ static_cast<std::uint64_t>(sim.now())) * 0x100000001b3ULL;
    hash = (hash ^ arg) * 0x100000001b3ULL;
    if (--left <= 0) return;
    // Zero delays on purpose: the now-lane must keep the order too.
    const Time d = static_cast<Time>(sim.rng().below(4)) * 1000;
    sim.schedule(d, *this, sim.rng().below(16));
  }
  Simulation& sim;
  int left;
  std::uint64_t hash = 0xcbf29ce484222325ULL;
};

std::uint64_t chain_hash(std::uint64_t seed) {
  Simulation sim(seed);
  Chain a(sim, 20000), b(sim, 20000);
  sim.schedule(0, a, 1);
  sim.schedule(0, b, 2);
  sim.run();
  return a.hash ^ (b.hash * 3);
}

}  // namespace

TEST_CASE("equal-time events run in the order they were scheduled", "[simulation]") {
  Simulation sim;
  Recorder r(sim);
  for (std::uint64_t i = 0; i < 100; ++i) sim.schedule(i % 2 == 0 ? 5 : 3, r, i);
  for (std::uint64_t i = 100; i < 110; ++i) sim.schedule(0, r, i);
  sim.run();
  REQUIRE(r.seen.size() == 110);
  // First the ten zero-delay events, then the odd i at t=3, then even at t=5,
  // each group in scheduling order.
  std::vector<std::uint64_t> expected;
  for (std::uint64_t i = 100; i < 110; ++i) expected.push_back(i);
  for (std::uint64_t i = 1; i < 100; i += 2) expected.push_back(i);
  for (std::uint64_t i = 0; i < 100; i += 2) expected.push_back(i);
  for (std::size_t k = 0; k < expected.size(); ++k) REQUIRE(r.seen[k].second == expected[k]);
  CHECK(sim.now() == 5);
}

TEST_CASE("a reserved event runs in the place reserved for it", "[simulation]") {
  Simulation sim;
  Recorder r(sim);
  sim.schedule(5, r, 1);
  const std::uint64_t place = sim.reserve_seq();  // between events 1 and 2
  sim.schedule(5, r, 2);
  sim.schedule(0, r, 0);
  // Materialised later, from inside the run: it still runs before event 2,
  // as if it had been scheduled when its place was reserved.
  struct Late final : Handler {
    Late(Simulation& s, Recorder& r, std::uint64_t p) : sim(s), rec(r), place(p) {}
    void on_event(std::uint64_t) override {
      CHECK_FALSE(sim.passed(5, place));
      sim.schedule_reserved(5, place, rec, 99);
    }
    Simulation& sim;
    Recorder& rec;
    std::uint64_t place;
  } late(sim, r, place);
  sim.schedule(2, late);
  sim.run();
  REQUIRE(r.seen.size() == 4);
  CHECK(r.seen[1].second == 1);
  CHECK(r.seen[2].second == 99);
  CHECK(r.seen[3].second == 2);
  CHECK(sim.passed(5, place));
  // A place that has passed cannot be used.
  Simulation s2;
  const std::uint64_t early = s2.reserve_seq();
  struct Misuse final : Handler {
    Misuse(Simulation& s, std::uint64_t p) : sim(s), place(p) {}
    void on_event(std::uint64_t) override {
      REQUIRE_THROWS_AS(sim.schedule_reserved(sim.now(), place, *this), kernbench::InternalError);
      REQUIRE_THROWS_WITH(sim.schedule_reserved(sim.now() - 1, place, *this), Catch::Contains("has passed"));
    }
    Simulation& sim;
    std::uint64_t place;
  } misuse(s2, early);
  s2.schedule(1, misuse);
  s2.run();
}

TEST_CASE("the loop hands the next event to prefetch before it runs the current one", "[simulation]") {
  // Records prefetch and run calls in the order they happen.
  struct Watcher final : Handler {
    void on_event(std::uint64_t arg) override { log.push_back("run " + std::to_string(arg)); }
    void prefetch(std::uint64_t arg) override { log.push_back("prefetch " + std::to_string(arg)); }
    std::vector<std::string> log;
  } w;
  Simulation sim;
  sim.schedule(30, w, 3);
  sim.schedule(10, w, 1);
  sim.schedule(20, w, 2);
  sim.run();
  // Each event warms the one after it; the last has nothing to warm.
  const std::vector<std::string> expected = {"prefetch 2", "run 1", "prefetch 3", "run 2", "run 3"};
  CHECK(w.log == expected);
}

TEST_CASE("same seed gives an identical trace; another seed does not", "[simulation][determinism]") {
  const auto h1 = chain_hash(42);
  const auto h2 = chain_hash(42);
  const auto h3 = chain_hash(43);
  CHECK(h1 == h2);
  CHECK(h1 != h3);
}

TEST_CASE("run(until) runs events strictly before until and sets the clock", "[simulation]") {
  Simulation sim;
  Recorder r(sim);
  sim.schedule(10, r, 1);
  sim.schedule(20, r, 2);
  sim.schedule(30, r, 3);
  sim.run(20);
  REQUIRE(r.seen.size() == 1);
  CHECK(sim.now() == 20);
  CHECK(sim.peek() == 20);  // the event at until stays pending
  sim.run(100);
  CHECK(r.seen.size() == 3);
  CHECK(sim.now() == 100);  // the clock advances to until even when idle
  CHECK(sim.peek() == kTimeInfinity);
  CHECK_THROWS_WITH(sim.run(50), Catch::Contains("before the current time"));
}

TEST_CASE("step and peek walk one event at a time", "[simulation]") {
  Simulation sim;
  Recorder r(sim);
  CHECK_FALSE(sim.step());
  sim.schedule(7, r, 1);
  sim.schedule(3, r, 2);
  CHECK(sim.peek() == 3);
  CHECK(sim.step());
  CHECK(sim.now() == 3);
  CHECK(sim.peek() == 7);
  CHECK(sim.step());
  CHECK_FALSE(sim.step());
  CHECK(sim.events_processed() == 2);
}

TEST_CASE("stop() ends run() after the current event", "[simulation]") {
  Simulation sim;
  struct Stopper final : Handler {
    explicit Stopper(Simulation& s) : sim(s) {}
    void on_event(std::uint64_t) override {
      ++count;
      if (count == 3) sim.stop();
      sim.schedule(1, *this);
    }
    Simulation& sim;
    int count = 0;
  } s(sim);
  sim.schedule(1, s);
  sim.run();
  CHECK(s.count == 3);
  CHECK(sim.now() == 3);
  CHECK(sim.pending_events() == 1);
}

TEST_CASE("negative delays are refused", "[simulation]") {
  Simulation sim;
  Recorder r(sim);
  CHECK_THROWS_AS(sim.schedule(-1, r), kernbench::UsageError);
}

namespace {
// Reschedules itself every `period` ps, for ever: a runaway model.
struct Forever final : Handler {
  Forever(Simulation& s, Time period) : sim(s), period(period) {}
  void on_event(std::uint64_t) override { sim.schedule(period, *this); }
  Simulation& sim;
  Time period;
};
}  // namespace

TEST_CASE("limits stop a runaway model with a LimitError", "[simulation][limits]") {
  Simulation sim;
  Forever f(sim, 1000);
  sim.schedule(0, f);
  sim.set_limits(500, kTimeInfinity);
  CHECK_THROWS_AS(sim.run(), kernbench::LimitError);
  CHECK(sim.events_processed() == 500);
  CHECK_THROWS_WITH(sim.run(), Catch::Contains("event limit: 500 events"));

  Simulation timed;
  Forever g(timed, 1000);
  timed.schedule(0, g);
  timed.set_limits(UINT64_MAX, 10'000);
  CHECK_THROWS_WITH(timed.run(), Catch::Contains("simulated-time limit") && Catch::Contains("max_time 10000 ps"));
  CHECK(timed.now() == 10'000);  // the events up to the limit ran
  // run(until) below the limit is unaffected.
  Simulation ok;
  Forever h(ok, 1000);
  ok.schedule(0, h);
  ok.set_limits(UINT64_MAX, 1'000'000);
  ok.run(50'000);
  CHECK(ok.now() == 50'000);
}

TEST_CASE("the poll runs between events at its period and may abandon the run", "[simulation][limits]") {
  Simulation sim;
  Forever f(sim, 1);
  sim.schedule(0, f);
  std::vector<std::uint64_t> seen;
  sim.set_poll(100, [&] {
    seen.push_back(sim.events_processed());
    if (seen.size() == 3) throw std::runtime_error("interrupted");
  });
  CHECK_THROWS_WITH(sim.run(), "interrupted");
  CHECK(seen == std::vector<std::uint64_t>{100, 200, 300});
}
