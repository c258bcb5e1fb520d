// test_nccl_multinode.cpp -- NCCL's collectives over several boxes (ccl/logical/boxes.hpp):
// boxes found by the NICs, the ring crossing every box on its channels' rails (PXN keeps it
// off the spine), the ring's and the tree's bytes through the NICs, the tree's latency
// growing as log2(boxes) against the ring's linear growth, and routes that avoid GPUs.
#include <catch2/catch.hpp>

#include "ccl/ccl.hpp"
#include "ccl/logical/boxes.hpp"
#include "ccl/nccl.hpp"
#include "kernbench.hpp"
#include "machines.hpp"
#include "runtime/config_section.hpp"
#include "topology/routing/routing.hpp"

using namespace kernbench::testing;
using namespace kernbench::ccl;
using kernbench::sim::kKiB;
using kernbench::sim::kMiB;

namespace {

ExplicitNode node(const std::string& name, NodeKind kind, const std::string& memory = {}) {
  ExplicitNode n{name, kind, {}, memory};
  n.params.transit = kind != NodeKind::Pe;  // a GPU forwards nothing (as the GPU presets declare)
  return n;
}

// `boxes` boxes of `g` GPUs: in each, the GPUs on one switch (NVLink `nvl` GB/s), GPU j's NIC
// beside it (PCIe far faster than the NIC), NIC j of every box on rail leaf j (`nic` GB/s), the
// rail leaves joined by one spine (class spine, as fast).
Config cluster(int boxes, int g, double nvl, double nic, kernbench::sim::Time hop = 0) {
  Config c;
  c.source = "test-cluster";
  ExplicitGraphConfig gr;
  gr.nodes.push_back(node("spine", NodeKind::Switch));
  for (int j = 0; j < g; ++j) {
    gr.nodes.push_back(node("leaf" + std::to_string(j), NodeKind::Switch));
    gr.edges.push_back(ExplicitEdge{"leaf" + std::to_string(j), "spine", "spine", link(nic * g, hop)});
  }
  for (int b = 0; b < boxes; ++b) {
    const std::string p = "n" + std::to_string(b) + ".";
    gr.nodes.push_back(node(p + "sw", NodeKind::Switch));
    for (int j = 0; j < g; ++j) {
      const std::string gpu = p + "gpu" + std::to_string(j), mem = p + "hbm" + std::to_string(j),
                        nic_name = p + "nic" + std::to_string(j);
      gr.nodes.push_back(node(gpu, NodeKind::Pe, mem));
      gr.nodes.push_back(node(mem, NodeKind::Memory));
      gr.nodes.push_back(node(nic_name, NodeKind::Nic));
      gr.edges.push_back(ExplicitEdge{gpu, p + "sw", "nvlink", link(nvl, hop)});
      gr.edges.push_back(ExplicitEdge{gpu, mem, "hbm", link(1'000'000, 0)});
      gr.edges.push_back(ExplicitEdge{gpu, nic_name, "pcie", link(1'000'000, hop)});
      gr.edges.push_back(ExplicitEdge{nic_name, "leaf" + std::to_string(j), "ib", link(nic, hop)});
    }
  }
  c.graph = gr;
  c.fabric.model = FabricModel::Flow;
  nccl_gpus(c, 2 * g);
  return c;
}

CollectiveSpec spec(Bytes bytes, const std::string& algorithm, const std::string& protocol = "auto") {
  CollectiveSpec s;
  s.algorithm = algorithm;
  s.protocol = protocol;
  s.bytes_per_pe = bytes;
  s.buffer = Buffer::Hbm;
  return s;
}

CollectiveResult run(const Config& c, const CollectiveSpec& s) {
  System system(c);
  return run_collective(system, s);
}

}  // namespace

TEST_CASE("boxes are the ranks a NIC does not separate, in rank order, with their NICs' rate out", "[nccl][boxes]") {
  const Config c = cluster(3, 2, 100, 25);
  System system(c);
  const Boxes b = boxes_of(system.machine(), system.machine().pes());
  REQUIRE(b.count() == 3);
  CHECK(b.ranks[1] == std::vector<int>{2, 3});
  CHECK(b.box == std::vector<int>{0, 0, 1, 1, 2, 2});
  CHECK(b.local == std::vector<int>{0, 1, 0, 1, 0, 1});
  CHECK(b.smallest() == 2);
  CHECK(b.at(2, 3) == 5);                                                 // local index modulo the box's size
  for (double e : b.egress) CHECK(e == Approx(2 * 25e9).epsilon(1e-12));  // two NICs at 25 GB/s each
  // Without NICs a machine is one box.
  Config flat = cluster(1, 4, 100, 25);
  System one(flat);
  CHECK_FALSE(boxes_of(one.machine(), one.machine().pes()).multi());
}

