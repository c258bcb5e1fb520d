// gemm.cpp -- planning a GEMM (split, tiles, scratch, estimates) and building
// its Program. The layout and loop order are documented in gemm.hpp.
#include "kernels/gemm.hpp"
#include "config/quantity.hpp"
#include "runtime/config_section.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "runtime/engine_timing.hpp"
#include "runtime/hbm.hpp"
#include "sim/errors.hpp"
#include "topology/routing/routing.hpp"

namespace kernbench::kernels {
namespace {

using topology::Machine;
using topology::NodeKind;
using topology::Route;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The HBM regions of each share's A rows, B columns and C block in its home
// slice (homes that are not HBM slices hold no reservation): a CapacityError
// when a slice cannot hold what its shares need. Deterministic, so the
// program gets the same addresses the plan checked.
struct ShareRegions {
  std::uint64_t a = 0, b = 0, c = 0;
};
std::vector<ShareRegions> place_operands(const topology::System& system, const GemmPlan& plan,
                                         const std::string& what) {
  const Machine& machine = system.machine();
  runtime::HbmAllocator hbm(machine, runtime::pe_config(system.config()).hbm);
  std::vector<ShareRegions> out;
  for (const GemmShare& sh : plan.shares) {
    ShareRegions r;
    if (machine.node(sh.home).kind == NodeKind::HbmCtrl) {
      const std::string of = " of " + what + " for " + machine.node(sh.pe).name;
      r.a = hbm.alloc(sh.home, sh.m * plan.spec.k * plan.elem_bytes,
                      "A rows " + std::to_string(sh.m) + " x K " + std::to_string(plan.spec.k) + of)
                .address;
      r.b = hbm.alloc(sh.home, plan.spec.k * sh.n * plan.elem_bytes,
                      "B columns K " + std::to_string(plan.spec.k) + " x " + std::to_string(sh.n) + of)
                .address;
      r.c = hbm.alloc(sh.home, sh.m * sh.n * plan.c_elem_bytes,
                      "C block " + std::to_string(sh.m) + " x " + std::to_string(sh.n) + of)
                .address;
    }
    out.push_back(r);
  }
  return out;
}

std::string shape_text(const GemmSpec& s) {
  return "GEMM " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " " +
         topology::to_string(s.precision) + (s.pinned ? " (pinned B)" : "");
}

// The fixed costs of one PE's DMA path, estimated from the config: what the
// packet fabric charges an uncontended transfer (node overheads, wire
// latency, one flit per hop, then the rest through the bottleneck; see
// packet_fabric.hpp). An estimate: the flow model and store-and-forward
// nodes differ a little, and contention is not in it.
struct PathModel {
  double read_bw = 0.0;   // bytes/s, home -> PE (per lane: the conservative rate)
  double write_bw = 0.0;  // bytes/s, PE -> home
  Time read_fixed = 0;    // a read's channel occupancy beyond its payload's serialisation
  Time write_fixed = 0;
  topology::Bandwidth read_bottleneck{}, write_bottleneck{};
};

Time leg_fixed(const Route& r, Bytes bytes, Bytes flit, Time skip_overhead) {
  Time t = r.node_overhead - skip_overhead + r.wire_latency;
  for (const auto& h : r.hop) t += sim::transfer_time(std::min(bytes, flit), h.bandwidth);
  return t;
}

PathModel path_model(const topology::System& system, topology::Router& router, NodeId pe, NodeId home) {
  const Machine& m = system.machine();
  const auto& fc = system.config().fabric;
  // Copies: the router's cache may rehash between the two lookups.
  const Route out = router.route(pe, home);
  const Route back = router.route(home, pe);
  PathModel p;
  p.read_bottleneck = back.bottleneck;
  p.write_bottleneck = out.bottleneck;
  p.read_bw = static_cast<double>(back.bottleneck.bytes_per_s);
  p.write_bw = static_cast<double>(out.bottleneck.bytes_per_s);
  // A read: the request packet to the home, then the data back (the home's
  // processing paid once, on the request). The channel is held throughout.
  // Each leg costs its fixed part plus its bytes past the first flit
  // through the bottleneck; the payload's own serialisation (bytes /
  // bottleneck) is added per transfer, so its first flit is taken off here.
  const Time request = leg_fixed(out, fc.request, fc.flit, 0) +
                       sim::transfer_time(std::max<Bytes>(fc.request - fc.flit, 0), out.bottleneck);
  p.read_fixed = request + leg_fixed(back, fc.flit, fc.flit, m.node(home).params.overhead) -
                 sim::transfer_time(fc.flit, back.bottleneck);
  p.write_fixed = leg_fixed(out, fc.flit, fc.flit, 0) - sim::transfer_time(fc.flit, out.bottleneck);
  return p;
}

// A worst case over several paths: the search plans for the slowest PE.
PathModel worst(const std::vector<PathModel>& paths) {
  PathModel w = paths.front();
  for (const auto& p : paths) {
    if (p.read_bw < w.read_bw) {
      w.read_bw = p.read_bw;
      w.read_bottleneck = p.read_bottleneck;
    }
    if (p.write_bw < w.write_bw) {
      w.write_bw = p.write_bw;
      w.write_bottleneck = p.write_bottleneck;
    }
    w.read_fixed = std::max(w.read_fixed, p.read_fixed);
    w.write_fixed = std::max(w.write_fixed, p.write_fixed);
  }
  return w;
}

// Everything needed to evaluate one share under one choice of tiles.
struct Context {
  const GemmSpec& spec;
  const runtime::PeConfig& pe;
  Bytes e = 0, ec = 0, acc = 4;
  int macs = 0;
};

Time compute_time(const Context& c, double flops) {
  // What the executor's GEMM engine charges (unchecked: a candidate tiling
  // may be absurdly slow; the search discards it).
  // (held at 2^62 ps: a tiling that slow is refused by plan_gemm, never cast out of range)
  return static_cast<Time>(std::min(runtime::cycles_to_ps(c.pe, runtime::gemm_cycles(flops, c.macs)), 0x1p62));
}

Bytes scratch_need(const Context& c, std::int64_t tm, std::int64_t tn, std::int64_t tk, std::int64_t n_share) {
  const Bytes a = tm * tk * c.e;
  const Bytes b = c.spec.pinned ? 0 : tk * tn * c.e;
  const Bytes pinned = c.spec.pinned ? c.spec.k * n_share * c.e : 0;
  return static_cast<Bytes>(c.spec.buffers) * (a + b) + pinned + 2 * tm * tn * c.acc;
}

std::string scratch_text(const Context& c, std::int64_t tm, std::int64_t tn, std::int64_t tk, std::int64_t n_share) {
  const std::string nb = std::to_string(c.spec.buffers) + " x ";
  std::string s = "A tiles " + nb + config::format_bytes(tm * tk * c.e, config::ByteUnits::UpToMiB);
  if (!c.spec.pinned) s += " + B tiles " + nb + config::format_bytes(tk * tn * c.e, config::ByteUnits::UpToMiB);
  if (c.spec.pinned)
    s += " + pinned B " + std::to_string(c.spec.k) + " x " + std::to_string(n_share) + " = " +
         config::format_bytes(c.spec.k * n_share * c.e, config::ByteUnits::UpToMiB);
  s += " + C accumulators 2 x " + config::format_bytes(tm * tn * c.acc, config::ByteUnits::UpToMiB);
  return s;
}

// Fills `s` (whose pe, home, m0, m, n0, n are set) for tiles tm x tn x tk.
void evaluate(const Context& c, const PathModel& path, std::int64_t tm, std::int64_t tn, std::int64_t tk,
              GemmShare& s) {
  tm = std::min(tm, s.m);
  tn = std::min(tn, s.n);
  tk = std::min(tk, c.spec.k);
  s.tiles_m = ceil_div(s.m, tm);
  s.tiles_n = ceil_div(s.n, tn);
  s.tiles_k = ceil_div(c.spec.k, tk);
  // In 128 bits: the tile counts of a huge shape multiply past 2^63 (2^40 x 4096 x 4096 wraps to 0).
  const __int128 steps128 = static_cast<__int128>(s.tiles_m) * s.tiles_n * s.tiles_k;
  if (steps128 > std::numeric_limits<std::uint32_t>::max()) {
    s.steps = 0;  // more than 2^32 steps: not a sensible tiling (the caller skips it)
    return;
  }
  const auto steps = static_cast<std::int64_t>(steps128);
  s.steps = static_cast<std::uint32_t>(steps);
  // Average traffic per step (exact totals; see the header on edge tiles).
  s.load_a = ceil_div(s.m * c.spec.k * c.e, s.tiles_m * s.tiles_k);
  s.load_b = c.spec.pinned ? 0 : ceil_div(c.spec.k * s.n * c.e, s.tiles_k * s.tiles_n);
  s.store_c = ceil_div(s.m * s.n * c.ec, steps);
  s.flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(c.spec.k) /
            static_cast<double>(steps);
  s.pinned = c.spec.pinned ? c.spec.k * s.n * c.e : 0;
  s.scratch = scratch_need(c, tm, tn, tk, s.n);

  s.load_ps = sim::transfer_time(s.load_a + s.load_b, path.read_bottleneck);
  s.store_ps = sim::transfer_time(s.store_c, path.write_bottleneck);
  s.compute_ps = compute_time(c, s.flops);
  const auto read_occ = [&](Bytes b) { return path.read_fixed + sim::transfer_time(b, path.read_bottleneck); };
  const Time write_occ = path.write_fixed + sim::transfer_time(s.store_c, path.write_bottleneck);
  const int ch = std::max(1, c.pe.dma_channels);
  const int n_loads = s.load_b > 0 ? 2 : 1;
  // The DMA stage's time per step, the larger of two bounds:
  //  - bandwidth: a step's loads (and, the other way, its store) through
  //    the path's bottleneck;
  //  - channels: a DMA holds its channel for the whole round trip, so the
  //    step's DMAs need (fixed costs + payloads) / channels of channel time.
  const Time channel_bound = ceil_div(read_occ(s.load_a) + (s.load_b > 0 ? read_occ(s.load_b) : 0) + write_occ, ch);
  s.dma_ps = std::max({s.load_ps, s.store_ps, channel_bound});
  // And the pipeline's own bound: tile t's loads start when tile t - buffers
  // has computed, so with load latency L no step beats (L + compute) / buffers.
  const Time load_latency =
      path.read_fixed * ceil_div(n_loads, ch) + sim::transfer_time(s.load_a + s.load_b, path.read_bottleneck);
  s.latency_ps = ceil_div(load_latency + s.compute_ps, static_cast<Time>(c.spec.buffers));
  s.step_ps = std::max({s.dma_ps, s.compute_ps, s.latency_ps});
  const Time step = s.step_ps;
  constexpr __int128 kLongest = std::numeric_limits<Time>::max();  // in 128 bits: a slow clock's steps x step
  s.ideal_ps = static_cast<Time>(std::min(static_cast<__int128>(steps) * step, kLongest));
  s.pinned_ps = c.spec.pinned ? read_occ(s.pinned) : 0;
  // The whole run: dispatches (alloc, [pinned], composite, free), the
  // pinned load, the first tile's loads, the steady state, the last
  // compute and the last store.
  const Time dispatches = (c.spec.pinned ? 4 : 3) * runtime::dispatch_time(c.pe);
  s.estimate_ps = static_cast<Time>(std::min(static_cast<__int128>(dispatches) + s.pinned_ps + load_latency +
                                                 static_cast<__int128>(steps - 1) * step + s.compute_ps + write_occ,
                                             kLongest));
}

// Tile sizes worth trying for a dimension d: for each power of two p, the
// balanced tile with as many tiles as p gives (ceil(d / ceil(d / p))), and d.
std::vector<std::int64_t> candidates(std::int64_t d) {
  std::set<std::int64_t> out;
  for (std::int64_t p = 1; p < d; p *= 2) out.insert(ceil_div(d, ceil_div(d, p)));
  out.insert(d);
  return {out.begin(), out.end()};
}

struct Choice {
  std::int64_t grid_m = 0, grid_n = 0, tm = 0, tn = 0, tk = 0;
  Time estimate = 0;
  Bytes traffic = 0;
  std::uint32_t steps = 0;
};

// How close to the best estimate a tiling must be to be preferred for
// having fewer steps (assumed: 1 %, well inside the estimate's own error).
constexpr double kNearBest = 0.01;

// The largest share of a grid (rows and columns split as evenly as integers allow).
GemmShare largest_share(const GemmSpec& spec, std::int64_t gm, std::int64_t gn) {
  GemmShare s;
  s.m = ceil_div(spec.m, gm);
  s.n = ceil_div(spec.n, gn);
  return s;
}

}  // namespace

Bytes gemm_elem_bytes(Precision precision) { return topology::element_bytes(precision); }

Bytes gemm_c_elem_bytes(Precision precision) {
  switch (precision) {
    case Precision::Fp32:
    case Precision::Tf32: return 4;
    case Precision::Fp16:
    case Precision::Bf16:
    case Precision::Fp8: return 2;   // FP8 GEMMs write a 16-bit result (cuBLASLt's usual D type)
    case Precision::Int8: return 4;  // int32 results
  }
  return 0;
}

GemmPlan plan_gemm(const topology::System& system, const GemmSpec& given) {
  const Machine& machine = system.machine();
  const runtime::PeConfig& pe_cfg = runtime::pe_config(system.config());
  GemmPlan plan;
  plan.spec = given;
  GemmSpec& spec = plan.spec;
  const std::string what = shape_text(spec);

  // ---- inputs ----
  if (spec.m <= 0 || spec.n <= 0 || spec.k <= 0)
    throw ConfigError(what + ": M, N and K must be positive, got M = " + std::to_string(spec.m) +
                      ", N = " + std::to_string(spec.n) + ", K = " + std::to_string(spec.k));
  // Byte counts are int64: keep every operand (at 4 B per element) far below 2^63 bytes.
  const double dm = static_cast<double>(spec.m), dn = static_cast<double>(spec.n), dk = static_cast<double>(spec.k);
  if (4.0 * std::max({dm * dn, dm * dk, dk * dn}) > 0x1p56)
    throw ConfigError(what + ": operands beyond 2^56 bytes are more than the model handles");
  // And the work: M x N x K multiply-adds at most kMaxGemmMacs, so that no tile or step count wraps.
  if (const __int128 macs = static_cast<__int128>(spec.m) * spec.n * spec.k; macs > kMaxGemmMacs) {
    const auto text = [](__int128 v) {
      std::string t;
      do t.insert(t.begin(), static_cast<char>('0' + static_cast<int>(v % 10))), v /= 10;
      while (v > 0);
      return t;
    };
    throw ConfigError(what + ": M x N x K = " + std::to_string(spec.m) + " x " + std::to_string(spec.n) + " x " +
                      std::to_string(spec.k) + " = " + text(macs) +
                      " multiply-adds, more than the model handles (at most 2^60 = " + text(kMaxGemmMacs) +
                      "); give smaller m, n or k");
  }
  if (spec.tile_m < 0 || spec.tile_n < 0 || spec.tile_k < 0)
    throw ConfigError(what + ": tile sizes must be >= 0 (0: chosen), got " + std::to_string(spec.tile_m) + " x " +
                      std::to_string(spec.tile_n) + " x " + std::to_string(spec.tile_k));
  if (spec.buffers < 1) throw ConfigError(what + ": buffers must be >= 1");
  const int macs = runtime::gemm_macs_per_cycle(pe_cfg, spec.precision);
  if (macs <= 0) throw ConfigError(what + ": " + runtime::no_gemm_mode_text(spec.precision));
  if (spec.pes.empty()) {
    if (machine.pes().empty())
      throw ConfigError(what +
                        ": the machine has no PEs: give it `kind: pe` nodes (graph.nodes), or name the "
                        "agents in GemmSpec::pes");
    spec.pes.push_back(machine.pes().front());
  }
  std::set<NodeId> seen;
  for (NodeId p : spec.pes) {
    if (p >= machine.num_nodes())
      throw ConfigError(what + ": node id " + std::to_string(p) + " does not exist (the machine has " +
                        std::to_string(machine.num_nodes()) + " nodes)");
    if (machine.node(p).kind != NodeKind::Pe)
      throw ConfigError(what + ": " + machine.node(p).name + " is a " + topology::to_string(machine.node(p).kind) +
                        ", not a PE");
    if (!seen.insert(p).second) throw ConfigError(what + ": " + machine.node(p).name + " is listed twice");
  }
  const auto P = static_cast<std::int64_t>(spec.pes.size());
  if (spec.homes.empty()) {
    for (NodeId p : spec.pes) {
      const auto home = machine.memory_of(p);
      if (!home)
        throw ConfigError(what + ": " + machine.node(p).name +
                          " has no memory of its own: declare it with `memory: NODE` on its graph.nodes entry, "
                          "or give the homes of the shares");
      spec.homes.push_back(*home);
    }
  } else {
    if (spec.homes.size() != spec.pes.size())
      throw ConfigError(what + ": " + std::to_string(spec.homes.size()) + " homes for " + std::to_string(P) +
                        " PEs (one home per PE, or none for each PE's own HBM slice)");
    for (std::size_t i = 0; i < spec.homes.size(); ++i) {
      if (spec.homes[i] >= machine.num_nodes())
        throw ConfigError(what + ": home node id " + std::to_string(spec.homes[i]) + " does not exist");
      if (spec.homes[i] == spec.pes[i])
        throw ConfigError(what + ": the home of " + machine.node(spec.pes[i]).name +
                          "'s share must be a memory node, not the PE itself");
    }
  }

  Context ctx{spec, pe_cfg, gemm_elem_bytes(spec.precision), gemm_c_elem_bytes(spec.precision), 4, macs};
  plan.elem_bytes = ctx.e;
  plan.c_elem_bytes = ctx.ec;
  plan.acc_elem_bytes = ctx.acc;
  plan.scratch_budget = pe_cfg.scratch;
  plan.flops = runtime::gemm_flops(dm, dn, dk);
  plan.peak_flops_per_s = static_cast<double>(P) * 2.0 * macs * static_cast<double>(pe_cfg.clock_hz);

  topology::Router router(machine);
  std::vector<PathModel> paths;
  for (std::size_t i = 0; i < spec.pes.size(); ++i)
    paths.push_back(path_model(system, router, spec.pes[i], spec.homes[i]));
  const PathModel slowest = worst(paths);

  // ---- the split and the tiles ----
  // Every grid and tiling that fits is estimated; among those within
  // kNearBest of the best estimate the fewest steps win (then the least HBM
  // traffic): fewer, larger DMAs depend less on the fixed DMA costs the
  // estimate can misjudge, and simulate faster.
  std::vector<Choice> feasible;
  Bytes overflow_need = 0;  // the smallest tiling that did not fit, for the error
  std::string overflow;
  bool any_grid = false;
  for (std::int64_t gm = 1; gm <= P; ++gm) {
    if (P % gm != 0) continue;
    const std::int64_t gn = P / gm;
    if (gm > spec.m || gn > spec.n) continue;
    any_grid = true;
    GemmShare s = largest_share(spec, gm, gn);
    const auto tms = spec.tile_m ? std::vector<std::int64_t>{std::min(spec.tile_m, s.m)} : candidates(s.m);
    const auto tns = spec.tile_n ? std::vector<std::int64_t>{std::min(spec.tile_n, s.n)} : candidates(s.n);
    const auto tks = spec.tile_k ? std::vector<std::int64_t>{std::min(spec.tile_k, spec.k)} : candidates(spec.k);
    for (auto tm : tms)
      for (auto tn : tns)
        for (auto tk : tks) {
          const Bytes need = scratch_need(ctx, tm, tn, tk, s.n);
          if (need > pe_cfg.scratch) {
            if (overflow.empty() || need < overflow_need) {
              overflow_need = need;
              overflow = "tiles " + std::to_string(tm) + "x" + std::to_string(tn) + "x" + std::to_string(tk) +
                         " need " + config::format_bytes(need, config::ByteUnits::UpToMiB) + " of scratch per PE (" +
                         scratch_text(ctx, tm, tn, tk, s.n) +
                         "), budget pe.scratch = " + config::format_bytes(pe_cfg.scratch, config::ByteUnits::UpToMiB);
            }
            continue;
          }
          evaluate(ctx, slowest, tm, tn, tk, s);
          if (s.steps == 0) continue;  // more than 2^32 steps: not a sensible tiling
          feasible.push_back(Choice{gm, gn, tm, tn, tk, s.estimate_ps,
                                    static_cast<Bytes>(s.steps) * (s.load_a + s.load_b + s.store_c), s.steps});
        }
  }
  if (!any_grid)
    throw ConfigError(what + ": cannot split a " + std::to_string(spec.m) + " x " + std::to_string(spec.n) +
                      " output over " + std::to_string(P) + " PEs (needs grid_m x grid_n = " + std::to_string(P) +
                      " with grid_m <= M and grid_n <= N; K is not split)");
  if (feasible.empty() && overflow.empty())
    throw ConfigError(what +
                      ": every tiling that fits takes more than 2^32 pipeline steps per PE; give "
                      "smaller m, n or k, larger tiles or more PEs");
  if (feasible.empty()) {
    const std::string pe_name = machine.node(spec.pes.front()).name;
    const bool given = spec.tile_m && spec.tile_n && spec.tile_k;
    throw CapacityError(what + " on " + pe_name + (P > 1 ? " (and " + std::to_string(P - 1) + " more PEs)" : "") +
                        ": " + (given ? "" : "no tiling fits the scratch; the smallest, ") + overflow);
  }
  Time best_estimate = feasible.front().estimate;
  for (const Choice& f : feasible) best_estimate = std::min(best_estimate, f.estimate);
  // Past 2^62 ps (53 days) the near-best bound would leave the clock's range (pe.clock = 1 Hz did): refused.
  if (best_estimate > (Time{1} << 62) || best_estimate < 0)
    throw ConfigError(what + ": its best tiling takes " + std::to_string(best_estimate / sim::kSecond) +
                      " s per PE, past the simulated clock's range (2^63 ps, about 106 days); check pe.clock and "
                      "the engines' rates");
  const auto near = static_cast<Time>(std::ceil(static_cast<double>(best_estimate) * (1.0 + kNearBest)));
  const Choice* pick = nullptr;
  for (const Choice& f : feasible) {
    if (f.estimate > near) continue;
    if (!pick ||
        std::make_tuple(f.steps, f.traffic, f.estimate) < std::make_tuple(pick->steps, pick->traffic, pick->estimate))
      pick = &f;
  }
  if (!pick) throw ConfigError(what + ": no tiling has an estimate within the clock's range; check pe.clock");
  const Choice best = *pick;

  // ---- the shares, as chosen ----
  plan.grid_m = best.grid_m;
  plan.grid_n = best.grid_n;
  plan.tile_m = best.tm;
  plan.tile_n = best.tn;
  plan.tile_k = best.tk;
  for (std::int64_t gm = 0; gm < plan.grid_m; ++gm) {
    for (std::int64_t gn = 0; gn < plan.grid_n; ++gn) {
      const auto i = static_cast<std::size_t>(gm * plan.grid_n + gn);
      GemmShare s;
      s.pe = spec.pes[i];
      s.home = spec.homes[i];
      s.m0 = gm * spec.m / plan.grid_m;
      s.m = (gm + 1) * spec.m / plan.grid_m - s.m0;
      s.n0 = gn * spec.n / plan.grid_n;
      s.n = (gn + 1) * spec.n / plan.grid_n - s.n0;
      evaluate(ctx, paths[i], plan.tile_m, plan.tile_n, plan.tile_k, s);
      if (s.scratch > pe_cfg.scratch)  // cannot happen: a share is never larger than the largest
        throw InternalError(what + ": share of " + machine.node(s.pe).name +
                            " overflows the scratch it was planned for");
      plan.shares.push_back(s);
    }
  }
  for (std::size_t i = 0; i < plan.shares.size(); ++i) {
    const GemmShare& s = plan.shares[i];
    plan.steps_total += s.steps;
    plan.scratch_per_pe = std::max(plan.scratch_per_pe, s.scratch);
    plan.hbm_bytes += static_cast<Bytes>(s.steps) * (s.load_a + s.load_b + s.store_c) + s.pinned;
    if (s.estimate_ps > plan.shares[plan.critical].estimate_ps) plan.critical = i;
  }
  const GemmShare& c = plan.critical_share();
  // Load latency the buffers cannot hide is a DMA limit too.
  plan.limit = c.step_ps > c.compute_ps ? "dma" : "compute";
  plan.ideal_ps = c.ideal_ps;
  plan.estimate_ps = c.estimate_ps;
  plan.read_bytes_per_s = paths[plan.critical].read_bw;
  plan.write_bytes_per_s = paths[plan.critical].write_bw;
  place_operands(system, plan, what);  // the operands must fit their HBM slices
  return plan;
}

runtime::Program gemm_program(const topology::System& system, const GemmSpec& spec, GemmPlan* plan_out) {
  GemmPlan plan = plan_gemm(system, spec);
  const GemmSpec& s = plan.spec;
  runtime::Program p(shape_text(s) + " on " + std::to_string(s.pes.size()) + (s.pes.size() == 1 ? " PE" : " PEs"));
  const std::int32_t gemm_tag = p.tag("gemm");
  const std::int32_t load_tag = p.tag("load");
  const std::int32_t compute_tag = p.tag("compute");
  const std::int32_t store_tag = p.tag("store");
  const std::int32_t pinned_tag = p.tag("pinned");  // interned even when unused, so window("pinned") always works
  const std::vector<ShareRegions> regions = place_operands(system, plan, shape_text(s));
  for (std::size_t i = 0; i < plan.shares.size(); ++i) {
    const GemmShare& share = plan.shares[i];
    const ShareRegions& at = regions[i];
    const runtime::OpId alloc = p.alloc(share.pe, share.scratch, {}, "gemm scratch");
    std::vector<runtime::OpId> deps{alloc};
    if (s.pinned)
      deps = {
          p.dma(share.pe, runtime::Move{share.home, share.pe, share.pinned, at.b}, {alloc}, "pinned B", pinned_tag)};
    runtime::Pipeline pipe;
    pipe.tiles = share.steps;
    pipe.loads.push_back(runtime::Move{share.home, share.pe, share.load_a, at.a});
    if (share.load_b > 0) pipe.loads.push_back(runtime::Move{share.home, share.pe, share.load_b, at.b});
    pipe.compute = runtime::OpKind::Gemm;
    pipe.flops = share.flops;
    pipe.precision = s.precision;
    pipe.stores.push_back(runtime::Move{share.pe, share.home, share.store_c, at.c});
    pipe.buffers = s.buffers;
    pipe.load_tag = load_tag;
    pipe.compute_tag = compute_tag;
    pipe.store_tag = store_tag;
    const runtime::OpId tiles = p.composite(share.pe, std::move(pipe), deps, "gemm tiles", gemm_tag);
    p.free(alloc, {tiles}, "free gemm scratch");
  }
  if (plan_out) *plan_out = std::move(plan);
  return p;
}

}  // namespace kernbench::kernels
