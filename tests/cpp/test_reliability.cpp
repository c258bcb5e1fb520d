// test_reliability.cpp -- issue 22, fabric/System half: the time range is one
// clear error everywhere (checked where durations are computed and where
// event times are summed), refused work leaves the System usable, DMA nodes
// must be able to play their part, and collective requests are bounded.
// Config-loader half (at the end): every resource a file can make the loader
// or the machine spend is bounded before it is spent, and includes stay in
// the folders they may read.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.hpp"
#include "config/yaml_tree.hpp"
#include "kernbench.hpp"
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
                      Catch::Contains("the issuer " + m.node(m.hbm_ctrl(0, 0, 0)).name) && Catch::Contains("hbm_ctrl"));
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

// ---- the config loader: bounded before it is spent -------------------------------------

namespace {

namespace fs = std::filesystem;

std::string nested_lists(int levels) {
  return "x: " + std::string(static_cast<std::size_t>(levels), '[') +
         std::string(static_cast<std::size_t>(levels), ']') + "\n";
}

struct Folder {
  fs::path path;
  explicit Folder(const std::string& name) {
    path = fs::temp_directory_path() / ("kernbench_reliability_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    fs::create_directories((path / name).parent_path());
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

}  // namespace

TEST_CASE("config: an alias inside its own anchor is a recursive alias, not a stack overflow", "[reliability]") {
  using Catch::Contains;
  REQUIRE_THROWS_AS(kernbench::parse_config("x: &a [1, *a]\n", "a.yaml"), ConfigError);
  REQUIRE_THROWS_WITH(kernbench::parse_config("x: &a [1, *a]\n", "a.yaml"),
                      Contains("a.yaml: x[1]: recursive alias") && Contains("(line 1)"));
  REQUIRE_THROWS_WITH(kernbench::parse_config("x: &a {b: *a}\n", "m.yaml"), Contains("m.yaml: x.b: recursive alias"));
  REQUIRE_THROWS_WITH(kernbench::parse_config("system: &s\n  name: t\n  sub:\n    - [*s]\n", "n.yaml"),
                      Contains("n.yaml: system.sub[0][0]: recursive alias"));
  // An alias to a finished anchor is no recursion: it is copied (and then typed).
  REQUIRE_THROWS_WITH(kernbench::parse_config("a: &a [1]\nb: [*a, *a]\n", "ok.yaml"),
                      Contains("ok.yaml: a: unknown key"));
}

TEST_CASE("config: nesting deeper than 100 levels is refused by name, wherever it is caught", "[reliability]") {
  using Catch::Contains;
  CHECK(config::kMaxDepth == 100);
  // Ours (with the YAML path), yaml-cpp's own guard (past ~500), and far past it.
  for (int levels : {101, 150, 600, 100'000}) {
    INFO(levels << " levels");
    REQUIRE_THROWS_WITH(kernbench::parse_config(nested_lists(levels), "deep.yaml"),
                        Contains("deep.yaml: ") && Contains("nested deeper than 100 levels"));
  }
  std::string block;
  for (int i = 0; i < 120; ++i) block += std::string(static_cast<std::size_t>(2 * i), ' ') + "k:\n";
  REQUIRE_THROWS_WITH(kernbench::parse_config(block, "block.yaml"), Contains("nested deeper than 100 levels"));
  // 99 levels under x are fine for the loader (the schema then refuses the key).
  REQUIRE_THROWS_WITH(kernbench::parse_config(nested_lists(99), "ok.yaml"), Contains("ok.yaml: x: unknown key"));
}

TEST_CASE("config: a key longer than 256 bytes is named as too long", "[reliability]") {
  using Catch::Contains;
  const std::string huge(10'000'000, 'k');
  REQUIRE_THROWS_WITH(kernbench::parse_config("fabric: {}\n" + huge + ": 1\n", "key.yaml"),
                      Contains("key.yaml: map key too long: 10000000 bytes, more than the 256") &&
                          Contains("(line 2, column 10000001)"));
  REQUIRE_THROWS_WITH(
      kernbench::parse_config("? " + std::string(300, 'k') + "\n: 1\n", "explicit.yaml"),
      Contains("explicit.yaml: (top level): map key too long: 300 bytes") && Contains("... (300 bytes)"));
}

TEST_CASE("config: alias expansion is charged by bytes, before the copy is made", "[reliability]") {
  using Catch::Contains;
  // 1 MiB aliased 100 times: 100 MiB once expanded, past the 64 MiB budget
  // (the node guard alone let 20,000 aliases reach 20 GB).
  std::string text = "a: &s " + std::string(1 << 20, 'x') + "\nb: [";
  for (int i = 0; i < 100; ++i) text += i ? ", *s" : "*s";
  text += "]\n";
  REQUIRE_THROWS_WITH(
      kernbench::parse_config(text, "bomb.yaml"),
      Contains("bomb.yaml: b[62]: the config is too large: more than 64 MiB") && Contains("once aliases are expanded"));
}

TEST_CASE("config: includes stay in the folders they may read, and nothing refused is read", "[reliability]") {
  using Catch::Contains;
  const Folder outside("outside");
  const std::string secret = outside.write("secret.yaml", "SECRET-LINE: [\n");  // invalid YAML: would be quoted
  const Folder top("top");
  top.write("parts/base.yaml", "fabric: {model: flow}\n");
  const auto load = [&](const std::string& include, const std::vector<std::string>& dirs = {}) {
    return kernbench::load_config(top.write("top.yaml", "include: " + include + "\n"), {}, dirs);
  };
  for (const std::string& inc : {secret, "../" + outside.path.filename().string() + "/secret.yaml",
                                 std::string("/etc/passwd"), std::string("/dev/zero")}) {
    INFO(inc);
    REQUIRE_THROWS_WITH(load(inc), Contains("top.yaml: include: ") &&
                                       Contains("is outside the folders includes may read") &&
                                       Contains(top.path.string()) && !Contains("SECRET") && !Contains("root:"));
  }
  // A symlink inside the tree is resolved before the check.
  fs::create_symlink(secret, top.path / "link.yaml");
  REQUIRE_THROWS_WITH(
      load("link.yaml"),
      Contains("\"link.yaml\" (" + fs::canonical(secret).string() + ") is outside") && !Contains("SECRET"));
  // Allowed folders: the tree itself, and include_dirs; then a parse error may quote the file.
  REQUIRE_THROWS_WITH(load("parts/base.yaml"),
                      Contains("top.yaml: (top level): missing system, graph or cluster"));  // read
  REQUIRE_THROWS_WITH(load(secret, {outside.path.string()}), Contains(secret + ": invalid YAML"));
  REQUIRE_THROWS_WITH(load("/dev/zero", {"/dev"}), Contains("not a regular file"));
}

TEST_CASE("config: files over 16 MiB and devices are refused before they are read", "[reliability]") {
  using Catch::Contains;
  const Folder dir("big");
  const std::string big = dir.write("big.yaml", "");
  fs::resize_file(big, (std::uintmax_t{16} << 20) + 1);  // sparse: nothing to write
  REQUIRE_THROWS_WITH(kernbench::load_config(big),
                      Contains("big.yaml: cannot read the config file: it holds 16777217 bytes, more than the 16 MiB"));
  REQUIRE_THROWS_WITH(kernbench::load_config(dir.write("inc.yaml", "include: big.yaml\n")),
                      Contains("inc.yaml: include: \"big.yaml\"") && Contains("more than the 16 MiB"));
  REQUIRE_THROWS_WITH(kernbench::load_config("/dev/zero"),
                      Contains("/dev/zero: cannot read the config file: not a regular file"));
}

TEST_CASE("links: connections are bounded per link and lanes per machine, before anything is built", "[reliability]") {
  using Catch::Contains;
  const std::string tiny = R"(system:
  sips: {w: 1, h: 1, topology: mesh}
  cubes: {w: 1, h: 1}
  routers: {w: 2, h: 1}
  pes_per_cube: 2
nodes:
  pe: {overhead: 1 ns}
  router: {overhead: 1 ns}
  hbm_ctrl: {overhead: 1 ns}
  ucie: {overhead: 1 ns}
  pcie_ep: {overhead: 1 ns}
links:
  pe: {bandwidth: 64 GB/s, latency: 1 ns}
  noc: {bandwidth: 64 GB/s, latency: 1 ns}
  hbm: {bandwidth: 64 GB/s, latency: 1 ns}
  ucie_port: {bandwidth: 64 GB/s, latency: 1 ns}
  ucie: {bandwidth: 64 GB/s, latency: 1 ns}
  pcie_port: {bandwidth: 64 GB/s, latency: 1 ns}
  pcie: {bandwidth: 64 GB/s, latency: 1 ns}
)";
  CHECK(kernbench::parse_config(tiny, "t.yaml", {{"links.noc.connections", "1024"}}).system->links.noc.connections ==
        1024);
  REQUIRE_THROWS_WITH(kernbench::parse_config(tiny, "t.yaml", {{"links.noc.connections", "1000000000"}}),
                      Contains("t.yaml: links.noc.connections (set by --set links.noc.connections=1000000000): at most "
                               "1024 parallel lanes per link"));
  REQUIRE_THROWS_WITH(
      kernbench::parse_config(tiny, "t.yaml", {{"system.sips.w", "5000"}, {"links.pe.connections", "1024"}}),
      Contains("t.yaml: links.pe.connections (set by --set links.pe.connections=1024): the machine is too large: "
               "more than 16777216 lanes") &&
          Contains("links.pe.connections = 1024 alone brings 20480000"));
  // Built without the loader: the same checks, before the machine is built.
  Config c = system_config();
  c.system->links.noc.connections = 5000;
  REQUIRE_THROWS_WITH(Machine(c), Contains("connections must be 1 to 1024, got 5000"));
  c = system_config(3000, 1);
  c.system->links.pe.connections = 1024;
  REQUIRE_THROWS_AS(Machine(c), CapacityError);
  // The count is exact: what the builder makes, for every SIP topology.
  for (SipTopology topo : {SipTopology::Ring, SipTopology::Mesh, SipTopology::Torus})
    for (const auto& [w, h] : {std::pair{1, 1}, {2, 1}, {3, 1}, {2, 2}, {3, 4}}) {
      const Config cfg = system_config(w, h, topo, 2, 3, 3, 2, 4);
      CHECK(count_lanes(cfg).lanes == static_cast<std::int64_t>(Machine(cfg).num_lanes()));
    }
}

TEST_CASE("SIP grids: routing tables grow with the destinations used, not n^2", "[reliability]") {
  // 30,000 SIPs in a ring: an n x n next-hop table would be 3.6 GB; built
  // per destination, loading is one Dijkstra, and routes are still right.
  Config c = system_config(30'000, 1, SipTopology::Ring, 1, 1, 1, 1, 1);
  System s(c);
  const Machine& m = s.machine();
  const Route& r = s.fabric().router().route(m.pe(0, 0, 0), m.pe(2, 0, 0));
  int pcie = 0;
  for (ChannelId ch : r.channels) pcie += m.channel(ch).link_class == "pcie" ? 1 : 0;
  CHECK(pcie == 2);
  const Route& back = s.fabric().router().route(m.pe(0, 0, 0), m.pe(29'999, 0, 0));
  pcie = 0;
  for (ChannelId ch : back.channels) pcie += m.channel(ch).link_class == "pcie" ? 1 : 0;
  CHECK(pcie == 1);  // the ring's wrap-around link
}

TEST_CASE("flow fabric: a re-solve queues one completion, not one per flow it moves", "[reliability]") {
  // 300 transfers of different sizes on one PE link finish one by one; each
  // end re-solves the rest. One event per moved flow was ~45,000 stale
  // events (and, with thousands of flows, gigabytes of queue).
  System s(slow_pe_links(FabricModel::Flow, 1'000'000'000));
  const Machine& m = s.machine();
  for (int i = 0; i < 300; ++i) s.transfer(m.pe(0, 0, 0), m.pe(0, 1, 0), 1000 + 64 * i, 0);
  s.run();
  for (const TransferRecord& rec : s.fabric().records()) CHECK(rec.done());
  CHECK(s.sim().events_processed() < 5'000);
}
