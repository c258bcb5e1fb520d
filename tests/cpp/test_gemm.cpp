// test_gemm.cpp -- the GEMM kernel model: efficiency against the stage
// limit, the pinned-operand window, tile and op counts, scratch and
// precision errors, determinism, and the multi-PE split.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "kernels/gemm.hpp"
#include "machines.hpp"
#include "runtime/executor.hpp"
#include "sim/errors.hpp"

using namespace kernbench::testing;
using namespace kernbench::kernels;
using kernbench::runtime::Executor;
using kernbench::runtime::OpId;
using kernbench::runtime::OpKind;
using kernbench::runtime::Program;
using kernbench::runtime::RunResult;
using kernbench::sim::kKiB;
using kernbench::sim::kMiB;
using kernbench::sim::kNanosecond;

namespace {

// One SIP of 2 cubes x 8 PEs; the HBM slice link (256 GB/s) is every PE's
// bottleneck to its own slice. 2 TFLOP/s fp16 per PE, no int8 mode.
Config machine_config(int macs_fp16 = 1024) {
  Config c = system_config(1, 1, SipTopology::Ring, 2, 1);
  pe_config(c).clock_hz = 1'000'000'000;
  pe_config(c).dispatch = 20 * kNanosecond;
  pe_config(c).dma_channels = 2;
  pe_config(c).gemm_macs_fp32 = 256;
  pe_config(c).gemm_macs_fp16 = macs_fp16;
  pe_config(c).gemm_macs_int8 = 0;
  pe_config(c).scratch = kMiB;
  return c;
}

constexpr double kHbmBytesPerS = 256e9;

struct Run {
  GemmPlan plan;
  Program program;
  RunResult result;
};

Run run(const GemmSpec& spec, const Config& config = machine_config()) {
  System system(config);
  GemmPlan plan;
  Program p = gemm_program(system, spec, &plan);
  RunResult r = Executor(system).run(p);
  return Run{std::move(plan), std::move(p), std::move(r)};
}

GemmSpec spec(std::int64_t m, std::int64_t n, std::int64_t k, Precision p = Precision::Fp16) {
  GemmSpec s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.precision = p;
  return s;
}

// Program ops of one kind, in order.
std::vector<OpId> ops_of(const Program& p, OpKind kind) {
  std::vector<OpId> out;
  for (OpId i = 0; i < p.size(); ++i)
    if (p.op(i).kind == kind) out.push_back(i);
  return out;
}

kernbench::sim::Time span(const RunResult& r, OpId op) { return r.ops[op].end - r.ops[op].start; }

}  // namespace

TEST_CASE("a compute-bound GEMM reaches >= 90 % of peak", "[gemm]") {
  for (auto prec : {Precision::Fp16, Precision::Fp32}) {
    const Run x = run(spec(512, 512, 512, prec));
    const double achieved = x.plan.flops / kernbench::sim::to_seconds(x.result.makespan());
    INFO(kernbench::topology::to_string(prec)
         << ": " << achieved / 1e12 << " TFLOP/s of " << x.plan.peak_flops_per_s / 1e12 << ", tiles " << x.plan.tile_m
         << "x" << x.plan.tile_n << "x" << x.plan.tile_k);
    CHECK(x.plan.limit == "compute");
    CHECK(achieved >= 0.9 * x.plan.peak_flops_per_s);
    CHECK(achieved <= x.plan.peak_flops_per_s);
    // The composite's window is bounded below by the steady-state limit and
    // the plan's whole-run estimate is close to what the simulation did.
    const OpId c = ops_of(x.program, OpKind::Composite).front();
    CHECK(span(x.result, c) >= x.plan.ideal_ps);
    CHECK(static_cast<double>(x.result.makespan()) == Approx(static_cast<double>(x.plan.estimate_ps)).epsilon(0.02));
  }
}

