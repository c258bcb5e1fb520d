// test_any_machine.cpp -- kernels and collectives on explicit graphs: the PE
// relations (ranks, memories, hierarchy, rank grid) read the same whatever
// built the machine; every collective algorithm verified symbolically on
// 8 GPUs with 4 switches, a 2x4 mesh and a ring written as graphs; GEMM and
// the LLaMA layer give the generated machine's time to the picosecond on its
// explicit twin; a missing shape is an error naming what is missing.
#include <catch2/catch.hpp>

#include "ccl/algorithms/algorithm.hpp"
#include "ccl/ccl.hpp"
#include "kernels/gemm.hpp"
#include "machines.hpp"
#include "runtime/executor.hpp"
#include "sim/errors.hpp"
#include "topology/graph/export.hpp"
#include "topology/system.hpp"
#include "workloads/llama.hpp"

using namespace kernbench::testing;
using namespace kernbench::ccl;
using kernbench::sim::kKiB;
using kernbench::sim::kMiB;
using kernbench::sim::kNanosecond;

namespace {

void pe_defaults(Config& c) {
  pe_config(c).clock_hz = 1'000'000'000;
  pe_config(c).dispatch = 20 * kNanosecond;
  pe_config(c).scratch = 4 * kMiB;
}

// n GPUs, each with its HBM node (`memory:`), named gpu<i> and gpu<i>.hbm.
void add_gpus(ExplicitGraphConfig& g, int n) {
  for (int i = 0; i < n; ++i) {
    const std::string name = "gpu" + std::to_string(i);
    g.nodes.push_back(ExplicitNode{name, NodeKind::Pe, {0, true}, name + ".hbm"});
    g.nodes.push_back(ExplicitNode{name + ".hbm", NodeKind::HbmCtrl, {5 * kNanosecond, true}, {}});
    g.edges.push_back(ExplicitEdge{name, name + ".hbm", "hbm", link(1000, 1 * kNanosecond)});
  }
}

// 8 GPUs, each linked to each of 4 reducing switches; a 4x2 rank grid and 2 groups of 4.
Config switch_box(bool with_layout = true) {
  Config c;
  c.source = "test-switch-box";
  ExplicitGraphConfig g;
  add_gpus(g, 8);
  for (int s = 0; s < 4; ++s) {
    // Reducing switches (in-network reduction, the nvls all-reduce): 800 GB/s of input, 8 ports x 100 GB/s.
    g.nodes.push_back(ExplicitNode{
        "sw" + std::to_string(s), NodeKind::Switch, {10 * kNanosecond, true, Bandwidth::gb_per_s(800)}, {}});
    for (int i = 0; i < 8; ++i)
      g.edges.push_back(ExplicitEdge{"gpu" + std::to_string(i), "sw" + std::to_string(s), "nvlink", link(100, 50)});
  }
  if (with_layout) {
    g.layout.grid = GridSize{4, 2};
    g.layout.packages = GridSize{1, 1};
    g.layout.groups = GridSize{2, 1};
    g.layout.pes_per_group = 4;
  }
  c.graph = g;
  pe_defaults(c);
  return c;
}

// 8 GPUs as a 4 x 2 mesh (rank r at column r % 4, row r / 4), each its own group.
Config mesh_graph() {
  Config c;
  c.source = "test-mesh";
  ExplicitGraphConfig g;
  add_gpus(g, 8);
  const auto name = [](int x, int y) { return "gpu" + std::to_string(y * 4 + x); };
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 4; ++x) {
      if (x + 1 < 4) g.edges.push_back(ExplicitEdge{name(x, y), name(x + 1, y), "mesh", link(100, 50)});
      if (y + 1 < 2) g.edges.push_back(ExplicitEdge{name(x, y), name(x, y + 1), "mesh", link(100, 50)});
    }
  g.layout.grid = GridSize{4, 2};
  g.layout.packages = GridSize{1, 1};
  g.layout.groups = GridSize{4, 2};
  g.layout.pes_per_group = 1;
  c.graph = g;
  pe_defaults(c);
  return c;
}

// 8 GPUs on a ring, no layout: the ranks are the pe nodes in order.
Config ring_graph() {
  Config c;
  c.source = "test-ring-graph";
  ExplicitGraphConfig g;
  add_gpus(g, 8);
  for (int i = 0; i < 8; ++i)
    g.edges.push_back(
        ExplicitEdge{"gpu" + std::to_string(i), "gpu" + std::to_string((i + 1) % 8), "ring", link(100, 50)});
  c.graph = g;
  pe_defaults(c);
  return c;
}

