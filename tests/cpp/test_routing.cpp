// test_routing.cpp -- dimension-order meshes, the SIP grid, Dijkstra, caching.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "machines.hpp"
#include "topology/routing/routing.hpp"

using namespace kernbench::testing;

namespace {

std::vector<std::string> names(const Machine& m, const Route& r) {
  std::vector<std::string> out;
  for (NodeId n : r.nodes) out.push_back(m.node(n).name);
  return out;
}

int pcie_hops(const Machine& m, const Route& r) {
  int n = 0;
  for (ChannelId c : r.channels) n += m.channel(c).link_class == "pcie" ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("inside a cube routes go X first, then Y", "[routing]") {
  const Machine m(system_config());
  Router router(m);
  const Route& r = router.route(m.pe(0, 0, 0), m.pe(0, 0, 6));  // r0c0 -> r1c2
  CHECK(names(m, r) == std::vector<std::string>{"sip0.cube0.pe0", "sip0.cube0.r0c0", "sip0.cube0.r0c1",
                                                "sip0.cube0.r0c2", "sip0.cube0.r1c2", "sip0.cube0.pe6"});
  // Local HBM: PE -> its router -> its slice.
  CHECK(router.route(m.pe(0, 0, 3), m.hbm_ctrl(0, 0, 3)).hops() == 2);
  CHECK(router.route(m.pe(0, 0, 3), m.pe(0, 0, 3)).hops() == 0);
}

TEST_CASE("crossing cubes leaves through the side router of the current row", "[routing]") {
  const Machine m(system_config());
  Router router(m);
  const Route& r = router.route(m.pe(0, 0, 4), m.hbm_ctrl(0, 1, 6));  // r1c0 in cube0 -> r1c2 in cube1
  CHECK(names(m, r) == std::vector<std::string>{"sip0.cube0.pe4", "sip0.cube0.r1c0", "sip0.cube0.r1c1",
                                                "sip0.cube0.r1c2", "sip0.cube0.r1c3", "sip0.cube0.ucie_e",
                                                "sip0.cube1.ucie_w", "sip0.cube1.r1c0", "sip0.cube1.r1c1",
                                                "sip0.cube1.r1c2", "sip0.cube1.hbm_ctrl.pe6"});
  // Row 0 traffic uses the row-0 router: the side is not funnelled.
  const Route& r0 = router.route(m.pe(0, 0, 0), m.pe(0, 1, 0));
  CHECK(names(m, r0)[4] == "sip0.cube0.r0c3");
}

TEST_CASE("on a cube grid routes go X across cubes, then Y", "[routing]") {
  const Machine m(system_config(1, 1, SipTopology::Ring, 2, 2));
  Router router(m);
  const Route& r = router.route(m.pe(0, 0, 1), m.pe(0, 3, 1));  // cube (0,0) -> (1,1)
  const auto n = names(m, r);
  const auto pos = [&](const std::string& s) { return std::find(n.begin(), n.end(), s) - n.begin(); };
  CHECK(pos("sip0.cube0.ucie_e") < pos("sip0.cube1.ucie_w"));
  CHECK(pos("sip0.cube1.ucie_s") < pos("sip0.cube3.ucie_n"));
  CHECK(std::find(n.begin(), n.end(), "sip0.cube2.ucie_n") == n.end());  // not Y first
  CHECK(n.back() == "sip0.cube3.pe1");
}

TEST_CASE("SIP-to-SIP routes take the shortest way over ring, torus and mesh", "[routing]") {
  struct Case {
    int w, h;
    SipTopology topo;
    int src, dst, hops;
  };
  const std::vector<Case> cases = {
      {3, 2, SipTopology::Ring, 0, 3, 3},  {3, 2, SipTopology::Ring, 0, 5, 1},  {2, 3, SipTopology::Ring, 0, 4, 2},
      {2, 3, SipTopology::Ring, 1, 5, 2},  {3, 2, SipTopology::Mesh, 0, 5, 3},  {2, 3, SipTopology::Mesh, 0, 5, 3},
      {3, 2, SipTopology::Mesh, 2, 3, 3},  {2, 3, SipTopology::Mesh, 1, 4, 3},  {3, 3, SipTopology::Torus, 0, 8, 2},
      {3, 2, SipTopology::Torus, 0, 5, 2}, {2, 3, SipTopology::Torus, 0, 5, 2}, {2, 3, SipTopology::Torus, 0, 4, 1},
      {4, 1, SipTopology::Torus, 0, 3, 1}, {2, 2, SipTopology::Torus, 0, 3, 2},
  };
  for (const Case& c : cases) {
    INFO(c.w << "x" << c.h << " " << to_string(c.topo) << " sip" << c.src << " -> sip" << c.dst);
    const Machine m(system_config(c.w, c.h, c.topo));
    Router router(m);
    const Route& r = router.route(m.pe(c.src, 1, 2), m.hbm_ctrl(c.dst, 0, 7));
    CHECK(pcie_hops(m, r) == c.hops);
    CHECK(m.node(r.nodes.front()).sip == c.src);
    CHECK(m.node(r.nodes.back()).sip == c.dst);
    // Each SIP boundary is crossed through the PCIe endpoints.
    CHECK(names(m, r)[r.nodes.size() - 1] == "sip" + std::to_string(c.dst) + ".cube0.hbm_ctrl.pe7");
  }
}

TEST_CASE("routes are cached and carry their latency sums", "[routing]") {
  const Machine m(system_config());
  Router router(m);
  const Route& a = router.route(m.pe(0, 0, 0), m.hbm_ctrl(0, 0, 1));
  const Route& b = router.route(m.pe(0, 0, 0), m.hbm_ctrl(0, 0, 1));
  CHECK(&a == &b);
  // pe0 -> r0c0 -> r0c1 -> hbm_ctrl.pe1: pe link 0.5 + noc 0.5 + hbm 1 ns;
  // overheads pe 1 + routers 2 + 2 + hbm 10 ns.
  CHECK(a.wire_latency == 2000);
  CHECK(a.node_overhead == 15000);
  CHECK(a.bottleneck.bytes_per_s == 256'000'000'000);
}

TEST_CASE("explicit graphs route by Dijkstra on latency", "[routing]") {
  Config c;
  c.source = "diamond";
  ExplicitGraphConfig g;
  for (const char* n : {"a", "b", "c", "d"}) g.nodes.push_back(ExplicitNode{n, NodeKind::Other, {}});
  g.edges = {{"a", "b", "x", link(1, 1000)},
             {"b", "d", "x", link(1, 1000)},
             {"a", "c", "x", link(100, 5000)},
             {"c", "d", "x", link(100, 5000)}};
  c.graph = g;
  const Machine m(c);
  Router router(m);
  CHECK(names(m, router.route(m.at("a"), m.at("d"))) == std::vector<std::string>{"a", "b", "d"});
  CHECK(names(m, router.route(m.at("d"), m.at("c"))) == std::vector<std::string>{"d", "c"});
}
