// test_cluster.cpp -- the cluster: generator (topology/config/cluster.cpp, docs/cluster.md): sizes, names, NIC
// placement, rank order, errors naming the YAML path, and ECMP across the spines.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "kernbench.hpp"
#include "sim/errors.hpp"
#include "topology/config/cluster.hpp"
#include "topology/routing/routing.hpp"
#include "topology/system.hpp"

using namespace kernbench::topology;
using Catch::Contains;
using kernbench::ConfigError;
namespace fs = std::filesystem;

namespace {

// A 2-GPU box: GPUs on one NVSwitch, gpu0 under a PCIe switch, gpu1 without PCIe.
const char* kBox = R"(graph:
  nodes:
    - {name: g0, kind: pe, overhead: 0 ns}
    - {name: g1, kind: pe, overhead: 0 ns}
    - {name: sw, kind: switch, overhead: 100 ns}
    - {name: px, kind: switch, overhead: 150 ns}
  edges:
    - {a: g0, b: sw, class: nvlink, bandwidth: 25 GB/s, latency: 100 ns}
    - {a: g1, b: sw, class: nvlink, bandwidth: 25 GB/s, latency: 100 ns}
    - {a: g0, b: px, class: pcie, bandwidth: 63.015 GB/s, latency: 200 ns}
  layout: {ranks: [g1, g0]}
)";

struct Dir {
  fs::path root = fs::temp_directory_path() / ("kb_cluster_" + std::to_string(::getpid()));
  Dir() {
    fs::create_directories(root);
    std::ofstream(root / "box.yaml") << kBox;
  }
  ~Dir() { fs::remove_all(root); }
  kernbench::topology::Config load(const std::string& cluster) const {
    const fs::path f = root / "c.yaml";
    std::ofstream(f) << cluster;
    return kernbench::load_config(f.string());
  }
};

std::string cluster(int nodes, const std::string& fabric) {
  return "cluster: {nodes: " + std::to_string(nodes) + ", box: box.yaml, fabric: " + fabric + "}\n";
}

}  // namespace

TEST_CASE("cluster: names, rank order and NIC placement on the box's PCIe path", "[cluster]") {
  const Dir d;
  const auto c = d.load(cluster(3, "{kind: fat-tree, radix: 4}"));
  REQUIRE(c.cluster);
  CHECK(c.cluster->ranks == std::vector<std::string>{"n0.g1", "n0.g0", "n1.g1", "n1.g0", "n2.g1", "n2.g0"});
  CHECK(c.graph->layout.ranks == c.cluster->ranks);
  // NIC j pairs with local rank j: nic0 with g1 (no PCIe: on the GPU), nic1 with g0 (on its PCIe switch px).
  bool nic0 = false, nic1 = false;
  for (const ExplicitEdge& e : c.graph->edges) {
    if (e.a == "n2.nic0" && e.b == "n2.g1") nic0 = e.link_class == "pcie";
    if (e.a == "n2.nic1" && e.b == "n2.px") nic1 = e.link_class == "pcie" && e.link.latency == 200'000;
  }
  CHECK(nic0);
  CHECK(nic1);
  // radix 4, o = 1: 2 down, 2 up; 6 NIC ports fill 3 leaves; spines: the fewest dividing 2 with 3 x 2 / S <= 4.
  CHECK(c.cluster->leaf_down == 2);
  CHECK(c.cluster->leaves.size() == 3);
  CHECK(c.cluster->spines.size() == 2);
  CHECK(c.cluster->nic_leaf == std::vector<int>{0, 0, 1, 1, 2, 2});
}

TEST_CASE("cluster: rail-optimized groups and 3-tier pods, counts", "[cluster]") {
  const Dir d;
  // radix 8, o = 1: groups of 4 nodes, one leaf per rail (2 rails); 9 nodes = 3 groups (the last partial).
  const auto r = d.load(cluster(9, "{kind: rail-optimized, radix: 8}"));
  CHECK(r.cluster->leaves.size() == 6);
  CHECK(r.cluster->nic_leaf[8 * 2 + 1] == 2 * 2 + 1);  // node 8 is group 2, rail 1
  CHECK(r.cluster->leaves[5].down_links == 1);
  // 3 tiers, fat-tree radix 4: 2 down, pods of 2 leaves; 5 nodes x 2 NICs = 5 leaves = 3 pods; 2 spines per pod.
  const auto t = d.load(cluster(5, "{kind: fat-tree, tiers: 3, radix: 4}"));
  CHECK(t.cluster->pods == 3);
  CHECK(t.cluster->spines.size() == 6);
  CHECK(t.cluster->cores.size() == 4);
}

TEST_CASE("cluster: bad keys name the YAML path", "[cluster]") {
  const Dir d;
  CHECK_THROWS_WITH(d.load(cluster(2, "{radix: 1}")), Contains("cluster.fabric.radix") && Contains("2 ports"));
  CHECK_THROWS_WITH(d.load(cluster(2, "{oversubscription: -1}")), Contains("cluster.fabric.oversubscription"));
  CHECK_THROWS_WITH(d.load("cluster: {nodes: 2, box: box.yaml, nic: cx9}\n"), Contains("cluster.nic"));
  CHECK_THROWS_WITH(d.load("cluster: {nodes: 2, box: nowhere.yaml}\n"),
                    Contains("cluster.box") && Contains("no such file"));
  CHECK_THROWS_WITH(d.load("cluster: {nodes: 2, box: box.yaml}\nsystem: {}\n"),
                    Contains("system") && Contains("either cluster"));
  // 2 tiers of radix 4: fat-tree holds 4 leaves x 2 down / 2 NICs = 4 nodes.
  CHECK_THROWS_WITH(d.load(cluster(5, "{kind: fat-tree, radix: 4}")),
                    Contains("cluster.nodes") && Contains("at most 4 nodes"));
}

TEST_CASE("cluster: equal-cost paths cross every spine; inside a box traffic stays on NVLink", "[cluster]") {
  const Dir d;
  System s(d.load(cluster(8, "{kind: fat-tree, radix: 8}")));  // 16 NICs, 4 leaves, 2 spines of 2 links per leaf
  Router router(s.machine());
  const Machine& m = s.machine();
  const auto& paths = router.paths(m.at("n0.g0"), m.at("n7.g0"));
  std::set<std::string> spines;
  for (const Route& p : paths)
    for (NodeId n : p.nodes)
      if (m.node(n).name.starts_with("spine")) spines.insert(m.node(n).name);
  CHECK(spines.size() == 2);
  const Route& inside = router.route(m.at("n3.g0"), m.at("n3.g1"));
  REQUIRE(inside.nodes.size() == 3);
  CHECK(m.node(inside.nodes[1]).name == "n3.sw");
}
