// test_config.cpp -- the strict YAML loader: one REQUIRE_THROWS per bad input,
// each checking that the message names the file and the YAML path, plus the
// unit parsers, includes, overrides, the schema export and two full configs.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kernbench.hpp"
#include "kernels/gpu/config.hpp"
#include "platforms/k200/config_section.hpp"
#include "platforms/vgpu/config_section.hpp"
#include "runtime/config_section.hpp"
#include "sim/errors.hpp"
#include "topology/config/loader.hpp"

using namespace kernbench::topology;
using namespace kernbench::runtime;  // the pe:, energy: and pe.hbm sections
using Catch::Contains;
using kernbench::ConfigError;
namespace fs = std::filesystem;

namespace {

// Line numbers matter to some tests below: `system:` is line 1.
const std::string kSystem = R"(system:
  name: default
  sips: {w: 2, h: 2, topology: torus}
  cubes: {w: 4, h: 4}
  routers: {w: 4, h: 2}
  pes_per_cube: 8
  pcie_attach: {cube: 3, router: r1c2}
nodes:
  pe:       {overhead: 1 ns}
  router:   {overhead: 1 ns}
  hbm_ctrl: {overhead: 10 ns}
  ucie:     {overhead: 3 ns}
  pcie_ep:  {overhead: 60 ns, flit_aware: false}
links:
  pe:        {bandwidth: 512 GB/s, latency: 0.5 ns}
  noc:       {bandwidth: 256 GB/s, latency: 0.5 ns}
  hbm:       {bandwidth: 256 GB/s, latency: 1 ns}
  ucie_port: {bandwidth: 512 GB/s, latency: 0.5 ns}
  ucie:      {bandwidth: 128 GB/s, latency: 2 ns, connections: 4}
  pcie_port: {bandwidth: 256 GB/s, latency: 0.5 ns}
  pcie:      {bandwidth: 64 GB/s, latency: 150 ns}
fabric:
  model: packet
  chunk: 8 KiB
  flit: 64 B
  request: 128 B
  stripe: 2 KiB
)";

const std::string kGraph = R"(graph:
  nodes:
    - {name: host, kind: host, overhead: 0 ns, flit_aware: false}
    - {name: rc, kind: switch, overhead: 20 ns}
    - {name: ep, kind: pcie_ep, overhead: 60 ns, flit_aware: false}
    - {name: die0, kind: engine, overhead: 1.5 us}
  edges:
    - {a: host, b: rc, class: pcie, bandwidth: 16 GB/s, latency: 100 ns, connections: 1}
    - {a: rc, b: ep, class: pcie, bandwidth: 25 Gb/s, latency: 50 ns, connections: 2}
    - {a: ep, b: die0, bandwidth: 64 GB/s, latency: 1 ns}
fabric: {model: flow}
)";

/// `text` with `from` (which must occur) replaced by `to`.
std::string with(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

Config parse(const std::string& text, const std::vector<Override>& overrides = {}) {
  return kernbench::parse_config(text, "test.yaml", overrides);
}

/// A fresh folder for include tests, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("kernbench_config_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = path / name;
    std::ofstream(p) << text;
    return p.string();
  }
};

}  // namespace

// ---- full configs ---------------------------------------------------------------

