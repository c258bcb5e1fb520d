// gemm.cpp -- GEMM on one die (an xdnn `fc` call), C[M,N] = A[M,K] B[K,N].
//
// The mechanism, in the order a call pays it:
//  1. fc_overhead: the call's fixed cost on the device.
//  2. The operand scan: the fc is given no max of its operands (xdnn's fc
//     takes max pointers for its quantized paths; a null one is computed),
//     so each call reads A and B once to find their range, at
//     operand_scan_bandwidth (HBM traffic through the fabric too). Its cost
//     follows the operands' bytes, not the FLOPs: it is what makes a small-M
//     fc with a large weight cost far more than its FLOPs, and FP32 about
//     twice FP16 there. Its lanes bound it too: at most
//     operand_scan_element_rate elements a second, whatever their width (so
//     FP16 may gain less than 2x). A zero bandwidth turns it off.
//  3. The tiles. C is cut into blocks whose side holds gemm_block_bytes of
//     elements (smaller when M or N is), one block per cluster at a time,
//     so blocks run in waves of ncluster; edge blocks cost whole blocks.
//     Inside a block the cluster's cores_per_cluster cores compute
//     core_tile_m x core_tile_n micro-tiles of C, K in steps of core_tile_k:
//     a block costs ceil(tiles / cores) rounds of one micro-tile each. So
//     M = 1 costs a whole core_tile_m rows, a K of 100 costs 128, and 20
//     micro-tiles on 16 cores cost 2 rounds: tile_utilization says what
//     share of the computed multiply-adds is useful.
//  4. Operand traffic: a block needs its A panel (bm x K) and B panel
//     (K x bn) from HBM in the cluster's memory. The panels of the next
//     wave are fetched through the fabric (die <-> HBM, shared by the
//     clusters) while the current wave computes (double buffering), so a
//     wave costs max(compute, fetch); the first fetch is exposed and C is
//     written back per wave.
// A micro-tile runs at the core's share of the cluster peak
// (flops_per_cycle x clock / cores) times the kernel's efficiency (one per
// precision). A core holds kpanel_capacity bytes of a K panel; past that it
// spills (the reference attributes the drop at large K to register spill),
// which costs spill_penalty % extra compute (the measured drop is a step).
//
// A conv is this GEMM after its lowering: with lowered_from > 0 the im2col
// pass first reads that many input elements and writes the m x k matrix A
// (HBM to HBM through the fabric), at lowering_bandwidth (bytes read +
// written per second); a 1x1 stride-1 conv needs none (its input is A).
// With compute.conv = implicit no conv pays that copy (an implicit-GEMM
// conv gathers its input in the panel fetch, whose bytes are A's anyway).
//
// INT8 (and BF16) have no GEMM kernel on KL1: asking is a UsageError.
#include <algorithm>
#include <cmath>

#include "platforms/k200/k200.hpp"
#include "sim/errors.hpp"
#include "topology/config/loader.hpp"

