// test_llama.cpp -- the LLaMA decoder layer Program: FLOPs and vector bytes
// against the analytic counts of the model's dims, all-reduce bytes against
// the ring's closed form, placement errors, overlap of communication with
// compute, prefill vs decode ordering, determinism; and Program::append.
#include <catch2/catch.hpp>

#include <map>

#include "workloads/llama.hpp"
#include "machines.hpp"
#include "runtime/executor.hpp"
#include "sim/errors.hpp"

using namespace kernbench::testing;
using namespace kernbench::workloads;
using kernbench::UsageError;
using kernbench::sim::kMiB;

namespace {

// One SIP of 4 x 2 cubes x 8 PEs (64 PEs), 1 MiB scratch, 2 TFLOPS per PE.
Config llama_machine() { return program_config(4, 2); }

// A small model with the layer's structure (GQA 4:1), for runs that finish in well under a second.
LlamaDims small_dims() {
  LlamaDims d;
  d.hidden = 1024;
  d.heads = 8;
  d.kv_heads = 2;
  d.head_dim = 128;
  d.intermediate = 2048;
  return d;
}

LlamaSpec spec(LlamaPhase phase, std::int64_t tokens, std::int64_t s_kv, int tp, int chunks = 0) {
  LlamaSpec s;
  s.phase = phase;
  s.tokens = tokens;
  s.s_kv = s_kv;
  s.tp = tp;
  s.chunks = chunks;
  return s;
}

// Analytic FLOPs of one LLaMA-3.1-70B layer, written out from the model card dims.
double analytic_70b(double T, double S) {
  const double H = 8192, I = 28672, kv = 8 * 128, h_q = 64, d = 128;
  return 2 * T * H * (H + 2 * kv)  // Q, K, V projections
         + 4 * T * S * d * h_q     // QK^T and PV, unmasked
         + 2 * T * H * H           // O projection
         + 3 * 2 * T * H * I;      // gate, up, down
}

kernbench::runtime::Bytes vector_bytes(const kernbench::runtime::Program& p) {
  kernbench::runtime::Bytes b = 0;
  for (const auto& op : p.ops()) {
    if (op.kind == kernbench::runtime::OpKind::Composite) {
      const auto& pl = p.pipelines()[op.pipeline];
      if (pl.compute == kernbench::runtime::OpKind::Vector) b += pl.vector_bytes * pl.tiles;
    }
  }
  return b;
}

}  // namespace

TEST_CASE("llama: the program's FLOPs equal the analytic count of the 70B dims", "[llama]") {
  System system(llama_machine());
  struct Case {
    LlamaPhase phase;
    std::int64_t tokens, s_kv;
    int tp;
  };
  for (const Case& c : {Case{LlamaPhase::Prefill, 256, 256, 8}, Case{LlamaPhase::Prefill, 128, 128, 2},
                        Case{LlamaPhase::Prefill, 256, 256, 4}, Case{LlamaPhase::Decode, 4, 1024, 8},
                        Case{LlamaPhase::Decode, 2, 512, 1}}) {
    LlamaPlan plan;
    const auto prog = llama_program(system, spec(c.phase, c.tokens, c.s_kv, c.tp), &plan);
    const double want = analytic_70b(static_cast<double>(c.tokens), static_cast<double>(c.s_kv));
    INFO("tokens " << c.tokens << " s_kv " << c.s_kv << " tp " << c.tp);
    CHECK(plan.flops_model == Approx(want).epsilon(1e-12));
    CHECK(program_flops(prog) == Approx(want).epsilon(1e-9));  // tp <= 8: nothing is computed twice
    CHECK(vector_bytes(prog) == plan.vector_bytes);
  }
}

TEST_CASE("llama: tp > 8 replicates the K/V projection and nothing else", "[llama]") {
  System system(llama_machine());
  LlamaPlan plan;
  const auto prog = llama_program(system, spec(LlamaPhase::Prefill, 128, 128, 16), &plan);
  const double T = 128, H = 8192;
  // 16 ranks each project one K and one V head (8 heads twice over).
  const double extra = 2 * T * H * 2 * (16 - 8) * 128;
  CHECK(plan.group_pes == 2);
  CHECK(plan.gqa_case == 1);
  CHECK(program_flops(prog) == Approx(analytic_70b(T, T) + extra).epsilon(1e-9));
  CHECK(plan.flops_executed == Approx(analytic_70b(T, T) + extra).epsilon(1e-12));
}