TEST_CASE("a full system config parses into the expected values", "[config]") {
  const Config c = parse(kSystem);
  CHECK(c.source == "test.yaml");
  REQUIRE(c.system);
  CHECK_FALSE(c.graph);
  const SystemConfig& s = *c.system;
  CHECK(s.name == "default");
  CHECK(s.sips.w == 2);
  CHECK(s.sips.h == 2);
  CHECK(s.sip_topology == SipTopology::Torus);
  CHECK(s.cubes.w == 4);
  CHECK(s.cubes.h == 4);
  CHECK(s.routers.w == 4);
  CHECK(s.routers.h == 2);
  CHECK(s.pes_per_cube == 8);
  CHECK(s.pcie_attach.cube == 3);
  CHECK(s.pcie_attach.row == 1);
  CHECK(s.pcie_attach.col == 2);
  CHECK(s.nodes.pe.overhead == 1'000);
  CHECK(s.nodes.pe.flit_aware);
  CHECK(s.nodes.hbm_ctrl.overhead == 10'000);
  CHECK(s.nodes.ucie.overhead == 3'000);
  CHECK(s.nodes.pcie_ep.overhead == 60'000);
  CHECK_FALSE(s.nodes.pcie_ep.flit_aware);
  CHECK(s.links.pe.bandwidth.bytes_per_s == 512'000'000'000);
  CHECK(s.links.pe.latency == 500);
  CHECK(s.links.pe.connections == 1);
  CHECK(s.links.noc.bandwidth.bytes_per_s == 256'000'000'000);
  CHECK(s.links.hbm.latency == 1'000);
  CHECK(s.links.ucie_port.bandwidth.bytes_per_s == 512'000'000'000);
  CHECK(s.links.ucie.bandwidth.bytes_per_s == 128'000'000'000);
  CHECK(s.links.ucie.latency == 2'000);
  CHECK(s.links.ucie.connections == 4);
  CHECK(s.links.pcie_port.latency == 500);
  CHECK(s.links.pcie.bandwidth.bytes_per_s == 64'000'000'000);
  CHECK(s.links.pcie.latency == 150'000);
  CHECK(c.fabric.model == FabricModel::Packet);
  CHECK(c.fabric.chunk == 8192);
  CHECK(c.fabric.flit == 64);
  CHECK(c.fabric.request == 128);
  CHECK(c.fabric.stripe == 2048);
}

TEST_CASE("optional system keys take the struct defaults", "[config]") {
  std::string text = with(kSystem, "  name: default\n", "");
  text = with(text, "  pcie_attach: {cube: 3, router: r1c2}\n", "");
  text = with(text, "  pcie_ep:  {overhead: 60 ns, flit_aware: false}", "  pcie_ep:  {overhead: 60 ns}");
  text = text.substr(0, text.find("fabric:"));
  const Config c = parse(text);
  const SystemConfig defaults;
  CHECK(c.system->name == defaults.name);
  CHECK(c.system->pcie_attach.cube == 0);
  CHECK(c.system->pcie_attach.row == 0);
  CHECK(c.system->pcie_attach.col == 0);
  CHECK_FALSE(c.system->nodes.pcie_ep.flit_aware);  // pcie_ep stores and forwards by default
  CHECK(c.system->nodes.router.flit_aware);
  const FabricConfig f;
  CHECK(c.fabric.model == f.model);
  CHECK(c.fabric.chunk == f.chunk);
  CHECK(c.fabric.stripe == f.stripe);
}

TEST_CASE("a full graph config parses into the expected values", "[config]") {
  const Config c = parse(kGraph);
  CHECK_FALSE(c.system);
  REQUIRE(c.graph);
  const auto& g = *c.graph;
  REQUIRE(g.nodes.size() == 4);
  CHECK(g.nodes[0].name == "host");
  CHECK(g.nodes[0].kind == NodeKind::Host);
  CHECK(g.nodes[0].params.overhead == 0);
  CHECK_FALSE(g.nodes[0].params.flit_aware);
  CHECK(g.nodes[1].kind == NodeKind::Switch);
  CHECK(g.nodes[1].params.overhead == 20'000);
  CHECK(g.nodes[1].params.flit_aware);
  CHECK(g.nodes[2].kind == NodeKind::PcieEp);
  CHECK(g.nodes[3].kind == NodeKind::Engine);
  CHECK(g.nodes[3].params.overhead == 1'500'000);
  REQUIRE(g.edges.size() == 3);
  CHECK(g.edges[0].a == "host");
  CHECK(g.edges[0].b == "rc");
  CHECK(g.edges[0].link_class == "pcie");
  CHECK(g.edges[0].link.bandwidth.bytes_per_s == 16'000'000'000);
  CHECK(g.edges[0].link.latency == 100'000);
  CHECK(g.edges[1].link.bandwidth.bytes_per_s == 3'125'000'000);
  CHECK(g.edges[1].link.connections == 2);
  CHECK(g.edges[2].link_class == "link");
  CHECK(g.edges[2].link.connections == 1);
  CHECK(c.fabric.model == FabricModel::Flow);
}

// ---- structure errors -----------------------------------------------------------

TEST_CASE("unknown keys are errors that list the known keys", "[config]") {
  REQUIRE_THROWS_WITH(parse(kSystem + "fabrik: {}\n"),
                      Contains("test.yaml: fabrik: unknown key; known keys of the top level: include, system") &&
                          Contains("did you mean \"fabric\"?") && Contains("(line 28)"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "  pes_per_cube: 8\n", "  pes_per_cube: 8\n  colour: red\n")),
                      Contains("test.yaml: system.colour: unknown key; known keys of system: name, sips, cubes, "
                               "routers, pes_per_cube, pcie_attach") &&
                          Contains("(line 7)"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "latency: 0.5 ns}", "latency: 0.5 ns, lanes: 2}")),
                      Contains("test.yaml: links.pe.lanes: unknown key; known keys of links.pe: bandwidth, latency, "
                               "connections"));
  REQUIRE_THROWS_WITH(parse(with(kGraph, "kind: switch,", "kind: switch, speed: 3,")),
                      Contains("test.yaml: graph.nodes[1].speed: unknown key"));
}

TEST_CASE("wrong YAML node types are ConfigErrors, never YAML exceptions", "[config]") {
  REQUIRE_THROWS_WITH(parse(with(kSystem, "{w: 2, h: 2, topology: torus}", "3")),
                      Contains("test.yaml: system.sips: expected a map (keys: w, h, count, topology), got \"3\"") &&
                          Contains("(line 3)"));
  REQUIRE_THROWS_WITH(parse("graph:\n  nodes: [{name: a, kind: host, overhead: 0 ns}]\n  edges:\n"
                            "    e0: {a: a, b: a, bandwidth: 1 GB/s, latency: 1 ns}\n"),
                      Contains("test.yaml: graph.edges: expected a list (- {a, b, class, bandwidth, latency, "
                               "connections, buffer, vcs}), got a map (line 4)"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "pes_per_cube: 8", "pes_per_cube: [8]")),
                      Contains("test.yaml: system.pes_per_cube: expected a positive integer, got a list"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "name: default", "name: {a: 1}")),
                      Contains("test.yaml: system.name: expected a string, got a map"));
  REQUIRE_THROWS_WITH(
      parse(with(kSystem, "latency: 150 ns", "latency: [150 ns]")),
      Contains("test.yaml: links.pcie.latency: expected a time like \"5 ns\"") && Contains("got a list"));
  REQUIRE_THROWS_WITH(parse("- system\n- graph\n"),
                      Contains("test.yaml: (top level): expected a map of sections") && Contains("got a list"));
  REQUIRE_THROWS_WITH(parse(with(kGraph, "- {name: rc,", "- [name, rc]\n    - {name: rc2,")),
                      Contains("test.yaml: graph.nodes[1]: expected a map"));
}

TEST_CASE("missing required keys name the key", "[config]") {
  REQUIRE_THROWS_WITH(parse(with(kSystem, "{bandwidth: 512 GB/s, latency: 0.5 ns}", "{latency: 0.5 ns}")),
                      Contains("test.yaml: links.pe.bandwidth: required key is missing") && Contains("(line 15)"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "  pcie:      {bandwidth: 64 GB/s, latency: 150 ns}\n", "")),
                      Contains("test.yaml: links.pcie: required key is missing"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "  ucie:     {overhead: 3 ns}\n", "")),
                      Contains("test.yaml: nodes.ucie: required key is missing"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "{overhead: 1 ns}", "{flit_aware: true}")),
                      Contains("test.yaml: nodes.pe.overhead: required key is missing"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "  pes_per_cube: 8\n", "")),
                      Contains("test.yaml: system.pes_per_cube: required key is missing"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "{w: 2, h: 2, topology: torus}", "{w: 2, h: 2}")),
                      Contains("test.yaml: system.sips.topology: required key is missing"));
  REQUIRE_THROWS_WITH(
      parse(with(kSystem, "{w: 2, h: 2, topology: torus}", "{w: 2, topology: torus}")),
      Contains("test.yaml: system.sips.h: required key is missing") && Contains("or system.sips.count"));
  REQUIRE_THROWS_WITH(parse("fabric: {model: flow}\n"),
                      Contains("test.yaml: (top level): missing system, graph or cluster"));
  REQUIRE_THROWS_WITH(parse(""), Contains("test.yaml: (top level): missing system, graph or cluster"));
  REQUIRE_THROWS_WITH(parse(kSystem.substr(0, kSystem.find("links:"))),
                      Contains("test.yaml: links: required key is missing: a system config needs links"));
  REQUIRE_THROWS_WITH(parse(with(kGraph, "{name: rc, kind: switch,", "{name: rc,")),
                      Contains("test.yaml: graph.nodes[1].kind: required key is missing"));
}

TEST_CASE("system and graph exclude each other; nodes needs system, a graph's links name its edges' classes",
          "[config]") {
  REQUIRE_THROWS_WITH(parse(kSystem + kGraph.substr(0, kGraph.find("fabric:"))),
                      Contains("test.yaml: graph: give either system or graph, not both"));
  REQUIRE_THROWS_WITH(parse(kGraph + "nodes:\n  pe: {overhead: 1 ns}\n"),
                      Contains("test.yaml: nodes: nodes belongs to a system config") && Contains("graph.nodes"));
  REQUIRE_THROWS_WITH(
      parse(kGraph + "links:\n  pe: {latency: 1 ns}\n"),
      Contains("test.yaml: links.pe: no edge of class \"pe\" in graph.edges (its classes: pcie, link)"));
}

TEST_CASE("duplicate YAML keys and invalid YAML are refused with a line", "[config]") {
  REQUIRE_THROWS_WITH(
      parse(with(kSystem, "  pes_per_cube: 8\n", "  pes_per_cube: 8\n  pes_per_cube: 4\n")),
      Contains("test.yaml: system.pes_per_cube: duplicate key (first given on line 6)") && Contains("(line 7)"));
  REQUIRE_THROWS_WITH(parse("system: {sips: [1, 2\n"), Contains("test.yaml: invalid YAML") && Contains("line "));
  REQUIRE_THROWS_WITH(
      parse(kSystem + "---\n" + kSystem),
      Contains("test.yaml: (top level): a config file holds one YAML document, found more") && Contains("(line 28)"));
  // yaml-cpp 0.7's LoadAll would loop forever on these (jbeder/yaml-cpp#1040).
  REQUIRE_THROWS_WITH(parse(",\n"), "test.yaml: invalid YAML: unexpected \",\" (line 1, column 1)");
  REQUIRE_THROWS_WITH(parse(", " + kSystem), Contains("test.yaml: invalid YAML: unexpected \",\""));
  REQUIRE_THROWS_WITH(parse("a: 1\n---\n,\n"),
                      Contains("test.yaml: (top level): a config file holds one YAML document"));
  // Control bytes and invalid UTF-8 from the input are escaped, so messages stay printable.
  REQUIRE_THROWS_WITH(parse(kSystem + "bad\x01\xff: 1\n"), Contains("test.yaml: bad\\x01\\xff: unknown key"));
}

// ---- values ---------------------------------------------------------------------

TEST_CASE("counts must be positive integers", "[config]") {
  REQUIRE_THROWS_WITH(parse(with(kSystem, "{w: 2, h: 2, topology: torus}", "{w: two, h: 2, topology: torus}")),
                      Contains("test.yaml: system.sips.w: expected a positive integer, got \"two\" (line 3)"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "pes_per_cube: 8", "pes_per_cube: 0")),
                      Contains("test.yaml: system.pes_per_cube: expected a positive integer, got \"0\""));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "cubes: {w: 4, h: 4}", "cubes: {w: 4, h: -1}")),
                      Contains("test.yaml: system.cubes.h: expected a positive integer, got \"-1\""));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "cubes: {w: 4, h: 4}", "cubes: {w: 2.5, h: 4}")),
                      Contains("test.yaml: system.cubes.w: expected a positive integer, got \"2.5\""));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "cubes: {w: 4, h: 4}", "cubes: {w: 99999999999, h: 4}")),
                      Contains("test.yaml: system.cubes.w: expected a positive integer of at most 2147483647"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "connections: 4", "connections: 0")),
                      Contains("test.yaml: links.ucie.connections: expected a positive integer, got \"0\""));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "sips: {w: 2, h: 2,", "sips: {w: 50000, h: 50000,")),
                      Contains("test.yaml: system: the machine is too large"));
}

