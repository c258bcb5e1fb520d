// test_flow_fabric.cpp -- the flow model against closed forms, sharing and invariants.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sim/errors.hpp"
#include "sim/process.hpp"
#include "sim/simulation.hpp"
#include "topology/fabric/fabric.hpp"
#include "topology/fabric/flow/flow_fabric.hpp"
#include "topology/graph/machine.hpp"

using namespace kernbench::topology;
using kernbench::UsageError;
using kernbench::sim::Handler;
using kernbench::sim::Simulation;
using kernbench::sim::Target;

namespace {

struct NodeSpec {
  std::string name;
  Time overhead = 0;
  bool flit_aware = true;
};
struct EdgeSpec {
  std::string a, b;
  std::int64_t bytes_per_s = 0;
  Time latency = 0;
  int connections = 1;
};

Machine make_machine(const std::vector<NodeSpec>& nodes, const std::vector<EdgeSpec>& edges) {
  Config cfg;
  cfg.source = "test_flow_fabric";
  ExplicitGraphConfig g;
  for (const NodeSpec& n : nodes)
    g.nodes.push_back(ExplicitNode{n.name, NodeKind::Router, NodeParams{n.overhead, n.flit_aware}});
  for (const EdgeSpec& e : edges)
    g.edges.push_back(ExplicitEdge{e.a, e.b, "link", LinkParams{Bandwidth{e.bytes_per_s}, e.latency, e.connections}});
  cfg.graph = g;
  return Machine(cfg);
}

FabricConfig flow_config() {
  FabricConfig fc;
  fc.model = FabricModel::Flow;
  return fc;
}

TransferSpec spec(const Machine& m, const char* src, const char* dst, Bytes bytes) {
  TransferSpec s;
  s.src = m.at(src);
  s.dst = m.at(dst);
  s.bytes = bytes;
  return s;
}

// Remembers when each on_done fired.
struct DoneLog final : Handler {
  explicit DoneLog(Simulation& sim) : sim(sim) {}
  void on_event(std::uint64_t id) override { done.emplace_back(id, sim.now()); }
  Simulation& sim;
  std::vector<std::pair<std::uint64_t, Time>> done;
};

// Starts specs[arg] when woken: transfers issued at scheduled times.
struct Starter final : Handler {
  explicit Starter(Fabric& fabric) : fabric(fabric) {}
  void on_event(std::uint64_t i) override { fabric.start(specs[i]); }
  Fabric& fabric;
  std::vector<TransferSpec> specs;
};

void check_breakdown(Fabric& fabric, const TransferRecord& r) {
  INFO("transfer " << r.id << " " << r.src << " -> " << r.dst << ", " << r.bytes << " B");
  REQUIRE(r.done());
  CHECK(r.parts.total() == r.latency());
  CHECK(r.parts.drain == 0);
  CHECK(r.parts.queuing >= 0);
  const Route& route = fabric.router().route(r.src, r.dst);
  CHECK(r.parts.overhead == route.node_overhead);
  CHECK(r.parts.transmission >= route.wire_latency);
}

// Three nodes a - b - c with distinct overheads, latencies and bandwidths.
Machine line_abc(bool b_flit_aware = true, std::int64_t bw1 = 3'000'000'000, std::int64_t bw2 = 7'000'000'000) {
  return make_machine({{"a", 1000}, {"b", 2000, b_flit_aware}, {"c", 3000}},
                      {{"a", "b", bw1, 5000}, {"b", "c", bw2, 7000}});
}

}  // namespace

