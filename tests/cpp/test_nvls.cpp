// test_nvls.cpp -- in-network reduction: the switch_reduce op and the nvls
// all-reduce. Closed forms on an ideal star (the three-stage pipeline of a
// reducing switch), the split of the buffer over switches by bandwidth,
// the symbolic check of a switch's reduce + multicast (a wrong schedule is
// caught), and the errors naming what is missing.
#include <catch2/catch.hpp>

#include "ccl/algorithms/algorithm.hpp"
#include "ccl/ccl.hpp"
#include "ccl/verify.hpp"
#include "kernbench.hpp"
#include "machines.hpp"
#include "runtime/critical_path.hpp"
#include "sim/errors.hpp"

using namespace kernbench::testing;
using namespace kernbench::ccl;
using kernbench::sim::kKiB;
using kernbench::sim::kMiB;
using kernbench::sim::kNanosecond;

namespace {

// n GPUs on `switches` switches (every GPU linked to every switch; switch j's
// links have `lanes[j]` connections of `gbps` each, class "nv<j>"), no
// latency and no overhead anywhere: the ideal star. Reduction bandwidth
// `reduce_gbps` on every switch (0: the switches do not reduce).
Config star(int n, double gbps, double reduce_gbps, std::vector<int> lanes = {1},
            FabricModel model = FabricModel::Flow) {
  Config c;
  c.source = "test-star";
  ExplicitGraphConfig g;
  for (int i = 0; i < n; ++i) g.nodes.push_back(ExplicitNode{"gpu" + std::to_string(i), NodeKind::Pe, {0, true}, {}});
  for (std::size_t j = 0; j < lanes.size(); ++j) {
    const std::string sw = "sw" + std::to_string(j);
    g.nodes.push_back(ExplicitNode{sw, NodeKind::Switch, {0, true, Bandwidth::gb_per_s(reduce_gbps)}, {}});
    for (int i = 0; i < n; ++i)
      g.edges.push_back(ExplicitEdge{"gpu" + std::to_string(i), sw, "nv" + std::to_string(j), link(gbps, 0, lanes[j])});
  }
  c.graph = g;
  c.fabric.model = model;
  c.fabric.chunk = 4 * kKiB;
  pe_config(c).clock_hz = 1'000'000'000;
  pe_config(c).dispatch = 20 * kNanosecond;
  pe_config(c).scratch = 64 * kMiB;
  return c;
}

CollectiveSpec nvls(Bytes bytes, int pieces) {
  CollectiveSpec s;
  s.algorithm = "nvls";
  s.bytes_per_pe = bytes;
  s.pieces = pieces;
  s.verify = Verify::On;
  return s;
}

CollectiveResult run(const Config& c, const CollectiveSpec& spec) {
  System system(c);
  return run_collective(system, spec);
}

}  // namespace

TEST_CASE("nvls on an ideal star: the three-stage pipeline in closed form", "[nvls][ccl][closed-form]") {
  // 100 GB/s links: a byte takes 10 ps, so every stage time is exact.
  const int n = 4;
  const Bytes bytes = 1 * kMiB;
  for (FabricModel model : {FabricModel::Flow, FabricModel::Packet}) {
    for (int pieces : {1, 4, 16}) {
      const Time b = bytes / pieces;  // bytes of one chunk
      const Time up = b * 10;         // gather: every GPU's chunk over its own link, at once
      const Time mc = b * 10;         // multicast: one copy per output port, at once
      INFO(kernbench::topology::to_string(model) << ", " << pieces << " pieces");
      {  // reduction at line rate (n x 100 GB/s): every stage takes one chunk time
        const Time red = n * b * 10 / n;
        const CollectiveResult r = run(star(n, 100, 100.0 * n, {1}, model), nvls(bytes, pieces));
        CHECK(r.verified);
        // T = up + red + mc + (pieces - 1) x max(stage) = (pieces + 2) chunk times.
        CHECK(r.latency == up + red + mc + (pieces - 1) * std::max({up, red, mc}));
        CHECK(r.latency == (pieces + 2) * b * 10);
        CHECK(r.run.op_counts.at("switch_reduce") == static_cast<std::uint64_t>(pieces));
        // Each GPU sends its buffer once and receives it once: 2 n B on the links.
        CHECK(r.link_bytes.at("nv0") == 2 * n * bytes);
      }
      {  // a slow reduction unit (100 GB/s of input) is the bottleneck stage
        const Time red = n * b * 10;
        const CollectiveResult r = run(star(n, 100, 100, {1}, model), nvls(bytes, pieces));
        CHECK(r.verified);
        CHECK(r.latency == up + pieces * red + mc);
      }
    }
  }
}

