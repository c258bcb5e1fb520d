// test_reliability_r3.cpp -- issue 31 (reliability round 3), the C++ core: grid products in 64 bits (family 1),
// the GEMM shape bounded before its tile search (2), packet buffers checked by the loader (5), exact bandwidths
// and pieces bounded by the bytes (9), poll periods and jiffies bounded and shortest-path searches shared per
// source (11), the exact product in hierarchy messages (13).
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "ccl/ccl.hpp"
#include "kernbench.hpp"
#include "kernels/gemm.hpp"
#include "machines.hpp"
#include "sim/errors.hpp"
#include "topology/routing/routing.hpp"
#include "topology/system.hpp"

using namespace kernbench::testing;
namespace ccl = kernbench::ccl;
namespace kernels = kernbench::kernels;
using Catch::Contains;
using kernbench::ConfigError;
using kernbench::UsageError;

namespace {

// A star leaf's name, built by append: GCC 12's -Wrestrict misfires (-Werror at -O3) on "p" + std::to_string(i)
// inlined into a test case.
std::string leaf_name(int i) {
  std::string s = "p";
  s += std::to_string(i);
  return s;
}

// Two PEs on a switch, with `layout` (YAML lines under graph.layout) appended.
std::string two_pes(const std::string& layout) {
  return "graph:\n  nodes:\n    - {name: a, kind: pe, overhead: 1 ns}\n    - {name: b, kind: pe, overhead: 1 ns}\n"
         "    - {name: s, kind: switch, overhead: 1 ns}\n  edges:\n"
         "    - {a: a, b: s, bandwidth: 256 GB/s, latency: 1 ns}\n"
         "    - {a: b, b: s, bandwidth: 256 GB/s, latency: 1 ns}\n  layout:\n" +
         layout;
}

const char* kTinySystem = R"(system:
  name: t
  sips: {w: 1, h: 1, topology: mesh}
  cubes: {w: 1, h: 1}
  routers: {w: 2, h: 1}
  pes_per_cube: 2
nodes:
  pe: {overhead: 2 ns}
  router: {overhead: 2 ns}
  hbm_ctrl: {overhead: 5 ns}
  ucie: {overhead: 1 ns}
  pcie_ep: {overhead: 20 ns, flit_aware: false}
links:
  pe: {bandwidth: 256 GB/s, latency: 0.5 ns}
  noc: {bandwidth: 256 GB/s, latency: 0.5 ns}
  hbm: {bandwidth: 256 GB/s, latency: 0.5 ns}
  ucie_port: {bandwidth: 256 GB/s, latency: 0.5 ns}
  ucie: {bandwidth: 128 GB/s, latency: 0.5 ns}
  pcie_port: {bandwidth: 256 GB/s, latency: 0.5 ns}
  pcie: {bandwidth: 64 GB/s, latency: 100 ns}
)";

std::string vgpu_yaml() {
  return (std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "configs" / "vgpu.yaml").lexically_normal();
}

}  // namespace