TEST_CASE("a DMA-bound GEMM matches bytes / bandwidth within 5 %", "[gemm]") {
  // A GEMV-like shape: B (8 MiB) streams through once, ~1 FLOP per byte.
  const Run x = run(spec(2, 2048, 2048));
  const GemmShare& s = x.plan.critical_share();
  CHECK(x.plan.limit == "dma");
  CHECK(x.plan.read_bytes_per_s == Approx(kHbmBytesPerS));
  const double read_bytes = static_cast<double>(s.steps) * static_cast<double>(s.load_a + s.load_b);
  CHECK(read_bytes >= 2048.0 * 2048 * 2);  // all of B at least
  const double expected_ps = read_bytes / kHbmBytesPerS * 1e12;
  const OpId c = ops_of(x.program, OpKind::Composite).front();
  INFO("window " << span(x.result, c) << " ps vs bytes / bandwidth " << expected_ps << " ps");
  CHECK(static_cast<double>(span(x.result, c)) == Approx(expected_ps).epsilon(0.05));
  CHECK(static_cast<double>(x.result.makespan()) == Approx(expected_ps).epsilon(0.05));
  CHECK(x.result.op_bytes.at("dma") == x.plan.hbm_bytes);
}

TEST_CASE("the composite window excludes the pinned-operand load", "[gemm][pinned]") {
  // The reference's skinny case, M x N x K = 32 x 3072 x 32: B (K x N fp16)
  // is 192 KiB, 768 ns at 256 GB/s. With a GEMM engine fast enough for the
  // case to be DMA-bound (16 TFLOP/s, like the tool the reference used),
  // taking B out of the pipeline shrinks the window by about its load.
  GemmSpec s = spec(32, 3072, 32);
  const Config fast = machine_config(8192);
  const Run plain = run(s, fast);
  s.pinned = true;
  const Run pinned = run(s, fast);
  const OpId pin = ops_of(pinned.program, OpKind::Dma).front();
  const OpId cp = ops_of(pinned.program, OpKind::Composite).front();
  const OpId cu = ops_of(plain.program, OpKind::Composite).front();
  CHECK(pinned.plan.shares[0].pinned == 192 * kKiB);
  CHECK(static_cast<std::size_t>(pinned.program.op(pin).tag) == pinned.program.tags().size() - 1);  // "pinned"
  CHECK(pinned.program.tags()[static_cast<std::size_t>(pinned.program.op(pin).tag)] == "pinned");
  // The pinned load: 192 KiB at the slice's 256 GB/s, plus the round trip.
  CHECK(static_cast<double>(span(pinned.result, pin)) == Approx(192.0 * 1024 / kHbmBytesPerS * 1e12).epsilon(0.05));
  // It runs before the composite, whose window therefore leaves it out ...
  CHECK(pinned.result.ops[cp].start > pinned.result.ops[pin].end);
  CHECK(pinned.result.makespan() - span(pinned.result, cp) >= span(pinned.result, pin));
  // ... and the window shrinks: the plain one moves B's 192 KiB in and C's
  // 192 KiB out (opposite link directions, overlapped), the pinned one only
  // A's 2 KiB and C, so it is bound by C's stores (768 ns).
  const auto shrink = span(plain.result, cu) - span(pinned.result, cp);
  INFO("window " << span(plain.result, cu) << " ps -> " << span(pinned.result, cp) << " ps, pinned load "
                 << span(pinned.result, pin) << " ps");
  CHECK(shrink >= span(pinned.result, pin) / 3);
  CHECK(span(pinned.result, cp) >= 768'000);
  CHECK(span(pinned.result, cp) <= 768'000 * 5 / 4);
  CHECK(pinned.plan.limit == "dma");
  CHECK(pinned.plan.scratch_per_pe >= 192 * kKiB);

  // On the default engine (2 TFLOP/s) the case is compute-bound: pinning
  // leaves the window as it was, and the end-to-end time grows by the load.
  GemmSpec d = spec(32, 3072, 32);
  const Run dplain = run(d);
  d.pinned = true;
  const Run dpinned = run(d);
  const OpId dpin = ops_of(dpinned.program, OpKind::Dma).front();
  const auto dwin = span(dpinned.result, ops_of(dpinned.program, OpKind::Composite).front());
  const auto uwin = span(dplain.result, ops_of(dplain.program, OpKind::Composite).front());
  CHECK(static_cast<double>(dwin) == Approx(static_cast<double>(uwin)).epsilon(0.03));
  CHECK(dpinned.result.makespan() - dplain.result.makespan() >= span(dpinned.result, dpin) * 9 / 10);
}

TEST_CASE("op counts equal the tile counts", "[gemm]") {
  for (bool pinned : {false, true}) {
    GemmSpec s = spec(256, 384, 512);
    s.tile_m = 64;
    s.tile_n = 128;
    s.tile_k = 128;
    s.pinned = pinned;
    const Run x = run(s);
    const GemmShare& sh = x.plan.shares.at(0);
    CHECK(x.plan.tile_m == 64);
    CHECK(x.plan.tile_n == 128);
    CHECK(x.plan.tile_k == 128);
    CHECK(sh.tiles_m == 4);
    CHECK(sh.tiles_n == 3);
    CHECK(sh.tiles_k == 4);
    CHECK(sh.steps == 4 * 3 * 4);
    const std::uint64_t loads = pinned ? 1 : 2;
    CHECK(x.result.op_counts.at("gemm") == sh.steps);
    CHECK(x.result.op_counts.at("dma") == sh.steps * (loads + 1) + (pinned ? 1 : 0));
    CHECK(x.result.op_counts.at("composite") == 1);
    CHECK(x.result.op_counts.at("alloc") == 1);
    CHECK(x.result.op_counts.at("free") == 1);
    // Exact traffic when the tiles divide the shape: A re-read per N tile,
    // B per M tile (or once, pinned), C written once.
    const kernbench::sim::Bytes a = 256 * 512 * 2 * 3, b = 512 * 384 * 2 * (pinned ? 1 : 4), c = 256 * 384 * 2;
    CHECK(x.result.op_bytes.at("dma") == a + b + c);
    CHECK(x.plan.hbm_bytes == a + b + c);
    // The stage tags reach the op log, and the windows nest in the composite's.
    const OpId comp = ops_of(x.program, OpKind::Composite).front();
    for (const char* tag : {"load", "compute", "store"}) {
      const auto& tags = x.program.tags();
      const auto id = static_cast<std::int32_t>(std::find(tags.begin(), tags.end(), tag) - tags.begin());
      const auto [t0, t1] = x.result.window(id);
      CHECK(t0 >= x.result.ops[comp].start);
      CHECK(t1 <= x.result.ops[comp].end);
    }
    CHECK(x.result.peak_scratch.at(x.plan.shares[0].pe) == sh.scratch);
  }
}

TEST_CASE("scratch overflow raises CapacityError with the numbers", "[gemm]") {
  System system(machine_config());
  GemmSpec s = spec(1024, 1024, 1024);
  s.tile_m = s.tile_n = s.tile_k = 512;
  // 2 x (512 KiB of A + 512 KiB of B) + 2 x 1 MiB of accumulators = 4 MiB.
  CHECK_THROWS_AS(plan_gemm(system, s), kernbench::CapacityError);
  CHECK_THROWS_WITH(plan_gemm(system, s),
                    Catch::Contains("GEMM 1024x1024x1024 fp16 on sip0.cube0.pe0") &&
                        Catch::Contains("tiles 512x512x512 need 4 MiB of scratch per PE") &&
                        Catch::Contains("A tiles 2 x 512 KiB + B tiles 2 x 512 KiB + C accumulators 2 x 1 MiB") &&
                        Catch::Contains("budget pe.scratch = 1 MiB"));
  CHECK_THROWS_AS(gemm_program(system, s), kernbench::CapacityError);
  // Pinned: B's whole share must fit besides the tiles; 4096 x 4096 fp16 is 32 MiB.
  GemmSpec p = spec(64, 4096, 4096);
  p.pinned = true;
  CHECK_THROWS_WITH(plan_gemm(system, p), Catch::Contains("no tiling fits the scratch") &&
                                              Catch::Contains("pinned B 4096 x 4096 = 32 MiB") &&
                                              Catch::Contains("budget pe.scratch = 1 MiB"));
  // A searched tiling always fits: what the executor's alloc checks.
  const GemmPlan ok = plan_gemm(system, spec(1024, 1024, 1024));
  CHECK(ok.scratch_per_pe <= kMiB);
  CHECK(ok.scratch_budget == kMiB);
}

TEST_CASE("a precision the GEMM engine lacks is a ConfigError naming it", "[gemm]") {
  System system(machine_config());
  const GemmSpec s = spec(64, 64, 64, Precision::Int8);
  CHECK_THROWS_AS(plan_gemm(system, s), kernbench::ConfigError);
  CHECK_THROWS_WITH(gemm_program(system, s),
                    Catch::Contains("GEMM 64x64x64 int8") && Catch::Contains("no int8 mode (pe.gemm.int8 = 0)"));
}

TEST_CASE("bad GEMM inputs are ConfigErrors that say what is wrong", "[gemm]") {
  System system(machine_config());
  const Machine& m = system.machine();
  CHECK_THROWS_WITH(plan_gemm(system, spec(0, 8, 8)), Catch::Contains("must be positive, got M = 0"));
  CHECK_THROWS_WITH(plan_gemm(system, spec(8, 8, -1)), Catch::Contains("K = -1"));
  GemmSpec s = spec(64, 64, 64);
  s.pes = {m.hbm_ctrl(0, 0, 0)};
  CHECK_THROWS_WITH(plan_gemm(system, s), Catch::Contains("sip0.cube0.hbm_ctrl.pe0 is a hbm_ctrl, not a PE"));
  s.pes = {static_cast<NodeId>(m.num_nodes())};
  CHECK_THROWS_WITH(plan_gemm(system, s), Catch::Contains("does not exist"));
  s.pes = {m.pe(0, 0, 1), m.pe(0, 0, 1)};
  CHECK_THROWS_WITH(plan_gemm(system, s), Catch::Contains("sip0.cube0.pe1 is listed twice"));
  // 7 PEs cannot tile a 4 x 4 output (K is not split).
  GemmSpec t = spec(4, 4, 64);
  for (int p = 0; p < 7; ++p) t.pes.push_back(m.pe(0, 0, p));
  CHECK_THROWS_WITH(plan_gemm(system, t), Catch::Contains("cannot split a 4 x 4 output over 7 PEs"));
  GemmSpec u = spec(64, 64, 64);
  u.pes = {m.pe(0, 0, 0)};
  u.homes = {m.hbm_ctrl(0, 0, 0), m.hbm_ctrl(0, 0, 1)};
  CHECK_THROWS_WITH(plan_gemm(system, u), Catch::Contains("2 homes for 1 PEs"));
  u.buffers = 0;
  CHECK_THROWS_WITH(plan_gemm(system, u), Catch::Contains("buffers must be >= 1"));
}

TEST_CASE("the same GEMM twice gives the same op log", "[gemm][determinism]") {
  auto once = [] {
    GemmSpec s = spec(256, 512, 384);
    System probe(machine_config());
    for (int p = 0; p < 8; ++p) s.pes.push_back(probe.machine().pe(0, p / 4, p % 4));
    return run(s);
  };
  const Run a = once(), b = once();
  REQUIRE(a.result.log.size() == b.result.log.size());
  CHECK(a.result.log.op() == b.result.log.op());
  CHECK(a.result.log.agent() == b.result.log.agent());
  CHECK(a.result.log.resource() == b.result.log.resource());
  CHECK(a.result.log.kind() == b.result.log.kind());
  CHECK(a.result.log.tag() == b.result.log.tag());
  CHECK(a.result.log.issue() == b.result.log.issue());
  CHECK(a.result.log.start() == b.result.log.start());
  CHECK(a.result.log.end() == b.result.log.end());
  CHECK(a.result.log.bytes() == b.result.log.bytes());
  CHECK(a.result.log.work() == b.result.log.work());
  CHECK(a.result.makespan() == b.result.makespan());
}

TEST_CASE("a multi-PE GEMM covers every output once and conserves FLOPs", "[gemm][multi]") {
  System probe(machine_config());
  const Machine& m = probe.machine();
  // Uneven on purpose: 300 rows and 200 columns over 16 PEs in two cubes,
  // tiles that do not divide the shares.
  GemmSpec s = spec(300, 200, 96);
  for (int p = 0; p < 16; ++p) s.pes.push_back(m.pe(0, p / 8, p % 8));
  s.tile_m = 32;
  s.tile_n = 24;
  s.tile_k = 40;
  const Run x = run(s);
  REQUIRE(x.plan.shares.size() == 16);
  CHECK(x.plan.grid_m * x.plan.grid_n == 16);
  // Every element of C belongs to exactly one share.
  std::vector<int> owner(300 * 200, 0);
  for (const GemmShare& sh : x.plan.shares) {
    CHECK(sh.home == m.hbm_ctrl(m.node(sh.pe).sip, m.node(sh.pe).cube, m.node(sh.pe).pe));  // own slice
    for (std::int64_t i = sh.m0; i < sh.m0 + sh.m; ++i)
      for (std::int64_t j = sh.n0; j < sh.n0 + sh.n; ++j) ++owner[static_cast<std::size_t>(i * 200 + j)];
  }
  CHECK(std::all_of(owner.begin(), owner.end(), [](int c) { return c == 1; }));
  // Every tile of every share computed once: GEMM rows = the tile counts,
  // their FLOPs sum to 2 M N K, each on the PE that owns the share.
  std::uint64_t steps = 0;
  for (const GemmShare& sh : x.plan.shares) {
    CHECK(sh.steps == sh.tiles_m * sh.tiles_n * sh.tiles_k);
    steps += sh.steps;
  }
  CHECK(x.plan.steps_total == steps);
  CHECK(x.result.op_counts.at("gemm") == steps);
  CHECK(x.result.op_counts.at("composite") == 16);
  double flops = 0.0;
  std::set<std::int32_t> agents;
  const auto& kinds = x.result.log.kind_names();
  const auto gemm = static_cast<std::int32_t>(std::find(kinds.begin(), kinds.end(), "gemm") - kinds.begin());
  for (std::size_t i = 0; i < x.result.log.size(); ++i) {
    if (x.result.log.kind()[i] != gemm) continue;
    flops += x.result.log.work()[i];
    agents.insert(x.result.log.agent()[i]);
  }
  CHECK(flops == Approx(2.0 * 300 * 200 * 96).epsilon(1e-12));
  CHECK(agents.size() == 16);
  // A is read once per N tile and B once per M tile, per share; C once.
  kernbench::sim::Bytes expected = 0;
  for (const GemmShare& sh : x.plan.shares)
    expected += sh.m * 96 * 2 * sh.tiles_n + 96 * sh.n * 2 * sh.tiles_m + sh.m * sh.n * 2;
  const auto moved = x.result.op_bytes.at("dma");
  CHECK(moved >= expected);
  CHECK(moved <= expected + 3 * static_cast<kernbench::sim::Bytes>(steps));  // whole bytes per step, rounded up
  CHECK(x.plan.peak_flops_per_s == Approx(16 * 2.048e12));
}

TEST_CASE("the default split is across M and N, and remote homes slow a DMA-bound GEMM", "[gemm][multi]") {
  System probe(machine_config());
  const Machine& m = probe.machine();
  GemmSpec s = spec(8, 4096, 1024);
  for (int p = 0; p < 8; ++p) s.pes.push_back(m.pe(0, 0, p));
  const Run local = run(s);
  CHECK(local.plan.grid_m * local.plan.grid_n == 8);
  CHECK(local.plan.limit == "dma");
  // All shares on one slice: eight PEs contend for one 256 GB/s link.
  s.homes.assign(8, m.hbm_ctrl(0, 0, 0));
  const Run hot = run(s);
  CHECK(hot.result.makespan() > 4 * local.result.makespan());
}