TEST_CASE("nvls splits the buffer over the switches by bandwidth and beats the ring", "[nvls][ccl]") {
  // Two switches with 5 and 4 lanes per GPU (the HGX H100's 5/4/4/5 in small):
  // parts of 5/9 and 4/9, each finishing at the same time.
  const int n = 8, pieces = 8;
  const Bytes bytes = 9 * 8 * 4 * kKiB;  // divisible by 9 x pieces
  const Config c = star(n, 25, 1000, {5, 4});
  const CollectiveResult r = run(c, nvls(bytes, pieces));
  CHECK(r.verified);
  CHECK(r.slices == 9 * pieces);
  CHECK(r.link_bytes.at("nv0") == 2 * n * bytes * 5 / 9);
  CHECK(r.link_bytes.at("nv1") == 2 * n * bytes * 4 / 9);
  // Both switches carry their part at 125 resp. 100 GB/s per GPU: the same
  // time, B / 225 GB/s, plus the pipeline fill (two chunk times).
  const Time chunk = bytes * 5 / 9 / pieces * 8;  // ps: 125 GB/s is 8 ps per byte
  CHECK(r.latency == (pieces + 2) * chunk);
  // The ring moves 2 (n-1)/n of the buffer through every GPU's links, twice
  // through the switch: nvls is faster at this size.
  CollectiveSpec ring = nvls(bytes, pieces);
  ring.algorithm = "ring";
  const CollectiveResult rr = run(c, ring);
  CHECK(rr.verified);
  CHECK(r.latency < rr.latency);
  // HBM-resident buffers work too: the chunks come from and go to the memories.
  Config h = c;
  for (int i = 0; i < n; ++i) {
    const std::string gpu = "gpu" + std::to_string(i);
    h.graph->nodes[static_cast<std::size_t>(i)].memory = gpu + ".hbm";
    h.graph->nodes.push_back(ExplicitNode{gpu + ".hbm", NodeKind::Memory, {0, true}, {}});
    h.graph->edges.push_back(ExplicitEdge{gpu, gpu + ".hbm", "hbm", link(1000, 0)});
  }
  CollectiveSpec hs = nvls(bytes, pieces);
  hs.buffer = Buffer::Hbm;
  const CollectiveResult hr = run(h, hs);
  CHECK(hr.verified);
  CHECK(hr.link_bytes.at("hbm") == 2 * n * bytes);
}

TEST_CASE("the symbolic check follows a switch's reduce and multicast", "[nvls][verify]") {
  const Config c = star(4, 100, 400);
  System system(c);
  const std::vector<NodeId> pes = system.machine().pes();
  const NodeId sw = system.machine().at("sw0");
  SECTION("a reduction over some ranks leaves the others short") {
    Schedule s(system.machine(), pes, 4 * kKiB, 2, Buffer::Sram, "partial");
    s.switch_reduce(sw, {0, 1, 2}, Slices{0, 2});
    SymbolicCheck check(s, "partial");
    for (int r = 0; r < 4; ++r) check.set_start(r, Slices{0, 2}, SymbolicCheck::Start::Own);
    kernbench::runtime::Executor(system).run(s.program(), &check);
    CHECK_THROWS_WITH(check.expect_complete(3, Slices{0, 2}),
                      Catch::Contains("rank 3 (gpu3) slice 0 holds ranks {3} but lacks {0,1,2}"));
    CHECK_THROWS_WITH(check.expect_complete(1, Slices{0, 2}),
                      Catch::Contains("rank 1 (gpu1) slice 0 holds ranks {0,1,2} but lacks {3}"));
  }
  SECTION("reducing a slice twice is caught when it happens") {
    Schedule s(system.machine(), pes, 4 * kKiB, 2, Buffer::Sram, "twice");
    s.switch_reduce(sw, {0, 1, 2, 3}, Slices{0, 2});
    s.switch_reduce(sw, {0, 1, 2, 3}, Slices{1, 2});  // slice 1 already holds every rank
    SymbolicCheck check(s, "twice");
    for (int r = 0; r < 4; ++r) check.set_start(r, Slices{0, 2}, SymbolicCheck::Start::Own);
    CHECK_THROWS_WITH(
        kernbench::runtime::Executor(system).run(s.program(), &check),
        Catch::Contains("would count ranks {0,1,2,3} twice when the switch adds what rank 1 (gpu1) slice 1 sent"));
  }
  SECTION("a complete one holds every rank once") {
    Schedule s(system.machine(), pes, 4 * kKiB, 2, Buffer::Sram, "whole");
    s.switch_reduce(sw, {0, 1, 2, 3}, Slices{0, 2});
    SymbolicCheck check(s, "whole");
    for (int r = 0; r < 4; ++r) check.set_start(r, Slices{0, 2}, SymbolicCheck::Start::Own);
    kernbench::runtime::Executor(system).run(s.program(), &check);
    for (int r = 0; r < 4; ++r) CHECK_NOTHROW(check.expect_complete(r, Slices{0, 2}));
  }
}

