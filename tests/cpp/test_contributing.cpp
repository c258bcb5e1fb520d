// test_contributing.cpp -- keeps docs/contributing.md true: the example
// collective algorithm of "Adding a collective algorithm" is written here
// between the markers exactly as the page shows it (tests/python/
// test_contributing_doc.py compares the two), registered, run on a machine
// and verified, and compared against the built-in ring it mirrors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "ccl/ccl.hpp"
#include "machines.hpp"
#include "sim/errors.hpp"

// contributing.md example: begin
#include "ccl/algorithms/algorithm.hpp"
#include "ccl/logical/ring.hpp"

namespace kernbench::ccl {

// ring, the other way round: every rank sends to the previous one.
Algorithm reverse_ring_algorithm() {
  Algorithm a;
  a.name = "reverse_ring";
  a.description = "ring all-reduce with the ranks in reverse order: 2(p-1) steps of n/p bytes";
  a.slices = [](const Plan& p) { return std::max(1, p.world.size()); };
  a.all_reduce = [](Schedule& s, const Plan& p) {
    const std::vector<int> ring(p.world.ranks.rbegin(), p.world.ranks.rend());
    s.phase("reduce-scatter");
    ring_reduce_scatter(s, ring, p.all());
    s.phase("all-gather");
    ring_all_gather(s, ring, p.all());
  };
  return a;  // no check, owned or other collectives: complete() fills safe defaults
}

}  // namespace kernbench::ccl
// contributing.md example: end

using namespace kernbench;
using namespace kernbench::ccl;
using namespace kernbench::testing;

namespace {

CollectiveResult run_on(const topology::Config& c, const std::string& algorithm, Bytes bytes) {
  topology::System system(c);
  CollectiveSpec s;
  s.algorithm = algorithm;
  s.bytes_per_pe = bytes;
  s.verify = Verify::On;
  return run_collective(system, s);
}

const Algorithm& registered() {
  static const Algorithm& a = register_algorithm(reverse_ring_algorithm());
  return a;
}

}  // namespace

TEST_CASE("contributing.md: the example algorithm registers, runs and verifies", "[ccl][contributing]") {
  const Algorithm& a = registered();
  CHECK(a.name == "reverse_ring");
  CHECK(&find_algorithm("reverse_ring") == &a);
  const auto listed = algorithms();
  const auto it =
      std::find_if(listed.begin(), listed.end(), [](const AlgorithmInfo& i) { return i.name == "reverse_ring"; });
  REQUIRE(it != listed.end());
  CHECK(it->collectives == std::vector<std::string>{"all_reduce"});
  // A second registration under the same name is refused.
  REQUIRE_THROWS_WITH(register_algorithm(reverse_ring_algorithm()), Catch::Contains("'reverse_ring' is registered"));

  // 16 PEs of one SIP, an uneven buffer: the symbolic check passes, and the reverse ring runs the ring's ops and
  // phases.
  topology::Config c = system_config(1, 1, topology::SipTopology::Ring, 2, 2, 2, 1, 4);
  runtime::pe_config(c).clock_hz = 1'000'000'000;
  const CollectiveResult rev = run_on(c, "reverse_ring", 24 * sim::kKiB + 12);
  const CollectiveResult fwd = run_on(c, "ring", 24 * sim::kKiB + 12);
  CHECK(rev.verified);
  CHECK(rev.ranks == 16);
  CHECK(rev.latency > 0);
  CHECK(rev.op_counts == fwd.op_counts);
  CHECK(rev.phases == std::vector<std::string>{"reduce-scatter", "all-gather"});
  CHECK(rev.phases == fwd.phases);
}

TEST_CASE("contributing.md: an algorithm with no name or no collective is refused", "[ccl][contributing]") {
  Algorithm none;
  REQUIRE_THROWS_WITH(register_algorithm(none), Catch::Contains("needs a name"));
  none.name = "empty";
  REQUIRE_THROWS_WITH(register_algorithm(none), Catch::Contains("'empty' implements no collective"));
}
