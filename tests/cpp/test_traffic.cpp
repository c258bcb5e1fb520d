// test_traffic.cpp -- synthetic traffic patterns and the DMA primitive.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>

#include "machines.hpp"
#include "sim/errors.hpp"
#include "sim/process.hpp"
#include "topology/system.hpp"

using namespace kernbench::testing;
using kernbench::sim::kKiB;

namespace {

// One cube, 4x4 routers, 16 PEs: a square grid for transpose.
System square_system(std::uint64_t seed = 1) {
  Config c = system_config(1, 1, SipTopology::Ring, 1, 1, 4, 4, 16);
  return System(c, seed);
}

TrafficSpec spec_for(System& s, TrafficPattern pattern, Injection injection = Injection::Periodic) {
  TrafficSpec t;
  t.pattern = pattern;
  t.injection = injection;
  for (int p = 0; p < 16; ++p) t.endpoints.push_back(s.machine().pe(0, 0, p));
  t.grid_w = 4;
  t.offered = Bandwidth::gb_per_s(6.4);  // 64 B every 10 ns
  t.packet = 64;
  t.start = 0;
  t.stop = 1'000'000;  // 1 us: 100 packets per source when periodic
  return t;
}

}  // namespace

TEST_CASE("periodic injection sends exactly rate x window packets per source", "[traffic]") {
  System s = square_system();
  s.traffic(spec_for(s, TrafficPattern::Neighbour));
  s.run();
  const auto& r = s.fabric().records();
  CHECK(r.size() == 16 * 100);
  std::map<NodeId, int> per_src;
  for (const auto& t : r) {
    ++per_src[t.src];
    CHECK(t.done());
    CHECK(t.parts.total() == t.latency());
  }
  for (const auto& [src, n] : per_src) CHECK(n == 100);
}

TEST_CASE("patterns pick the documented destinations", "[traffic]") {
  System s = square_system();
  const Machine& m = s.machine();
  s.traffic(spec_for(s, TrafficPattern::Transpose));
  s.run();
  for (const auto& t : s.fabric().records()) {
    // PE p sits at (row, col) = (p / 4, p % 4) of the 4x4 list; transpose swaps them.
    const int p = m.node(t.src).pe, q = m.node(t.dst).pe;
    CHECK(q == (p % 4) * 4 + p / 4);
    CHECK(p != q);  // the diagonal sends nothing
  }
  CHECK(s.fabric().records().size() == 12 * 100);

  // Neighbour on the grid: the next PE in the row, wrapping within the row.
  System n = square_system();
  n.traffic(spec_for(n, TrafficPattern::Neighbour));
  n.run();
  for (const auto& t : n.fabric().records()) {
    const int p = n.machine().node(t.src).pe;
    CHECK(n.machine().node(t.dst).pe == (p / 4) * 4 + (p % 4 + 1) % 4);
  }
  CHECK(n.fabric().records().size() == 16 * 100);
  // Without a grid: the next endpoint of the list (a ring over the sources).
  System l = square_system();
  TrafficSpec ring = spec_for(l, TrafficPattern::Neighbour);
  ring.grid_w = 0;
  l.traffic(ring);
  l.run();
  for (const auto& t : l.fabric().records()) CHECK(l.machine().node(t.dst).pe == (l.machine().node(t.src).pe + 1) % 16);

  // Bit-complement: every bit of the 4-bit index flipped, p -> 15 - p; no fixed point.
  System b = square_system();
  b.traffic(spec_for(b, TrafficPattern::BitComplement));
  b.run();
  for (const auto& t : b.fabric().records()) CHECK(b.machine().node(t.dst).pe == 15 - b.machine().node(t.src).pe);
  CHECK(b.fabric().records().size() == 16 * 100);
}

TEST_CASE("bernoulli injection: one trial per cycle, mean rate p within statistical bounds", "[traffic]") {
  System s = square_system(11);
  TrafficSpec t = spec_for(s, TrafficPattern::Uniform, Injection::Bernoulli);
  t.cycle = 1000;                             // 1 ns cycles
  t.offered = Bandwidth::gb_per_s(0.3 * 64);  // p = 0.3 packets (of 64 B) per cycle
  t.stop = 2'000'000;                         // 2000 cycles x 16 sources = 32000 trials
  s.traffic(t);
  s.run();
  const auto& r = s.fabric().records();
  const double trials = 16 * 2000, p = 0.3;
  const double sd = std::sqrt(trials * p * (1 - p));  // binomial: ~82 packets
  CHECK(std::abs(static_cast<double>(r.size()) - trials * p) < 4 * sd);
  std::map<std::pair<NodeId, kernbench::sim::Time>, int> per_cycle;
  for (const auto& x : r) {
    CHECK(x.issue % t.cycle == 0);  // packets start on cycle boundaries
    CHECK(x.issue < t.stop);
    ++per_cycle[{x.src, x.issue}];
  }
  for (const auto& [k, c] : per_cycle) CHECK(c == 1);  // at most one packet per source per cycle

  // The gaps are geometric in cycles: mean 1/p cycles, variance (1-p)/p^2.
  System g = square_system(12);
  TrafficSpec gt = t;
  gt.endpoints = {g.machine().pe(0, 0, 0), g.machine().pe(0, 0, 1)};
  TrafficGenerator& gen = g.traffic(gt);
  const int n = 200000;
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double k = static_cast<double>(gen.gap()) / static_cast<double>(t.cycle);
    CHECK(k == std::floor(k));
    sum += k;
    sum2 += k * k;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  CHECK(mean == Approx(1 / p).margin(4 * std::sqrt((1 - p) / (p * p) / n)));
  CHECK(var == Approx((1 - p) / (p * p)).epsilon(0.03));

  // p = 1: a packet every cycle exactly.
  System one = square_system();
  TrafficSpec full = spec_for(one, TrafficPattern::Neighbour, Injection::Bernoulli);
  full.cycle = 1000;
  full.offered = Bandwidth::gb_per_s(64);
  full.stop = 100'000;
  one.traffic(full);
  one.run();
  CHECK(one.fabric().records().size() == 16 * 100);
}

