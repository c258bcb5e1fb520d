// test_executor.cpp -- programs on PEs: dispatch, engines, dependencies,
// pipelines, scratch, deadlocks, determinism.
#include <catch2/catch.hpp>

#include <cmath>

#include "machines.hpp"
#include "runtime/executor.hpp"
#include "sim/errors.hpp"
#include "topology/fabric/dma.hpp"

using namespace kernbench::testing;
using namespace kernbench::runtime;
using kernbench::sim::kKiB;
using kernbench::sim::kNanosecond;

namespace {

Config machine_config() {
  Config c = program_config(2, 1);  // 2048 FLOP per cycle at 1 GHz = 2.048 TFLOPS
  pe_config(c).gemm_macs_int8 = 0;
  return c;
}

struct Fixture {
  System system{machine_config()};
  const Machine& m = system.machine();
  NodeId pe(int p, int cube = 0) const { return m.pe(0, cube, p); }
  NodeId hbm(int p, int cube = 0) const { return m.hbm_ctrl(0, cube, p); }
};

// The latency of the same DMA read with the fabric alone, for comparison.
Time bare_read(NodeId pe, NodeId hbm, Bytes bytes) {
  System s(machine_config());
  s.dma(DmaKind::Read, pe, hbm, bytes, 0);
  s.run();
  return s.dma_ops()[0].result.latency();
}

}  // namespace

