// test_reliability.cpp -- issue 22, fabric/System half: the time range is one
// clear error everywhere (checked where durations are computed and where
// event times are summed), refused work leaves the System usable, DMA nodes
// must be able to play their part, and collective requests are bounded.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.hpp"
#include "runtime/config_section.hpp"
#include "machines.hpp"
#include "sim/errors.hpp"
#include "sim/simulation.hpp"
#include "sim/units.hpp"
#include "topology/system.hpp"

using namespace kernbench;
using namespace kernbench::testing;
using sim::Bandwidth;
using sim::kMaxTime;

namespace {

Config slow_pe_links(FabricModel model, std::int64_t bytes_per_s = 1000) {
  Config c = system_config();
  c.system->links.pe = LinkParams{Bandwidth{bytes_per_s}, 500, 1};
  c.fabric.model = model;
  return c;
}

struct Noop final : sim::Handler {
  int fired = 0;
  void on_event(std::uint64_t) override { ++fired; }
};

}  // namespace

TEST_CASE("transfer_time: past 2^62 ps is a UsageError naming bytes, bandwidth and the limit", "[reliability]") {
  CHECK(sim::transfer_time(1000, Bandwidth{1000}) == sim::kSecond);
  // 2^62 ps exactly is the last duration in range.
  CHECK(sim::transfer_time(std::int64_t{1} << 62, Bandwidth{sim::kSecond}) == kMaxTime);
  REQUIRE_THROWS_AS(sim::transfer_time((std::int64_t{1} << 62) + 1, Bandwidth{sim::kSecond}), UsageError);
  REQUIRE_THROWS_WITH(sim::transfer_time(10'000'000'000, Bandwidth{1000}),
                      Catch::Contains("10000000000 B at 1000 B/s") && Catch::Contains("2^62 ps"));
}

TEST_CASE("ps_from_double and add_time refuse what has no time", "[reliability]") {
  CHECK(sim::ps_from_double(1.5, "x") == 2);
  REQUIRE_THROWS_WITH(sim::ps_from_double(std::nan(""), "gemm"), Catch::Contains("gemm"));
  REQUIRE_THROWS_AS(sim::ps_from_double(1e30, "gemm"), UsageError);
  REQUIRE_THROWS_WITH(sim::ps_from_double(1e30, "gemm"), Catch::Contains("2^62 ps"));
  REQUIRE_THROWS_AS(sim::ps_from_double(-1.0, "gemm"), UsageError);
  CHECK(sim::add_time(kMaxTime - 1, 1, "x") == kMaxTime);
  REQUIRE_THROWS_WITH(sim::add_time(kMaxTime, 1, "delay"), Catch::Contains("delay"));
}

TEST_CASE("schedule: an event past the time range is a UsageError naming the delay, not time going backwards",
          "[reliability]") {
  sim::Simulation s;
  Noop h;
  s.schedule(kMaxTime, h);
  REQUIRE_THROWS_AS(s.schedule(kMaxTime + 1, h), UsageError);
  REQUIRE_THROWS_WITH(s.schedule(std::numeric_limits<sim::Time>::max(), h),
                      Catch::Contains("9223372036854775807 ps") && Catch::Contains("time range"));
  s.run();  // the refused events were never queued
  CHECK(h.fired == 1);
  CHECK(s.now() == kMaxTime);
  REQUIRE_THROWS_WITH(s.schedule(1, h), Catch::Contains("a delay of 1 ps"));
  REQUIRE_THROWS_WITH(s.schedule(-1, h), Catch::Contains("negative delay"));
}

TEST_CASE("a transfer longer than the time range is refused up front by both fabric models alike", "[reliability]") {
  for (FabricModel model : {FabricModel::Packet, FabricModel::Flow}) {
    System s(slow_pe_links(model));
    const Machine& m = s.machine();
    const NodeId a = m.pe(0, 0, 0), b = m.pe(0, 1, 0);
    // 10 GB at 1 KB/s: 1e19 ps, past 2^63 (the packet model used to recurse
    // until the stack ran out).
    REQUIRE_THROWS_AS(s.transfer(a, b, 10'000'000'000, 0), UsageError);
    REQUIRE_THROWS_WITH(s.transfer(a, b, 10'000'000'000, 0),
                        Catch::Contains("10000000000 B at 1000 B/s") && Catch::Contains("2^62 ps"));
    // Above 2^62 ps but below 2^63: refused the same way (it was accepted by
    // the packet model).
    REQUIRE_THROWS_AS(s.transfer(a, b, 5'000'000'000, 0), UsageError);
    // Refused work left nothing behind: the System runs on.
    s.transfer(a, b, 1000, 0);
    s.run();
    REQUIRE(s.fabric().records().size() == 1);
    CHECK(s.fabric().records()[0].done());
    CHECK(s.failure().empty());
  }
}

TEST_CASE("the whole transfer is checked: many in-range chunks that sum past the range", "[reliability]") {
  // 2^62 ps worth of bytes in one transfer: each chunk is short, the
  // whole (plus latencies) is not.
  Config c = slow_pe_links(FabricModel::Packet, 1000);
  c.system->links.pe.latency = sim::kMillisecond;
  System s(c);
  const Machine& m = s.machine();
  const sim::Bytes bytes = kMaxTime / 1'000'000'000;  // its streaming alone is just under 2^62 ps at 1 KB/s
  CHECK(sim::transfer_time(bytes, Bandwidth{1000}) < kMaxTime);
  REQUIRE_THROWS_WITH(s.transfer(m.pe(0, 0, 0), m.pe(0, 1, 0), bytes, 0),
                      Catch::Contains("past the simulator's time range") && Catch::Contains("wire latency"));
}

TEST_CASE("a huge link latency is refused at the transfer, not as time going backwards", "[reliability]") {
  for (FabricModel model : {FabricModel::Packet, FabricModel::Flow}) {
    Config c = system_config();
    c.system->links.pe.latency = 9'000'000 * sim::kSecond;  // 9e18 ps: validates, but two of them wrap int64
    c.fabric.model = model;
    System s(c);
    const Machine& m = s.machine();
    REQUIRE_THROWS_AS(s.transfer(m.pe(0, 0, 0), m.pe(0, 0, 1), 1000, 0), UsageError);
    REQUIRE_THROWS_WITH(s.transfer(m.pe(0, 0, 0), m.pe(0, 0, 1), 1000, 0),
                        Catch::Contains("wire latency 18000000000000000500 ps"));
    REQUIRE_THROWS_AS(s.dma(DmaKind::Read, m.pe(0, 0, 0), m.hbm_ctrl(0, 0, 0), 64, 0), UsageError);
    s.run();  // nothing was scheduled
    CHECK(s.sim().now() == 0);
  }
}

TEST_CASE("a start time past the time range is refused", "[reliability]") {
  System s(system_config());
  const Machine& m = s.machine();
  REQUIRE_THROWS_WITH(s.transfer(m.pe(0, 0, 0), m.pe(0, 0, 1), 64, kMaxTime + 1),
                      Catch::Contains("past the simulator's time range"));
  REQUIRE_THROWS_WITH(s.transfer(m.pe(0, 0, 0), m.pe(0, 0, 1), 64, kMaxTime - 10),
                      Catch::Contains("past the simulator's time range"));
  REQUIRE_THROWS_AS(s.dma(DmaKind::Write, m.pe(0, 0, 0), m.hbm_ctrl(0, 0, 0), 64, kMaxTime + 1), UsageError);
}

TEST_CASE("the packet model refuses more than 2^32 - 1 chunks", "[reliability]") {
  Config c = system_config();
  c.fabric.chunk = 64;
  System s(c);
  const Machine& m = s.machine();
  REQUIRE_THROWS_WITH(s.transfer(m.pe(0, 0, 0), m.pe(0, 0, 1), sim::Bytes{1} << 40, 0),
                      Catch::Contains("2^32 - 1 chunks of fabric.chunk = 64 B"));
}

TEST_CASE("DMA: a router cannot be the memory, an HBM controller cannot issue", "[reliability]") {
  System s(system_config());
  const Machine& m = s.machine();
  NodeId router = 0;
  while (m.node(router).kind != NodeKind::Router) ++router;
  REQUIRE_THROWS_AS(s.dma(DmaKind::Read, m.pe(0, 0, 0), router, 64, 0), TopologyError);
  REQUIRE_THROWS_WITH(s.dma(DmaKind::Read, m.pe(0, 0, 0), router, 64, 0),
                      Catch::Contains(m.node(router).name) && Catch::Contains("is a router"));
  REQUIRE_THROWS_WITH(s.dma(DmaKind::Write, m.hbm_ctrl(0, 0, 0), m.hbm_ctrl(0, 0, 1), 64, 0),
                      Catch::Contains("the issuer " + m.node(m.hbm_ctrl(0, 0, 0)).name) &&
                          Catch::Contains("hbm_ctrl"));
  REQUIRE_THROWS_AS(s.dma(DmaKind::Read, router, m.hbm_ctrl(0, 0, 0), 64, 0), TopologyError);
  CHECK(s.dma_ops().empty());
  s.dma(DmaKind::Read, m.pe(0, 0, 0), m.hbm_ctrl(0, 0, 0), 64, 0);  // still fine
  s.run();
  CHECK(s.dma_ops().at(0).done);
}

TEST_CASE("traffic: a gap or stop past the time range is refused up front", "[reliability]") {
  System s(system_config());
  TrafficSpec t;
  t.endpoints = s.machine().pes();
  t.pattern = TrafficPattern::Neighbour;
  t.offered = Bandwidth{1};
  t.packet = sim::Bytes{1} << 40;
  t.stop = 1000;
  REQUIRE_THROWS_WITH(s.traffic(t), Catch::Contains("injection gap"));
  t.offered = Bandwidth::gb_per_s(1);
  t.packet = 64;
  t.stop = kMaxTime + 1;
  REQUIRE_THROWS_AS(s.traffic(t), ConfigError);
}

TEST_CASE("System::Use: threads take turns; a failed run makes the System refuse with the reason", "[reliability]") {
  System s(system_config());
  const Machine& m = s.machine();
  {
    System::Use use(s);
    REQUIRE_THROWS_WITH(System::Use(s), Catch::Contains("re-entrant"));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      System::Use use(s);
      s.transfer(m.pe(0, 0, 0), m.pe(0, 1, i), 4096, s.sim().now());
      s.run();
    });
  for (auto& t : threads) t.join();
  CHECK(s.fabric().records().size() == 4);
  {
    System::Use use(s);
    use.failed("boom");
  }
  REQUIRE_THROWS_WITH(s.transfer(m.pe(0, 0, 0), m.pe(0, 0, 1), 64, s.sim().now()),
                      Catch::Contains("no longer be used") && Catch::Contains("boom"));
}

TEST_CASE("collectives: HBM buffers must fit the slice, pieces and grids are bounded", "[reliability]") {
  Config c = program_config(2, 1);
  pe_config(c).hbm.capacity = sim::kGiB;
  System s(c);
  ccl::CollectiveSpec spec;
  spec.collective = ccl::Collective::AllReduce;
  spec.algorithm = "ring";
  spec.buffer = ccl::Buffer::Hbm;
  spec.bytes_per_pe = 4 * sim::kGiB;
  REQUIRE_THROWS_AS(ccl::run_collective(s, spec), CapacityError);
  REQUIRE_THROWS_WITH(ccl::run_collective(s, spec),
                      Catch::Contains("4096 MiB per PE") && Catch::Contains("HBM slice is 1024 MiB"));
  spec.bytes_per_pe = 4096;
  spec.pieces = 1'000'000'000;
  REQUIRE_THROWS_WITH(ccl::run_collective(s, spec), Catch::Contains("pieces = 1000000000 is too many"));
  spec.pieces = 4;
  spec.grid_w = -4;
  spec.grid_h = -4;
  REQUIRE_THROWS_WITH(ccl::run_collective(s, spec), Catch::Contains("negative side"));
}