TEST_CASE("an uncontended transfer matches the closed form to the ps", "[flow]") {
  const Machine m = line_abc();
  Simulation sim;
  auto fabric = make_fabric(sim, m, flow_config());
  REQUIRE(std::string(fabric->model_name()) == "flow");
  DoneLog log(sim);
  const TransferId id = fabric->start(spec(m, "a", "c", 1000), Target::call(log));
  CHECK(log.done.empty());  // never completes synchronously
  CHECK(fabric->in_flight() == 1);
  sim.run();
  // Overheads 1+2+3 ns, latencies 5+7 ns, ceil(1000 B / 3 GB/s) = 333334 ps.
  const Time expected = 6000 + 12000 + 333334;
  const TransferRecord& r = fabric->record(id);
  CHECK(r.latency() == expected);
  CHECK(r.parts.overhead == 6000);
  CHECK(r.parts.transmission == 12000 + 333334);
  CHECK(r.parts.drain == 0);
  CHECK(r.parts.queuing == 0);
  CHECK(r.hops == 2);
  REQUIRE(log.done.size() == 1);
  CHECK(log.done[0] == std::make_pair(std::uint64_t{id}, expected));
  CHECK(fabric->in_flight() == 0);
  // Per-channel totals: both channels a->b and b->c carried the bytes.
  const ChannelId ab = *m.channel_between(m.at("a"), m.at("b"));
  const ChannelId bc = *m.channel_between(m.at("b"), m.at("c"));
  CHECK(fabric->channel_stats(ab).bytes == 1000);
  CHECK(fabric->channel_stats(bc).bytes == 1000);
  CHECK(fabric->channel_stats(ab).busy_time == Approx(1000e12 / 3e9));
  CHECK(fabric->channel_stats(bc).busy_time == Approx(1000e12 / 7e9));
  CHECK(fabric->channel_stats(m.channel(ab).reverse).bytes == 0);
  REQUIRE_THROWS_AS(fabric->channel_stats(static_cast<ChannelId>(m.num_channels())), UsageError);
}

TEST_CASE("the awaitable form returns the finished record", "[flow]") {
  const Machine m = line_abc();
  Simulation sim;
  FlowFabric fabric(sim, m, flow_config());
  Time seen = -1;
  auto proc = [&]() -> kernbench::sim::Process {
    const TransferRecord& r = co_await fabric.transfer(spec(m, "c", "a", 700));
    seen = r.latency();
    CHECK(sim.now() == r.end);
  };
  sim.spawn("mover", proc());
  sim.run();
  CHECK(seen == 6000 + 12000 + 233334);  // ceil(700 B / 3 GB/s)
}

TEST_CASE("two transfers started together on one channel each take twice the fluid time", "[flow]") {
  // 1 TB/s = 1 B/ps: 1000 B take 1000 ps alone.
  const Machine m = make_machine({{"a", 10}, {"b", 20}}, {{"a", "b", 1'000'000'000'000, 50}});
  Simulation sim;
  FlowFabric fabric(sim, m, flow_config());
  const TransferId x = fabric.start(spec(m, "a", "b", 1000));
  const TransferId y = fabric.start(spec(m, "a", "b", 1000));
  sim.run();
  for (TransferId id : {x, y}) {
    const TransferRecord& r = fabric.record(id);
    CHECK(r.latency() == 10 + 2000 + 50 + 20);
    CHECK(r.parts.transmission == 50 + 1000);
    CHECK(r.parts.queuing == 1000);
    CHECK(r.parts.overhead == 30);
  }
  CHECK(fabric.channel_stats(*m.channel_between(m.at("a"), m.at("b"))).bytes == 2000);
}

TEST_CASE("a later transfer speeds up when the first one ends", "[flow]") {
  const Machine m = make_machine({{"a"}, {"b"}}, {{"a", "b", 1'000'000'000'000, 0}});
  Simulation sim;
  FlowFabric fabric(sim, m, flow_config());
  const TransferId first = fabric.start(spec(m, "a", "b", 1000));
  sim.run(200);
  const TransferId second = fabric.start(spec(m, "a", "b", 1000));
  sim.run();
  // First: alone for 200 ps (800 B left), then half rate: 1600 ps more.
  // Second: half rate 200..1800 (800 B), then alone: 200 ps more.
  CHECK(fabric.record(first).end == 1800);
  CHECK(fabric.record(first).parts.queuing == 800);
  CHECK(fabric.record(second).end == 2000);
  CHECK(fabric.record(second).latency() == 1800);
  CHECK(fabric.record(second).parts.queuing == 800);
}

TEST_CASE("a flow held elsewhere leaves the rest of a shared channel to the other", "[flow]") {
  // a->c is limited to 1 B/ps by a->b; b->c (2 B/ps) gives it 1 and the
  // local transfer b->c the other 1: half its uncontended rate.
  const Machine m =
      make_machine({{"a"}, {"b"}, {"c"}}, {{"a", "b", 1'000'000'000'000, 0}, {"b", "c", 2'000'000'000'000, 0}});
  Simulation sim;
  FlowFabric fabric(sim, m, flow_config());
  const TransferId through = fabric.start(spec(m, "a", "c", 1000));
  const TransferId local = fabric.start(spec(m, "b", "c", 1000));
  sim.run();
  CHECK(fabric.record(through).latency() == 1000);
  CHECK(fabric.record(through).parts.queuing == 0);
  CHECK(fabric.record(local).latency() == 1000);
  CHECK(fabric.record(local).parts.transmission == 500);
  CHECK(fabric.record(local).parts.queuing == 500);
}

