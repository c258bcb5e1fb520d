// test_machine.cpp -- the SIP/CUBE/PE generator and the explicit builder.
#include <catch2/catch.hpp>

#include "machines.hpp"
#include "sim/errors.hpp"
#include "topology/graph/machine.hpp"

using namespace kernbench::testing;

TEST_CASE("the generator names and counts nodes as documented", "[machine]") {
  // 2x2 SIPs (torus), 2x1 cubes, 4x2 routers, 8 PEs.
  const Machine m(system_config(2, 2, SipTopology::Torus));
  const std::size_t per_cube = 8 /*routers*/ + 8 * 2 /*PE + hbm slice*/ + 1 /*one UCIe side*/;
  CHECK(m.num_nodes() == 4 * (2 * per_cube + 1 /*pcie_ep*/));
  CHECK(m.pes().size() == 4 * 2 * 8);
  CHECK(m.node(m.pe(1, 1, 5)).name == "sip1.cube1.pe5");
  CHECK(m.node(m.hbm_ctrl(0, 1, 5)).name == "sip0.cube1.hbm_ctrl.pe5");
  CHECK(m.node(m.router(0, 1, 1, 3)).name == "sip0.cube1.r1c3");
  CHECK(m.node(m.pcie_ep(3)).name == "sip3.pcie_ep");
  CHECK(m.node(*m.ucie(0, 0, Side::East)).name == "sip0.cube0.ucie_e");
  CHECK_FALSE(m.ucie(0, 0, Side::West).has_value());  // no cube to the west
  CHECK(m.at("sip2.cube0.pe7") == m.pe(2, 0, 7));
  // PE 5 sits on router 5 = r1c1 of a 4-wide mesh; its HBM slice on the same router.
  CHECK(m.channel_between(m.pe(0, 0, 5), m.router(0, 0, 1, 1)).has_value());
  CHECK(m.channel_between(m.router(0, 0, 1, 1), m.hbm_ctrl(0, 0, 5)).has_value());
}

TEST_CASE("every link has two channels and every lane is named", "[machine]") {
  const Machine m(system_config());
  for (ChannelId c = 0; c < m.num_channels(); ++c) {
    const ChannelInfo& ch = m.channel(c);
    CHECK(m.channel(ch.reverse).reverse == c);
    CHECK(m.channel(ch.reverse).from == ch.to);
  }
  const ChannelId ucie = *m.channel_between(*m.ucie(0, 0, Side::East), *m.ucie(0, 1, Side::West));
  CHECK(m.channel(ucie).link.connections == 4);
  CHECK(m.lane_name(m.channel(ucie).first_lane + 2) == "sip0.cube0.ucie_e.conn2");
  CHECK(m.lane_name(m.channel(*m.channel_between(m.pe(0, 0, 0), m.router(0, 0, 0, 0))).first_lane) ==
        "sip0.cube0.pe0->sip0.cube0.r0c0.conn0");
  // All routers of the east column reach the east adapter (spread, not funnelled).
  for (int r = 0; r < 2; ++r) CHECK(m.channel_between(m.router(0, 0, r, 3), *m.ucie(0, 0, Side::East)));
}

TEST_CASE("SIP grids are linked as ring, torus or mesh", "[machine]") {
  auto degree = [](const Machine& m, int sip) {
    int d = 0;
    for (ChannelId c : m.out_channels(m.pcie_ep(sip))) d += m.channel(c).link_class == "pcie" ? 1 : 0;
    return d;
  };
  const Machine ring(system_config(3, 2, SipTopology::Ring));
  for (int s = 0; s < 6; ++s) CHECK(degree(ring, s) == 2);
  CHECK(ring.channel_between(ring.pcie_ep(5), ring.pcie_ep(0)).has_value());
  const Machine mesh(system_config(3, 2, SipTopology::Mesh));
  CHECK(degree(mesh, 0) == 2);  // corner
  CHECK(degree(mesh, 1) == 3);  // edge
  const Machine torus(system_config(3, 3, SipTopology::Torus));
  for (int s = 0; s < 9; ++s) CHECK(degree(torus, s) == 4);
  // A 2-long torus dimension does not get a duplicate wrap link.
  const Machine t23(system_config(2, 3, SipTopology::Torus));
  CHECK(degree(t23, 0) == 3);
}

TEST_CASE("unknown node names are TopologyErrors with examples", "[machine]") {
  const Machine m(system_config());
  CHECK_THROWS_AS(m.at("sip0.cube9.pe0"), kernbench::TopologyError);
  CHECK_THROWS_WITH(m.at("sip0.cube9.pe0"),
                    Catch::Contains("unknown node 'sip0.cube9.pe0'") && Catch::Contains("sip0.cube0.pe0"));
  CHECK_THROWS_WITH(m.pe(0, 0, 8), Catch::Contains("no PE sip0.cube0.pe8"));
}

TEST_CASE("explicit graphs build from node and edge lists", "[machine]") {
  const Machine m(chain_config({{0, true}, {5, false}, {0, true}}, {link(16, 100), link(32, 200, 2)}));
  CHECK(m.num_nodes() == 3);
  CHECK(m.num_channels() == 4);
  CHECK(m.num_lanes() == 2 + 4);
  CHECK_FALSE(m.node(m.at("n1")).params.flit_aware);
  CHECK_FALSE(m.generated());
  CHECK_THROWS_WITH(m.system(), Catch::Contains("not a generated"));
}
