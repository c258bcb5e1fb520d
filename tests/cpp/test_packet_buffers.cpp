// test_packet_buffers.cpp -- finite buffers, credits, VCs and the router
// pipeline of the packet model: closed forms, identity with the unbounded
// model, credit conservation, deadlock detection, back-pressure, config.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "kernbench.hpp"
#include "machines.hpp"
#include "sim/errors.hpp"
#include "topology/fabric/packet/packet_fabric.hpp"

using namespace kernbench::testing;
using Catch::Contains;
using kernbench::ConfigError;
using kernbench::DeadlockError;
using kernbench::sim::kKiB;
using kernbench::sim::Simulation;

namespace {

FabricConfig packet(Bytes chunk) {
  FabricConfig f;
  f.model = FabricModel::Packet;
  f.chunk = chunk;
  return f;
}

BufferSize flits(std::int64_t n) { return BufferSize{BufferSize::Unit::Flits, n}; }

LinkParams buffered(LinkParams l, BufferSize b, int vcs = 1) {
  l.buffer = b;
  l.vcs = vcs;
  return l;
}

struct Run {
  Run(const Config& c, FabricConfig f) : machine(c), fabric(sim, machine, f) {}
  /// Starts specs[arg] when its event fires (ids[arg] gets its id).
  struct Starter final : kernbench::sim::Handler {
    explicit Starter(Run& r) : run(r) {}
    void on_event(std::uint64_t arg) override { ids[arg] = run.fabric.start(specs[arg]); }
    Run& run;
    std::vector<TransferSpec> specs;
    std::vector<TransferId> ids;
  } starter{*this};
  TransferId go(const std::string& a, const std::string& b, Bytes bytes) {
    return fabric.start(TransferSpec{machine.at(a), machine.at(b), bytes});
  }
  TransferId go(NodeId a, NodeId b, Bytes bytes) { return fabric.start(TransferSpec{a, b, bytes}); }
  ChannelId channel(const std::string& a, const std::string& b) const {
    return *machine.channel_between(machine.at(a), machine.at(b));
  }
  /// Credits add up on every VC of every buffered channel (and the fabric's
  /// own check agrees); at the end of a run, all are back home.
  void check_credits(bool idle) const {
    fabric.check_credits();
    for (ChannelId ch = 0; ch < machine.num_channels(); ++ch)
      for (int v = 0; v < fabric.vcs(ch); ++v) {
        const PacketFabric::CreditState s = fabric.credits(ch, v);
        INFO("channel " << ch << " vc " << v);
        REQUIRE(s.free + s.held + s.returning == s.capacity);
        if (idle) {
          REQUIRE(s.free == s.capacity);
          REQUIRE(s.waiting == 0);
        }
      }
  }
  Simulation sim{1};
  Machine machine;
  PacketFabric fabric;
};

/// A generated 1-cube machine (routers w x h, one PE per router) whose PE,
/// NoC and HBM links get `b` (vcs VCs).
Config mesh(int w, int h, BufferSize b, int vcs = 1) {
  Config c = system_config(1, 1, SipTopology::Ring, 1, 1, w, h, w * h);
  c.system->links.pe = buffered(c.system->links.pe, b, vcs);
  c.system->links.noc = buffered(c.system->links.noc, b, vcs);
  c.system->links.hbm = buffered(c.system->links.hbm, b, vcs);
  return c;
}

/// The same random traffic on a machine: n transfers at random times in
/// the first 200 ns (PE to PE, a third to a PE's memory). Their ids are in
/// run.starter.ids once the run has passed 200 ns.
const std::vector<TransferId>& random_traffic(Run& run, int n, Bytes bytes, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto& pes = run.machine.pes();
  run.starter.specs.clear();
  run.starter.ids.assign(static_cast<std::size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    const NodeId a = pes[rng() % pes.size()];
    NodeId b = pes[rng() % pes.size()];
    if (rng() % 3 == 0) b = run.machine.memory_of(b).value();
    run.starter.specs.push_back(TransferSpec{a, b, bytes, static_cast<std::uint64_t>(rng() % 4096) * 64});
    run.sim.schedule_at(static_cast<Time>(rng() % 200'000), kernbench::sim::Target::call(run.starter),
                        static_cast<std::uint64_t>(i));
  }
  return run.starter.ids;
}

}  // namespace

TEST_CASE("buffered links keep the wormhole closed form when nothing contends", "[packet][buffer]") {
  // As the unbounded closed-form test: 16 KiB over three hops (the middle
  // one at half rate), overheads 1..4 ns. With buffers that cover each
  // hop's credit round trip -- 8 KiB: two 4 KiB chunks, or many small ones
  // -- the stream never waits for room where it matters: the latency is the
  // closed form to the ps. A 16 KiB buffer never makes it wait at all: the
  // parts are those of the unbounded model too.
  for (const Bytes chunk : {Bytes{64}, Bytes{1024}, 4 * kKiB}) {
    for (const Bytes buffer : {8 * kKiB, 16 * kKiB}) {
      INFO("chunk " << chunk << ", buffer " << buffer);
      const BufferSize b{BufferSize::Unit::Bytes, buffer};
      Run run(
          chain_config({{1000, true}, {2000, true}, {3000, true}, {4000, true}},
                       {buffered(link(256, 500), b), buffered(link(128, 1000), b, 2), buffered(link(256, 1500), b)}),
          packet(chunk));
      const TransferId id = run.go("n0", "n3", 16 * kKiB);
      run.sim.run();
      const TransferRecord& r = run.fabric.record(id);
      REQUIRE(r.done());
      CHECK(r.latency() == 10'000 + 3'000 + 1'000 + 255 * 500);
      CHECK(r.parts.total() == r.latency());
      if (buffer == 16 * kKiB) CHECK(r.parts.queuing == 0);
      run.check_credits(true);
    }
  }
  // One 4 KiB chunk of buffer does not cover the round trip: the stream
  // waits for credits and the transfer takes longer than the closed form.
  const BufferSize one{BufferSize::Unit::Bytes, 4 * kKiB};
  Run run(chain_config({{1000, true}, {2000, true}, {3000, true}, {4000, true}},
                       {buffered(link(256, 500), one), buffered(link(128, 1000), one), buffered(link(256, 1500), one)}),
          packet(4 * kKiB));
  const TransferId id = run.go("n0", "n3", 16 * kKiB);
  run.sim.run();
  CHECK(run.fabric.record(id).latency() > 10'000 + 3'000 + 1'000 + 255 * 500);
  CHECK(run.fabric.credits(run.channel("n0", "n1"), 0).stalls > 0);
}

TEST_CASE("router pipeline: zero-load latency is hops x pipeline + serialisation", "[packet][pipeline]") {
  // Four routers, pipeline 1 + 2 + 1 cycles at 2 GHz = 2 ns each, no other
  // overhead; 64 B over three 256 GB/s hops of 0.5 ns: one flit time each.
  NodeParams r;
  r.pipeline = {1, 2, 1};
  r.clock_hz = 2'000'000'000;
  CHECK(pipeline_time(r) == 2000);
  Run run(chain_config({r, r, r, r}, {link(256, 500), link(256, 500), link(256, 500)}), packet(64));
  const TransferId id = run.go("n0", "n3", 64);
  run.sim.run();
  const TransferRecord& rec = run.fabric.record(id);
  CHECK(rec.latency() == 4 * 2000 + 3 * (500 + 250));
  CHECK(rec.parts.overhead == 4 * 2000);
  // Odd clocks round the pipeline's time up to the next ps.
  r.pipeline = {1, 0, 0};
  r.clock_hz = 3'000'000'000;
  CHECK(pipeline_time(r) == 334);
}

TEST_CASE("large buffers give the unbounded model's results to the picosecond", "[packet][buffer]") {
  // Contended random traffic (HOL, queuing, striping, DMA to memories):
  // with buffers no run can fill, credits never run short and every record
  // -- end and all four parts -- matches the unbounded run.
  const BufferSize huge{BufferSize::Unit::Bytes, Bytes{1} << 30};
  for (const Bytes chunk : {Bytes{64}, Bytes{512}}) {
    INFO("chunk " << chunk);
    Run ideal(mesh(4, 4, BufferSize{}), packet(chunk));
    Run big(mesh(4, 4, huge, 2), packet(chunk));
    const auto& a = random_traffic(ideal, 600, 2 * kKiB, 7);
    const auto& b = random_traffic(big, 600, 2 * kKiB, 7);
    ideal.sim.run();
    big.sim.run();
    REQUIRE(a.size() == b.size());
    bool contended = false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const TransferRecord& x = ideal.fabric.record(a[i]);
      const TransferRecord& y = big.fabric.record(b[i]);
      INFO("transfer " << i);
      REQUIRE(y.end == x.end);
      REQUIRE(y.parts.queuing == x.parts.queuing);
      REQUIRE(y.parts.drain == x.parts.drain);
      REQUIRE(y.parts.overhead == x.parts.overhead);
      contended = contended || x.parts.queuing > 0;
    }
    CHECK(contended);  // the traffic really contends
    big.check_credits(true);
  }
}

TEST_CASE("credits are conserved on every channel, mid-run and at the end", "[packet][buffer]") {
  // Small buffers (one chunk, 1 or 2 VCs): chunks stall, credits fly back.
  for (const int vcs : {1, 2}) {
    INFO("vcs " << vcs);
    Run run(mesh(4, 4, flits(2), vcs), packet(128));
    const auto& ids = random_traffic(run, 400, 2 * kKiB, 11);
    for (Time t = 10'000; t < 200'000; t += 10'000) {
      run.sim.run(t);
      run.check_credits(false);
    }
    run.sim.run();
    for (const TransferId id : ids) {
      const TransferRecord& r = run.fabric.record(id);
      REQUIRE(r.done());
      REQUIRE(r.parts.total() == r.latency());
    }
    run.check_credits(true);
    std::uint64_t stalls = 0;
    for (ChannelId ch = 0; ch < run.machine.num_channels(); ++ch)
      for (int v = 0; v < run.fabric.vcs(ch); ++v) stalls += run.fabric.credits(ch, v).stalls;
    CHECK(stalls > 0);  // the buffers really were full at times
  }
}

TEST_CASE("tiny buffers slow contended traffic down (back-pressure and HOL blocking)", "[packet][buffer]") {
  Run ideal(mesh(4, 4, BufferSize{}), packet(64));
  Run small(mesh(4, 4, flits(1)), packet(64));
  const auto& a = random_traffic(ideal, 400, 1 * kKiB, 3);
  const auto& b = random_traffic(small, 400, 1 * kKiB, 3);
  ideal.sim.run();
  small.sim.run();
  Time end_a = 0, end_b = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    end_a = std::max(end_a, ideal.fabric.record(a[i]).end);
    end_b = std::max(end_b, small.fabric.record(b[i]).end);
  }
  CHECK(end_b > end_a);
}

TEST_CASE("a one-VC ring with wrap-around traffic deadlocks, and is caught", "[packet][buffer][deadlock]") {
  // Five nodes in a ring, each sending to the node two steps clockwise
  // (shortest path): channel i->i+1 waits for i+1->i+2, a cycle. With one
  // chunk of buffer per channel the buffers fill and never drain.
  ExplicitGraphConfig g;
  for (int i = 0; i < 5; ++i) g.nodes.push_back(ExplicitNode{"n" + std::to_string(i), NodeKind::Router, NodeParams{}});
  for (int i = 0; i < 5; ++i)
    g.edges.push_back(ExplicitEdge{"n" + std::to_string(i), "n" + std::to_string((i + 1) % 5), "ring",
                                   buffered(link(256, 500), flits(1))});
  Config c;
  c.source = "ring";
  c.graph = g;
  Run run(c, packet(64));
  for (int i = 0; i < 5; ++i) run.go("n" + std::to_string(i), "n" + std::to_string((i + 2) % 5), 4 * kKiB);
  REQUIRE_THROWS_AS(run.sim.run(), DeadlockError);
  // The message names the cycle's channels by their nodes.
  Run again(c, packet(64));
  for (int i = 0; i < 5; ++i) again.go("n" + std::to_string(i), "n" + std::to_string((i + 2) % 5), 4 * kKiB);
  try {
    again.sim.run();
    FAIL("no deadlock reported");
  } catch (const DeadlockError& e) {
    const std::string m = e.what();
    for (int i = 0; i < 5; ++i)
      CHECK_THAT(m, Contains("n" + std::to_string(i) + "->n" + std::to_string((i + 1) % 5) + " vc0"));
    CHECK_THAT(m, Contains("cycle of full buffers"));
  }
  // Unbounded, the same traffic finishes.
  for (auto& e : c.graph->edges) e.link.buffer = BufferSize{};
  Run ideal(c, packet(64));
  for (int i = 0; i < 5; ++i) ideal.go("n" + std::to_string(i), "n" + std::to_string((i + 2) % 5), 4 * kKiB);
  ideal.sim.run();
  CHECK(ideal.fabric.in_flight() == 0);
}

TEST_CASE("a dimension-order mesh never deadlocks under 10^6 random packets", "[packet][buffer][deadlock][slow]") {
  // One-flit packets between random PEs and memories of a 4x4 mesh, one
  // flit of buffer per channel and one VC: the tightest buffers there are.
  // 1000 waves of 1000 packets; every wave runs until the queue empties,
  // where the deadlock check runs.
  Run run(mesh(4, 4, flits(1)), packet(64));
  std::mt19937_64 rng(5);
  const auto& pes = run.machine.pes();
  std::uint64_t delivered = 0;
  for (int wave = 0; wave < 1000; ++wave) {
    for (int i = 0; i < 1000; ++i) {
      const NodeId a = pes[rng() % pes.size()];
      NodeId b = pes[rng() % pes.size()];
      if (rng() % 4 == 0) b = run.machine.memory_of(b).value();
      run.go(a, b, 64);
    }
    run.sim.run();
    REQUIRE(run.fabric.in_flight() == 0);
    delivered += 1000;
  }
  CHECK(delivered == 1'000'000);
  run.check_credits(true);
}

TEST_CASE("back-pressure: a blocked destination stalls its sender within hops x credit round trip",
          "[packet][buffer]") {
  // s -> a -> b -> c -> d, every channel buffering one chunk; c -> d runs at
  // 1 GB/s, so the first chunk to reach it holds it for 4 us: d is blocked.
  // Behind it one chunk fills each buffer (at a, b, c), then the sender's
  // first channel stops granting; unbounded, it would send all 64 chunks.
  const Bytes chunk = 4 * kKiB;
  const BufferSize one{BufferSize::Unit::Bytes, chunk};
  std::vector<NodeParams> nodes(5, NodeParams{1000, true});
  const LinkParams fast = buffered(link(256, 500), one), slow = buffered(link(1, 500), one);
  Config c = chain_config(nodes, {fast, fast, fast, slow});
  Run run(c, packet(chunk));
  const TransferId id = run.go("n0", "n4", 64 * chunk);
  // Credit round trip of a fast hop: the chunk's serialisation (16 ns), the
  // wire both ways and the node's overhead.
  const Time rtt = 16'000 + 2 * 500 + 1000;
  const int hops = 4;
  // The destination is blocked once the first chunk holds c -> d: after
  // three fast hops of head flit, wire and overhead (and 4 KiB behind it).
  const Time blocked = 1000 + 3 * (250 + 500 + 1000) + 16'000;
  run.sim.run(blocked + hops * rtt);
  const ChannelId first = run.channel("n0", "n1");
  const auto grants = [&] { return run.fabric.lane_stats(run.machine.channel(first).first_lane).grants; };
  CHECK(grants() == 3);  // the chunks in the buffers at n1, n2, n3 (the first one is on c -> d)
  CHECK(run.fabric.credits(first, 0).waiting == 1);
  CHECK(run.fabric.credits(first, 0).free == 0);
  run.sim.run(blocked + 3'000'000);  // 3 us on: still stalled (c -> d frees at ~4 us)
  CHECK(grants() == 3);
  run.check_credits(false);
  run.sim.run();
  const TransferRecord& r = run.fabric.record(id);
  REQUIRE(r.done());
  CHECK(r.parts.total() == r.latency());
  CHECK(grants() == 64);
  run.check_credits(true);
  // The same with unbounded buffers: the sender never stalls.
  for (auto& e : c.graph->edges) e.link.buffer = BufferSize{};
  Run ideal(c, packet(chunk));
  ideal.go("n0", "n4", 64 * chunk);
  ideal.sim.run(blocked + hops * rtt);
  CHECK(ideal.fabric.lane_stats(ideal.machine.channel(first).first_lane).grants > 3);
}

TEST_CASE("a buffer smaller than a chunk is refused, naming the link", "[packet][buffer][config]") {
  Config c = chain_config({{}, {}}, {buffered(link(256, 500), flits(4))});
  Machine m(c);
  Simulation sim(1);
  REQUIRE_THROWS_WITH(
      PacketFabric(sim, m, packet(512)),
      Contains("buffer 4 flits holds 4 flits of 64 B, fewer than one chunk (fabric.chunk = 512 B = 8 flits)"));
}

TEST_CASE("links.<class>.buffer, vcs and nodes.<kind>.pipeline in YAML", "[packet][buffer][config]") {
  const std::string base = R"(system:
  name: t
  sips: {w: 1, h: 1, topology: ring}
  cubes: {w: 1, h: 1}
  routers: {w: 2, h: 2}
  pes_per_cube: 4
nodes:
  pe:       {overhead: 1 ns}
  router:   {overhead: 0.5 ns, pipeline: {route: 1, vc_alloc: 1, switch_alloc: 1}, clock: 2 GHz}
  hbm_ctrl: {overhead: 10 ns}
  ucie:     {overhead: 3 ns}
  pcie_ep:  {overhead: 60 ns, flit_aware: false}
links:
  pe:        {bandwidth: 512 GB/s, latency: 0.5 ns, buffer: 8 flits}
  noc:       {bandwidth: 256 GB/s, latency: 0.5 ns, buffer: 8 KiB, vcs: 2}
  hbm:       {bandwidth: 256 GB/s, latency: 1 ns}
  ucie_port: {bandwidth: 512 GB/s, latency: 0.5 ns}
  ucie:      {bandwidth: 128 GB/s, latency: 2 ns, connections: 4}
  pcie_port: {bandwidth: 256 GB/s, latency: 0.5 ns}
  pcie:      {bandwidth: 64 GB/s, latency: 150 ns}
fabric: {chunk: 512 B}  # the 8-flit pe buffer holds one chunk (the loader checks it)
)";
  const Config c = kernbench::parse_config(base, "t.yaml", {});
  const SystemConfig& s = *c.system;
  CHECK(s.links.pe.buffer.unit == BufferSize::Unit::Flits);
  CHECK(s.links.pe.buffer.flits(64) == 8);
  CHECK(s.links.noc.buffer.flits(64) == 128);
  CHECK(s.links.noc.vcs == 2);
  CHECK_FALSE(s.links.hbm.buffer.bounded());
  CHECK(s.nodes.router.pipeline.cycles() == 3);
  CHECK(Machine(c).node(Machine(c).at("sip0.cube0.r0c0")).params.overhead == 500 + 1500);
  const auto bad = [&](const std::string& from, const std::string& to) {
    std::string t = base;
    t.replace(t.find(from), from.size(), to);
    return kernbench::parse_config(t, "t.yaml", {});
  };
  REQUIRE_THROWS_WITH(bad("buffer: 8 flits", "buffer: eight"),
                      Contains("t.yaml") && Contains("links.pe.buffer") && Contains("expected unbounded"));
  REQUIRE_THROWS_WITH(bad("buffer: 8 flits", "buffer: 0 flits"), Contains("at least one flit"));
  REQUIRE_THROWS_WITH(bad("vcs: 2", "vcs: 0"), Contains("links.noc.vcs"));
  REQUIRE_THROWS_WITH(bad("vcs: 2", "vcs: 65"), Contains("at most 64 virtual channels"));
  REQUIRE_THROWS_WITH(bad(", clock: 2 GHz", ""), Contains("nodes.router") && Contains("needs the node's clock"));
  REQUIRE_THROWS_WITH(bad("route: 1,", "route: -1,"), Contains("nodes.router.pipeline.route"));
  REQUIRE_THROWS_WITH(bad("route: 1,", "stages: 1,"), Contains("nodes.router.pipeline"));
}