CollectiveSpec spec_of(const std::string& algorithm, Collective what, Buffer buffer = Buffer::Sram) {
  CollectiveSpec s;
  s.algorithm = algorithm;
  s.collective = what;
  s.bytes_per_pe = 24 * kKiB + 12;  // an uneven cut
  s.buffer = buffer;
  s.verify = Verify::On;
  return s;
}

bool has(const Algorithm& a, Collective c) {
  switch (c) {
    case Collective::AllReduce: return a.all_reduce != nullptr;
    case Collective::ReduceScatter: return a.reduce_scatter != nullptr;
    case Collective::AllGather: return a.all_gather != nullptr;
    case Collective::Broadcast: return a.broadcast != nullptr;
    case Collective::AllToAll: return a.all_to_all != nullptr;
  }
  return false;
}

}  // namespace

TEST_CASE("explicit graphs: pes, memories, hierarchy and grid are the declared relations", "[any][machine]") {
  System s(switch_box());
  const Machine& m = s.machine();
  REQUIRE(m.pes().size() == 8);
  CHECK(m.node(m.pes()[0]).name == "gpu0");
  CHECK(m.node(m.memory(m.pes()[3], "test")).name == "gpu3.hbm");
  CHECK(m.hierarchy().declared);
  CHECK(m.node(m.pes()[5]).cube == 1);
  CHECK(m.node(m.pes()[5]).pe == 1);
  CHECK(m.hbm_ctrl(0, 1, 1) == m.at("gpu5.hbm"));
  REQUIRE(m.rank_grid());
  CHECK(m.rank_grid()->w == 4);

  System r(ring_graph());
  CHECK(r.machine().pes().size() == 8);
  CHECK_FALSE(r.machine().hierarchy().declared);
  CHECK(r.machine().hierarchy().pes_per_group == 8);

  // The generator states the same relations.
  System gen(system_config(2, 1, SipTopology::Ring, 2, 1, 2, 1, 2));
  CHECK(gen.machine().hierarchy().packages.count() == 2);
  CHECK(gen.machine().hierarchy().pes_per_group == 2);
  CHECK(gen.machine().node(gen.machine().memory(gen.machine().pes()[5], "test")).name == "sip1.cube0.hbm_ctrl.pe1");
}

TEST_CASE("every collective algorithm is verified on explicit graphs where its shape exists", "[any][ccl][verify]") {
  struct Shape {
    const char* name;
    Config config;
    bool grid, hierarchy, reducing_switch;
  };
  const std::vector<Shape> shapes = {
      {"8 GPUs + 4 switches", switch_box(), true, true, true},
      {"2x4 mesh graph", mesh_graph(), true, true, false},
      {"ring graph", ring_graph(), false, false, false},
  };
  for (const Shape& shape : shapes) {
    for (const Algorithm& a : registry()) {
      for (Collective what : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                              Collective::Broadcast, Collective::AllToAll}) {
        if (!has(a, what)) continue;
        INFO(shape.name << ": " << a.name << " " << to_string(what));
        System system(shape.config);
        const CollectiveSpec spec = spec_of(a.name, what);
        if (a.needs_grid && !shape.grid) {
          CHECK_THROWS_WITH(run_collective(system, spec),
                            Catch::Contains(a.name + " needs a rank grid") && Catch::Contains("graph.layout.grid"));
          continue;
        }
        if (a.name == "nvls" && !shape.reducing_switch) {
          CHECK_THROWS_WITH(run_collective(system, spec), Catch::Contains("nvls needs an in-network reducing switch") &&
                                                              Catch::Contains("reduction: {bandwidth: ...}") &&
                                                              Catch::Contains("the machine has no switch node"));
          continue;
        }
        if (a.name == "nvls_tree") {  // NVLS across boxes: these machines have no NIC, so they are one box
          CHECK_THROWS_WITH(run_collective(system, spec),
                            Catch::Contains("nvls_tree is NCCL's NVLS across boxes") && Catch::Contains("use nvls"));
          continue;
        }
        if (a.name == "lrab" && !shape.hierarchy) {
          CHECK_THROWS_WITH(run_collective(system, spec),
                            Catch::Contains("lrab needs a group hierarchy") && Catch::Contains("graph.layout.groups"));
          continue;
        }
        const CollectiveResult r = run_collective(system, spec);
        CHECK(r.verified);
        CHECK(r.ranks == 8);
        CHECK(r.latency > 0);
      }
    }
  }
  // HBM buffers read each rank's declared memory.
  System hbm(switch_box());
  const CollectiveResult r = run_collective(hbm, spec_of("ring", Collective::AllReduce, Buffer::Hbm));
  CHECK(r.verified);
  CHECK(r.link_bytes.at("hbm") > 0);
  // A grid given in the spec serves where none is declared.
  System ring(ring_graph());
  CollectiveSpec t = spec_of("torus2d", Collective::AllReduce);
  t.grid_w = 4;
  t.grid_h = 2;
  CHECK(run_collective(ring, t).verified);
}