TEST_CASE("uniform never sends to itself and covers every destination; hotspot hits its fraction", "[traffic]") {
  System s = square_system(5);
  s.traffic(spec_for(s, TrafficPattern::Uniform, Injection::Poisson));
  s.run();
  std::set<NodeId> dsts;
  for (const auto& t : s.fabric().records()) {
    CHECK(t.src != t.dst);
    dsts.insert(t.dst);
  }
  CHECK(dsts.size() == 16);

  System h = square_system(6);
  TrafficSpec spec = spec_for(h, TrafficPattern::Hotspot);
  spec.hotspot = h.machine().pe(0, 0, 0);
  spec.hotspot_fraction = 0.25;
  h.traffic(spec);
  h.run();
  std::size_t hot = 0, total = 0;
  for (const auto& t : h.fabric().records()) {
    ++total;
    hot += t.dst == spec.hotspot ? 1 : 0;
  }
  // 25 % chosen outright plus 1/15 of the uniform rest (sources other than pe0).
  const double expected = 0.25 + 0.75 / 15.0;
  CHECK(static_cast<double>(hot) / static_cast<double>(total) == Approx(expected).margin(0.03));
}

TEST_CASE("bad traffic specs are clear errors", "[traffic]") {
  System s = square_system();
  TrafficSpec t = spec_for(s, TrafficPattern::Transpose);
  t.grid_w = 3;
  CHECK_THROWS_WITH(s.traffic(t),
                    Catch::Contains("transpose needs a square grid of endpoints; 16 endpoints with grid_w 3"));
  t = spec_for(s, TrafficPattern::Uniform);
  t.endpoints.resize(1);
  CHECK_THROWS_WITH(s.traffic(t), Catch::Contains("at least two endpoints"));
  t = spec_for(s, TrafficPattern::Uniform);
  t.offered = Bandwidth{0};
  CHECK_THROWS_AS(s.traffic(t), kernbench::ConfigError);
  CHECK_THROWS_WITH(traffic_pattern_from_name("zipf"),
                    Catch::Contains("known: uniform, transpose, bitcomplement, hotspot, neighbour"));
  t = spec_for(s, TrafficPattern::BitComplement);
  t.endpoints.resize(12);
  CHECK_THROWS_WITH(s.traffic(t), Catch::Contains("bitcomplement needs a power-of-two number of endpoints, got 12"));
  t = spec_for(s, TrafficPattern::Uniform, Injection::Bernoulli);
  CHECK_THROWS_WITH(s.traffic(t), Catch::Contains("bernoulli injection needs a cycle > 0 ps"));
  t.cycle = 20'000;  // 64 B every 10 ns offered, 20 ns cycles: 2 packets per cycle
  CHECK_THROWS_WITH(s.traffic(t), Catch::Contains("over 1"));
  CHECK_THROWS_WITH(injection_from_name("burst"), Catch::Contains("known: poisson, periodic, bernoulli"));
}

TEST_CASE("a DMA read is a request out and the data back, logged as one op", "[dma]") {
  System s = square_system();
  const Machine& m = s.machine();
  s.dma(DmaKind::Read, m.pe(0, 0, 0), m.hbm_ctrl(0, 0, 5), 16 * kKiB, 0, /*tag=*/7);
  s.dma(DmaKind::Write, m.pe(0, 0, 1), m.hbm_ctrl(0, 0, 2), 4 * kKiB, 1000);
  s.run();
  const auto& ops = s.dma_ops();
  REQUIRE(ops.size() == 2);
  CHECK(ops[0].done);
  const auto& recs = s.fabric().records();
  REQUIRE(recs.size() == 3);
  const TransferRecord& req = recs[ops[0].result.request_leg];
  const TransferRecord& data = recs[ops[0].result.data_leg];
  CHECK(req.bytes == 64);  // the fabric's request size
  CHECK(req.dst == data.src);
  CHECK(data.issue == req.end);  // data streams once the request has arrived
  CHECK(ops[0].result.latency() == data.end - req.issue);
  CHECK(ops[0].result.parts.total() == ops[0].result.latency());
  // The memory node's overhead is paid once, on the request's arrival.
  CHECK(ops[0].result.parts.overhead == req.parts.overhead + data.parts.overhead);
  // Same routers both ways: the data leg pays all the request's overheads but the controller's.
  CHECK(data.parts.overhead == req.parts.overhead - m.node(m.hbm_ctrl(0, 0, 5)).params.overhead);
  CHECK(ops[1].result.issue == 1000);
  // Ops are logged as they complete: the short write first, then the read.
  const auto& log = s.sim().op_log();
  REQUIRE(log.size() == 2);
  CHECK(log.kind_names()[static_cast<std::size_t>(log.kind()[0])] == "dma_write");
  CHECK(log.kind_names()[static_cast<std::size_t>(log.kind()[1])] == "dma_read");
  CHECK(log.tag()[1] == 7);
  CHECK(log.bytes()[1] == 16 * kKiB);
  CHECK(log.agent()[1] == static_cast<std::int32_t>(m.pe(0, 0, 0)));
  CHECK(log.resource()[1] == static_cast<std::int32_t>(m.hbm_ctrl(0, 0, 5)));
  CHECK(log.issue()[1] == 0);
  CHECK(log.end()[1] == ops[0].result.end);
}