TEST_CASE("store-and-forward at a middle node doubles the fluid time", "[flow]") {
  const std::int64_t bw = 1'000'000'000'000;  // 1 B/ps both hops
  Simulation sim_cut, sim_saf;
  const Machine cut = line_abc(true, bw, bw);
  const Machine saf = line_abc(false, bw, bw);
  FlowFabric f_cut(sim_cut, cut, flow_config());
  FlowFabric f_saf(sim_saf, saf, flow_config());
  const TransferId a = f_cut.start(spec(cut, "a", "c", 1000));
  const TransferId b = f_saf.start(spec(saf, "a", "c", 1000));
  sim_cut.run();
  sim_saf.run();
  CHECK(f_cut.record(a).latency() == 6000 + 12000 + 1000);
  CHECK(f_saf.record(b).latency() == 6000 + 12000 + 2000);
  CHECK(f_saf.record(b).parts.transmission == 12000 + 2000);
  CHECK(f_saf.record(b).parts.queuing == 0);

  SECTION("each segment is its own flow: the second one shares with local traffic") {
    Simulation sim;
    FlowFabric fabric(sim, saf, flow_config());
    // a->c: segment 1 on a->b over 1000..2000, b's overhead, segment 2 from
    // 2000+5000+2000 = 9000. A b->c transfer issued at 7000 starts at 9000
    // too (b's overhead), so the two share b->c for their whole drain.
    const TransferId through = fabric.start(spec(saf, "a", "c", 1000));
    sim.run(7000);
    const TransferId local = fabric.start(spec(saf, "b", "c", 1000));
    sim.run();
    CHECK(fabric.record(through).latency() == 6000 + 12000 + 1000 + 2000);
    CHECK(fabric.record(through).parts.queuing == 1000);
    CHECK(fabric.record(local).latency() == 2000 + 2000 + 7000 + 3000);
    CHECK(fabric.record(local).parts.queuing == 1000);
  }
}

