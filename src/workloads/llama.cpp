// llama.cpp -- planning and building the LLaMA decoder layer Program; the
// sharding, the schedule and what is counted are documented in llama.hpp.
#include "workloads/llama.hpp"
#include "runtime/config_section.hpp"

#include <algorithm>
#include <array>
#include <tuple>
#include <set>

#include "kernels/gemm.hpp"
#include "kernels/gqa.hpp"
#include "sim/errors.hpp"
#include "sim/shares.hpp"
#include "topology/fabric/fabric.hpp"

namespace kernbench::workloads {
namespace {

// The kernel models this workload is built from.
using kernels::gemm_program;
using kernels::GemmPlan;
using kernels::GemmSpec;
using kernels::gqa_program;
using kernels::GqaPhase;
using kernels::GqaSpec;

using runtime::Bytes;
using runtime::Move;
using runtime::NodeId;
using runtime::OpId;
using runtime::Program;
using topology::Machine;

std::string what_text(const LlamaSpec& s) {
  return std::string("llama layer ") + to_string(s.phase) + " (tokens = " + std::to_string(s.tokens) +
         ", s_kv = " + std::to_string(s.s_kv) + ", tp = " + std::to_string(s.tp) + ")";
}

// PEs in placement order: SIP by SIP, cubes in snake order (consecutive cubes
// are neighbours), PEs of a cube in index order.
std::vector<NodeId> placement_order(const Machine& m) {
  const topology::PeHierarchy& sc = m.hierarchy();
  std::vector<NodeId> out;
  for (int sip = 0; sip < sc.packages.count(); ++sip)
    for (int y = 0; y < sc.groups.h; ++y)
      for (int i = 0; i < sc.groups.w; ++i) {
        const int x = y % 2 == 0 ? i : sc.groups.w - 1 - i;
        for (int p = 0; p < sc.pes_per_group; ++p) out.push_back(m.pe(sip, y * sc.groups.w + x, p));
      }
  return out;
}

// Largest divisor of n that is <= cap (>= 1).
std::int64_t divisor_at_most(std::int64_t n, std::int64_t cap) {
  for (std::int64_t d = std::min(n, std::max<std::int64_t>(cap, 1)); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

constexpr Bytes kVectorTile = 64 * 1024;  // target bytes per vector pipeline tile (per load stream)

}  // namespace

const char* to_string(LlamaPhase phase) { return phase == LlamaPhase::Prefill ? "prefill" : "decode"; }

LlamaPhase llama_phase_from(const std::string& name) {
  if (name == "prefill") return LlamaPhase::Prefill;
  if (name == "decode") return LlamaPhase::Decode;
  throw UsageError("llama layer phase '" + name + "': expected 'prefill' or 'decode'");
}

const std::vector<std::string>& llama_phase_names() {
  static const std::vector<std::string> names = {"norm",   "qkv",        "attention", "relayout",
                                                 "o_proj", "allreduce1", "mlp",       "allreduce2"};
  return names;
}

LlamaPlan plan_llama(const topology::System& system, const LlamaSpec& given) {
  const Machine& m = system.machine();
  LlamaPlan plan;
  plan.spec = given;
  LlamaSpec& s = plan.spec;
  const LlamaDims& d = s.dims;
  const bool prefill = s.phase == LlamaPhase::Prefill;
  if (prefill && s.s_kv == 0) s.s_kv = s.tokens;
  const std::string what = what_text(s);

  if (d.hidden < 1 || d.heads < 1 || d.kv_heads < 1 || d.head_dim < 1 || d.intermediate < 1 || d.elem_bytes < 1)
    throw UsageError(what + ": model dimensions must be >= 1");
  if (d.heads % d.kv_heads != 0 || d.hidden != d.heads * d.head_dim)
    throw UsageError(what + ": dims: heads (" + std::to_string(d.heads) + ") must be a multiple of kv_heads (" +
                     std::to_string(d.kv_heads) + ") and hidden = heads x head_dim");
  if (s.tokens < 1) throw UsageError(what + ": tokens must be >= 1, got " + std::to_string(s.tokens));
  if (s.s_kv < 1)
    throw UsageError(what + ": s_kv must be >= 1 (decode needs the K/V length), got " + std::to_string(s.s_kv));
  if (prefill && s.s_kv != s.tokens)
    throw UsageError(what + ": prefill attends its own prompt: s_kv must equal tokens (or be 0)");
  if (s.tp < 1 || s.replicas < 1)
    throw UsageError(what + ": tp and replicas must be >= 1, got tp = " + std::to_string(s.tp) +
                     ", replicas = " + std::to_string(s.replicas));
  if (d.heads % s.tp != 0)
    throw UsageError(what + ": tp = " + std::to_string(s.tp) + " does not divide the " + std::to_string(d.heads) +
                     " query heads (Megatron sharding gives every rank whole heads)");
  if (!(d.kv_heads % s.tp == 0 || s.tp % d.kv_heads == 0))
    throw UsageError(what + ": tp = " + std::to_string(s.tp) + " neither divides nor is a multiple of the " +
                     std::to_string(d.kv_heads) + " KV heads");
  if (d.intermediate % s.tp != 0)
    throw UsageError(what + ": tp = " + std::to_string(s.tp) + " does not divide the MLP intermediate size " +
                     std::to_string(d.intermediate));
  if (m.pes().empty()) throw UsageError(what + ": the machine has no PEs: give it `kind: pe` nodes (graph.nodes)");
  const auto want = static_cast<std::int64_t>(s.tp) * s.replicas;
  if (s.pes.empty()) {
    const std::vector<NodeId> order = placement_order(m);
    if (s.first_pe < 0 || s.first_pe + want > static_cast<std::int64_t>(order.size()))
      throw UsageError(what + ": tp x replicas = " + std::to_string(want) + " PEs from PE index " +
                       std::to_string(s.first_pe) + " do not fit the machine's " + std::to_string(order.size()) +
                       " PEs");
    s.pes.assign(order.begin() + s.first_pe, order.begin() + s.first_pe + want);
  } else {
    if (static_cast<std::int64_t>(s.pes.size()) != want)
      throw UsageError(what + ": " + std::to_string(s.pes.size()) +
                       " PEs given, tp x replicas = " + std::to_string(want));
    std::set<NodeId> seen;
    for (NodeId p : s.pes) {
      if (p >= m.num_nodes() || m.node(p).kind != topology::NodeKind::Pe)
        throw UsageError(what + ": node " + std::to_string(p) + " in pes is not a PE");
      if (!seen.insert(p).second) throw UsageError(what + ": PE " + m.node(p).name + " is listed twice");
    }
  }
  for (int r = 0; r < s.replicas; ++r)
    plan.ranks.emplace_back(s.pes.begin() + static_cast<std::ptrdiff_t>(r) * s.tp,
                            s.pes.begin() + static_cast<std::ptrdiff_t>(r + 1) * s.tp);

  plan.group_pes = std::max(1, s.tp / d.kv_heads);
  plan.groups_per_rank = std::max(1, d.kv_heads / s.tp);
  plan.gqa_case = plan.group_pes == 1 ? 2 : prefill ? 1 : 4;
  const int G = plan.group_pes;
  if (G > 1) {
    for (const auto& ranks : plan.ranks)
      for (int g = 0; g < d.kv_heads; ++g) {
        const auto& first = m.node(ranks[static_cast<std::size_t>(g * G)]);
        for (int i = 1; i < G; ++i) {
          const auto& x = m.node(ranks[static_cast<std::size_t>(g * G + i)]);
          if (x.sip != first.sip || x.cube != first.cube || x.pe != first.pe + i)
            throw UsageError(what + ": KV group " + std::to_string(g) + " needs " + std::to_string(G) +
                             " consecutive PEs of one cube, got " + first.name + " ... " + x.name);
        }
      }
  }

  plan.tokens_total = s.tokens;
  // Decode streams every weight once per chunk and is bound by that stream:
  // one chunk. Prefill is compute-bound: 4 chunks let the all-reduces overlap.
  if (s.chunks == 0) s.chunks = prefill ? static_cast<int>(std::min<std::int64_t>(4, s.tokens)) : 1;
  if (s.chunks < 1 || s.tokens % s.chunks != 0)
    throw UsageError(what + ": chunks = " + std::to_string(s.chunks) + " must be >= 1 and divide tokens");
  plan.chunk_tokens = s.tokens / s.chunks;
  if (prefill && plan.chunk_tokens % G != 0)
    throw UsageError(what + ": a chunk of " + std::to_string(plan.chunk_tokens) + " tokens cannot be split over the " +
                     std::to_string(G) + " PEs of a KV group");

  // ---- analytic counts ----
  const double T = static_cast<double>(s.tokens), S = static_cast<double>(s.s_kv), R = s.replicas;
  const double H = static_cast<double>(d.hidden), I = static_cast<double>(d.intermediate),
               dh = static_cast<double>(d.head_dim), kvc = static_cast<double>(d.kv_heads) * dh;
  // Attention reads one query token per sequence in decode: T = batch, S = s_kv.
  plan.flops_qkv = R * 2 * T * H * (H + 2 * kvc);
  plan.flops_attention = R * 4 * T * S * dh * d.heads;
  plan.flops_o = R * 2 * T * H * H;
  plan.flops_mlp = R * 2 * T * H * I * 3;
  plan.flops_model = plan.flops_qkv + plan.flops_attention + plan.flops_o + plan.flops_mlp;
  const double kv_exec = static_cast<double>(std::max(s.tp, d.kv_heads)) * dh;  // replicated KV heads
  plan.flops_executed = plan.flops_model + R * 2 * T * H * 2 * (kv_exec - kvc);
  const Bytes e = d.elem_bytes, Tb = s.tokens;
  // Per rank: norm1 2TH, norm2 3TH, silu 2 T I/tp, residual TH (times e).
  plan.vector_bytes =
      static_cast<Bytes>(s.replicas) * s.tp * (6 * Tb * d.hidden * e + 2 * Tb * (d.intermediate / s.tp) * e);
  plan.allreduce_bytes = Tb * d.hidden * e;
  const Bytes qkv_cols = (d.heads / s.tp) * d.head_dim + 2 * std::max(1, d.kv_heads / s.tp) * d.head_dim;
  plan.weight_bytes_per_rank = d.hidden * (qkv_cols + d.hidden / s.tp + 3 * (d.intermediate / s.tp)) * e;
  plan.kv_cache_bytes = 2 * (prefill ? 1 : Tb) * s.s_kv * d.kv_heads * d.head_dim * e;
  return plan;
}

double program_flops(const runtime::Program& program) {
  double f = 0;
  for (const auto& op : program.ops()) {
    if (op.kind == runtime::OpKind::Gemm) f += op.flops;
    if (op.kind == runtime::OpKind::Composite) {
      const auto& p = program.pipelines()[op.pipeline];
      if (p.compute == runtime::OpKind::Gemm) f += p.flops * p.tiles;
    }
  }
  return f;
}

runtime::Program llama_program(const topology::System& system, const LlamaSpec& spec, LlamaPlan* plan_out,
                               LlamaPhases* phases_out) {
  LlamaPlan plan = plan_llama(system, spec);
  const LlamaSpec& s = plan.spec;
  const LlamaDims& d = s.dims;
  const Machine& m = system.machine();
  const bool prefill = s.phase == LlamaPhase::Prefill;
  const int G = plan.group_pes, tp = s.tp, C = s.chunks;
  const Bytes e = d.elem_bytes;
  const std::int64_t Tc = plan.chunk_tokens;
  Program prog(what_text(s));
  LlamaPhases phases;
  const std::int32_t t_relayout = prog.tag("relayout");
  std::int64_t next_key = -1;  // own sends use negative keys; appended programs' keys are shifted above

  const std::string what = what_text(s);
  auto hbm_of = [&](NodeId pe) {
    if (auto home = m.memory_of(pe)) return *home;
    return m.memory(pe, what);
  };
  // Cached GEMM tiles per shape: planned once, then given to every rank.
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::array<std::int64_t, 3>> tiles;
  auto gemm_sub = [&](NodeId pe, std::int64_t M, std::int64_t N, std::int64_t K) {
    GemmSpec g;
    g.m = M;
    g.n = N;
    g.k = K;
    g.precision = s.precision;
    g.pes = {pe};
    const auto key = std::make_tuple(M, N, K);
    const auto it = tiles.find(key);
    if (it != tiles.end()) {
      g.tile_m = it->second[0];
      g.tile_n = it->second[1];
      g.tile_k = it->second[2];
    }
    GemmPlan gp;
    Program p = gemm_program(system, g, &gp);
    tiles[key] = {gp.tile_m, gp.tile_n, gp.tile_k};
    return p;
  };
  // A vector tile pipeline over `rows` rows: per row, `loads` streams of
  // `row_bytes` in, `passes` x row_bytes through the vector engine, `stores`
  // streams out; scratch for the buffers claimed around it.
  auto vector_sub = [&](NodeId pe, std::int64_t rows, Bytes row_bytes, int loads, int passes, int stores,
                        const std::string& name) {
    Program p(name);
    const std::int64_t per_tile = divisor_at_most(rows, std::max<Bytes>(1, kVectorTile / row_bytes));
    runtime::Pipeline pl;
    pl.tiles = static_cast<std::uint32_t>(rows / per_tile);
    const Bytes tb = per_tile * row_bytes;
    const NodeId home = hbm_of(pe);
    for (int i = 0; i < loads; ++i) pl.loads.push_back(Move{home, pe, tb});
    for (int i = 0; i < stores; ++i) pl.stores.push_back(Move{pe, home, tb});
    pl.compute = runtime::OpKind::Vector;
    pl.vector_bytes = passes * tb;
    pl.buffers = 2;
    pl.load_tag = p.tag("vector load");
    pl.compute_tag = p.tag("vector");
    pl.store_tag = p.tag("vector store");
    const OpId a = p.alloc(pe, pl.buffers * (loads + stores) * tb, {}, name + " scratch");
    const OpId c = p.composite(pe, std::move(pl), {a}, name, p.tag("vector"));
    p.free(a, {c}, "free " + name + " scratch");
    return p;
  };

  // chain[pe]: the ops the next compute step on that PE waits for.
  std::map<NodeId, std::vector<OpId>> chain;
  auto splice = [&](const std::string& phase, const Program& sub, const std::vector<OpId>& after) {
    const OpId lo = prog.append(sub, after);
    phases.ranges[phase].push_back({lo, static_cast<OpId>(prog.size())});
    return lo;
  };
  // Appends a compute step that uses `pes`, after their chains and `extra`;
  // afterwards each PE's chain is the step's sinks on that PE.
  auto compute_step = [&](const std::string& phase, const Program& sub, const std::vector<NodeId>& pes,
                          std::vector<OpId> extra = {}) {
    for (NodeId p : pes) extra.insert(extra.end(), chain[p].begin(), chain[p].end());
    std::sort(extra.begin(), extra.end());
    extra.erase(std::unique(extra.begin(), extra.end()), extra.end());
    const OpId lo = splice(phase, sub, extra);
    const std::vector<OpId> sinks = prog.sinks(lo);
    for (NodeId p : pes) {
      std::vector<OpId> mine;
      for (OpId o : sinks)
        if (prog.op(o).agent == p) mine.push_back(o);
      chain[p] = mine.empty() ? sinks : mine;
    }
    return sinks;
  };
  auto allreduce = [&](const std::string& phase, const std::vector<NodeId>& ranks, Bytes bytes,
                       const std::vector<OpId>& after) -> std::vector<OpId> {
    if (ranks.size() < 2) return after;
    ccl::CollectiveSpec cs;
    cs.collective = ccl::Collective::AllReduce;
    cs.algorithm = s.allreduce;
    cs.bytes_per_pe = bytes;
    cs.pes = ranks;
    cs.buffer = ccl::Buffer::Hbm;
    const Program sub = ccl::build_collective(m, system.config(), cs);
    const OpId lo = splice(phase, sub, after);
    return prog.sinks(lo);
  };

  const std::int64_t H = d.hidden, I_tp = d.intermediate / tp, hd = d.head_dim;
  const std::int64_t q_cols = (d.heads / tp) * hd;
  const std::int64_t kv_cols = 2 * std::max(1, d.kv_heads / tp) * hd;
  const std::int64_t group_cols = (d.heads / d.kv_heads) * hd;  // attention output columns of one group
  const int heads_per_group = d.heads / d.kv_heads;

  for (const auto& ranks : plan.ranks) {
    // ---- norm 1 and QKV over all tokens ----
    for (NodeId pe : ranks) {
      compute_step("norm", vector_sub(pe, s.tokens, H * e, 1, 2, 1, "rmsnorm 1"), {pe});
      compute_step("qkv", gemm_sub(pe, s.tokens, q_cols + kv_cols, H), {pe});
    }
    // ---- per chunk: attention, relayout, O projection, AR 1 ----
    std::vector<std::vector<OpId>> ar1(static_cast<std::size_t>(C));
    auto attention_chunk = [&](int c) {
      for (int g = 0; g < d.kv_heads; ++g) {
        // tp <= 8: group g runs on rank g / groups_per_rank; tp > 8: on ranks g G .. g G + G - 1.
        const std::size_t first = G > 1 ? static_cast<std::size_t>(g) * static_cast<std::size_t>(G)
                                        : static_cast<std::size_t>(g / plan.groups_per_rank);
        std::vector<NodeId> gpes(ranks.begin() + static_cast<std::ptrdiff_t>(first),
                                 ranks.begin() + static_cast<std::ptrdiff_t>(first + G));
        const auto& n0 = m.node(gpes[0]);
        GqaSpec gs;
        gs.phase = prefill ? GqaPhase::Prefill : GqaPhase::Decode;
        gs.gqa_case = plan.gqa_case;
        gs.h_q = heads_per_group;
        gs.d_head = hd;
        gs.elem_bytes = e;
        gs.tile_q = s.tile_q;
        gs.tile_s = s.tile_s;
        gs.sip = n0.sip;
        gs.cubes = {n0.cube};
        gs.pe_first = n0.pe;
        gs.pe_count = G;
        gs.precision = s.precision;
        gs.s_kv = s.s_kv;
        const std::int64_t programs = prefill ? 1 : Tc;  // decode: one program per sequence
        gs.t_q = prefill ? Tc : 1;
        for (std::int64_t q = 0; q < programs; ++q) compute_step("attention", gqa_program(system, gs), gpes);
        if (G > 1) {
          // Re-layout O from the GQA case's split to heads per rank.
          const Bytes per_pair = prefill ? (Tc / G) * (group_cols / G) * e : Tc * (group_cols / G) * e;
          const OpId lo = static_cast<OpId>(prog.size());
          std::map<NodeId, std::vector<OpId>> got;
          for (int i = 0; i < G; ++i) {
            if (!prefill && i != 0) continue;  // decode: the case-4 writer (PE 0 of the group) holds O
            for (int j = 0; j < G; ++j) {
              if (i == j) continue;
              const NodeId src = gpes[static_cast<std::size_t>(i)], dst = gpes[static_cast<std::size_t>(j)];
              const std::int64_t key = next_key--;
              prog.send(src, dst, per_pair, key, chain[src], "relayout O", t_relayout, hbm_of(src));
              got[dst].push_back(prog.recv(dst, src, key, chain[dst], "relayout O", t_relayout));
            }
          }
          phases.ranges["relayout"].push_back({lo, static_cast<OpId>(prog.size())});
          for (auto& [pe, recvs] : got) chain[pe].insert(chain[pe].end(), recvs.begin(), recvs.end());
        }
      }
      std::vector<OpId> done;
      for (NodeId pe : ranks) {
        const auto sinks = compute_step("o_proj", gemm_sub(pe, Tc, H, H / tp), {pe});
        done.insert(done.end(), sinks.begin(), sinks.end());
      }
      ar1[static_cast<std::size_t>(c)] = allreduce("allreduce1", ranks, Tc * H * e, done);
    };
    auto mlp_chunk = [&](int c) {
      std::vector<OpId> done;
      for (NodeId pe : ranks) {
        compute_step("mlp", vector_sub(pe, Tc, H * e, 2, 3, 2, "residual + rmsnorm 2"), {pe},
                     ar1[static_cast<std::size_t>(c)]);
        compute_step("mlp", gemm_sub(pe, Tc, 2 * I_tp, H), {pe});
        compute_step("mlp", vector_sub(pe, Tc, I_tp * e, 2, 2, 1, "silu x up"), {pe});
        const auto sinks = compute_step("mlp", gemm_sub(pe, Tc, H, I_tp), {pe});
        done.insert(done.end(), sinks.begin(), sinks.end());
      }
      const auto ar2 = allreduce("allreduce2", ranks, Tc * H * e, done);
      for (NodeId pe : ranks) compute_step("mlp", vector_sub(pe, Tc, H * e, 2, 1, 1, "residual 2"), {pe}, ar2);
    };
    // Software pipeline: attn_0, o_0, attn_1, o_1, mlp_0, attn_2, o_2, mlp_1, ...
    for (int c = 0; c < C; ++c) {
      attention_chunk(c);
      if (c >= 1) mlp_chunk(c - 1);
    }
    mlp_chunk(C - 1);
  }
  if (plan_out) *plan_out = std::move(plan);
  if (phases_out) *phases_out = std::move(phases);
  return prog;
}

LlamaResult run_llama(topology::System& system, const LlamaSpec& spec) {
  LlamaResult res;
  LlamaPhases phases;
  res.program = llama_program(system, spec, &res.plan, &phases);
  const Program& prog = res.program;
  res.flops_program = program_flops(prog);
  const std::vector<Bytes> before = topology::channel_bytes(system.fabric());
  res.run = runtime::Executor(system).run(prog);
  res.latency = res.run.makespan();
  res.link_bytes = topology::link_class_bytes_since(system.fabric(), before);
  res.tokens_per_s = res.latency > 0
                         ? static_cast<double>(res.plan.spec.replicas) * static_cast<double>(res.plan.tokens_total) /
                               (static_cast<double>(res.latency) * 1e-12)
                         : 0.0;
  // (time, +1 start / -1 end, phase index) of every working op, for the shares.
  std::vector<sim::ShareEdge> edges;
  const std::vector<std::string>& names = llama_phase_names();
  for (std::size_t ph = 0; ph < names.size(); ++ph) {
    const std::string& name = names[ph];
    const auto it = phases.ranges.find(name);
    if (it == phases.ranges.end()) continue;
    LlamaPhaseTime pt;
    std::vector<std::pair<runtime::Time, runtime::Time>> iv;
    for (const auto& [lo, hi] : it->second)
      for (OpId o = lo; o < hi; ++o) {
        const runtime::OpTiming& t = res.run.ops[o];
        const runtime::Op& op = prog.op(o);
        if (op.kind == runtime::OpKind::Gemm) pt.flops += op.flops;
        if (op.kind == runtime::OpKind::Composite) {
          const auto& p = prog.pipelines()[op.pipeline];
          if (p.compute == runtime::OpKind::Gemm) pt.flops += p.flops * p.tiles;
        }
        if (op.kind == runtime::OpKind::Send) pt.send_bytes += op.move.bytes;
        if (!t.done() || t.start < 0) continue;
        // Only ops that do work count towards the active time.
        if (op.kind == runtime::OpKind::Alloc || op.kind == runtime::OpKind::Free ||
            op.kind == runtime::OpKind::Barrier)
          continue;
        iv.emplace_back(t.start, t.end);
        if (t.end > t.start) {
          edges.emplace_back(t.start, 1, ph);
          edges.emplace_back(t.end, -1, ph);
        }
      }
    std::sort(iv.begin(), iv.end());
    runtime::Time cur_lo = -1, cur_hi = -1;
    for (const auto& [a, b] : iv) {
      if (pt.first_start < 0 || a < pt.first_start) pt.first_start = a;
      pt.last_end = std::max(pt.last_end, b);
      if (cur_hi < 0 || a > cur_hi) {
        if (cur_hi >= 0) pt.active += cur_hi - cur_lo;
        cur_lo = a;
        cur_hi = b;
      } else {
        cur_hi = std::max(cur_hi, b);
      }
    }
    if (cur_hi >= 0) pt.active += cur_hi - cur_lo;
    res.phases[name] = pt;
  }
  // Shares: sweep the run's span; an instant is split over the phases at work then, or is idle.
  const std::vector<double> share =
      sim::share_span(edges, names.size(), res.run.start, res.run.start + res.latency, res.idle);
  for (std::size_t ph = 0; ph < names.size(); ++ph)
    if (const auto it = res.phases.find(names[ph]); it != res.phases.end()) it->second.share = share[ph];
  return res;
}

}  // namespace kernbench::workloads