namespace kernbench::platforms::k200 {

GemmPlan K200::plan_gemm(const KernelSpec& k) const {
  using topology::Precision;
  if (k.precision == Precision::Int8 || k.precision == Precision::Bf16)
    throw UsageError(std::string("K200 GEMM: no ") + topology::to_string(k.precision) +
                     " GEMM kernel on KL1 (xdnn fc runs fp32 and fp16)");
  if (k.kind == KernelSpec::Kind::Conv && k.lowered_from < 0)
    throw UsageError("K200 conv: lowered_from (input elements) must be >= 0, got " + std::to_string(k.lowered_from));
  if (k.m <= 0 || k.n <= 0 || k.k <= 0)
    throw UsageError("K200 GEMM: M, N and K must be > 0, got " + std::to_string(k.m) + " x " + std::to_string(k.n) +
                     " x " + std::to_string(k.k));
  const auto& c = cfg_.compute;
  {
    // A, B and C must fit the die's HBM (long double: no overflow for any int64 shape).
    const long double e = static_cast<long double>(topology::element_bytes(k.precision));
    const long double m = static_cast<long double>(k.m), n = static_cast<long double>(k.n),
                      kk = static_cast<long double>(k.k);
    const long double need = (m * kk + kk * n + m * n) * e;
    if (need > static_cast<long double>(c.hbm_capacity))
      throw CapacityError("K200 GEMM " + std::to_string(k.m) + " x " + std::to_string(k.n) + " x " +
                          std::to_string(k.k) + " " + topology::to_string(k.precision) + ": A, B and C need " +
                          std::to_string(static_cast<double>(need / (1024.0L * 1024 * 1024))) +
                          " GiB, a die's HBM holds " + topology::format_bytes(c.hbm_capacity) +
                          " (k200.compute.hbm_capacity)");
  }
  GemmPlan p;
  p.ncluster = ncluster_of(k);
  const bool fp32 = k.precision == Precision::Fp32;
  const std::int64_t elem = topology::element_bytes(k.precision);
  const auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  const std::int64_t block = std::max<std::int64_t>(1, c.gemm_block_bytes / elem);
  p.block_m = std::min<std::int64_t>(block, k.m);
  p.block_n = std::min<std::int64_t>(block, k.n);
  p.blocks = ceil_div(k.m, p.block_m) * ceil_div(k.n, p.block_n);
  p.waves = ceil_div(p.blocks, p.ncluster);
  const std::int64_t tm = c.core_tile_m, tn = c.core_tile_n, tk = c.core_tile_k;
  p.core_tiles = ceil_div(p.block_m, tm) * ceil_div(p.block_n, tn);
  p.core_rounds = ceil_div(p.core_tiles, c.cores_per_cluster);
  p.k_padded = ceil_div(k.k, tk) * tk;
  const double cluster_peak =
      static_cast<double>(fp32 ? c.fp32_flops_per_cycle : c.fp16_flops_per_cycle) * static_cast<double>(c.clock_hz);
  const double core_peak = cluster_peak / c.cores_per_cluster;
  const double eff = (fp32 ? c.fp32_efficiency : c.fp16_efficiency) / 100.0;
  const double panel = static_cast<double>(k.k * elem);
  p.spill_fraction = std::max(0.0, 1.0 - static_cast<double>(c.kpanel_capacity) / panel);
  const double spill = p.spill_fraction > 0.0 ? c.spill_penalty / 100.0 : 0.0;
  const double tile_flops = 2.0 * static_cast<double>(tm * tn) * static_cast<double>(p.k_padded);
  const double seconds = static_cast<double>(p.core_rounds) * tile_flops / (core_peak * eff) * (1.0 + spill);
  p.compute_per_wave = sim::ps_from_double(seconds * 1e12, "K200 GEMM: one wave's compute");
  p.flops = 2.0 * static_cast<double>(k.m) * static_cast<double>(k.n) * static_cast<double>(k.k);
  const double computed = static_cast<double>(p.waves * p.ncluster * p.core_rounds * c.cores_per_cluster) * tile_flops;
  p.tile_utilization = p.flops / computed;
  p.scan_bytes = (k.m * k.k + k.k * k.n) * elem;
  if (c.operand_scan_bandwidth.bytes_per_s > 0) {
    p.scan_time = sim::transfer_time(p.scan_bytes, c.operand_scan_bandwidth);
    // The pass is bounded by its lanes too: at most operand_scan_element_rate elements a second.
    if (c.operand_scan_element_rate > 0)
      p.scan_time = std::max(p.scan_time, sim::ps_from_double(static_cast<double>(k.m * k.k + k.k * k.n) /
                                                                  c.operand_scan_element_rate * 1e12,
                                                              "K200 GEMM: the operand scan"));
  }
  p.hbm_per_wave = (p.block_m + p.block_n) * k.k * elem;  // per block; a wave moves this times its blocks
  p.hbm_bytes = (p.scan_time > 0 ? p.scan_bytes : 0) + p.blocks * p.hbm_per_wave + k.m * k.n * elem;
  p.peak_flops_per_s = cluster_peak * p.ncluster;
  return p;
}

sim::Task<void> K200::hbm_move(Chain& ch, Die& d, Bytes bytes, bool to_die, std::int32_t tag) {
  sim::Simulation& sim = system_.sim();
  topology::TransferSpec spec;
  spec.src = to_die ? d.hbm : d.node;
  spec.dst = to_die ? d.node : d.hbm;
  spec.bytes = bytes;
  spec.tag = tag;
  spec.agent = d.res_compute;
  const Time t0 = sim.now();
  co_await system_.fabric().transfer(spec);
  record(ch, "hbm", d.res_hbm, tag, t0, t0, sim.now(), bytes);
}

sim::Task<void> K200::hbm_pass(Chain& ch, Die& d, Bytes read, Bytes write, Time at_least, const char* kind,
                               std::int32_t tag) {
  sim::Simulation& sim = system_.sim();
  const Time t0 = sim.now();
  sim::Join j(sim);
  Chain rd = ch, wr = ch;
  if (read > 0) j.spawn("k200.hbm_pass_read", hbm_move(rd, d, read, true, tag), &rd.last);
  if (write > 0) j.spawn("k200.hbm_pass_write", hbm_move(wr, d, write, false, tag), &wr.last);
  co_await sim.delay(at_least);
  co_await j.wait();
  record(ch, kind, d.res_compute, tag, t0, t0, sim.now(), read + write);
  ch.last = rec_.later(ch.last, j.last());
}

sim::Task<void> K200::run_gemm(Chain& ch, Die& d, const KernelSpec& k) {
  sim::Simulation& sim = system_.sim();
  const GemmPlan p = plan_gemm(k);
  if (k.kind == KernelSpec::Kind::Conv && k.lowered_from > 0 && cfg_.compute.conv == ConvLowering::Im2col &&
      cfg_.compute.lowering_bandwidth.bytes_per_s > 0) {
    // im2col: the input in, the lowered matrix out, both through the die's HBM link.
    const Bytes e = topology::element_bytes(k.precision);
    const Bytes in = k.lowered_from * e, out = k.m * k.k * e;
    co_await hbm_pass(ch, d, in, out, sim::transfer_time(in + out, cfg_.compute.lowering_bandwidth), "im2col", k.tag);
  }
  const Time f0 = sim.now();
  if (cfg_.compute.fc_overhead > 0) co_await sim.delay(cfg_.compute.fc_overhead);
  record(ch, "fc_setup", d.res_compute, k.tag, f0, f0, sim.now());
  // The max-finding pass: its reads share the die's HBM link with everyone else's traffic.
  if (p.scan_time > 0) co_await hbm_pass(ch, d, p.scan_bytes, 0, p.scan_time, "fc_scan", k.tag);
  const auto wave_blocks = [&](std::int64_t w) {
    return std::min<std::int64_t>(p.ncluster, p.blocks - w * p.ncluster);
  };
  co_await hbm_move(ch, d, wave_blocks(0) * p.hbm_per_wave, true, k.tag);
  const double block_flops = p.flops / static_cast<double>(p.blocks);  // useful FLOPs, for the op log
  // C leaves in per-wave slices (its share of M x N), each written back
  // while the next wave computes; only the last one is exposed. Each fetch
  // and store forks from the wave's chain; a wave follows the later of the
  // previous wave and its panels' fetch.
  const Bytes c_total = k.m * k.n * topology::element_bytes(k.precision);
  Bytes c_left = c_total;
  sim::Join stores(sim);
  std::vector<Chain> store_chains(static_cast<std::size_t>(p.waves));  // sized once: the stores hold references
  for (std::int64_t w = 0; w < p.waves; ++w) {
    sim::Join j(sim);
    Chain fetch = ch;
    if (w + 1 < p.waves)
      j.spawn("k200.gemm_fetch", hbm_move(fetch, d, wave_blocks(w + 1) * p.hbm_per_wave, true, k.tag), &fetch.last);
    const Time c0 = sim.now();
    co_await sim.delay(p.compute_per_wave);
    record(ch, "gemm", d.res_compute, k.tag, c0, c0, sim.now(), 0, block_flops * static_cast<double>(wave_blocks(w)));
    const Bytes c_bytes = w + 1 < p.waves ? c_total * wave_blocks(w) / p.blocks : c_left;
    c_left -= c_bytes;
    Chain& sc = store_chains[static_cast<std::size_t>(w)];
    sc = ch;
    stores.spawn("k200.gemm_store", hbm_move(sc, d, c_bytes, false, k.tag), &sc.last);
    if (w + 1 < p.waves) {
      co_await j.wait();
      ch.last = rec_.later(ch.last, j.last());
    }
  }
  co_await stores.wait();
  ch.last = rec_.later(ch.last, stores.last());
}

RunReport K200::gemm(const KernelSpec& kernel, DieRef ref) {
  (void)die(ref);
  const GemmPlan plan = plan_gemm(kernel);
  sim::Simulation& sim = system_.sim();
  const Snapshot s = snapshot();
  Chain ch;
  auto call = [&]() -> sim::Task<void> {
    co_await launch_task(ch, 0, ref, kernel);
    co_await wait_task(ch, 0, ref);
  };
  sim.spawn("k200.gemm", top(call()));
  run_to_completion();
  RunReport r = report(s);
  r.flops = plan.flops;
  r.path = std::string("fc ") + topology::to_string(kernel.precision) + " nc=" + std::to_string(plan.ncluster);
  return r;
}

}  // namespace kernbench::platforms::k200
