// test_event_queue.cpp -- the (time, seq) order of the pending-event set.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <set>
#include <utility>
#include <sstream>
#include <string>
#include <vector>

#include "sim/event_queue.hpp"
#include "sim/huge_pages.hpp"
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

TEST_CASE("a run of pushes and pops keeps the exact (time, seq) order", "[event_queue]") {
  // A simulation's pattern: pop the least, then schedule a few events at or
  // after it -- zero delays to the now-lane, short and very long delays to
  // the radix part, and some in places reserved earlier (a smaller seq at
  // the current time). A std::set is the reference.
  EventQueue q;
  std::set<std::pair<Time, std::uint64_t>> ref;
  Rng rng(11);
  std::uint64_t seq = 0;
  std::vector<std::uint64_t> reserved;  // places taken, not yet used
  auto push = [&](Time t, std::uint64_t s, bool now_lane) {
    ref.emplace(t, s);
    if (now_lane) {
      q.push_now(Event{t, s, Target{}, s});
    } else {
      q.push_heap(Event{t, s, Target{}, s});
    }
  };
  for (int i = 0; i < 64; ++i) push(static_cast<Time>(rng.below(1000)), seq++, false);
  std::size_t popped = 0;
  while (!ref.empty() && popped < 200000) {
    const Event got = q.pop();
    const auto want = *ref.begin();
    ref.erase(ref.begin());
    REQUIRE(got.time == want.first);
    REQUIRE(got.seq == want.second);
    ++popped;
    const Time now = got.time;
    if (popped > 150000) continue;  // drain at the end
    // One successor always (the population neither dies nor explodes), and
    // up to two extras of any kind.
    push(now + static_cast<Time>(rng.below(5000)) + 1, seq++, false);
    const int n = ref.size() < 4000 ? static_cast<int>(rng.below(3)) : 0;
    for (int k = 0; k < n; ++k) {
      const std::uint64_t kind = rng.below(10);
      if (kind == 0) {
        push(now, seq++, true);  // zero delay
      } else if (kind == 1) {
        reserved.push_back(seq++);  // a place reserved now, used later at this time
      } else if (kind == 2 && !reserved.empty()) {
        // A reserved place used at the current time: only if it has not passed.
        const std::uint64_t s = reserved.back();
        reserved.pop_back();
        if (s > got.seq) push(now, s, false);
      } else {
        const Time delay =
            kind == 3 ? static_cast<Time>(rng.below(1ULL << 40)) : static_cast<Time>(rng.below(5000)) + 1;
        push(now + delay, seq++, false);
      }
    }
  }
  CHECK(popped > 100000);
  CHECK(q.size() == ref.size());
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

TEST_CASE("the peak counts heap and now-lane events pending together", "[event_queue]") {
  EventQueue q;
  for (std::uint64_t i = 0; i < 5; ++i) q.push_heap(Event{10 + static_cast<Time>(i), i, {}, 0});
  q.push_now(Event{0, 5, {}, 0});
  CHECK(q.peak_size() == 6);
  for (int i = 0; i < 4; ++i) q.pop();
  q.push_heap(Event{20, 6, {}, 0});
  CHECK(q.size() == 3);
  CHECK(q.peak_size() == 6);  // a high-water mark: it never falls
  for (std::uint64_t i = 7; i < 12; ++i) q.push_now(Event{0, i, {}, 0});
  CHECK(q.peak_size() == 8);
}

TEST_CASE("reserved bytes cover the pending events", "[event_queue]") {
  EventQueue q;
  for (std::uint64_t i = 0; i < 1000; ++i) q.push_heap(Event{static_cast<Time>(i + 1), i, Target{}, 0});
  CHECK(q.reserved_bytes() >= 1000 * sizeof(Event));
}

namespace {
// The "THPeligible" flag /proc/self/smaps gives the mapping holding `p`
// (-1: no such line, e.g. off Linux).
int thp_eligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= addr && addr < hi;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return std::stoi(line.substr(12));
    }
  }
  return -1;
}
std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s;
}
}  // namespace

TEST_CASE("big arrays go on 2 MiB-aligned blocks advised for huge pages", "[event_queue][huge_pages]") {
  HugeVector<std::uint64_t> v;
  for (std::uint64_t i = 0; i < 100; ++i) v.push_back(i * 7);
  CHECK(reinterpret_cast<std::uintptr_t>(v.data()) % kHugePage != 0);  // small: plain new
  // Growing past 2 MiB moves the contents to a huge-page block.
  for (std::uint64_t i = 100; i < (3 * kHugePage) / sizeof(std::uint64_t); ++i) v.push_back(i * 7);
  CHECK(reinterpret_cast<std::uintptr_t>(v.data()) % kHugePage == 0);
  bool intact = true;
  for (std::uint64_t i = 0; i < v.size(); ++i) intact = intact && v[i] == i * 7;
  CHECK(intact);
  // Where the kernel offers transparent huge pages, the block is eligible.
  const std::string mode = thp_mode();
  if (mode.find("[madvise]") != std::string::npos || mode.find("[always]") != std::string::npos) {
    const int eligible = thp_eligible(v.data());
    if (eligible != -1) CHECK(eligible == 1);  // -1: a kernel without the smaps line
  }
  // Over-aligned types keep their alignment on both paths.
  struct alignas(64) Line {
    char bytes[64];
  };
  HugeVector<Line> small(3), big(kHugePage / sizeof(Line) + 1);
  CHECK(reinterpret_cast<std::uintptr_t>(small.data()) % 64 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(big.data()) % kHugePage == 0);
}
