// test_event_queue.cpp -- the (time, seq) order of the pending-event set.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "sim/event_queue.hpp"
#include "sim/rng.hpp"

using namespace kernbench::sim;

TEST_CASE("heap pops in (time, seq) order for random input", "[event_queue]") {
  EventQueue q;
  Rng rng(7);
  std::vector<Event> all;
  for (std::uint64_t seq = 0; seq < 5000; ++seq) {
    // Few distinct times, so ties are frequent and seq must break them.
    Event e{static_cast<Time>(rng.below(50)) + 1, seq, Target{}, seq};
    all.push_back(e);
    q.push_heap(e);
  }
  std::sort(all.begin(), all.end());
  for (const Event& expected : all) {
    REQUIRE_FALSE(q.empty());
    const Event got = q.pop();
    REQUIRE(got.time == expected.time);
    REQUIRE(got.seq == expected.seq);
  }
  CHECK(q.empty());
}

TEST_CASE("the now-lane merges with heap events due at the same time", "[event_queue]") {
  EventQueue q;
  q.push_heap(Event{10, 0, Target{}, 0});
  q.push_heap(Event{10, 1, Target{}, 1});
  q.push_heap(Event{20, 2, Target{}, 2});
  CHECK(q.pop().arg == 0);  // clock is now 10
  q.push_now(Event{10, 3, Target{}, 3});
  q.push_now(Event{10, 4, Target{}, 4});
  CHECK(q.size() == 4);
  CHECK(q.top().arg == 1);  // heap event at 10 was scheduled first
  CHECK(q.pop().arg == 1);
  CHECK(q.pop().arg == 3);
  CHECK(q.pop().arg == 4);
  CHECK(q.pop().arg == 2);
  CHECK(q.empty());
}

TEST_CASE("reserved bytes cover the pending events", "[event_queue]") {
  EventQueue q;
  for (std::uint64_t i = 0; i < 1000; ++i) q.push_heap(Event{static_cast<Time>(i + 1), i, Target{}, 0});
  CHECK(q.reserved_bytes() >= 1000 * sizeof(Event));
}