TEST_CASE("bandwidths are > 0, latencies and overheads >= 0", "[config]") {
  const std::string hbm = "{bandwidth: 256 GB/s, latency: 1 ns}";
  REQUIRE_THROWS_WITH(parse(with(kSystem, hbm, "{bandwidth: 0 GB/s, latency: 1 ns}")),
                      Contains("test.yaml: links.hbm.bandwidth: expected a bandwidth > 0, got \"0 GB/s\" (line 17)"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, hbm, "{bandwidth: -5 GB/s, latency: 1 ns}")),
                      Contains("test.yaml: links.hbm.bandwidth: expected a bandwidth > 0, got \"-5 GB/s\""));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "latency: 150 ns", "latency: -1 ns")),
                      Contains("test.yaml: links.pcie.latency: expected a time >= 0, got \"-1 ns\""));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "{overhead: 10 ns}", "{overhead: -0.5 ns}")),
                      Contains("test.yaml: nodes.hbm_ctrl.overhead: expected a time >= 0, got \"-0.5 ns\""));
  REQUIRE_THROWS_WITH(parse(with(kGraph, "bandwidth: 64 GB/s", "bandwidth: 0 B/s")),
                      Contains("test.yaml: graph.edges[2].bandwidth: expected a bandwidth > 0"));
  CHECK(parse(with(kSystem, "latency: 150 ns", "latency: 0 ns")).system->links.pcie.latency == 0);
}

TEST_CASE("quantities need a known unit", "[config]") {
  REQUIRE_THROWS_WITH(parse(with(kSystem, "latency: 150 ns", "latency: 5")),
                      Contains("test.yaml: links.pcie.latency: expected a time like \"5 ns\" (units: ps, ns, us, ms, "
                               "s), got \"5\""));
  REQUIRE_THROWS_WITH(
      parse(with(kSystem, "latency: 150 ns", "latency: 5 parsecs")),
      Contains("test.yaml: links.pcie.latency: expected a time like \"5 ns\"") && Contains("got \"5 parsecs\""));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "bandwidth: 64 GB/s", "bandwidth: 16 GT/s")),
                      Contains("test.yaml: links.pcie.bandwidth: expected a bandwidth like \"256 GB/s\"") &&
                          Contains("\"GT/s\" is a transfer rate, not a bandwidth"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "chunk: 8 KiB", "chunk: 8 kibibytes")),
                      Contains("test.yaml: fabric.chunk: expected a size like \"4 KiB\" (units: B, KB, MB, GB, KiB, "
                               "MiB, GiB), got \"8 kibibytes\""));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "flit: 64 B", "flit: 0.5 B")),
                      Contains("test.yaml: fabric.flit: \"0.5 B\" is not a whole number of bytes"));
}

