// test_link_classes.cpp -- links.<class> on explicit graphs (topology/config/link_classes.cpp): a class's values
// fill its edges, an edge's own value wins over the file's class, a --set of the class wins over every edge;
// errors name the file and the YAML path; the cluster generator carries a box's classes; the schema lists the
// <class> placeholder while a system config still refuses a class of its own naming.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernbench.hpp"
#include "machines.hpp"
#include "sim/errors.hpp"
#include "topology/config/loader.hpp"

using namespace kernbench::topology;
using Catch::Contains;
using kernbench::ConfigError;
namespace fs = std::filesystem;

namespace {

// Three nvlink edges (e0 states its own bandwidth, e1 its own latency, e2 nothing), one pcie edge stating all.
const std::string kGraph = R"(links:
  nvlink: {bandwidth: 25 GB/s, latency: 100 ns, connections: 2}
graph:
  nodes:
    - {name: g0, kind: pe, overhead: 0 ns}
    - {name: g1, kind: pe, overhead: 0 ns}
    - {name: sw, kind: switch, overhead: 100 ns}
    - {name: px, kind: switch, overhead: 150 ns}
  edges:
    - {a: g0, b: sw, class: nvlink, bandwidth: 50 GB/s}
    - {a: g1, b: sw, class: nvlink, latency: 300 ns}
    - {a: g1, b: px, class: nvlink, connections: 7}
    - {a: g0, b: px, class: pcie, bandwidth: 64 GB/s, latency: 250 ns}
fabric: {model: flow}
)";

Config parse(const std::string& text, const std::vector<Override>& overrides = {}) {
  return kernbench::parse_config(text, "test.yaml", overrides);
}

std::string with(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

double gbps(const ExplicitEdge& e) { return static_cast<double>(e.link.bandwidth.bytes_per_s) / 1e9; }

}  // namespace