TEST_CASE("a multi-connection link offers bandwidth x connections", "[flow]") {
  const Machine m = make_machine({{"a", 0}, {"b", 0}}, {{"a", "b", 100'000'000'000, 0, 4}});
  Simulation sim;
  FlowFabric fabric(sim, m, flow_config());
  const TransferId id = fabric.start(spec(m, "a", "b", 4096));
  sim.run();
  CHECK(fabric.record(id).latency() == 10240);  // 4096 B / (4 x 100 GB/s)
  const ChannelStats st = fabric.channel_stats(*m.channel_between(m.at("a"), m.at("b")));
  CHECK(st.bytes == 4096);
  CHECK(st.busy_time == Approx(40960.0));  // lane-time: 4096 B at 100 GB/s per lane
}

TEST_CASE("zero-byte and zero-hop transfers pay only latencies and overheads", "[flow]") {
  const Machine m = line_abc(false);
  Simulation sim;
  FlowFabric fabric(sim, m, flow_config());
  DoneLog log(sim);
  const TransferId empty = fabric.start(spec(m, "a", "c", 0), Target::call(log));
  const TransferId self = fabric.start(spec(m, "b", "b", 4096), Target::call(log));
  sim.run();
  const TransferRecord& e = fabric.record(empty);
  CHECK(e.latency() == 6000 + 12000);
  CHECK(e.parts.transmission == 12000);
  CHECK(e.parts.overhead == 6000);
  CHECK(e.parts.queuing == 0);
  const TransferRecord& s = fabric.record(self);
  CHECK(s.latency() == 2000);
  CHECK(s.parts.overhead == 2000);
  CHECK(s.hops == 0);
  CHECK(log.done.size() == 2);
  CHECK(fabric.active_flows() == 0);
}

TEST_CASE("bad transfers are usage errors", "[flow]") {
  const Machine m = line_abc();
  Simulation sim;
  FlowFabric fabric(sim, m, flow_config());
  REQUIRE_THROWS_AS(fabric.start(spec(m, "a", "c", -1)), UsageError);
  TransferSpec bad = spec(m, "a", "c", 8);
  bad.dst = 99;
  REQUIRE_THROWS_AS(fabric.start(bad), UsageError);
}

TEST_CASE("processor sharing of many flows on one channel is work-conserving", "[flow]") {
  // 1000 transfers of 1..1000 x 100 B start together on one 1 B/ps channel:
  // the channel never idles, so the last one ends at the total size (each
  // completion may round one ps up).
  const Machine m = make_machine({{"a"}, {"b"}}, {{"a", "b", 1'000'000'000'000, 0}});
  Simulation sim;
  FlowFabric fabric(sim, m, flow_config());
  Bytes total = 0;
  for (int i = 1; i <= 1000; ++i) {
    fabric.start(spec(m, "a", "b", 100 * i));
    total += 100 * i;
  }
  sim.run();
  Time makespan = 0;
  for (const TransferRecord& r : fabric.records()) {
    check_breakdown(fabric, r);
    makespan = std::max(makespan, r.end);
  }
  CHECK(makespan >= total);
  CHECK(makespan <= total + 1000);
  // Smaller transfers finish first (they all had the same rate).
  for (std::size_t i = 1; i < fabric.records().size(); ++i)
    CHECK(fabric.records()[i - 1].end <= fabric.records()[i].end);
}

namespace {

// A tree with a flit-aware hub and a store-and-forward switch: leaves l0-l2
// on the hub, l3-l5 on the switch. Random transfers at random times.
std::vector<TransferRecord> random_workload(std::uint64_t seed, int n, std::vector<ChannelStats>* stats = nullptr) {
  const Machine m =
      make_machine({{"hub", 3}, {"sw", 11, false}, {"l0", 1}, {"l1", 2}, {"l2", 0}, {"l3", 5}, {"l4", 1}, {"l5", 0}},
                   {{"l0", "hub", 3'000'000'000, 100},
                    {"l1", "hub", 7'000'000'000, 250},
                    {"l2", "hub", 64'000'000'000, 0, 2},
                    {"hub", "sw", 16'000'000'000, 1000, 4},
                    {"sw", "l3", 9'000'000'000, 30},
                    {"sw", "l4", 11'000'000'000, 40},
                    {"sw", "l5", 25'000'000'000, 50, 3}});
  Simulation sim;
  FlowFabric fabric(sim, m, flow_config());
  Starter starter(fabric);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> leaf(0, 5);
  std::uniform_int_distribution<Bytes> size(0, 200'000);
  std::uniform_int_distribution<Time> when(0, 20'000'000);
  for (int i = 0; i < n; ++i) {
    static const char* const leaves[] = {"l0", "l1", "l2", "l3", "l4", "l5"};
    const char* src = leaves[leaf(rng)];
    const char* dst = leaves[leaf(rng)];
    starter.specs.push_back(spec(m, src, dst, i % 17 == 0 ? 0 : size(rng)));
    sim.schedule(when(rng), starter, static_cast<std::uint64_t>(i));
  }
  sim.run();
  REQUIRE(fabric.records().size() == static_cast<std::size_t>(n));
  CHECK(fabric.in_flight() == 0);
  CHECK(fabric.active_flows() == 0);
  Bytes hop_bytes = 0, channel_bytes = 0;
  for (const TransferRecord& r : fabric.records()) {
    check_breakdown(fabric, r);
    hop_bytes += r.bytes * static_cast<Bytes>(r.hops);
  }
  for (ChannelId c = 0; c < m.num_channels(); ++c) {
    channel_bytes += fabric.channel_stats(c).bytes;
    if (stats) stats->push_back(fabric.channel_stats(c));
  }
  CHECK(channel_bytes == hop_bytes);
  return fabric.records();
}

}  // namespace

TEST_CASE("every record's breakdown sums to its latency under random load", "[flow]") {
  const auto records = random_workload(2024, 600);
  // Contention happened somewhere, or the test proves little.
  CHECK(std::any_of(records.begin(), records.end(), [](const TransferRecord& r) { return r.parts.queuing > 0; }));
}

TEST_CASE("two identical runs give identical records", "[flow]") {
  std::vector<ChannelStats> sa, sb;
  const auto a = random_workload(99, 400, &sa);
  const auto b = random_workload(99, 400, &sb);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("record " << i);
    CHECK(a[i].issue == b[i].issue);
    CHECK(a[i].end == b[i].end);
    CHECK(a[i].src == b[i].src);
    CHECK(a[i].dst == b[i].dst);
    CHECK(a[i].bytes == b[i].bytes);
    CHECK(a[i].parts.overhead == b[i].parts.overhead);
    CHECK(a[i].parts.transmission == b[i].parts.transmission);
    CHECK(a[i].parts.queuing == b[i].parts.queuing);
  }
  REQUIRE(sa.size() == sb.size());
  for (std::size_t c = 0; c < sa.size(); ++c) {
    CHECK(sa[c].bytes == sb[c].bytes);
    CHECK(sa[c].busy_time == sb[c].busy_time);
  }
}

TEST_CASE("a coflow drains at its busiest link's weighted rate, then pays its slowest hop's tail", "[flow][coflow]") {
  // a - b - c, 3 GB/s then 7 GB/s. Hops a->b (weight 1) and a->c (weight 1)
  // both cross a->b: weight 2 there, so the pace is 1.5 GB/s; 3000 B take 2 us.
  const Machine m = line_abc();
  Simulation sim;
  auto fabric = make_fabric(sim, m, flow_config());
  REQUIRE(fabric->moves_coflows());
  CoflowSpec c;
  c.hops = {CoflowHop{m.at("a"), m.at("b"), 1.0}, CoflowHop{m.at("a"), m.at("c"), 1.0}};
  c.bytes = 3000;
  DoneLog log(sim);
  const TransferId id = fabric->start_coflow(c, Target::call(log));
  sim.run();
  const TransferRecord& r = fabric->record(id);
  // src overhead 1 ns, the slowest hop's tail: latencies 5 + 7 ns, overheads of b and c 2 + 3 ns.
  const Time drain = 2'000'000;
  CHECK(r.latency() == 1000 + 12000 + 5000 + drain);
  CHECK(r.parts.total() == r.latency());
  CHECK(r.parts.queuing == 0);  // alone: its uncontended pace
  CHECK(r.hops == 2);
  REQUIRE(log.done.size() == 1);
  CHECK(log.done[0].second == r.end);
  // Bytes per link: weight x bytes.
  const ChannelId ab = *m.channel_between(m.at("a"), m.at("b"));
  const ChannelId bc = *m.channel_between(m.at("b"), m.at("c"));
  CHECK(fabric->channel_stats(ab).bytes == 6000);
  CHECK(fabric->channel_stats(bc).bytes == 3000);
  CHECK(fabric->in_flight() == 0);
}

TEST_CASE("a coflow shares links max-min with plain transfers", "[flow][coflow]") {
  // 1 B/ps link; a coflow of weight 1 and a transfer: half each while both run.
  const Machine m = make_machine({{"a"}, {"b"}}, {{"a", "b", 1'000'000'000'000, 0}});
  Simulation sim;
  FlowFabric fabric(sim, m, flow_config());
  CoflowSpec c;
  c.hops = {CoflowHop{m.at("a"), m.at("b"), 1.0}};
  c.bytes = 1000;
  const TransferId x = fabric.start_coflow(c);
  const TransferId y = fabric.start(spec(m, "a", "b", 3000));
  sim.run();
  CHECK(fabric.record(x).latency() == 2000);  // 1000 B at 0.5 B/ps
  CHECK(fabric.record(x).parts.queuing == 1000);
  CHECK(fabric.record(y).latency() == 2000 + 2000);  // 1000 at half, then 2000 alone
}

TEST_CASE("coflows are refused where they cannot run", "[flow][coflow]") {
  const Machine m = line_abc();
  Simulation sim;
  FabricConfig packet;
  packet.model = FabricModel::Packet;
  auto pf = make_fabric(sim, m, packet);
  CoflowSpec c;
  c.hops = {CoflowHop{m.at("a"), m.at("b"), 1.0}};
  c.bytes = 10;
  REQUIRE_THROWS_WITH(pf->start_coflow(c), Catch::Contains("fabric.model: flow"));
  FlowFabric fabric(sim, m, flow_config());
  CoflowSpec none;
  CHECK_THROWS_AS(fabric.start_coflow(none), UsageError);
  CoflowSpec self;
  self.hops = {CoflowHop{m.at("a"), m.at("a"), 1.0}};
  CHECK_THROWS_WITH(fabric.start_coflow(self), Catch::Contains("two different nodes"));
  CoflowSpec neg;
  neg.hops = {CoflowHop{m.at("a"), m.at("b"), -1.0}};
  CHECK_THROWS_WITH(fabric.start_coflow(neg), Catch::Contains("weight"));
  CHECK(fabric.in_flight() == 0);
}