TEST_CASE("an op pays one dispatch, then its engine's time", "[executor]") {
  Fixture f;
  Program p("one");
  const OpId g = p.gemm(f.pe(0), 2048.0 * 1000, Precision::Fp16);  // 1000 cycles = 1 us
  const OpId d = p.dma(f.pe(1), Move{f.hbm(1), f.pe(1), 16 * kKiB});
  const RunResult r = Executor(f.system).run(p);
  CHECK(r.ops[g].ready == 0);
  CHECK(r.ops[g].start == 20'000);
  CHECK(r.ops[g].end == 20'000 + 1'000'000);
  CHECK(r.ops[d].end - r.ops[d].start == bare_read(f.pe(1), f.hbm(1), 16 * kKiB));
  CHECK(r.makespan() == r.ops[g].end);
  CHECK(r.op_counts.at("gemm") == 1);
  CHECK(r.op_bytes.at("dma") == 16 * kKiB);
}

TEST_CASE("dependencies order ops; PE_CPU and engines serialise them", "[executor]") {
  Fixture f;
  Program p("chain");
  const OpId a = p.gemm(f.pe(0), 2048.0 * 100, Precision::Fp16, {}, "a");
  const OpId b = p.gemm(f.pe(0), 2048.0 * 100, Precision::Fp16, {a}, "b");
  const OpId c = p.gemm(f.pe(0), 2048.0 * 100, Precision::Fp16, {}, "c");  // independent, same PE
  const RunResult r = Executor(f.system).run(p);
  CHECK(r.ops[b].ready == r.ops[a].end);
  // a and c are dispatched back to back by the one PE_CPU.
  CHECK(r.ops[a].start == 20'000);
  CHECK(r.ops[c].ready == 0);
  CHECK(r.ops[c].start == r.ops[a].end);  // c dispatched at 40 ns, waits for the GEMM engine
  CHECK(r.ops[b].start == r.ops[c].end);  // b dispatched after a ended, queued behind c
  const EngineUse& gemm = r.engines[static_cast<std::size_t>(r.log.resource()[0])];
  CHECK(gemm.name == "sip0.cube0.pe0.gemm");
  CHECK(gemm.busy == Approx(3 * 100'000.0));
  CHECK(r.busy_within(f.pe(0), Engine::Gemm, 0, r.ops[a].end) == Approx(100'000.0));
}

TEST_CASE("DMA channels bound the DMAs in flight on a PE", "[executor]") {
  Fixture f;
  Program p("dmas");
  std::vector<OpId> ids;
  for (int k = 0; k < 3; ++k) ids.push_back(p.dma(f.pe(0), Move{f.hbm(0), f.pe(0), 64 * kKiB}));
  const RunResult r = Executor(f.system).run(p);
  // Two channels: the third DMA gets one when the first is done.
  CHECK(r.ops[ids[2]].start == std::min(r.ops[ids[0]].end, r.ops[ids[1]].end));
  const auto dma =
      std::find_if(r.engines.begin(), r.engines.end(), [](const EngineUse& u) { return u.engine == Engine::Dma; });
  CHECK(dma->capacity == 2);
  CHECK(dma->total_wait > 0);
}

TEST_CASE("a composite pipeline: one dispatch, N-buffered tiles, counts match tiles", "[executor]") {
  Fixture f;
  Program p("pipe");
  Pipeline pipe;
  pipe.tiles = 6;
  pipe.loads = {Move{f.hbm(0), f.pe(0), 8 * kKiB}, Move{f.hbm(1), f.pe(0), 8 * kKiB}};
  pipe.flops = 2048.0 * 50;
  pipe.stores = {Move{f.pe(0), f.hbm(0), 4 * kKiB}};
  pipe.buffers = 2;
  pipe.load_tag = p.tag("load");
  pipe.compute_tag = p.tag("compute");
  pipe.store_tag = p.tag("store");
  const OpId pin = p.dma(f.pe(0), Move{f.hbm(2), f.pe(0), 64 * kKiB}, {}, "pinned operand", p.tag("pinned"));
  const OpId c = p.composite(f.pe(0), pipe, {pin}, "gemm tiles", p.tag("composite"));
  const RunResult r = Executor(f.system).run(p);
  CHECK(r.op_counts.at("dma") == 1 + 6 * 3);
  CHECK(r.op_counts.at("gemm") == 6);
  CHECK(r.op_counts.at("composite") == 1);
  CHECK(r.op_bytes.at("dma") == 64 * kKiB + 6 * (16 + 4) * kKiB);
  // The composite's window starts after the pinned load and after one dispatch.
  CHECK(r.ops[c].ready == r.ops[pin].end);
  CHECK(r.ops[c].start == r.ops[pin].end + 20'000);
  const auto [w0, w1] = r.window(p.tag("compute"));
  CHECK(w0 > r.ops[pin].end);
  CHECK(w1 <= r.ops[c].end);
  // Double buffering: tile 2's loads start after tile 0's compute ended.
  Time compute0_end = -1, load2_start = -1;
  for (std::size_t i = 0; i < r.log.size(); ++i) {
    const auto kind = r.log.kind_names()[static_cast<std::size_t>(r.log.kind()[i])];
    if (kind == "gemm" && compute0_end < 0) compute0_end = r.log.end()[i];
  }
  int loads_seen = 0;
  for (std::size_t i = 0; i < r.log.size(); ++i)
    if (r.log.tag()[i] == p.tag("load") && ++loads_seen == 5) load2_start = r.log.start()[i];
  CHECK(load2_start >= compute0_end);
  // One dispatch for the whole composite (plus the pinned DMA's).
  const auto cpu =
      std::find_if(r.engines.begin(), r.engines.end(), [](const EngineUse& u) { return u.engine == Engine::PeCpu; });
  CHECK(cpu->grants == 2);
}

TEST_CASE("scratch overflow is a CapacityError with the numbers", "[executor]") {
  Fixture f;
  Program p("scratch");
  const OpId a = p.alloc(f.pe(3), 700 * kKiB, {}, "A tiles");
  p.alloc(f.pe(3), 400 * kKiB, {a}, "B tiles");
  CHECK_THROWS_AS(Executor(f.system).run(p), kernbench::CapacityError);
  Fixture g;
  CHECK_THROWS_WITH(
      Executor(g.system).run(p),
      Catch::Contains("scratch of sip0.cube0.pe3 overflows: B tiles asks for 400 KiB with 700 KiB of 1024 KiB in use"));
  // Freed scratch can be reused; the peak is reported.
  Fixture h;
  Program q("reuse");
  const OpId x = q.alloc(h.pe(3), 700 * kKiB);
  const OpId fx = q.free(x);
  q.alloc(h.pe(3), 400 * kKiB, {fx});
  const RunResult r = Executor(h.system).run(q);
  CHECK(r.peak_scratch.at(h.pe(3)) == 700 * kKiB);
}

TEST_CASE("a cycle and a recv without a send end in a DeadlockError naming the ops", "[executor]") {
  Fixture f;
  Program p("cyclic");
  const OpId a = p.barrier(f.pe(0), {}, "start");
  const OpId b = p.gemm(f.pe(0), 1000, Precision::Fp16, {a}, "left");
  const OpId c = p.gemm(f.pe(0), 1000, Precision::Fp16, {b}, "right");
  p.depend(b, c);
  CHECK_THROWS_AS(Executor(f.system).run(p), kernbench::DeadlockError);
  Fixture g;
  CHECK_THROWS_WITH(Executor(g.system).run(p),
                    Catch::Contains("cyclic: deadlock") &&
                        Catch::Contains("op 1 'left' (gemm on sip0.cube0.pe0) waits for op 2") &&
                        Catch::Contains("op 2 'right'"));
  Fixture h;
  Program q("lonely");
  q.recv(h.pe(1), h.pe(0), 42, {}, "wait for data");
  CHECK_THROWS_WITH(
      Executor(h.system).run(q),
      Catch::Contains("'wait for data' (recv on sip0.cube0.pe1) waits for a send from sip0.cube0.pe0 with key 42"));
}

TEST_CASE("send and recv pair up by key; a no-consume recv ends when the data has arrived", "[executor]") {
  Fixture f;
  Program p("p2p");
  const OpId r1 = p.recv(f.pe(5, 1), f.pe(0), 7, {}, "recv", 0, RecvMode::NoConsume);
  const OpId s1 = p.send(f.pe(0), f.pe(5, 1), 8 * kKiB, 7, {}, "send");
  const RunResult r = Executor(f.system).run(p);
  CHECK(r.ops[r1].end == r.ops[s1].end);
  CHECK(r.op_bytes.at("send") == 8 * kKiB);
}

TEST_CASE("an engine without the precision is a clear error", "[executor]") {
  Fixture f;
  Program p("int8");
  p.gemm(f.pe(0), 1000, Precision::Int8, {}, "quantised");
  CHECK_THROWS_WITH(Executor(f.system).run(p),
                    Catch::Contains("'quantised'") && Catch::Contains("no int8 mode (pe.gemm.int8 = 0)"));
}

TEST_CASE("the same program twice gives the same op log", "[executor][determinism]") {
  auto once = [] {
    Fixture f;
    Program p("mix");
    std::vector<OpId> prev;
    for (int k = 0; k < 8; ++k) {
      const OpId l = p.dma(f.pe(k), Move{f.hbm((k + 3) % 8, 1), f.pe(k), 16 * kKiB});
      const OpId g = p.gemm(f.pe(k), 2048.0 * 40, Precision::Fp16, {l});
      prev.push_back(p.dma(f.pe(k), Move{f.pe(k), f.hbm(0), 4 * kKiB}, {g}));
    }
    p.barrier(f.pe(0), prev, "join");
    return Executor(f.system).run(p);
  };
  const RunResult a = once(), b = once();
  REQUIRE(a.log.size() == b.log.size());
  CHECK(a.log.start() == b.log.start());
  CHECK(a.log.end() == b.log.end());
  CHECK(a.log.op() == b.log.op());
  CHECK(a.makespan() == b.makespan());
}

TEST_CASE("program building checks its inputs", "[executor]") {
  Program p("bad");
  CHECK_THROWS_WITH(p.gemm(0, 10, Precision::Fp16, {3}), Catch::Contains("depends on op 3, which does not exist yet"));
  CHECK_THROWS_WITH(p.free(0), Catch::Contains("is not an alloc"));
  Pipeline none;
  none.tiles = 0;
  CHECK_THROWS_WITH(p.composite(0, none), Catch::Contains("needs at least one tile"));
  CHECK(p.tag("x") == p.tag("x"));
  CHECK(p.tag("x") != p.tag("y"));
}

TEST_CASE("the engines charge what engine_timing computes (the plans' estimates use the same)", "[executor]") {
  Fixture f;
  const kernbench::runtime::PeConfig& cfg = pe_config(f.system.config());
  Program p("timing");
  const double flops = gemm_flops(100, 70, 33);  // not a whole number of cycles
  const OpId g = p.gemm(f.pe(0), flops, Precision::Fp16);
  const OpId g32 = p.gemm(f.pe(0), flops, Precision::Fp32);
  const OpId v = p.vector(f.pe(1), 1000);  // 7.8 cycles of 128 B
  const RunResult r = Executor(f.system).run(p);
  CHECK(r.ops[g].end - r.ops[g].start == gemm_time(cfg, flops, Precision::Fp16, "g"));
  CHECK(r.ops[g32].end - r.ops[g32].start == gemm_time(cfg, flops, Precision::Fp32, "g32"));
  CHECK(r.ops[v].end - r.ops[v].start == vector_time(cfg, 1000, "v"));
  CHECK(r.ops[g].start - r.ops[g].ready == dispatch_time(cfg));
  // The formulas: cycles rounded up, then ps rounded up.
  CHECK(gemm_time(cfg, flops, Precision::Fp16, "g") ==
        static_cast<Time>(std::ceil(std::ceil(flops / (2.0 * cfg.gemm_macs_fp16)) * 1e12 / cfg.clock_hz)));
  CHECK(vector_time(cfg, 1000, "v") == 8 * 1000);  // 8 cycles at 1 GHz
  CHECK(scratch_read_time(cfg, 1000) == cfg.ipcq_bank_hop + 8 * 1000);
  CHECK(gemm_macs_per_cycle(cfg, Precision::Int8) == 0);
  CHECK_THROWS_AS(gemm_time(cfg, flops, Precision::Int8, "i8"), kernbench::ConfigError);
  CHECK_THROWS_AS(cycles_to_time(cfg, 1e60, "huge"), kernbench::UsageError);
}