TEST_CASE("a PE without a declared memory is named, with the key that declares it", "[any][errors]") {
  Config c = ring_graph();
  c.graph->nodes[0].memory.clear();
  System s(c);
  CHECK_THROWS_WITH(run_collective(s, spec_of("ring", Collective::AllReduce, Buffer::Hbm)),
                    Catch::Contains("gpu0 has no memory of its own") && Catch::Contains("memory: NODE"));
  kernbench::kernels::GemmSpec g;
  g.m = g.n = g.k = 256;
  g.pes = {s.machine().at("gpu0")};
  CHECK_THROWS_WITH(kernbench::kernels::gemm_program(s, g), Catch::Contains("gpu0 has no memory of its own"));
}

TEST_CASE("GEMM and the LLaMA layer on the explicit twin of a generated machine: same time to the ps",
          "[any][gemm][llama]") {
  // One SIP, one cube, a line of 2 routers: every route is unique, so the
  // graph's shortest paths are the generator's routes.
  Config gen = system_config(1, 1, SipTopology::Ring, 1, 1, 2, 1, 8);
  pe_config(gen).clock_hz = 1'000'000'000;
  pe_config(gen).dispatch = 20 * kNanosecond;
  pe_config(gen).gemm_macs_fp16 = 1024;
  pe_config(gen).scratch = 4 * kMiB;
  const Config twin = as_explicit(gen);
  REQUIRE(twin.graph);
  REQUIRE_FALSE(twin.system);

  System a(gen), b(twin);
  REQUIRE(a.machine().num_nodes() == b.machine().num_nodes());
  REQUIRE(a.machine().num_channels() == b.machine().num_channels());
  for (std::size_t i = 0; i < a.machine().pes().size(); ++i) {
    CHECK(a.machine().pes()[i] == b.machine().pes()[i]);
    CHECK(a.machine().memory_of(a.machine().pes()[i]) == b.machine().memory_of(b.machine().pes()[i]));
  }

  kernbench::kernels::GemmSpec g;
  g.m = 1024;
  g.n = 512;
  g.k = 768;
  g.pes = {a.machine().pes().begin(), a.machine().pes().begin() + 4};
  const auto ra = kernbench::runtime::Executor(a).run(kernbench::kernels::gemm_program(a, g));
  const auto rb = kernbench::runtime::Executor(b).run(kernbench::kernels::gemm_program(b, g));
  CHECK(ra.makespan() > 0);
  CHECK(ra.makespan() == rb.makespan());

  using namespace kernbench::workloads;
  LlamaSpec l;
  l.phase = LlamaPhase::Prefill;
  l.tokens = 256;
  l.tp = 8;
  l.dims.hidden = 1024;
  l.dims.heads = 8;
  l.dims.kv_heads = 2;
  l.dims.head_dim = 128;
  l.dims.intermediate = 2048;
  System la(gen), lb(twin);
  const LlamaResult xa = run_llama(la, l);
  const LlamaResult xb = run_llama(lb, l);
  CHECK(xa.latency > 0);
  CHECK(xa.latency == xb.latency);
}

TEST_CASE("LLaMA and GQA run on an explicit box without a declared hierarchy", "[any][llama]") {
  Config c = switch_box(false);
  pe_config(c).gemm_macs_fp16 = 1024;
  System s(c);
  using namespace kernbench::workloads;
  LlamaSpec l;
  l.phase = LlamaPhase::Decode;
  l.tokens = 4;
  l.s_kv = 256;
  l.tp = 8;
  l.dims.hidden = 1024;
  l.dims.heads = 8;
  l.dims.kv_heads = 2;
  l.dims.head_dim = 128;
  l.dims.intermediate = 2048;
  CHECK(run_llama(s, l).latency > 0);
}