TEST_CASE("links.<class>: a class fills what an edge leaves out; the edge's own value wins (rule 2)",
          "[config][links]") {
  const Config c = parse(kGraph);
  REQUIRE(c.graph);
  const auto& e = c.graph->edges;
  REQUIRE(e.size() == 4);
  CHECK(gbps(e[0]) == 50);  // its own bandwidth
  CHECK(e[0].link.latency == 100'000);
  CHECK(e[0].link.connections == 2);
  CHECK(gbps(e[1]) == 25);
  CHECK(e[1].link.latency == 300'000);  // its own latency
  CHECK(gbps(e[2]) == 25);
  CHECK(e[2].link.latency == 100'000);
  CHECK(e[2].link.connections == 7);  // its own lanes
  CHECK(gbps(e[3]) == 64);            // another class: untouched
  CHECK(e[3].link.connections == 1);
  // The same graph with every value on its edges loads to the same links.
  const Config flat = parse(R"(graph:
  nodes:
    - {name: g0, kind: pe, overhead: 0 ns}
    - {name: g1, kind: pe, overhead: 0 ns}
    - {name: sw, kind: switch, overhead: 100 ns}
    - {name: px, kind: switch, overhead: 150 ns}
  edges:
    - {a: g0, b: sw, class: nvlink, bandwidth: 50 GB/s, latency: 100 ns, connections: 2}
    - {a: g1, b: sw, class: nvlink, bandwidth: 25 GB/s, latency: 300 ns, connections: 2}
    - {a: g1, b: px, class: nvlink, bandwidth: 25 GB/s, latency: 100 ns, connections: 7}
    - {a: g0, b: px, class: pcie, bandwidth: 64 GB/s, latency: 250 ns}
fabric: {model: flow}
)");
  for (std::size_t i = 0; i < e.size(); ++i) {
    CHECK(e[i].link.bandwidth.bytes_per_s == flat.graph->edges[i].link.bandwidth.bytes_per_s);
    CHECK(e[i].link.latency == flat.graph->edges[i].link.latency);
    CHECK(e[i].link.connections == flat.graph->edges[i].link.connections);
  }
}

TEST_CASE("links.<class>: a --set of the class overrides every edge of it, also those stating their own (rule 1)",
          "[config][links]") {
  const Config c = parse(kGraph, {{"links.nvlink.bandwidth", "40 GB/s"}, {"links.nvlink.latency", "1 us"}});
  const auto& e = c.graph->edges;
  for (int i : {0, 1, 2}) {
    CHECK(gbps(e[i]) == 40);
    CHECK(e[i].link.latency == 1'000'000);
  }
  CHECK(e[2].link.connections == 7);  // not set: the edge's own value still wins
  CHECK(gbps(e[3]) == 64);            // the pcie edge is not of the class
  // A --set of a class the file has no links: for, and of a key the class does not give.
  const Config d =
      parse(with(kGraph, "  nvlink: {bandwidth: 25 GB/s, latency: 100 ns, connections: 2}\n", ""),
            {{"links.pcie.connections", "3"}, {"links.nvlink.bandwidth", "10 GB/s"}, {"links.nvlink.latency", "2 ns"}});
  CHECK(d.graph->edges[3].link.connections == 3);
  CHECK(gbps(d.graph->edges[0]) == 10);
  CHECK(d.graph->edges[1].link.latency == 2'000);  // its own 300 ns loses to the --set
  CHECK(d.graph->edges[2].link.connections == 7);
  // Overrides apply in order: an edge's own --set after the class's wins, before it loses.
  const Config later = parse(kGraph, {{"links.nvlink.bandwidth", "40 GB/s"}, {"graph.edges.1.bandwidth", "5 GB/s"}});
  CHECK(gbps(later.graph->edges[1]) == 5);
  CHECK(gbps(later.graph->edges[0]) == 40);
  const Config earlier = parse(kGraph, {{"graph.edges.1.bandwidth", "5 GB/s"}, {"links.nvlink.bandwidth", "40 GB/s"}});
  CHECK(gbps(earlier.graph->edges[1]) == 40);
}

TEST_CASE("links.<class>: errors name the file and the YAML path", "[config][links]") {
  // A class no edge has: the graph's classes are listed.
  REQUIRE_THROWS_WITH(parse(with(kGraph, "  nvlink:", "  nvlinks: {latency: 1 ns}\n  nvlink:")),
                      Contains("test.yaml: links.nvlinks: no edge of class \"nvlinks\" in graph.edges") &&
                          Contains("its classes: nvlink, pcie"));
  REQUIRE_THROWS_WITH(parse(kGraph, {{"links.ib.bandwidth", "50 GB/s"}}),
                      Contains("test.yaml: links.ib (set by --set links.ib.bandwidth=50 GB/s)") &&
                          Contains("no edge of class \"ib\"") && Contains("its classes: nvlink, pcie"));
  // An unknown key of a class, from the file and from --set.
  REQUIRE_THROWS_WITH(parse(with(kGraph, "connections: 2}", "conections: 2}")),
                      Contains("test.yaml: links.nvlink.conections: unknown key") && Contains("connections"));
  REQUIRE_THROWS_WITH(parse(kGraph, {{"links.nvlink.bandwith", "1 GB/s"}}),
                      Contains("links.nvlink.bandwith") && Contains("unknown key"));
  // Values are typed and bounded at the class's path.
  REQUIRE_THROWS_WITH(parse(kGraph, {{"links.nvlink.bandwidth", "25"}}),
                      Contains("test.yaml: links.nvlink.bandwidth") && Contains("expected a bandwidth"));
  REQUIRE_THROWS_WITH(parse(with(kGraph, "latency: 100 ns, connections: 2}", "latency: -1 ns}")),
                      Contains("test.yaml: links.nvlink.latency: expected a time >= 0"));
  // Shapes: links must be a map of maps.
  REQUIRE_THROWS_WITH(
      parse(with(kGraph, "  nvlink: {bandwidth: 25 GB/s, latency: 100 ns, connections: 2}\n", "  - nvlink\n")),
      Contains("test.yaml: links: expected a map of link classes"));
  REQUIRE_THROWS_WITH(
      parse(with(kGraph, "  nvlink: {bandwidth: 25 GB/s, latency: 100 ns, connections: 2}", "  nvlink: 25 GB/s")),
      Contains("test.yaml: links.nvlink: expected a map"));
  // An edge with neither its own value nor its class's: the edge's key is missing, and the message says where else.
  REQUIRE_THROWS_WITH(
      parse(with(kGraph, "bandwidth: 64 GB/s, latency: 250 ns}", "bandwidth: 64 GB/s}")),
      Contains("test.yaml: graph.edges[3].latency: required key is missing") && Contains("links.<class>.latency"));
}

TEST_CASE("links on a system config: the generator's seven classes, no other (unchanged)", "[config][links]") {
  const std::string sys = kernbench::testing::kOnePeSystemYaml;
  CHECK(parse(sys, {{"links.pcie.bandwidth", "3 GB/s"}}).system->links.pcie.bandwidth.bytes_per_s == 3'000'000'000);
  REQUIRE_THROWS_WITH(
      parse(sys, {{"links.nvlink.bandwidth", "3 GB/s"}}),
      Contains("links.nvlink") && Contains("unknown key; known keys of links: pe, noc, hbm") && !Contains("<class>"));
  // The placeholder is no key of a file.
  REQUIRE_THROWS_WITH(parse(sys + "  <class>: {bandwidth: 1 GB/s}\n"), Contains("links.<class>: unknown key"));
  REQUIRE_THROWS_WITH(parse(with(sys, "  pcie: {bandwidth: 1 GB/s, latency: 1 ns}\n", "")),
                      Contains("test.yaml: links.pcie: required key is missing"));
}

TEST_CASE("the schema lists links.<class> with the link keys, none required", "[config][links]") {
  const auto j = nlohmann::json::parse(kernbench::config_schema_json());
  const auto& links = j["keys"]["links"]["keys"];
  REQUIRE(links.contains("<class>"));
  for (const char* k : {"bandwidth", "latency", "connections", "buffer", "vcs"}) {
    REQUIRE(links["<class>"]["keys"].contains(k));
    CHECK(links["<class>"]["keys"][k]["required"] == false);
  }
  CHECK(links["pcie"]["keys"]["bandwidth"]["required"] == true);  // a system's class: as before
  CHECK(links["<class>"]["keys"]["bandwidth"]["type"] == "bandwidth");
}

TEST_CASE("cluster: a box's links.<class> reach every box's edges; the cluster's --set overrides them",
          "[config][links][cluster]") {
  const fs::path root = fs::temp_directory_path() / ("kb_links_" + std::to_string(::getpid()));
  fs::create_directories(root);
  std::ofstream(root / "box.yaml") << R"(links:
  nvlink: {bandwidth: 25 GB/s, latency: 100 ns}
  pcie: {bandwidth: 63.015 GB/s, latency: 200 ns}
graph:
  nodes:
    - {name: g0, kind: pe, overhead: 0 ns}
    - {name: g1, kind: pe, overhead: 0 ns}
    - {name: sw, kind: switch, overhead: 100 ns}
    - {name: px, kind: switch, overhead: 150 ns}
  edges:
    - {a: g0, b: sw, class: nvlink}
    - {a: g1, b: sw, class: nvlink}
    - {a: g0, b: px, class: pcie}
  layout: {ranks: [g1, g0]}
)";
  const fs::path f = root / "c.yaml";
  std::ofstream(f) << "cluster: {nodes: 2, box: box.yaml, fabric: {kind: fat-tree, radix: 4}}\n";
  const Config c = kernbench::load_config(f.string());
  const Config s = kernbench::load_config(f.string(), {{"links.nvlink.bandwidth", "50 GB/s"}});
  const Config p = kernbench::load_config(f.string(), {{"links.pcie.bandwidth", "1 GB/s"}});
  // The generated links are not the box's classes: they keep the NIC catalog's figures System.cluster() reports.
  REQUIRE_THROWS_WITH(kernbench::load_config(f.string(), {{"links.ib.bandwidth", "1 GB/s"}}),
                      Contains("links.ib (set by --set links.ib.bandwidth=1 GB/s): no edge of class \"ib\" in "
                               "the box's graph.edges (box.yaml; the generated NIC and ib links take cluster.nic") &&
                          Contains("its classes: nvlink, pcie"));
  fs::remove_all(root);
  for (std::size_t i = 0; i < c.graph->edges.size(); ++i) {
    const ExplicitEdge& e = c.graph->edges[i];
    if (e.link_class != "pcie") continue;
    const bool nic = e.a.find("nic") != std::string::npos;  // n<k>.nic<j>: a generated NIC's host link
    CHECK(p.graph->edges[i].link.bandwidth.bytes_per_s == (nic ? e.link.bandwidth.bytes_per_s : 1'000'000'000));
  }
  int nvlinks = 0;
  bool nic_latency = false;
  for (std::size_t i = 0; i < c.graph->edges.size(); ++i) {
    const ExplicitEdge& e = c.graph->edges[i];
    if (e.link_class == "nvlink") {
      ++nvlinks;
      CHECK(gbps(e) == 25);
      CHECK(e.link.latency == 100'000);
      CHECK(gbps(s.graph->edges[i]) == 50);
    }
    // The NIC under the PCIe switch takes the box's pcie latency, now its class's.
    if (e.a == "n1.nic1" && e.b == "n1.px") nic_latency = e.link.latency == 200'000;
  }
  CHECK(nvlinks == 4);
  CHECK(nic_latency);
}
