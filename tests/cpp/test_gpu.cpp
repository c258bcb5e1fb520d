// test_gpu.cpp -- the GPU execution target: kernel models against their
// closed forms (waves, the memory-bound GEMM, streaming kernels, split-KV
// decode attention, the causal mask) and the runtime's launch and kernel ops
// (host launches run ahead of the GPU in order; no PE_CPU dispatch; a
// kernel started while a collective holds SMs runs in more waves).
#include <catch2/catch.hpp>

#include "kernels/gpu/attention.hpp"
#include "kernels/gpu/gemm.hpp"
#include "kernels/gpu/stream.hpp"
#include "machines.hpp"
#include "runtime/engine_timing.hpp"
#include "runtime/executor.hpp"
#include "sim/errors.hpp"
#include "topology/system.hpp"

using namespace kernbench::testing;
using namespace kernbench::kernels::gpu;
using kernbench::runtime::Engine;
using kernbench::runtime::KernelCost;
using kernbench::runtime::Program;
using kernbench::sim::kMicrosecond;
using kernbench::sim::transfer_time;

namespace {

// One GPU with round numbers: 100 SMs, 1 GHz, 100,000 BF16 MACs per cycle
// (2 TFLOP/s per SM), 1000 GB/s to its memory, every efficiency 1/2.
Config gpu_config() {
  Config c;
  c.source = "test-gpu";
  ExplicitGraphConfig g;
  g.nodes.push_back(ExplicitNode{"gpu0", NodeKind::Pe, {0, true}, "gpu0.hbm"});
  g.nodes.push_back(ExplicitNode{"gpu0.hbm", NodeKind::Memory, {0, true}, {}});
  g.edges.push_back(ExplicitEdge{"gpu0", "gpu0.hbm", "hbm", link(1000, 0)});
  c.graph = g;
  auto& pe = pe_config(c);
  pe.target = ExecTarget::Gpu;
  pe.clock_hz = 1'000'000'000;
  pe.gemm_macs_bf16 = 100'000;
  auto& gc = c.section<GpuConfig>();
  gc.sms = 100;
  gc.sustained_clock_ratio = 1.0;
  gc.stream_efficiency = 0.5;
  gc.gemm_memory_efficiency = 0.5;
  gc.attention_efficiency = 0.5;
  gc.kernel_latency = 2 * kMicrosecond;
  gc.launch_host = 5 * kMicrosecond;
  gc.launch_graph = 1 * kMicrosecond;
  return c;
}

}  // namespace

