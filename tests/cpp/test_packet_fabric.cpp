// test_packet_fabric.cpp -- the packet model against closed forms.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "machines.hpp"
#include "sim/process.hpp"
#include "topology/fabric/packet/packet_fabric.hpp"

using namespace kernbench::testing;
using kernbench::sim::kKiB;
using kernbench::sim::Simulation;

namespace {

FabricConfig packet(Bytes chunk = 4 * kKiB) {
  FabricConfig f;
  f.model = FabricModel::Packet;
  f.chunk = chunk;
  return f;
}

struct Run {
  explicit Run(const Config& c, FabricConfig f = packet()) : machine(c), fabric(sim, machine, f) {}
  TransferId go(const std::string& a, const std::string& b, Bytes bytes, std::uint64_t address = 0) {
    return fabric.start(TransferSpec{machine.at(a), machine.at(b), bytes, address});
  }
  TransferId go(NodeId a, NodeId b, Bytes bytes) { return fabric.start(TransferSpec{a, b, bytes}); }
  Simulation sim{1};
  Machine machine;
  PacketFabric fabric;
};

}  // namespace

TEST_CASE("uncontended multi-hop latency matches the closed form to the ps", "[packet]") {
  // n0 -256-> n1 -128-> n2 -256-> n3; overheads 1,2,3,4 ns; latencies .5,1,1.5 ns.
  // 16 KiB in 4 KiB chunks, 64 B flits (256 of them). Cut-through gives the
  // wormhole closed form whatever the chunk size:
  //   sum(o) + sum(lat) + sum_h flit/bw_h + (n_flits - 1) * flit / min(bw)
  // with flit/bw = 250, 500, 250 ps.
  for (const Bytes chunk : {Bytes{64}, Bytes{1024}, 4 * kKiB, 16 * kKiB}) {
    INFO("chunk " << chunk);
    Run run(chain_config({{1000, true}, {2000, true}, {3000, true}, {4000, true}},
                         {link(256, 500), link(128, 1000), link(256, 1500)}),
            packet(chunk));
    const TransferId id = run.go("n0", "n3", 16 * kKiB);
    run.sim.run();
    const TransferRecord& r = run.fabric.record(id);
    REQUIRE(r.done());
    CHECK(r.latency() == 10'000 + 3'000 + 1'000 + 255 * 500);
    CHECK(r.parts.overhead == 10'000);
    CHECK(r.parts.transmission == 3'000 + 1'000);  // wire latency + one flit per hop
    CHECK(r.parts.drain == 255 * 500);             // the other flits through the bottleneck
    CHECK(r.parts.queuing == 0);
    CHECK(r.chunks == 16 * kKiB / chunk);
    CHECK(r.hops == 3);
  }
}

TEST_CASE("lanes are released lazily: an uncontended chunk-hop costs one event", "[packet][cost]") {
  // Three equal hops, 4 chunks. Events: the stream start, one wake per
  // chunk that waits for the first lane behind its own predecessor (3), one
  // arrival at each later hop per chunk (2 x 4) -- each finds its lane just
  // freed, so it is granted in the same event -- one arrival at the end per
  // chunk (4) and the close. A hold's end is an event only when a chunk
  // waits for the lane: here the first lane's 3 (each hands the lane over
  // by a grant event due at once, as a Server does: 3 more).
  Run run(chain_config({{1000, true}, {1000, true}, {1000, true}, {1000, true}},
                       {link(128, 500), link(128, 500), link(128, 500)}));
  const TransferId id = run.go("n0", "n3", 16 * kKiB);
  run.sim.run();
  REQUIRE(run.fabric.record(id).done());
  CHECK(run.sim.events_processed() == 1 + 3 + 3 + 2 * 4 + 4 + 1);
  CHECK(run.fabric.chunk_hops() == 3 * 4);
  // Each lane served 4 chunks of 32 ns.
  for (int h = 0; h < 3; ++h) {
    const auto ch = *run.machine.channel_between(run.machine.at(std::string("n").append(std::to_string(h))),
                                                 run.machine.at(std::string("n").append(std::to_string(h + 1))));
    const PacketFabric::LaneStats st = run.fabric.lane_stats(run.machine.channel(ch).first_lane);
    INFO("hop " << h);
    CHECK(st.grants == 4);
    CHECK(st.bytes == 16 * kKiB);
    CHECK(st.busy_unit_time == Approx(4 * 32'000));
    CHECK(run.fabric.channel_stats(ch).busy_time == Approx(4 * 32'000));
  }
}

TEST_CASE("flit-sized chunks give the wormhole drain term", "[packet]") {
  // 64 B flits over two 256 GB/s hops: drain = (n_flits - 1) * flit / bw.
  Run run(chain_config({{0, true}, {0, true}, {0, true}}, {link(256, 0), link(256, 0)}), packet(64));
  const TransferId id = run.go("n0", "n2", 16 * kKiB);
  run.sim.run();
  const TransferRecord& r = run.fabric.record(id);
  CHECK(r.parts.drain == 255 * 250);  // 64 B at 256 GB/s = 250 ps
  CHECK(r.parts.transmission == 2 * 250);
  CHECK(r.latency() == 257 * 250);
}

TEST_CASE("a store-and-forward node doubles the serialisation", "[packet]") {
  const auto nodes = [](bool flit_aware) { return std::vector<NodeParams>{{0, true}, {0, flit_aware}, {0, true}}; };
  const std::vector<LinkParams> links{link(64, 0), link(64, 0)};
  // 64 KiB = 16 chunks of 4 KiB, 64 ns each at 64 GB/s.
  Run sf(chain_config(nodes(false), links));
  Run ct(chain_config(nodes(true), links));
  const TransferId a = sf.go("n0", "n2", 64 * kKiB);
  const TransferId b = ct.go("n0", "n2", 64 * kKiB);
  sf.sim.run();
  ct.sim.run();
  CHECK(sf.fabric.record(a).latency() == 2 * 16 * 64'000);  // whole payload, twice
  CHECK(ct.fabric.record(b).latency() == 1025 * 1'000);     // cut-through: one extra flit (1 ns)
}

TEST_CASE("two transfers sharing a channel get half the bandwidth each", "[packet]") {
  Run run(chain_config({{0, true}, {0, true}}, {link(64, 0)}));
  const TransferId a = run.go("n0", "n1", 64 * kKiB);
  const TransferId b = run.go("n0", "n1", 64 * kKiB);
  run.sim.run();
  const TransferRecord& ra = run.fabric.record(a);
  const TransferRecord& rb = run.fabric.record(b);
  // A's second chunk queues the moment A0 gets the lane, before B0 arrives;
  // from then on they alternate: A0 A1 B0 A2 B1 ... A15 B14 B15.
  CHECK(ra.latency() == 30 * 64'000);
  CHECK(rb.latency() == 32 * 64'000);
  // B waited behind all 16 of A's chunks (queuing) and 15 of its own, plus
  // its last chunk's body behind its head flit (drain); A's last chunk
  // waited behind B0..B13. Flits take 1 ns at 64 GB/s.
  CHECK(rb.parts.queuing == 16 * 64'000);
  CHECK(rb.parts.drain == 15 * 64'000 + 63'000);
  CHECK(rb.parts.transmission == 1'000);
  CHECK(ra.parts.queuing == 14 * 64'000);
  CHECK(ra.parts.drain == 15 * 64'000 + 63'000);
  // Each got half of 64 GB/s over the shared interval.
  const double rate_b = 64.0 * 1024 / (static_cast<double>(rb.latency()) * 1e-12) / 1e9;
  CHECK(rate_b == Approx(32.0).epsilon(0.01));
}

TEST_CASE("multi-connection links stripe chunks over their lanes", "[packet]") {
  Run run(chain_config({{0, true}, {0, true}}, {link(128, 0, 4)}));
  const TransferId id = run.go("n0", "n1", 16 * kKiB);
  run.sim.run();
  // Four 4 KiB chunks on four 128 GB/s lanes at once: one chunk time.
  CHECK(run.fabric.record(id).latency() == 32'000);
  const ChannelInfo& ch = run.machine.channel(*run.machine.channel_between(run.machine.at("n0"), run.machine.at("n1")));
  for (int k = 0; k < 4; ++k) CHECK(run.fabric.lane_stats(ch.first_lane + k).busy_unit_time == Approx(32'000));
  // The address picks the first lane: a second transfer at another stripe
  // starts on another lane.
  CHECK(run.fabric.channel_stats(*run.machine.channel_between(run.machine.at("n0"), run.machine.at("n1"))).bytes ==
        16 * kKiB);
}

TEST_CASE("hot HBM controller: makespan grows by 16 KB / 256 GB/s per reader", "[packet]") {
  // pe5's slice hangs off r1c1; pe1, pe4 and pe6 are one router away
  // from it in three different directions, so only the 256 GB/s
  // controller link is shared and each extra reader adds exactly its
  // 16 KB / 256 GB/s = 64 ns there.
  std::vector<Time> makespan;
  const int readers[] = {1, 4, 6};
  for (int k = 1; k <= 3; ++k) {
    Run run(system_config());
    for (int i = 0; i < k; ++i) run.go(run.machine.hbm_ctrl(0, 0, 5), run.machine.pe(0, 0, readers[i]), 16 * kKiB);
    run.sim.run();
    makespan.push_back(run.sim.now());
  }
  CHECK(makespan[1] - makespan[0] == 64'000);
  CHECK(makespan[2] - makespan[1] == 64'000);
}

TEST_CASE("a zero-hop transfer costs the node's overhead; zero bytes cost latency only", "[packet]") {
  Run run(chain_config({{7000, true}, {0, true}}, {link(64, 3000)}));
  const TransferId self = run.go("n0", "n0", 4096);
  const TransferId empty = run.go("n0", "n1", 0);
  run.sim.run();
  CHECK(run.fabric.record(self).latency() == 7000);
  CHECK(run.fabric.record(empty).latency() == 7000 + 3000);
  CHECK(run.fabric.in_flight() == 0);
}

TEST_CASE("contention on a generated machine: parts always sum and runs repeat", "[packet][determinism]") {
  auto run_once = [] {
    Run run(system_config(2, 1, SipTopology::Ring));
    // Every PE of sip0 reads pe0's slice of sip1's cube1, plus local traffic.
    const Machine& m = run.machine;
    for (int c = 0; c < 2; ++c)
      for (int p = 0; p < 8; ++p) {
        run.go(m.hbm_ctrl(1, 1, 0), m.pe(0, c, p), 16 * kKiB);
        run.go(m.pe(0, c, p), m.hbm_ctrl(0, c, (p + 1) % 8), 8 * kKiB);
      }
    run.sim.run();
    return run.fabric.records();
  };
  const auto a = run_once();
  const auto b = run_once();
  REQUIRE(a.size() == b.size());
  Time queued = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].parts.total() == a[i].latency());
    CHECK(a[i].end == b[i].end);
    CHECK(a[i].parts.queuing == b[i].parts.queuing);
    queued += a[i].parts.queuing;
  }
  CHECK(queued > 0);
}

TEST_CASE("coroutines can await a transfer", "[packet]") {
  Run run(chain_config({{0, true}, {0, true}}, {link(64, 1000)}));
  Time seen = -1;
  auto proc = [&]() -> kernbench::sim::Process {
    const TransferRecord& r =
        co_await run.fabric.transfer(TransferSpec{run.machine.at("n0"), run.machine.at("n1"), 4096});
    seen = r.end;
  };
  run.sim.spawn("mover", proc());
  run.sim.run();
  CHECK(seen == 64'000 + 1000);
}