TEST_CASE("every unit family parses to the right integer", "[config]") {
  // time, to the nearest ps
  CHECK(parse_time("1.5 us", "") == 1'500'000);
  CHECK(parse_time("1.5us", "") == 1'500'000);
  CHECK(parse_time("7 ps", "") == 7);
  CHECK(parse_time("0.5 ns", "") == 500);
  CHECK(parse_time("2 ms", "") == 2'000'000'000);
  CHECK(parse_time("3 s", "") == 3'000'000'000'000);
  CHECK(parse_time("0.0004 ns", "") == 0);  // 0.4 ps rounds down
  CHECK(parse_time("0.0006 ns", "") == 1);  // 0.6 ps rounds up
  CHECK(parse_time("1e3 ns", "") == 1'000'000);
  CHECK(parse_time("  0.3 ns ", "") == 300);  // exact decimal, no binary-float drift
  // bytes, integral
  CHECK(parse_bytes("4 KiB", "") == 4096);
  CHECK(parse_bytes("64 B", "") == 64);
  CHECK(parse_bytes("1.5 KiB", "") == 1536);
  CHECK(parse_bytes("0.1 KB", "") == 100);
  CHECK(parse_bytes("2 MiB", "") == 2 * 1024 * 1024);
  CHECK(parse_bytes("3 MB", "") == 3'000'000);
  CHECK(parse_bytes("1 GiB", "") == kernbench::sim::kGiB);
  CHECK(parse_bytes("16 GB", "") == 16'000'000'000);
  // bandwidth, bits divided by 8, to the nearest B/s
  CHECK(parse_bandwidth("25 Gb/s", "").bytes_per_s == 3'125'000'000);
  CHECK(parse_bandwidth("25 Gbps", "").bytes_per_s == 3'125'000'000);
  CHECK(parse_bandwidth("256 GB/s", "").bytes_per_s == 256'000'000'000);
  CHECK(parse_bandwidth("1 GiB/s", "").bytes_per_s == 1LL << 30);
  CHECK(parse_bandwidth("2 TB/s", "").bytes_per_s == 2'000'000'000'000);
  CHECK(parse_bandwidth("1 Tb/s", "").bytes_per_s == 125'000'000'000);
  // 12 b/s is 1.5 B/s: bandwidths are whole B/s within 1e-6, so it is refused, not read as 2 B/s
  CHECK_THROWS_WITH(parse_bandwidth("12 b/s", ""), Catch::Contains("would be read as 2 B/s"));
  CHECK(parse_bandwidth("13.41 GiB/s", "").bytes_per_s == 14'398'877'860);  // rounding well inside 1e-6
  CHECK(parse_bandwidth("3 MiB/s", "").bytes_per_s == 3 * 1024 * 1024);
  CHECK(parse_bandwidth("10 KB/s", "").bytes_per_s == 10'000);
  // frequency
  CHECK(parse_frequency_hz("900 MHz", "") == 9e8);
  CHECK(parse_frequency_hz("1.5 GHz", "") == 1.5e9);
  CHECK(parse_frequency_hz("32 kHz", "") == 32e3);
  CHECK(parse_frequency_hz("50 Hz", "") == 50.0);
}

TEST_CASE("unit parsers refuse what is not their kind", "[config]") {
  REQUIRE_THROWS_AS(parse_time("5", "x"), ConfigError);
  REQUIRE_THROWS_WITH(parse_time("5", "here"),
                      "here: expected a time like \"5 ns\" (units: ps, ns, us, ms, s), got \"5\"");
  REQUIRE_THROWS_WITH(parse_time("5 GB", ""), Contains("expected a time like"));
  REQUIRE_THROWS_WITH(parse_time("ns", ""), Contains("expected a time like"));
  REQUIRE_THROWS_WITH(parse_time("1e30 s", "t"), Contains("t: \"1e30 s\" is too large"));
  REQUIRE_THROWS_WITH(parse_bandwidth("16 GT/s", "b"),
                      Contains("b: expected a bandwidth like \"256 GB/s\" (units: B/s, KB/s, MB/s, GB/s, TB/s, "
                               "KiB/s, MiB/s, GiB/s, b/s, Kb/s, Mb/s, Gb/s, Tb/s, Gbps), got \"16 GT/s\""));
  REQUIRE_THROWS_WITH(parse_bandwidth("5 GB", ""), Contains("expected a bandwidth like"));
  REQUIRE_THROWS_WITH(parse_bytes("3 b", ""), Contains("expected a size like \"4 KiB\""));
  REQUIRE_THROWS_WITH(parse_bytes("1 KiB/s", ""), Contains("expected a size like"));
  REQUIRE_THROWS_WITH(parse_bytes("0.3 B", ""), Contains("is not a whole number of bytes"));
  REQUIRE_THROWS_WITH(parse_frequency_hz("900 mhz", "f"),
                      Contains("f: expected a frequency like \"900 MHz\" (units: Hz, kHz, MHz, GHz), got \"900 mhz\""));
  REQUIRE_THROWS_WITH(parse_time("nan ns", ""), Contains("expected a time like"));
  REQUIRE_THROWS_WITH(parse_time("1234567890123456789 ps", ""), Contains("too many significant digits"));
}

TEST_CASE("format_* give the largest exact unit and parse back", "[config]") {
  CHECK(format_bytes(4096) == "4 KiB");
  CHECK(format_bytes(64) == "64 B");
  CHECK(format_bytes(3000) == "3 KB");
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_time(1'500'000) == "1500 ns");
  CHECK(format_time(2'000'000) == "2 us");
  CHECK(format_time(0) == "0 ns");
  CHECK(format_bandwidth({3'125'000'000}) == "3125 MB/s");
  for (Bytes b : {Bytes{1}, Bytes{4096}, Bytes{1'000'000}, Bytes{3 << 20}})
    CHECK(parse_bytes(format_bytes(b), "") == b);
  for (Time t : {Time{1}, Time{500}, Time{150'000}, Time{7'000'000'000'000}})
    CHECK(parse_time(format_time(t), "") == t);
}

TEST_CASE("enums and booleans are checked against their names", "[config]") {
  REQUIRE_THROWS_WITH(parse(with(kSystem, "topology: torus", "topology: tori")),
                      Contains("test.yaml: system.sips.topology: expected one of ring, torus, mesh, got \"tori\"") &&
                          Contains("did you mean \"torus\"?"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "model: packet", "model: packets")),
                      Contains("test.yaml: fabric.model: expected one of packet, flow, got \"packets\""));
  REQUIRE_THROWS_WITH(parse(with(kGraph, "kind: engine", "kind: gpu")),
                      Contains("test.yaml: graph.nodes[3].kind: expected one of pe, router, hbm_ctrl, ucie, pcie_ep, "
                               "host, cpu, memory, switch, engine, gsp, nic, other, got \"gpu\""));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "flit_aware: false", "flit_aware: maybe")),
                      Contains("test.yaml: nodes.pcie_ep.flit_aware: expected true or false, got \"maybe\""));
}

// ---- the SIP grid and the PCIe attachment --------------------------------------

TEST_CASE("sips.count must be a perfect square", "[config]") {
  REQUIRE_THROWS_WITH(parse(with(kSystem, "{w: 2, h: 2, topology: torus}", "{count: 6, topology: torus}")),
                      Contains("test.yaml: system.sips.count: 6 SIPs is not a square grid: give system.sips.w and "
                               "system.sips.h (2x3 or 3x2)"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "{w: 2, h: 2, topology: torus}", "{count: 7, topology: ring}")),
                      Contains("(1x7 or 7x1)"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "{w: 2, h: 2, topology: torus}", "{count: 4, w: 2, topology: torus}")),
                      Contains("test.yaml: system.sips.count: give either count or w and h, not both"));
  const Config c = parse(with(kSystem, "{w: 2, h: 2, topology: torus}", "{count: 4, topology: mesh}"));
  CHECK(c.system->sips.w == 2);
  CHECK(c.system->sips.h == 2);
  CHECK(c.system->sip_topology == SipTopology::Mesh);
  CHECK(parse(with(kSystem, "{w: 2, h: 2, topology: torus}", "{count: 1, topology: ring}")).system->sips.count() == 1);
}

TEST_CASE("pcie_attach is checked against the cube grid and the router mesh", "[config]") {
  REQUIRE_THROWS_WITH(parse(with(kSystem, "router: r1c2", "router: r2c0")),
                      Contains("test.yaml: system.pcie_attach.router: router \"r2c0\" is outside the 4x2 router "
                               "mesh (rows r0..r1, columns c0..c3)"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "router: r1c2", "router: r0c4")), Contains("is outside the 4x2 router mesh"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "router: r1c2", "router: router3")),
                      Contains("test.yaml: system.pcie_attach.router: expected a router name like \"r0c1\" "
                               "(r<row>c<col>), got \"router3\""));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "cube: 3", "cube: 16")),
                      Contains("test.yaml: system.pcie_attach.cube: cube 16 is outside the 4x4 cube grid (cubes "
                               "0..15)"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "cube: 3", "cube: -1")),
                      Contains("test.yaml: system.pcie_attach.cube: expected a non-negative integer, got \"-1\""));
}

TEST_CASE("fabric sizes are positive and the chunk is a multiple of the flit", "[config]") {
  REQUIRE_THROWS_WITH(parse(with(kSystem, "chunk: 8 KiB", "chunk: 1000 B")),
                      Contains("test.yaml: fabric.chunk: the chunk (1 KB) must be a multiple of the flit (64 B)"));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "flit: 64 B", "flit: 0 B")),
                      Contains("test.yaml: fabric.flit: expected a size > 0, got \"0 B\""));
  REQUIRE_THROWS_WITH(parse(with(kSystem, "stripe: 2 KiB", "stripe: -64 B")),
                      Contains("test.yaml: fabric.stripe: expected a size >= 0"));
  CHECK(parse(with(kSystem, "stripe: 2 KiB", "stripe: 0 B")).fabric.stripe == 0);
}