TEST_CASE("gpu spec reads the datasheet from the graph and pe:", "[gpu]") {
  System s(gpu_config());
  const GpuSpec g = gpu_spec(s, s.machine().at("gpu0"));
  CHECK(g.sms == 100);
  CHECK(g.memory_bw.bytes_per_s == 1'000'000'000'000);
  CHECK(g.stream_bw().bytes_per_s == 500'000'000'000);
  CHECK(g.peak_flops(Precision::Bf16) == Approx(2e14));
  CHECK(g.sm_flops(Precision::Bf16) == Approx(2e12));
  CHECK_THROWS_WITH(g.macs(Precision::Fp8), Catch::Contains("pe.gemm.fp8 is 0"));
  Config none = gpu_config();
  none.section<GpuConfig>().sms = 0;
  System s0(none);
  CHECK_THROWS_WITH(gpu_spec(s0, s0.machine().at("gpu0")), Catch::Contains("gpu.sms: 0"));
}

TEST_CASE("a GEMM whose tile count is the SM count + 1 takes two waves", "[gpu]") {
  System s(gpu_config());
  const GpuSpec g = gpu_spec(s, s.machine().at("gpu0"));
  const GemmTile t{128, 256, 64};
  const GemmKernel one = gemm_config(g, 128 * 100, 256, 4096, Precision::Bf16, t, 1);
  const GemmKernel two = gemm_config(g, 128 * 101, 256, 4096, Precision::Bf16, t, 1);
  CHECK(one.ctas == 100);
  CHECK(one.waves == 1);
  CHECK(two.ctas == 101);
  CHECK(two.waves == 2);
  // One CTA: 2 x 128 x 256 x 4096 FLOPs at 2 TFLOP/s = 134.217728 us; a wave is one CTA's time.
  CHECK(one.mainloop == 134'217'728);
  CHECK(two.mainloop == 2 * one.mainloop);
  // A partial tile at the edge costs a whole one: one more row than 100 tiles is the second wave.
  CHECK(gemm_config(g, 128 * 100 + 1, 256, 4096, Precision::Bf16, t, 1).waves == 2);
  // K is padded to whole K steps of the tile.
  CHECK(gemm_config(g, 128, 256, 65, Precision::Bf16, t, 1).mainloop ==
        gemm_config(g, 128, 256, 128, Precision::Bf16, t, 1).mainloop);
  // The planner takes the cheapest configuration: never dearer than any one of them.
  const GemmKernel best = plan_gemm(g, 128 * 101, 256, 4096, Precision::Bf16);
  for (const GemmTile& tt : kGemmTiles)
    CHECK(best.duration <= gemm_config(g, 128 * 101, 256, 4096, Precision::Bf16, tt, 1).duration);
  CHECK(best.duration < two.duration);  // a smaller tile fills the SMs better here
}

TEST_CASE("a memory-bound GEMM (M = 1) takes the weights' bytes over the achievable rate, plus launch", "[gpu]") {
  System s(gpu_config());
  const GpuSpec g = gpu_spec(s, s.machine().at("gpu0"));
  const GemmKernel k = plan_gemm(g, 1, 8192, 8192, Precision::Bf16);
  const kernbench::sim::Bytes bytes = (1 * 8192 + 8192 * 8192) * 2 + 1 * 8192 * 2;
  CHECK(k.bytes == bytes);
  CHECK(std::string(k.bound()) == "memory");
  CHECK(k.split_k == 1);  // splitting K cannot beat the memory, and costs a reduction
  CHECK(k.duration == g.cfg.kernel_latency + transfer_time(bytes, g.gemm_bw()));
  CHECK_THROWS_WITH(plan_gemm(g, 0, 8, 8, Precision::Bf16), Catch::Contains("m = 0"));
}

TEST_CASE("stream kernels sustain exactly the configured achievable rate", "[gpu]") {
  System s(gpu_config());
  const GpuSpec g = gpu_spec(s, s.machine().at("gpu0"));
  // BabelStream's byte counting: copy and mul 2 arrays, add and triad 3, dot 2; 2^25 doubles each.
  for (int arrays : {2, 3}) {
    const kernbench::sim::Bytes bytes = static_cast<kernbench::sim::Bytes>(arrays) * (1 << 25) * 8;
    const StreamKernel k = plan_stream(g, bytes);
    const auto work = k.duration - g.cfg.kernel_latency;
    CHECK(work == transfer_time(bytes, g.stream_bw()));
    CHECK(static_cast<double>(bytes) / (static_cast<double>(work) * 1e-12) == Approx(5e11).epsilon(1e-9));
  }
  CHECK_THROWS_AS(plan_stream(g, -1), kernbench::UsageError);
}

TEST_CASE("decode attention reads the KV cache at the streaming rate when split-KV covers the SMs", "[gpu]") {
  System s(gpu_config());
  const GpuSpec g = gpu_spec(s, s.machine().at("gpu0"));
  AttentionShape a;
  a.batch = 8, a.heads = 32, a.kv_heads = 8, a.q_len = 1, a.kv_len = 4096, a.head_dim = 128;
  const AttentionKernel k = plan_attention(g, a);
  const kernbench::sim::Bytes kv = 2LL * 8 * 8 * 4096 * 128 * 2;
  CHECK(k.decode);
  CHECK(k.ctas >= g.sms);  // 64 (sequence, KV head) pairs, split in 2
  CHECK(k.bytes == kv);
  CHECK(k.duration == g.cfg.kernel_latency + transfer_time(kv, g.stream_bw()));
  // One sequence, one KV head, 256 keys: one CTA, no split -- one SM's share of the rate.
  AttentionShape lone = a;
  lone.batch = 1, lone.heads = 1, lone.kv_heads = 1, lone.kv_len = 256;
  const AttentionKernel l = plan_attention(g, lone);
  CHECK(l.ctas == 1);
  CHECK(l.memory == transfer_time(l.bytes, g.scaled(0.5 / 100)));
}

TEST_CASE("prefill attention: a causal mask halves the work", "[gpu]") {
  System s(gpu_config());
  const GpuSpec g = gpu_spec(s, s.machine().at("gpu0"));
  AttentionShape a;
  a.batch = 1, a.heads = 32, a.kv_heads = 8, a.q_len = 4096, a.kv_len = 4096, a.head_dim = 128;
  a.causal = false;
  const AttentionKernel full = plan_attention(g, a);
  a.causal = true;
  const AttentionKernel causal = plan_attention(g, a);
  CHECK(!full.decode);
  CHECK(full.flops == Approx(4.0 * 32 * 4096.0 * 4096 * 128));
  CHECK(causal.flops / full.flops == Approx(4097.0 / 2 / 4096));
  CHECK(static_cast<double>(causal.compute) / static_cast<double>(full.compute) ==
        Approx(4097.0 / 2 / 4096).epsilon(1e-6));
  a.q_len = 8192;  // more queries than keys
  CHECK_THROWS_WITH(plan_attention(g, a), Catch::Contains("q_len 8192 > kv_len 4096"));
}

TEST_CASE("kernels: host launches run ahead of the GPU in order, and no PE_CPU dispatch is paid", "[gpu][runtime]") {
  const auto run = [](kernbench::sim::Time launch, kernbench::sim::Time duration) {
    System s(gpu_config());
    const auto gpu = s.machine().at("gpu0");
    Program p("back-to-back");
    std::vector<kernbench::runtime::OpId> ks;
    for (int i = 0; i < 4; ++i) {
      KernelCost c;
      c.launch = launch;
      c.duration = duration;
      std::vector<kernbench::runtime::OpId> deps;
      if (!ks.empty()) deps.push_back(ks.back());
      ks.push_back(p.kernel(gpu, c, deps, std::string(1, 'k').append(std::to_string(i))));
    }
    kernbench::runtime::Executor ex(s);
    const auto r = ex.run(p);
    for (const auto& e : r.engines)
      if (e.engine == Engine::PeCpu) CHECK(e.grants == 0);
    return std::pair{r, ks};
  };
  // GPU-bound: kernels of 10 us after launches of 5 us follow each other every 10 us.
  {
    auto [r, ks] = run(5 * kMicrosecond, 10 * kMicrosecond);
    CHECK(r.ops[ks[0]].start == 5 * kMicrosecond);
    CHECK(r.ops[ks[3]].end - r.ops[ks[0]].end == 30 * kMicrosecond);
    CHECK(r.makespan() == 45 * kMicrosecond);
  }
  // Host-bound: kernels of 1 us wait for their launches, one every 5 us.
  {
    auto [r, ks] = run(5 * kMicrosecond, 1 * kMicrosecond);
    CHECK(r.ops[ks[3]].end - r.ops[ks[0]].end == 15 * kMicrosecond);
    CHECK(r.makespan() == 21 * kMicrosecond);
  }
  // The launch engine and the SM array are listed for the GPU, each busy for its ops' time.
  {
    auto [r, ks] = run(5 * kMicrosecond, 10 * kMicrosecond);
    double launch = -1, sm = -1;
    for (const auto& e : r.engines) {
      if (e.engine == Engine::Launch) launch = e.busy;
      if (e.engine == Engine::Sm) sm = e.busy;
    }
    CHECK(launch == Approx(20.0 * kMicrosecond));
    CHECK(sm == Approx(40.0 * kMicrosecond));
  }
}

TEST_CASE("a kernel with a negative duration is refused, naming it", "[gpu][runtime]") {
  Program p("bad");
  KernelCost c;
  c.duration = -1;
  CHECK_THROWS_WITH(p.kernel(0, c, {}, "oops"), Catch::Contains("kernel 'oops'"));
}

TEST_CASE("a kernel started while a collective holds SMs runs the waves of the SMs left", "[gpu]") {
  using kernbench::runtime::fewer_sms;
  // 250 CTAs on 100 SMs: 3 waves; with 20 held, 80 SMs: 4 waves; with all held, one SM: 250 waves.
  CHECK(fewer_sms(3000, 250, 100, 20) == 4000);
  CHECK(fewer_sms(3000, 250, 100, 0) == 3000);
  CHECK(fewer_sms(3000, 250, 100, 100) == 250000);
  CHECK(fewer_sms(3000, 0, 0, 20) == 3000);  // a memory-bound kernel: no CTAs given, no stretch

  System sys(gpu_config());
  const auto gpu = sys.machine().at("gpu0");
  Program p("held");
  KernelCost nccl;  // a collective's kernel: holds 20 SMs until its release
  nccl.duration = 1 * kMicrosecond;
  nccl.hold = 20;
  const auto k0 = p.kernel(gpu, nccl, {}, "nccl");
  KernelCost gemm;
  gemm.duration = 30 * kMicrosecond;
  gemm.ctas = 250;
  gemm.sms = 100;
  const auto during = p.kernel(gpu, gemm, {k0}, "during");
  const auto release = p.sm_release(gpu, 20, {during}, "release");
  const auto after = p.kernel(gpu, gemm, {release}, "after");
  kernbench::runtime::Executor ex(sys);
  const auto r = ex.run(p);
  CHECK(r.ops[during].end - r.ops[during].start == 40 * kMicrosecond);  // 4 waves for 3
  CHECK(r.ops[after].end - r.ops[after].start == 30 * kMicrosecond);
  CHECK(r.ops[release].end == r.ops[during].end);  // a release pays no PE_CPU dispatch
  KernelCost bad = gemm;
  bad.sms = 0;
  CHECK_THROWS_WITH(p.kernel(gpu, bad, {}, "bad"),
                    Catch::Contains("kernel 'bad': ctas 250 and sms 0 must be both 0 or both > 0"));
}

TEST_CASE("a kernel on a stream of its own runs beside the SM array's queue and holds its SMs", "[gpu][runtime]") {
  System sys(gpu_config());
  const auto gpu = sys.machine().at("gpu0");
  Program p("side");
  KernelCost gemm;  // 250 CTAs on 100 SMs: 3 waves
  gemm.duration = 30 * kMicrosecond;
  gemm.ctas = 250;
  gemm.sms = 100;
  const auto first = p.kernel(gpu, gemm, {}, "first");
  KernelCost nccl;  // a collective's kernel on its NCCL stream: ready at 0 like the GEMM, holds 20 SMs
  nccl.duration = 5 * kMicrosecond;
  nccl.hold = 20;
  nccl.side = true;
  const auto side = p.kernel(gpu, nccl, {}, "nccl");
  const auto second = p.kernel(gpu, gemm, {}, "second");  // queued behind `first` on the SM array
  const auto release = p.sm_release(gpu, 20, {second}, "release");
  kernbench::runtime::Executor ex(sys);
  const auto r = ex.run(p);
  CHECK(r.ops[first].start == 0);
  CHECK(r.ops[side].start == 0);  // not behind `first`
  CHECK(r.ops[side].end == 5 * kMicrosecond);
  CHECK(r.ops[first].end == 30 * kMicrosecond);                         // started with every SM: keeps its width
  CHECK(r.ops[second].start == 30 * kMicrosecond);                      // behind `first`, not behind the side kernel
  CHECK(r.ops[second].end - r.ops[second].start == 40 * kMicrosecond);  // started while 20 SMs are held
  CHECK(r.ops[release].end == r.ops[second].end);
}