TEST_CASE("routes avoid a GPU that is not a transit node, and pass through it only when nothing else joins",
          "[routing][transit]") {
  const Config c = cluster(2, 2, 100, 25);
  System system(c);
  const kernbench::topology::Machine& m = system.machine();
  kernbench::topology::Router router(m);
  // n0.gpu0 -> n1.gpu1: through n0.nic0, leaf0, the spine, leaf1 (no GPU on the way), not over
  // NVLink to n0.gpu1 and its rail-1 NIC, which is as short.
  const kernbench::topology::Route& r = router.route(m.at("n0.gpu0"), m.at("n1.gpu1"));
  for (std::size_t i = 1; i + 1 < r.nodes.size(); ++i) CHECK(m.node(r.nodes[i]).kind != NodeKind::Pe);
  CHECK(r.hops() == 6);
  // A chain a - gpu - b: the only path passes through the GPU.
  Config chain;
  chain.source = "test-chain";
  ExplicitGraphConfig g;
  g.nodes = {node("a", NodeKind::Switch), node("gpu", NodeKind::Pe), node("b", NodeKind::Switch)};
  g.edges = {ExplicitEdge{"a", "gpu", "x", link(10, 0)}, ExplicitEdge{"gpu", "b", "x", link(10, 0)}};
  chain.graph = g;
  System cs(chain);
  kernbench::topology::Router cr(cs.machine());
  CHECK(cr.route(cs.machine().at("a"), cs.machine().at("b")).hops() == 2);
}

TEST_CASE("a ring over boxes is verified and crosses each box on its rails: PXN keeps it off the spine",
          "[nccl][multinode]") {
  Config c = cluster(3, 2, 100, 25);
  const CollectiveResult with = run(c, spec(8 * kMiB, "ring"));
  CHECK(with.verified);
  CHECK(with.link_bytes.at("ib") > 0);
  CHECK(with.link_bytes.count("spine") == 0);
  c.section<NcclConfig>().pxn = false;
  const CollectiveResult without = run(c, spec(8 * kMiB, "ring"));
  CHECK(without.verified);
  CHECK(without.link_bytes.at("spine") > 0);  // a box's last GPU sends on its own rail, to the next box's first
}

TEST_CASE("the ring's bytes through the NICs are 2(n-1)/n of the buffer per box, each crossing two ib links",
          "[nccl][multinode]") {
  const Config c = cluster(3, 2, 100, 25);
  const int n = 6;
  // A buffer of whole slices (of every channel's part), so that the blocks are equal; Simple, whose
  // wire bytes are its payload (link_bytes counts the wire's).
  const Bytes bytes = 48 * kMiB;
  const CollectiveResult r = run(c, spec(bytes, "ring", "simple"));
  REQUIRE(bytes % (static_cast<Bytes>(r.slices) / r.channels * r.channels) == 0);
  REQUIRE(r.slices % (r.channels * n) == 0);
  REQUIRE(r.verified);
  CHECK(r.link_bytes.at("ib") == 3 * 2 * (2 * (n - 1) * bytes / n));
}

TEST_CASE("the tree over boxes is verified; its latency grows as log2(boxes), the ring's linearly",
          "[nccl][multinode][tree]") {
  std::vector<double> tree, ring;
  for (int boxes : {2, 4, 8, 16}) {
    const Config c = cluster(boxes, 2, 100, 25);
    const CollectiveResult t = run(c, spec(64, "double_binary_tree"));
    CHECK(t.verified);
    tree.push_back(static_cast<double>(t.latency));
    ring.push_back(static_cast<double>(run(c, spec(64, "ring")).latency));
  }
  // Each doubling of the boxes adds one level to each tree: the same increment every time.
  const double d1 = tree[1] - tree[0], d2 = tree[2] - tree[1], d3 = tree[3] - tree[2];
  CHECK(d1 > 0);
  CHECK(d2 == Approx(d1).epsilon(0.1));
  CHECK(d3 == Approx(d1).epsilon(0.1));
  // The ring's steps double with the boxes: its increments double too.
  CHECK((ring[3] - ring[2]) == Approx(2 * (ring[2] - ring[1])).epsilon(0.1));
}

TEST_CASE("NCCL's tuner prices a tree across boxes with log2(boxes) network steps, and picks it for small buffers",
          "[nccl][multinode][tuner]") {
  NcclConfig cfg;
  TunerFacts f;
  f.ranks = 128;
  f.ring_bandwidth = 450e9;
  f.route_latency = 0;
  f.channels = 16;
  f.nodes = 16;
  f.ppn = 8;
  f.inter_bandwidth = 400e9;
  f.inter_latency = 0;
  const Protocol simple = Protocol::Simple;
  const TuneRow tree = choose(NcclCollective::AllReduce, 1, f, cfg, "tree", &simple);
  CHECK(tree.latency == cfg.tuner.simple_base + 2 * (7 * cfg.tuner.simple_step + 4 * cfg.tuner.net_tree_simple_step));
  const TuneRow ring = choose(NcclCollective::AllReduce, 1, f, cfg, "ring", &simple);
  CHECK(ring.latency ==
        cfg.tuner.simple_base + (2 * 127 - 2 * 15) * cfg.tuner.simple_step + 2 * 15 * cfg.tuner.net_simple_step);
  CHECK(ring.bandwidth == Approx(400e9 / (2.0 * 127 / 128)).epsilon(1e-12));  // the boxes' NIC rate bounds it
  CHECK(choose(NcclCollective::AllReduce, 64 * kKiB, f, cfg).algorithm == "tree");
  CHECK(choose(NcclCollective::AllReduce, 4LL << 30, f, cfg).algorithm == "ring");
}