// ---- the explicit graph ---------------------------------------------------------

TEST_CASE("graph edges must join two different existing nodes", "[config]") {
  REQUIRE_THROWS_WITH(parse(with(kGraph, "{a: rc, b: ep,", "{a: rc, b: epp,")),
                      Contains("test.yaml: graph.edges[1].b: no node named \"epp\" in graph.nodes; did you mean "
                               "\"ep\"?") &&
                          Contains("(line 9)"));
  REQUIRE_THROWS_WITH(parse(with(kGraph, "{a: ep, b: die0,", "{a: nowhere, b: die0,")),
                      Contains("test.yaml: graph.edges[2].a: no node named \"nowhere\" in graph.nodes"));
  REQUIRE_THROWS_WITH(parse(with(kGraph, "{a: ep, b: die0,", "{a: ep, b: ep,")),
                      Contains("test.yaml: graph.edges[2].b: self-loop: both ends are \"ep\""));
}

TEST_CASE("graph node names are unique and non-empty", "[config]") {
  REQUIRE_THROWS_WITH(parse(with(kGraph, "{name: die0,", "{name: rc,")),
                      Contains("test.yaml: graph.nodes[3].name: duplicate node name \"rc\" (first defined at "
                               "graph.nodes[1])"));
  REQUIRE_THROWS_WITH(parse(with(kGraph, "{name: die0,", "{name: '',")),
                      Contains("test.yaml: graph.nodes[3].name: a node name must not be empty"));
  REQUIRE_THROWS_WITH(parse("graph: {nodes: [], edges: []}\n"),
                      Contains("test.yaml: graph.nodes: expected at least one node"));
}

TEST_CASE("a disconnected graph names a node that cannot be reached", "[config]") {
  const std::string text = with(kGraph, "    - {a: ep, b: die0, bandwidth: 64 GB/s, latency: 1 ns}\n", "");
  REQUIRE_THROWS_WITH(parse(text), Contains("test.yaml: graph.nodes[3].name: the graph is disconnected: node "
                                            "\"die0\" cannot be reached from \"host\" (graph.nodes[0])"));
  CHECK(parse("graph:\n  nodes: [{name: solo, kind: other, overhead: 0 ns}]\n  edges: []\n").graph->nodes.size() == 1);
}

// ---- includes --------------------------------------------------------------------