TEST_CASE("in-network reduction: what is missing is named", "[nvls][errors]") {
  SECTION("switches that do not reduce") {
    CHECK_THROWS_WITH(run(star(4, 100, 0), nvls(4 * kKiB, 1)),
                      Catch::Contains("nvls needs an in-network reducing switch") &&
                          Catch::Contains("none of its switches (sw0) declares reduction: {bandwidth: ...}"));
  }
  SECTION("a reducing switch not linked to every rank") {
    Config c = star(4, 100, 400);
    c.graph->nodes.push_back(ExplicitNode{"gpu4", NodeKind::Pe, {0, true}, {}});
    c.graph->edges.push_back(ExplicitEdge{"gpu4", "gpu0", "p2p", link(100, 0)});
    CHECK_THROWS_WITH(run(c, nvls(4 * kKiB, 1)), Catch::Contains("sw0 (no link to gpu4)"));
  }
  SECTION("a switch_reduce op on a switch that declares no reduction") {
    System system(star(4, 100, 0));
    kernbench::runtime::Program p("bad");
    const auto& pes = system.machine().pes();
    p.switch_reduce(system.machine().at("sw0"), {pes[0], pes[1]}, 1024, {}, "sr");
    CHECK_THROWS_WITH(
        kernbench::runtime::Executor(system).run(p),
        Catch::Contains("op 0 'sr' (switch_reduce): sw0 is a switch that declares no in-network reduction"));
    System reducing(star(4, 100, 400));
    kernbench::runtime::Program d("dup");
    d.switch_reduce(reducing.machine().at("sw0"), {pes[0], pes[1], pes[0]}, 1024, {}, "sr");
    CHECK_THROWS_WITH(kernbench::runtime::Executor(reducing).run(d), Catch::Contains("member gpu0 appears twice"));
    kernbench::runtime::Program q("one");
    CHECK_THROWS_WITH(q.switch_reduce(system.machine().at("sw0"), {pes[0]}, 1024, {}, "sr"),
                      Catch::Contains("needs at least 2 members"));
  }
  SECTION("the config: reduction only on a switch, with a positive bandwidth") {
    const std::string text = R"(graph:
  nodes:
    - {name: a, kind: pe, overhead: 0 ns}
    - {name: s, kind: switch, overhead: 0 ns, reduction: {bandwidth: 400 GB/s}}
  edges:
    - {a: a, b: s, bandwidth: 100 GB/s, latency: 0 ns}
)";
    const Config ok = kernbench::parse_config(text, "t.yaml", {});
    CHECK(ok.graph->nodes[1].params.reduction.bytes_per_s == 400'000'000'000);
    std::string bad = text;
    bad.replace(bad.find("kind: pe, overhead: 0 ns"), 24, "kind: pe, overhead: 0 ns, reduction: {bandwidth: 1 GB/s}");
    CHECK_THROWS_WITH(kernbench::parse_config(bad, "t.yaml", {}),
                      Catch::Contains("graph.nodes[0].reduction") && Catch::Contains("only a switch node reduces"));
    std::string zero = text;
    zero.replace(zero.find("400 GB/s"), 8, "0 GB/s");
    CHECK_THROWS_WITH(kernbench::parse_config(zero, "t.yaml", {}),
                      Catch::Contains("graph.nodes[1].reduction.bandwidth"));
    std::string unknown = text;
    unknown.replace(unknown.find("bandwidth: 400 GB/s}"), 20, "bandwidth: 400 GB/s, ops: sum}");
    CHECK_THROWS_WITH(kernbench::parse_config(unknown, "t.yaml", {}), Catch::Contains("ops"));
  }
}

TEST_CASE("the critical path of an nvls all-reduce tiles its makespan", "[nvls][critical-path]") {
  const CollectiveResult r = run(star(4, 100, 400), nvls(256 * kKiB, 4));
  const kernbench::runtime::CriticalPath cp = kernbench::runtime::critical_path(r.run);
  CHECK(cp.length() == r.latency);
  // The path runs through the switch's ops: its time is theirs.
  Time on_switch = 0;
  for (const auto& st : cp.steps)
    if (st.op_kind == "switch_reduce") on_switch += st.end - st.start;
  CHECK(on_switch > 0);
}