TEST_CASE("r3 family 1: GridSize::count is 64-bit", "[reliability][r3]") {
  CHECK(GridSize{1282, 6700417}.count() == 8'589'934'594);
  CHECK(GridSize{65536, 65536}.count() == 4'294'967'296);
}

TEST_CASE("r3 family 1: a layout grid whose int product wraps to the ranks is refused", "[reliability][r3]") {
  REQUIRE_THROWS_AS(kernbench::parse_config(two_pes("    grid: {w: 1282, h: 6700417}\n"), "g.yaml"), ConfigError);
  REQUIRE_THROWS_WITH(
      kernbench::parse_config(two_pes("    grid: {w: 1282, h: 6700417}\n"), "g.yaml"),
      Contains("g.yaml") && Contains("graph.layout.grid") && Contains("8589934594 cells") && Contains("2 ranks"));
  // 641 x 6700417 packages = 2^32 + 1 wrapped to 1: 1 x 1 x 2 PEs then matched.
  REQUIRE_THROWS_WITH(
      kernbench::parse_config(
          two_pes("    packages: {w: 641, h: 6700417}\n    groups: {w: 1, h: 1}\n    pes_per_group: 2\n"), "h.yaml"),
      Contains("graph.layout.pes_per_group") && Contains("4294967297 packages") && Contains("= 8589934594"));
  CHECK_NOTHROW(kernbench::parse_config(two_pes("    grid: {w: 2, h: 1}\n"), "ok.yaml"));
}

TEST_CASE("r3 family 13: hierarchy messages give the exact product", "[reliability][r3]") {
  REQUIRE_THROWS_WITH(
      kernbench::parse_config(
          two_pes("    packages: {w: 65536, h: 65536}\n    groups: {w: 1, h: 1}\n    pes_per_group: 2\n"), "p.yaml"),
      Contains("65536x65536 = 4294967296 packages") && !Contains(" 0 packages"));
}

TEST_CASE("r3 family 1: a hierarchy product past 2^127 is refused and not overflowed", "[reliability][r3]") {
  // (2^31-1)^4 packages x groups is about 2^124; times 2^31-1 PEs per group it is past 2^127 (a fuzz_config
  // finding under UBSan: the 128-bit product overflowed).
  REQUIRE_THROWS_WITH(kernbench::parse_config(two_pes("    packages: {w: 2147483647, h: 2147483647}\n"
                                                      "    groups: {w: 2147483647, h: 2147483647}\n"
                                                      "    pes_per_group: 2147483647\n"),
                                              "o.yaml"),
                      Contains("o.yaml") && Contains("graph.layout.pes_per_group") && Contains("more than 2^127"));
  // A negative count prints its sign, not a wrapped magnitude.
  REQUIRE_THROWS_WITH(
      kernbench::parse_config(two_pes("    packages: {w: 1, h: 1}\n    groups: {w: 1, h: 1}\n    pes_per_group: -3\n"),
                              "n.yaml"),
      Contains("graph.layout") && !Contains("more than 2^127"));
}

TEST_CASE("r3 family 1: a collective grid whose int product wraps to the ranks is refused", "[reliability][r3][ccl]") {
  System s(program_config(2, 1));  // 16 PEs
  ccl::CollectiveSpec spec;
  spec.collective = ccl::Collective::AllReduce;
  spec.algorithm = "torus2d";
  spec.bytes_per_pe = 4096;
  spec.grid_w = 272;  // 272 x 15790321 = 2^32 + 16
  spec.grid_h = 15790321;
  REQUIRE_THROWS_AS(ccl::run_collective(s, spec), UsageError);
  REQUIRE_THROWS_WITH(ccl::run_collective(s, spec),
                      Contains("grid=(272, 15790321)") && Contains("4294967312 cells") && Contains("16 ranks"));
  spec.grid_w = 4;
  spec.grid_h = 4;
  CHECK(ccl::run_collective(s, spec).latency > 0);
}

TEST_CASE("r3 family 2: a GEMM past 2^60 multiply-adds is refused before the tile search", "[reliability][r3][gemm]") {
  System s(program_config(1, 1));
  kernels::GemmSpec g;
  g.m = std::int64_t{1} << 40;
  g.n = 4096;
  g.k = 4096;
  g.pes = {s.machine().pe(0, 0, 0)};
  REQUIRE_THROWS_AS(kernels::plan_gemm(s, g), ConfigError);
  REQUIRE_THROWS_WITH(kernels::plan_gemm(s, g), Contains("M x N x K = 1099511627776 x 4096 x 4096") &&
                                                    Contains("18446744073709551616 multiply-adds") &&
                                                    Contains("at most 2^60"));
}

TEST_CASE("r3 family 5: the loader refuses buffers the packet fabric would", "[reliability][r3][buffer]") {
  const std::string base = std::string(kTinySystem) + "fabric: {model: packet, chunk: 4 KiB, flit: 64 B}\n";
  for (const char* b : {"63 B", "64 B", "1 flit", "1 KiB"}) {
    const std::vector<kernbench::config::Override> set{{"links.noc.buffer", b}};
    INFO(b);
    REQUIRE_THROWS_AS(kernbench::parse_config(base, "b.yaml", set), ConfigError);
    REQUIRE_THROWS_WITH(kernbench::parse_config(base, "b.yaml", set),
                        Contains("links.noc.buffer") && Contains("fewer than one chunk"));
  }
  CHECK_NOTHROW(kernbench::parse_config(base, "b.yaml", {{"links.noc.buffer", "4 KiB"}}));
  // The flow model has no buffers: nothing to refuse.
  CHECK_NOTHROW(kernbench::parse_config(std::string(kTinySystem) + "fabric: {model: flow}\n", "f.yaml",
                                        {{"links.noc.buffer", "63 B"}}));
}

TEST_CASE("r3 family 9: a bandwidth is exact and not rounded to the nearest B/s", "[reliability][r3][config]") {
  REQUIRE_THROWS_WITH(
      kernbench::parse_config(kTinySystem, "w.yaml", {{"links.pcie.bandwidth", "0.5 B/s"}}),
      Contains("links.pcie.bandwidth") && Contains("\"0.5 B/s\"") && Contains("would be read as 1 B/s"));
  CHECK_NOTHROW(kernbench::parse_config(kTinySystem, "w.yaml", {{"links.pcie.bandwidth", "13.41 GiB/s"}}));
}

TEST_CASE("r3 family 9: pieces beyond the bytes are refused", "[reliability][r3][ccl]") {
  System s(program_config(1, 1));
  ccl::CollectiveSpec spec;
  spec.collective = ccl::Collective::AllReduce;
  spec.algorithm = "ring";
  spec.bytes_per_pe = 16;
  spec.pieces = 1000;
  REQUIRE_THROWS_WITH(ccl::run_collective(s, spec),
                      Contains("pieces = 1000") && Contains("16 B") && Contains("pieces <= 16"));
  spec.pieces = 16;
  CHECK(ccl::run_collective(s, spec).latency > 0);
  spec.bytes_per_pe = 1;  // a barrier: the default 4 pieces always pass
  spec.pieces = 4;
  CHECK(ccl::run_collective(s, spec).latency > 0);
}

TEST_CASE("r3 family 11: a completion poll or a jiffy that implies too many events is refused",
          "[reliability][r3][vgpu]") {
  REQUIRE_THROWS_WITH(kernbench::load_config(vgpu_yaml(), {{"vgpu.launch.completion_poll", "1 ps"}}),
                      Contains("vgpu.launch.completion_poll") && Contains("5000000000000 times per launch") &&
                          Contains("at most 10000000"));
  REQUIRE_THROWS_WITH(kernbench::load_config(vgpu_yaml(), {{"vgpu.jiffy", "1 ps"}}),
                      Contains("vgpu.jiffy") && Contains("at least 1 us"));
  CHECK_NOTHROW(kernbench::load_config(vgpu_yaml(), {{"vgpu.launch.completion_poll", "1 us"}, {"vgpu.jiffy", "1 us"}}));
}

TEST_CASE("r3 family 11: shortest-path searches are shared one per source", "[reliability][r3][routing]") {
  // A star of 2000 leaves: every leaf routes through the hub's one search.
  Config c;
  c.source = "star";
  ExplicitGraphConfig g;
  g.nodes.push_back(ExplicitNode{"hub", NodeKind::Switch, {1 * kNanosecond, true}});
  const int leaves = 2000;
  for (int i = 0; i < leaves; ++i) {
    g.nodes.push_back(ExplicitNode{leaf_name(i), NodeKind::Pe, {1 * kNanosecond, true}});
    g.edges.push_back(ExplicitEdge{leaf_name(i), "hub", "link", link(100, kNanosecond)});
  }
  c.graph = g;
  const Machine m(c);
  Router r(m);
  for (int i = 0; i < leaves; ++i) {
    const Route& route = r.route(m.at(leaf_name(i)), m.at(leaf_name((i + 7) % leaves)));
    REQUIRE(route.hops() == 2);
  }
  CHECK(r.searches() == 1);
  r.route(m.at("hub"), m.at("p3"));
  CHECK(r.searches() == 1);
}

TEST_CASE("r3 family 11: a leaf's paths keep the tie order", "[reliability][r3][routing]") {
  // l has two equal channels to h; h reaches z over x and over y: four paths, channel first, then x before y.
  Config c;
  c.source = "leaf";
  ExplicitGraphConfig g;
  for (const char* n : {"l", "h", "x", "y", "z"}) g.nodes.push_back(ExplicitNode{n, NodeKind::Router, {0, true}});
  for (const auto& [a, b] : std::vector<std::pair<const char*, const char*>>{
           {"l", "h"}, {"l", "h"}, {"h", "y"}, {"h", "x"}, {"y", "z"}, {"x", "z"}})
    g.edges.push_back(ExplicitEdge{a, b, "link", link(100, kNanosecond)});
  c.graph = g;
  const Machine m(c);
  Router r(m);
  const std::vector<Route> paths = r.equal_cost_paths(m.at("l"), m.at("z"), 16);
  REQUIRE(paths.size() == 4);
  std::vector<std::string> seen;
  for (const Route& p : paths) {
    std::string s;
    for (NodeId n : p.nodes) s += m.node(n).name;
    seen.push_back(s + ":" + std::to_string(p.channels.front()));
  }
  const ChannelId c0 = paths[0].channels.front(), c1 = paths[2].channels.front();
  CHECK(c0 < c1);
  CHECK(seen == std::vector<std::string>{"lhxz:" + std::to_string(c0), "lhyz:" + std::to_string(c0),
                                         "lhxz:" + std::to_string(c1), "lhyz:" + std::to_string(c1)});
  // The cap keeps the first ones of that order.
  CHECK(r.equal_cost_paths(m.at("l"), m.at("z"), 3).size() == 3);
  CHECK(r.equal_cost_paths(m.at("l"), m.at("h"), 16).size() == 2);
}