TEST_CASE("includes merge deeply and this file's keys win", "[config]") {
  TempDir dir;
  dir.write("base.yaml", kSystem);
  fs::create_directories(dir.path / "variants");
  dir.write("fabric.yaml", "fabric: {model: flow, chunk: 1 KiB}\n");
  const std::string top = dir.write("variants/big.yaml", R"(include: [../base.yaml, ../fabric.yaml]
system:
  name: big
  sips: {w: 4}
links:
  pcie: {latency: 200 ns}
fabric: {flit: 32 B}
)");
  // ../ leaves big.yaml's folder tree: allowed only where the caller names the folder (--include-dir).
  REQUIRE_THROWS_WITH(kernbench::load_config(top), Contains("is outside the folders includes may read"));
  const Config c = kernbench::load_config(top, {}, {dir.path.string()});
  CHECK(c.source == top);
  const SystemConfig& s = *c.system;
  CHECK(s.name == "big");
  CHECK(s.sips.w == 4);
  CHECK(s.sips.h == 2);                         // from base, merged under the override
  CHECK(s.sip_topology == SipTopology::Torus);  // from base
  CHECK(s.links.pcie.latency == 200'000);
  CHECK(s.links.pcie.bandwidth.bytes_per_s == 64'000'000'000);  // from base
  CHECK(c.fabric.model == FabricModel::Flow);                   // from fabric.yaml, over base
  CHECK(c.fabric.chunk == 1024);
  CHECK(c.fabric.flit == 32);
  CHECK(c.fabric.request == 128);  // from base

  // A single string works too, and errors point into the file that holds the bad value.
  const std::string bad = dir.write("bad_base.yaml", with(kSystem, "pes_per_cube: 8", "pes_per_cube: eight"));
  const std::string uses_bad = dir.write("uses_bad.yaml", "include: bad_base.yaml\n");
  REQUIRE_THROWS_WITH(kernbench::load_config(uses_bad),
                      Contains(bad + ": system.pes_per_cube: expected a positive integer, got \"eight\" (line 6)"));
}

TEST_CASE("include cycles and missing includes are errors", "[config]") {
  TempDir dir;
  const std::string a = dir.write("a.yaml", "include: b.yaml\n" + kSystem);
  dir.write("b.yaml", "include: [c.yaml]\n");
  dir.write("c.yaml", "include: a.yaml\n");
  REQUIRE_THROWS_WITH(kernbench::load_config(a),
                      Contains("c.yaml: include: include cycle: ") &&
                          Contains("a.yaml -> " + (dir.path / "b.yaml").string() + " -> " +
                                   (dir.path / "c.yaml").string() + " -> " + (dir.path / "a.yaml").string()) &&
                          Contains("(line 1)"));
  const std::string self = dir.write("self.yaml", "include: self.yaml\n");
  REQUIRE_THROWS_WITH(kernbench::load_config(self), Contains("self.yaml: include: include cycle"));
  dir.write("fine.yaml", "fabric: {model: flow}\n");
  const std::string missing = dir.write("missing.yaml", "include: [fine.yaml, nope.yaml]\n");
  REQUIRE_THROWS_WITH(kernbench::load_config(missing),
                      Contains("missing.yaml: include[1]: \"nope.yaml\" (" + (dir.path / "nope.yaml").string() +
                               "): cannot read the config file: no such file"));
  REQUIRE_THROWS_WITH(kernbench::load_config(dir.write("num.yaml", "include: {a: 1}\n")),
                      Contains("num.yaml: include: expected a file name or a list of file names, got a map"));
}

TEST_CASE("a missing or unreadable file names the path", "[config]") {
  TempDir dir;
  const std::string nope = (dir.path / "nope.yaml").string();
  REQUIRE_THROWS_WITH(kernbench::load_config(nope), nope + ": cannot read the config file: no such file");
  REQUIRE_THROWS_WITH(kernbench::load_config(dir.path.string()),
                      Contains(dir.path.string() + ": cannot read the config file"));
}

// ---- overrides -------------------------------------------------------------------

TEST_CASE("overrides set values, create keys and index lists", "[config]") {
  const Config c = parse(kSystem, {{"system.sips.w", "4"}, {"fabric.model", "flow"}, {"links.ucie.connections", "2"}});
  CHECK(c.system->sips.w == 4);
  CHECK(c.system->sips.h == 2);
  CHECK(c.fabric.model == FabricModel::Flow);
  CHECK(c.system->links.ucie.connections == 2);

  // Creating keys: no fabric section, no pcie_attach in the file.
  std::string bare = kSystem.substr(0, kSystem.find("fabric:"));
  bare = with(bare, "  pcie_attach: {cube: 3, router: r1c2}\n", "");
  const Config d = parse(bare, {{"fabric.chunk", "16 KiB"}, {"system.pcie_attach.router", "r1c3"}});
  CHECK(d.fabric.chunk == 16 * 1024);
  CHECK(d.system->pcie_attach.row == 1);
  CHECK(d.system->pcie_attach.col == 3);

  // List items by index; later overrides win.
  const Config g = parse(
      kGraph,
      {{"graph.edges.1.latency", "7 ns"}, {"graph.nodes.0.flit_aware", "true"}, {"graph.edges.1.latency", "8 ns"}});
  CHECK(g.graph->edges[1].link.latency == 8'000);
  CHECK(g.graph->nodes[0].params.flit_aware);
}

TEST_CASE("errors caused by an override say so", "[config]") {
  REQUIRE_THROWS_WITH(parse(kSystem, {{"system.sips.w", "two"}}),
                      "test.yaml: system.sips.w (set by --set system.sips.w=two): expected a positive integer, got "
                      "\"two\"");
  REQUIRE_THROWS_WITH(parse(kSystem, {{"system.sipz.w", "2"}}),
                      Contains("test.yaml: system.sipz (set by --set system.sipz.w=2): unknown key; known keys of "
                               "system:") &&
                          Contains("did you mean \"sips\"?"));
  REQUIRE_THROWS_WITH(parse(kGraph, {{"graph.edges.3.latency", "1 ns"}}),
                      Contains("test.yaml: graph.edges[3] (set by --set graph.edges.3.latency=1 ns): index out of "
                               "range: graph.edges has 3 items"));
  REQUIRE_THROWS_WITH(parse(kGraph, {{"graph.edges.first.latency", "1 ns"}}),
                      Contains("test.yaml: graph.edges (set by --set graph.edges.first.latency=1 ns): is a list: "
                               "expected an item index, got \"first\""));
  REQUIRE_THROWS_WITH(parse(kSystem, {{"system.name.first", "x"}}),
                      Contains("test.yaml: system.name (set by --set system.name.first=x): is a single value "
                               "(\"default\"), it has no key \"first\""));
  REQUIRE_THROWS_WITH(parse(kSystem, {{"system..w", "2"}}),
                      Contains("test.yaml: system..w (set by --set system..w=2): expected a dotted path"));
  REQUIRE_THROWS_WITH(parse(kSystem, {{"fabric.chunk", "[1, 2]"}}),
                      Contains("test.yaml: fabric.chunk (set by --set fabric.chunk=[1, 2]): a --set value is a single "
                               "YAML scalar, got a list"));
  REQUIRE_THROWS_WITH(parse(kSystem, {{"system.sips", "3"}}),
                      Contains("test.yaml: system.sips (set by --set system.sips=3): expected a map"));
  REQUIRE_THROWS_WITH(parse(kSystem, {{"include", "x.yaml"}}),
                      Contains("test.yaml: include (set by --set include=x.yaml): includes cannot be set by --set"));
  // An override that creates a section in a graph config hits the system-only rule.
  REQUIRE_THROWS_WITH(parse(kGraph, {{"nodes.pe.overhead", "1 ns"}}),
                      Contains("test.yaml: nodes (set by --set nodes.pe.overhead=1 ns): nodes belongs to a system "
                               "config"));
  // A created section misses its required keys: named, and blamed on the override.
  REQUIRE_THROWS_WITH(parse(kSystem.substr(0, kSystem.find("links:")), {{"links.pe.latency", "1 ns"}}),
                      Contains("test.yaml: links.noc (set by --set links.pe.latency=1 ns): required key is missing"));
}

// ---- the schema export ----------------------------------------------------------

TEST_CASE("the schema JSON describes every section and key", "[config]") {
  const auto j = nlohmann::json::parse(kernbench::config_schema_json());
  CHECK(j["version"] == 1);
  CHECK(j["units"]["time"] == nlohmann::json({"ps", "ns", "us", "ms", "s"}));
  CHECK(j["units"]["bytes"] == nlohmann::json({"B", "KB", "MB", "GB", "KiB", "MiB", "GiB"}));
  CHECK(j["units"]["frequency"] == nlohmann::json({"Hz", "kHz", "MHz", "GHz"}));
  const auto& keys = j["keys"];
  for (const char* k : {"include", "system", "nodes", "links", "graph", "fabric"}) CHECK(keys.contains(k));
  const auto& sips = keys["system"]["keys"]["sips"];
  CHECK(sips["type"] == "map");
  CHECK(sips["required"] == true);
  CHECK(sips["keys"]["topology"]["type"] == "enum");
  CHECK(sips["keys"]["topology"]["values"] == nlohmann::json({"ring", "torus", "mesh"}));
  CHECK(sips["keys"]["w"]["constraint"] == "> 0");
  const auto& bw = keys["links"]["keys"]["ucie"]["keys"]["bandwidth"];
  CHECK(bw["type"] == "bandwidth");
  CHECK(bw["required"] == true);
  CHECK(bw["units"].size() == 14);
  CHECK_FALSE(bw["doc"].get<std::string>().empty());
  CHECK(keys["links"]["keys"]["ucie"]["keys"]["connections"]["default"] == 1);
  CHECK(keys["nodes"]["keys"]["pcie_ep"]["keys"]["flit_aware"]["default"] == false);
  CHECK(keys["nodes"]["keys"]["pe"]["keys"]["flit_aware"]["default"] == true);
  const auto& edge = keys["graph"]["keys"]["edges"];
  CHECK(edge["type"] == "list");
  CHECK(edge["items"]["keys"]["class"]["default"] == "link");
  CHECK(keys["graph"]["keys"]["nodes"]["items"]["keys"]["kind"]["values"].size() == 13);
  CHECK(keys["include"]["items"]["type"] == "string");

  // The defaults it advertises are the structs' defaults.
  const FabricConfig f;
  const auto& fab = keys["fabric"]["keys"];
  CHECK(fab["model"]["default"] == to_string(f.model));
  CHECK(parse_bytes(fab["chunk"]["default"].get<std::string>(), "") == f.chunk);
  CHECK(parse_bytes(fab["flit"]["default"].get<std::string>(), "") == f.flit);
  CHECK(parse_bytes(fab["stripe"]["default"].get<std::string>(), "") == f.stripe);
  CHECK(keys["system"]["keys"]["name"]["default"] == SystemConfig{}.name);
}

TEST_CASE("the schema and the unknown-key check agree", "[config]") {
  // Every key the schema lists for links.pe is accepted, and the error for
  // an unknown one lists exactly those keys, in the schema's order.
  const auto j = nlohmann::ordered_json::parse(kernbench::config_schema_json());  // keeps the key order
  std::string listed;
  for (const auto& [name, v] : j["keys"]["links"]["keys"]["pe"]["keys"].items())
    listed += (listed.empty() ? "" : ", ") + name;
  REQUIRE_THROWS_WITH(parse(with(kSystem, "latency: 0.5 ns}", "latency: 0.5 ns, bogus: 1}")),
                      Contains("known keys of links.pe: " + listed));
  std::string top;
  for (const auto& [name, v] : j["keys"].items()) top += (top.empty() ? "" : ", ") + name;
  REQUIRE_THROWS_WITH(parse(kSystem + "bogus: 1\n"), Contains("known keys of the top level: " + top));
}

TEST_CASE("the pe section types every engine and defaults what it omits", "[config]") {
  const Config c = parse(kSystem + R"(pe:
  clock: 1.5 GHz
  dispatch: 30 ns
  scratch: 1 MiB
  dma_channels: 4
  gemm: {fp32: 128, int8: 0}
  ipcq: {slots: 16}
)");
  CHECK(pe_config(c).clock_hz == 1'500'000'000);
  CHECK(pe_config(c).dispatch == 30'000);
  CHECK(pe_config(c).scratch == 1 << 20);
  CHECK(pe_config(c).dma_channels == 4);
  CHECK(pe_config(c).gemm_macs_fp32 == 128);
  CHECK(pe_config(c).gemm_macs_fp16 == PeConfig{}.gemm_macs_fp16);  // omitted: the default
  CHECK(pe_config(c).gemm_macs_int8 == 0);                          // explicitly absent mode
  CHECK(pe_config(c).ipcq_slots == 16);
  CHECK(pe_config(c).ipcq_slot == PeConfig{}.ipcq_slot);
  CHECK(pe_config(parse(kSystem)).clock_hz == PeConfig{}.clock_hz);  // no section: all defaults
  REQUIRE_THROWS_WITH(parse(kSystem + "pe: {clock: 1.5 GT/s}\n"),
                      Contains("test.yaml: pe.clock: expected a frequency"));
  REQUIRE_THROWS_WITH(parse(kSystem + "pe: {dma_channels: 0}\n"),
                      Contains("test.yaml: pe.dma_channels: expected a positive integer"));
  REQUIRE_THROWS_WITH(parse(kSystem + "pe: {gemm: {fp4: 4}}\n"), Contains("test.yaml: pe.gemm.fp4: unknown key"));
}

TEST_CASE("the gpu section and pe.target: fractions at most 1, the target a choice", "[config][gpu]") {
  const Config c = parse(kSystem + "pe: {target: gpu}\ngpu: {sms: 132, stream_efficiency: 0.89, launch_host: 12 us}\n");
  CHECK(pe_config(c).target == ExecTarget::Gpu);
  CHECK(c.section<kernbench::kernels::gpu::GpuConfig>().sms == 132);
  CHECK(c.section<kernbench::kernels::gpu::GpuConfig>().launch_host == 12 * kernbench::sim::kMicrosecond);
  CHECK(pe_config(parse(kSystem)).target == ExecTarget::Sip);  // the default machine is SIP
  REQUIRE_THROWS_WITH(parse(kSystem + "pe: {target: tpu}\n"), Contains("test.yaml: pe.target") && Contains("sip, gpu"));
  REQUIRE_THROWS_WITH(parse(kSystem + "gpu: {stream_efficiency: 1.2}\n"),
                      Contains("test.yaml: gpu.stream_efficiency: a fraction, at most 1"));
  REQUIRE_THROWS_WITH(parse(kSystem + "gpu: {sms: -1}\n"), Contains("test.yaml: gpu.sms"));
  REQUIRE_THROWS_WITH(parse(kSystem + "gpu: {launch_host: 5}\n"), Contains("test.yaml: gpu.launch_host"));
}

TEST_CASE("sections are read in the order they always were and listed in the schema's", "[config]") {
  // energy is read before vgpu and k200 (its error is the one reported) but listed after them.
  REQUIRE_THROWS_WITH(parse(kSystem + "energy: {static: {pe: -1 W}}\nvgpu: {guests: 2}\n"),
                      Contains("test.yaml: energy.static.pe: expected a power >= 0"));
  REQUIRE_THROWS_WITH(parse(kGraph + "energy: {static: {pe: -1 W}}\nk200: {lanes: 2}\n"),
                      Contains("test.yaml: energy.static.pe: expected a power >= 0"));
  REQUIRE_THROWS_WITH(parse(kSystem + "vgpu: {guests: 2}\n"),
                      Contains("test.yaml: vgpu: the vgpu path runs on an explicit graph, not a system"));
  REQUIRE_THROWS_WITH(parse(kSystem + "k200: {}\n"),
                      Contains("test.yaml: k200: the K200 host is an explicit graph: give graph, not system"));
  REQUIRE_THROWS_WITH(
      parse(kSystem + "fabrik: {}\n"),
      Contains("known keys of the top level: include, system, nodes, links, graph, cluster, fabric, pe, gpu, "
               "nccl, vgpu, k200, energy"));
}

TEST_CASE("the higher layers' sections travel typed in the Config, read back by their owners", "[config]") {
  namespace k200 = kernbench::platforms::k200;
  namespace vgpu = kernbench::platforms::vgpu;
  const Config plain = parse(kGraph);
  CHECK(k200::config_of(plain) == nullptr);  // not given: absent
  CHECK(vgpu::config_of(plain) == nullptr);
  CHECK(pe_config(plain).dma_channels == PeConfig{}.dma_channels);  // not given: the defaults
  CHECK(energy_config(plain).links.pcie == EnergyLinks{}.pcie);

  const Config c = parse(kGraph + "k200: {edma: {channels_per_card: 4, channels_per_die: 2}}\nvgpu: {guests: 3}\n");
  REQUIRE(k200::config_of(c) != nullptr);
  CHECK(k200::config_of(c)->edma.channels_per_card == 4);
  CHECK(k200::config_of(c)->edma.channels_per_die == 2);
  CHECK(k200::config_of(c)->driver.page == k200::K200DriverConfig{}.page);
  REQUIRE(vgpu::config_of(c) != nullptr);
  CHECK(vgpu::config_of(c)->guests == 3);

  Config copy = c;  // sections copy with the Config
  pe_config(copy).dma_channels = 7;
  CHECK(pe_config(copy).dma_channels == 7);
  CHECK(pe_config(c).dma_channels == PeConfig{}.dma_channels);
  CHECK(k200::config_of(copy)->edma.channels_per_card == 4);
}

TEST_CASE("one size formatter, in the styles the messages use", "[config]") {
  using kernbench::config::ByteUnits;
  using kernbench::sim::kGiB;
  using kernbench::sim::kKiB;
  using kernbench::sim::kMiB;
  CHECK(format_bytes(2 * kGiB) == "2 GiB");
  CHECK(format_bytes(3000) == "3 KB");
  CHECK(format_bytes(2 * kMiB, ByteUnits::UpToKiB) == "2048 KiB");
  CHECK(format_bytes(3000, ByteUnits::UpToKiB) == "3000 B");
  CHECK(format_bytes(2 * kGiB, ByteUnits::UpToMiB) == "2048 MiB");
  CHECK(format_bytes(48 * kKiB, ByteUnits::UpToMiB) == "48 KiB");
  CHECK(format_bytes(0, ByteUnits::UpToMiB) == "0 B");
  CHECK(format_bytes(3 * kGiB / 2, ByteUnits::Rounded) == "1.50 GiB");
  CHECK(format_bytes(384 * kKiB, ByteUnits::Rounded) == "384 KiB");
  CHECK(format_bytes(100, ByteUnits::Rounded) == "100 B");
}