TEST_CASE("llama: all-reduce bytes are the ring's 2 (p - 1) x T x hidden x e per all-reduce", "[llama]") {
  System system(llama_machine());
  for (int tp : {2, 4}) {
    auto s = spec(LlamaPhase::Prefill, 64, 64, tp, 2);
    s.dims = small_dims();
    const LlamaResult r = run_llama(system, s);
    const double T = 64, H = 1024, e = 2;
    INFO("tp " << tp);
    CHECK(r.plan.allreduce_bytes == static_cast<kernbench::runtime::Bytes>(T * H * e));
    for (const char* ar : {"allreduce1", "allreduce2"})
      CHECK(static_cast<double>(r.phases.at(ar).send_bytes) == 2.0 * (tp - 1) * T * H * e);
    CHECK(r.flops_program == Approx(r.plan.flops_executed).epsilon(1e-9));
    CHECK(r.latency > 0);
  }
}

TEST_CASE("llama: placement errors are UsageErrors that say what is wrong", "[llama]") {
  System system(llama_machine());
  auto msg = [&](LlamaSpec s) {
    try {
      (void)plan_llama(system, s);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(msg(spec(LlamaPhase::Prefill, 256, 0, 3)), Catch::Contains("does not divide the 64 query heads"));
  CHECK_THAT(msg(spec(LlamaPhase::Prefill, 256, 0, 128)), Catch::Contains("does not divide the 64 query heads"));
  auto many = spec(LlamaPhase::Prefill, 256, 0, 64);
  many.replicas = 2;
  CHECK_THAT(msg(many), Catch::Contains("do not fit the machine's 64 PEs"));
  auto shifted = spec(LlamaPhase::Prefill, 256, 0, 16);
  shifted.first_pe = 1;  // groups of 2 PEs would straddle cubes
  CHECK_THAT(msg(shifted), Catch::Contains("consecutive PEs of one cube"));
  CHECK_THAT(msg(spec(LlamaPhase::Decode, 8, 0, 8)), Catch::Contains("s_kv must be >= 1"));
  CHECK_THAT(msg(spec(LlamaPhase::Prefill, 256, 0, 8, 3)), Catch::Contains("chunks = 3"));
  CHECK_THAT(msg(spec(LlamaPhase::Prefill, 256, 512, 8)), Catch::Contains("s_kv must equal tokens"));
  CHECK_THROWS_AS(llama_phase_from("train"), UsageError);
}

TEST_CASE("llama: communication overlaps compute; prefill out-produces decode; reruns are identical", "[llama]") {
  auto s = spec(LlamaPhase::Prefill, 128, 128, 4, 4);
  s.dims = small_dims();
  System a(llama_machine());
  const LlamaResult r = run_llama(a, s);
  // The all-reduce of chunk 0 is in flight while later chunks compute: the
  // AR 1 window overlaps the attention window.
  const auto& ar = r.phases.at("allreduce1");
  const auto& at = r.phases.at("attention");
  CHECK(ar.first_start < at.last_end);
  // Every phase ran and the layer ends with the second all-reduce's residual.
  for (const auto& name : llama_phase_names()) {
    INFO(name);
    CHECK(r.phases.at(name).active > 0);
  }
  // Summed phase activity exceeds the makespan only because phases overlap.
  kernbench::runtime::Time sum = 0;
  for (const auto& [name, p] : r.phases) sum += p.active;
  CHECK(sum > r.latency);

  System b(llama_machine());
  CHECK(run_llama(b, s).latency == r.latency);

  // Decode of 4 sequences reads every weight for 4 tokens; prefill of 128
  // tokens reuses them 128 times: more tokens per second.
  auto d = spec(LlamaPhase::Decode, 4, 128, 4, 2);
  d.dims = small_dims();
  System c(llama_machine());
  const LlamaResult rd = run_llama(c, d);
  CHECK(r.tokens_per_s > 2 * rd.tokens_per_s);
  CHECK(rd.plan.gqa_case == 4);
}

TEST_CASE("llama: a larger TP degree lowers the prefill latency of a compute-bound layer", "[llama]") {
  auto s1 = spec(LlamaPhase::Prefill, 128, 128, 1, 2);
  s1.dims = small_dims();
  auto s4 = s1;
  s4.tp = 4;
  System a(llama_machine()), b(llama_machine());
  const auto r1 = run_llama(a, s1);
  const auto r4 = run_llama(b, s4);
  CHECK(r4.latency < r1.latency);
  CHECK(r1.phases.count("allreduce1") == 0);  // one rank: nothing to reduce
}

TEST_CASE("Program::append remaps dependencies, tags, pipelines and message keys", "[llama][program]") {
  System system(llama_machine());
  const auto& m = system.machine();
  const auto p0 = m.pe(0, 0, 0), p1 = m.pe(0, 0, 1);
  kernbench::runtime::Program sub("sub");
  const auto s = sub.send(p0, p1, 4096, 0, {}, "send", sub.tag("x"));
  const auto r = sub.recv(p1, p0, 0, {}, "recv", sub.tag("y"));
  sub.gemm(p1, 1e6, Precision::Fp16, {r}, "gemm", sub.tag("x"));
  kernbench::runtime::Program prog("main");
  const auto first = prog.append(sub);
  const auto sinks = prog.sinks(first);
  const auto second = prog.append(sub, sinks);
  CHECK(first == 0);
  CHECK(second == 3);
  CHECK(prog.size() == 6);
  CHECK(prog.op(5).deps == std::vector<kernbench::runtime::OpId>{4});  // remapped
  CHECK(prog.op(3).deps == sinks);                                     // roots wait for `after`
  CHECK(prog.op(3).key != prog.op(0).key);                             // keys shifted
  CHECK(prog.op(3).key == prog.op(4).key);
  CHECK(prog.tags()[static_cast<std::size_t>(prog.op(5).tag)] == "x");
  CHECK(prog.tags().size() == 3);  // "", x, y interned once
  CHECK_THROWS_AS(prog.append(sub, {99}), UsageError);
  const auto run = kernbench::runtime::Executor(system).run(prog);
  CHECK(run.ops[3].start >= run.ops[2].end);  // the second copy waited for the first's sinks
  (void)s;
}

TEST_CASE("Program::append keeps every key distinct across appends mixed with sends", "[llama][program]") {
  System system(llama_machine());
  const auto& m = system.machine();
  const auto p0 = m.pe(0, 0, 0), p1 = m.pe(0, 0, 1);
  kernbench::runtime::Program sub("sub");  // keys 5 and 7
  sub.send(p0, p1, 64, 5);
  sub.recv(p1, p0, 5);
  sub.send(p1, p0, 64, 7);
  sub.recv(p0, p1, 7);
  kernbench::runtime::Program prog("main");
  prog.send(p0, p1, 64, 100);  // its own key, above the sub-program's
  prog.recv(p1, p0, 100);
  for (int i = 0; i < 50; ++i) {
    prog.append(sub);
    if (i == 20) {  // a send added between appends raises the floor for the next
      prog.send(p0, p1, 64, 100000);
      prog.recv(p1, p0, 100000);
    }
  }
  // Every pair stays a pair and no two pairs share a key: 1 + 2 x 50 + 1.
  std::map<std::int64_t, int> uses;
  for (const auto& op : prog.ops())
    if (op.kind == kernbench::runtime::OpKind::Send) ++uses[op.key];
  CHECK(uses.size() == 102);
  for (const auto& [key, n] : uses) CHECK(n == 1);
  // Appended after the 100000 send, a copy's keys lie above it.
  CHECK(prog.op(2 + 21 * 4 + 2).key > 100000);
  const auto run = kernbench::runtime::Executor(system).run(prog);  // every recv meets its send
  CHECK(run.end > run.start);
}
