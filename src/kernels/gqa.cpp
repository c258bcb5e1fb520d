// gqa.cpp -- planning and building the GQA attention programs; the layout,
// the cases and the cost of each op are documented in gqa.hpp.
#include "kernels/gqa.hpp"
#include "config/quantity.hpp"
#include "runtime/config_section.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "runtime/hbm.hpp"
#include "sim/errors.hpp"

namespace kernbench::kernels {
namespace {

using runtime::Bytes;
using runtime::Move;
using runtime::NodeId;
using runtime::OpId;
using runtime::Program;
using topology::Machine;

constexpr OpId kNone = ~OpId{0};

std::string what_text(const GqaSpec& s) {
  return "GQA case " + std::to_string(s.gqa_case) + " " + to_string(s.phase) + " (T_q = " + std::to_string(s.t_q) +
         ", S_kv = " + std::to_string(s.s_kv) + ")";
}

// [lo, hi) of part i of n parts of `total` (as even as integers allow).
std::int64_t part_lo(std::int64_t total, std::int64_t n, std::int64_t i) { return i * total / n; }
std::int64_t part_len(std::int64_t total, std::int64_t n, std::int64_t i) {
  return part_lo(total, n, i + 1) - part_lo(total, n, i);
}

bool tp_case(const GqaSpec& s) { return s.gqa_case == 1 || s.gqa_case == 2; }

// One K/V tile a PE processes: its length and, if it is loaded from HBM,
// the slice holding it (kNone: received from the ring).
struct KvTile {
  std::int64_t len = 0;
  NodeId home = 0;
  bool from_hbm = true;
  bool forward = false;   // sent on to the next cube after use
  std::int64_t step = 0;  // ring step
  std::int64_t j = 0;     // tile index within the chunk
  std::int64_t lo = 0;    // its first K/V token
};

// The K/V stream of PE (pos, p) for one Q tile.
std::vector<KvTile> kv_stream(const GqaPlan& plan, const Machine& m, int pos, int p) {
  const GqaSpec& s = plan.spec;
  const int n = plan.n_cubes, P = plan.pes_per_cube;
  const std::int64_t ts = plan.tile_s;
  std::vector<KvTile> out;
  // Tiles of a chunk of `len` tokens, homes chosen by `home_of(tile index)`.
  // Per ring step, the tiles of the chunk processed then.
  std::vector<std::vector<KvTile>> steps;
  auto chunk = [&](std::int64_t lo, std::int64_t len, auto home_of, bool from_hbm, bool forward) {
    std::vector<KvTile> tiles;
    const auto step = static_cast<std::int64_t>(steps.size());
    for (std::int64_t j = 0; j * ts < len; ++j)
      tiles.push_back(KvTile{std::min(ts, len - j * ts), home_of(j), from_hbm, forward, step, j, lo + j * ts});
    steps.push_back(std::move(tiles));
  };
  const int cube = s.cubes[static_cast<std::size_t>(pos)];
  auto striped = [&](int c) {
    return [&m, &s, c, P](std::int64_t j) { return m.hbm_ctrl(s.sip, c, s.pe_first + static_cast<int>(j % P)); };
  };
  auto own = [&](std::int64_t) { return m.hbm_ctrl(s.sip, cube, s.pe_first + p); };
  switch (s.gqa_case) {
    case 1:
      if (s.phase == GqaPhase::Prefill) {
        for (int r = 0; r < n; ++r) {
          const int src = ((pos - r) % n + n) % n;
          chunk(part_lo(s.s_kv, n, src), part_len(s.s_kv, n, src), striped(s.cubes[static_cast<std::size_t>(src)]),
                r == 0, r < n - 1);
        }
      } else {
        chunk(part_lo(s.s_kv, n, pos), part_len(s.s_kv, n, pos), striped(cube), true, false);
      }
      break;
    case 2: chunk(0, s.s_kv, striped(cube), true, false); break;
    case 3: chunk(part_lo(s.s_kv, P, p), part_len(s.s_kv, P, p), own, true, false); break;
    case 4:
      if (s.phase == GqaPhase::Prefill) {
        for (int r = 0; r < n; ++r) {
          const int src = ((pos - r) % n + n) % n;
          const std::int64_t share = static_cast<std::int64_t>(src) * P + p;
          chunk(part_lo(s.s_kv, static_cast<std::int64_t>(n) * P, share),
                part_len(s.s_kv, static_cast<std::int64_t>(n) * P, share), own, r == 0, r < n - 1);
        }
      } else {
        const std::int64_t share = static_cast<std::int64_t>(pos) * P + p;
        chunk(part_lo(s.s_kv, static_cast<std::int64_t>(n) * P, share),
              part_len(s.s_kv, static_cast<std::int64_t>(n) * P, share), own, true, false);
      }
      break;
  }
  // Tile-major order: tile j of every ring step, then tile j + 1. A PE
  // forwards tile (r, j) to the next cube, which needs it as (r + 1, j) --
  // its very next tile -- so a sender is never more than a tile ahead of
  // its receiver and the IPCQ slots cannot fill up around the ring (in
  // step-major order every PE would send a whole chunk before receiving,
  // which deadlocks once a chunk outgrows the slots). The online softmax
  // does not care about the order of the K/V tiles.
  std::size_t most = 0;
  for (const auto& st : steps) most = std::max(most, st.size());
  for (std::size_t j = 0; j < most; ++j)
    for (const auto& st : steps)
      if (j < st.size()) out.push_back(st[j]);
  return out;
}

// Whether PE (pos, p) works at all.
bool working(const GqaSpec& s, int pos) { return s.gqa_case != 2 || pos == 0; }

// The query rows (token x h_q + head) of working PE (pos, p), in the order
// its Q tiles take them: prefill splits the tokens (case 1: n P ways, 2: P
// ways over a cube's PEs, 4: n ways over the cubes; 3: every PE has all);
// decode cases 1 and 2 split the heads over a cube's PEs, 3 and 4 give
// every PE all rows.
std::vector<std::int64_t> pe_rows(const GqaPlan& plan, int pos, int p) {
  const GqaSpec& s = plan.spec;
  const int n = plan.n_cubes, P = plan.pes_per_cube;
  std::vector<std::int64_t> rows;
  if (s.phase == GqaPhase::Prefill) {
    const std::int64_t shares = s.gqa_case == 1   ? static_cast<std::int64_t>(n) * P
                                : s.gqa_case == 2 ? P
                                : s.gqa_case == 4 ? n
                                                  : 1;
    const std::int64_t idx = s.gqa_case == 1   ? static_cast<std::int64_t>(pos) * P + p
                             : s.gqa_case == 2 ? p
                             : s.gqa_case == 4 ? pos
                                               : 0;
    const std::int64_t per = s.t_q / shares;
    for (std::int64_t t = idx * per; t < (idx + 1) * per; ++t)
      for (int h = 0; h < s.h_q; ++h) rows.push_back(t * s.h_q + h);
  } else if (tp_case(s)) {
    const int hp = s.h_q / P;
    for (std::int64_t t = 0; t < s.t_q; ++t)
      for (int h = p * hp; h < (p + 1) * hp; ++h) rows.push_back(t * s.h_q + h);
  } else {
    for (std::int64_t r = 0; r < s.t_q * s.h_q; ++r) rows.push_back(r);
  }
  return rows;
}

// Where the resident data lives in HBM: every K/V tile read from a slice
// (keyed by slice, ring step and tile index: PEs of a cube that read the
// same striped tile share it), and each working PE's Q rows and O output in
// its own slice. Placed with an HbmAllocator, so a KV cache that does not
// fit is a CapacityError naming the slice; deterministic, so the program
// gets the addresses the plan checked.
struct GqaHbmLayout {
  std::map<std::tuple<NodeId, std::int64_t, std::int64_t>, std::pair<std::uint64_t, std::uint64_t>> kv;  // -> K, V
  std::map<NodeId, std::pair<std::uint64_t, std::uint64_t>> qo;  // PE -> Q, O addresses
};

GqaHbmLayout place_gqa(const topology::System& system, const GqaPlan& plan) {
  const GqaSpec& s = plan.spec;
  const Machine& m = system.machine();
  const Bytes tok = s.d_head * s.elem_bytes;  // one token of K (or V)
  // Distinct tiles per slice, in first-read order.
  std::map<NodeId, std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>> tiles;  // step, j, len
  std::set<std::tuple<NodeId, std::int64_t, std::int64_t>> seen;
  for (int pos = 0; pos < plan.n_cubes; ++pos) {
    if (!working(s, pos)) continue;
    for (int p = 0; p < plan.pes_per_cube; ++p)
      for (const KvTile& t : kv_stream(plan, m, pos, p))
        if (t.from_hbm && seen.insert({t.home, t.step, t.j}).second) tiles[t.home].emplace_back(t.step, t.j, t.len);
  }
  runtime::HbmAllocator hbm(m, runtime::pe_config(system.config()).hbm);
  GqaHbmLayout out;
  const std::string cache = "KV cache of " + what_text(s) + ", h_kv " + std::to_string(s.h_kv) + " x d " +
                            std::to_string(s.d_head) + " x " + std::to_string(s.elem_bytes) + " B";
  for (const auto& [home, list] : tiles) {
    std::int64_t tokens = 0;
    for (const auto& t : list) tokens += std::get<2>(t);
    const std::string held = " (" + std::to_string(tokens) + " tokens here)";
    const std::uint64_t k = hbm.alloc(home, tokens * tok, "K of the " + cache + held).address;
    const std::uint64_t v = hbm.alloc(home, tokens * tok, "V of the " + cache + held).address;
    std::uint64_t off = 0;
    for (const auto& [step, j, len] : list) {
      out.kv[{home, step, j}] = {k + off, v + off};
      off += static_cast<std::uint64_t>(len * tok);
    }
  }
  for (int pos = 0; pos < plan.n_cubes; ++pos) {
    if (!working(s, pos)) continue;
    for (int p = 0; p < plan.pes_per_cube; ++p) {
      const NodeId own = m.hbm_ctrl(s.sip, s.cubes[static_cast<std::size_t>(pos)], s.pe_first + p);
      const Bytes rows = plan.rows_per_pe * tok;
      const std::string who =
          " of " + m.node(plan.pes[static_cast<std::size_t>(pos)][static_cast<std::size_t>(p)]).name;
      const std::uint64_t q = hbm.alloc(own, rows, "Q rows" + who).address;
      const std::uint64_t o = hbm.alloc(own, rows, "O rows" + who).address;
      out.qo[plan.pes[static_cast<std::size_t>(pos)][static_cast<std::size_t>(p)]] = {q, o};
    }
  }
  return out;
}

}  // namespace

GqaPlan plan_gqa(const topology::System& system, const GqaSpec& given) {
  const Machine& m = system.machine();
  const runtime::PeConfig& pe_cfg = runtime::pe_config(system.config());
  GqaPlan plan;
  plan.spec = given;
  GqaSpec& s = plan.spec;
  const std::string what = what_text(s);

  if (s.gqa_case < 1 || s.gqa_case > 4) throw ConfigError(what + ": case must be 1, 2, 3 or 4");
  if (s.t_q < 1 || s.s_kv < 1)
    throw ConfigError(what + ": T_q and S_kv must be >= 1, got T_q = " + std::to_string(s.t_q) +
                      ", S_kv = " + std::to_string(s.s_kv));
  if (s.h_kv != 1)
    throw ConfigError(what + ": h_kv = " + std::to_string(s.h_kv) + "; the model covers one KV-head group (h_kv = 1)");
  if (s.h_q < 1 || s.d_head < 1 || s.elem_bytes < 1)
    throw ConfigError(what + ": h_q, d_head and the element size must be >= 1");
  if (s.tile_q < 1 || s.tile_s < 1)
    throw ConfigError(what + ": tile_q and tile_s must be >= 1, got " + std::to_string(s.tile_q) + " and " +
                      std::to_string(s.tile_s));
  if (s.kv_buffers < 1) throw ConfigError(what + ": kv_buffers must be >= 1");
  // The group hierarchy: SIPs of cubes of PEs, or what an explicit graph
  // declares (graph.layout; without one, one package with one group of
  // every PE).
  const topology::PeHierarchy& sc = m.hierarchy();
  if (m.pes().empty()) throw ConfigError(what + ": the machine has no PEs: give it `kind: pe` nodes (graph.nodes)");
  if (s.sip < 0 || s.sip >= sc.packages.count())
    throw ConfigError(what + ": sip " + std::to_string(s.sip) + " does not exist (" +
                      std::to_string(sc.packages.count()) + " SIPs)");
  if (s.cubes.empty()) {
    if (sc.groups.w < 4 || sc.groups.h < 2)
      throw ConfigError(what + ": the default 2 x 4 snake of cubes needs a cube grid of at least 4 x 2, the SIP has " +
                        std::to_string(sc.groups.w) + " x " + std::to_string(sc.groups.h) +
                        (sc.declared ? "" : " (no group hierarchy declared: graph.layout.groups)") +
                        "; give the cubes");
    for (int c = 0; c < 4; ++c) s.cubes.push_back(c);
    for (int c = 3; c >= 0; --c) s.cubes.push_back(sc.groups.w + c);
  }
  std::set<int> seen;
  for (int c : s.cubes) {
    if (c < 0 || c >= sc.groups.count())
      throw ConfigError(what + ": cube " + std::to_string(c) + " does not exist (" + std::to_string(sc.groups.count()) +
                        " cubes per SIP)");
    if (!seen.insert(c).second) throw ConfigError(what + ": cube " + std::to_string(c) + " is listed twice");
  }
  const int n = static_cast<int>(s.cubes.size());
  if (s.pe_first < 0 || s.pe_count < 0 || s.pe_first + s.pe_count > sc.pes_per_group || s.pe_first >= sc.pes_per_group)
    throw ConfigError(what + ": PEs " + std::to_string(s.pe_first) + " + " + std::to_string(s.pe_count) +
                      " per cube do not fit the " + std::to_string(sc.pes_per_group) + " PEs of a cube");
  const int P = s.pe_count > 0 ? s.pe_count : sc.pes_per_group - s.pe_first;
  plan.n_cubes = n;
  plan.pes_per_cube = P;
  for (int c : s.cubes) {
    std::vector<NodeId> row;
    for (int p = 0; p < P; ++p) row.push_back(m.pe(s.sip, c, s.pe_first + p));
    plan.pes.push_back(row);
  }

  // ---- rows per working PE ----
  const bool prefill = s.phase == GqaPhase::Prefill;
  std::int64_t q_shares = 1;  // how many ways T_q is split
  if (prefill) {
    q_shares = s.gqa_case == 1 ? static_cast<std::int64_t>(n) * P : s.gqa_case == 2 ? P : s.gqa_case == 4 ? n : 1;
    if (s.t_q % q_shares != 0)
      throw ConfigError(what + ": case " + std::to_string(s.gqa_case) + " splits T_q " + std::to_string(q_shares) +
                        " ways; T_q = " + std::to_string(s.t_q) + " is not a multiple of " + std::to_string(q_shares));
    plan.rows_per_pe = s.t_q / q_shares * s.h_q;
  } else if (tp_case(s)) {
    if (s.h_q % P != 0)
      throw ConfigError(what + ": decode case " + std::to_string(s.gqa_case) + " splits the " + std::to_string(s.h_q) +
                        " query heads over " + std::to_string(P) + " PEs per cube; h_q must be a multiple");
    plan.rows_per_pe = s.t_q * (s.h_q / P);
  } else {
    plan.rows_per_pe = s.t_q * s.h_q;
  }
  // K/V shares: every PE's stream must have at least one token.
  const std::int64_t kv_parts = s.gqa_case == 4   ? static_cast<std::int64_t>(n) * P
                                : s.gqa_case == 3 ? P
                                : s.gqa_case == 1 ? n
                                                  : 1;
  if (s.s_kv < kv_parts)
    throw ConfigError(what + ": case " + std::to_string(s.gqa_case) + " splits S_kv " + std::to_string(kv_parts) +
                      " ways; S_kv = " + std::to_string(s.s_kv) + " is too short");
  const std::int64_t kv_max_chunk = (s.s_kv + kv_parts - 1) / kv_parts;
  plan.tile_q = std::min(s.tile_q, plan.rows_per_pe);
  plan.tile_s = std::min(s.tile_s, kv_max_chunk);
  plan.q_tiles = (plan.rows_per_pe + plan.tile_q - 1) / plan.tile_q;

  // ---- scratch ----
  const Bytes d = s.d_head, e = s.elem_bytes, R = plan.tile_q, L = plan.tile_s;
  const bool merges = s.gqa_case == 3 || (s.gqa_case == 4) || (!prefill && s.gqa_case == 1);
  const Bytes q = R * d * e, o = R * d * 4, ml = 2 * R * 4, sc_b = R * L * 4;
  const Bytes kv = static_cast<Bytes>(s.kv_buffers) * 2 * L * d * e;
  const Bytes part = merges ? R * d * 4 + 2 * R * 4 : 0;
  plan.scratch_per_pe = q + o + ml + sc_b + kv + part;
  plan.scratch_budget = pe_cfg.scratch;
  plan.scratch_breakdown =
      "Q tile " + std::to_string(R) + " x " + std::to_string(d) + " x " + std::to_string(e) +
      " B = " + config::format_bytes(q, config::ByteUnits::UpToKiB) + " + O accumulator " +
      config::format_bytes(o, config::ByteUnits::UpToKiB) + " + m, l " +
      config::format_bytes(ml, config::ByteUnits::UpToKiB) + " + scores " + std::to_string(R) + " x " +
      std::to_string(L) + " x 4 B = " + config::format_bytes(sc_b, config::ByteUnits::UpToKiB) + " + K/V tiles " +
      std::to_string(s.kv_buffers) + " x 2 x " + std::to_string(L) + " x " + std::to_string(d) + " x " +
      std::to_string(e) + " B = " + config::format_bytes(kv, config::ByteUnits::UpToKiB) +
      (merges ? " + received partial " + config::format_bytes(part, config::ByteUnits::UpToKiB) : "");
  if (plan.scratch_per_pe > pe_cfg.scratch)
    throw CapacityError(what + ": tile_q = " + std::to_string(R) + " rows, tile_s = " + std::to_string(L) +
                        " tokens need " + config::format_bytes(plan.scratch_per_pe, config::ByteUnits::UpToKiB) +
                        " of scratch per PE (" + plan.scratch_breakdown +
                        "), budget pe.scratch = " + config::format_bytes(pe_cfg.scratch, config::ByteUnits::UpToKiB));

  // ---- work and closed-form counts ----
  for (int pos = 0; pos < n; ++pos) {
    if (!working(s, pos)) continue;
    for (int p = 0; p < P; ++p) {
      ++plan.active_pes;
      const auto stream = kv_stream(plan, m, pos, p);
      std::int64_t kv_tokens = 0;
      std::uint64_t hbm_tiles = 0, fwd_tiles = 0;
      for (const KvTile& t : stream) {
        kv_tokens += t.len;
        hbm_tiles += t.from_hbm ? 1 : 0;
        fwd_tiles += t.forward ? 1 : 0;
      }
      plan.kv_tokens_per_pe = std::max(plan.kv_tokens_per_pe, kv_tokens);
      plan.compute_work += static_cast<double>(plan.rows_per_pe) * static_cast<double>(kv_tokens);
      const auto qt = static_cast<std::uint64_t>(plan.q_tiles);
      plan.dma_q += qt;
      plan.dma_kv += qt * 2 * hbm_tiles;
      plan.ipcq_ring += qt * 2 * fwd_tiles;
      plan.gemm_ops += qt * 2 * stream.size();
      plan.vector_ops += qt * stream.size();
    }
  }
  plan.flops = 4.0 * static_cast<double>(d) * plan.compute_work;
  // Merges and writers per Q tile.
  std::uint64_t merges_per_qtile = 0, writers = 0;
  switch (s.gqa_case) {
    case 1:
      merges_per_qtile = prefill ? 0 : static_cast<std::uint64_t>(P) * (n - 1);
      writers = prefill ? static_cast<std::uint64_t>(n) * P : static_cast<std::uint64_t>(P);
      break;
    case 2: writers = static_cast<std::uint64_t>(P); break;
    case 3:
      merges_per_qtile = static_cast<std::uint64_t>(n) * (P - 1);
      writers = static_cast<std::uint64_t>(n);
      break;
    case 4:
      merges_per_qtile = static_cast<std::uint64_t>(n) * (P - 1) + (prefill ? 0 : static_cast<std::uint64_t>(n - 1));
      writers = prefill ? static_cast<std::uint64_t>(n) : 1;
      break;
  }
  const auto qt = static_cast<std::uint64_t>(plan.q_tiles);
  plan.ipcq_merge = 3 * merges_per_qtile * qt;
  plan.vector_ops += merges_per_qtile * qt + writers * qt;  // merges + finalizes
  plan.dma_out = writers * qt;
  const Bytes kv_per_token = 2 * d * e;
  plan.kv_bytes_per_cube = kv_per_token * ((s.gqa_case == 1 || s.gqa_case == 4) ? part_len(s.s_kv, n, 0) : s.s_kv);
  place_gqa(system, plan);  // the KV cache, Q and O must fit their HBM slices
  return plan;
}

runtime::Program gqa_program(const topology::System& system, const GqaSpec& spec, GqaPlan* plan_out,
                             std::vector<GqaOpData>* data) {
  GqaPlan plan = plan_gqa(system, spec);
  const GqaSpec& s = plan.spec;
  const Machine& m = system.machine();
  const int n = plan.n_cubes, P = plan.pes_per_cube;
  const bool prefill = s.phase == GqaPhase::Prefill;
  Program prog(what_text(s));
  const GqaHbmLayout layout = place_gqa(system, plan);
  const std::int32_t t_load_q = prog.tag("load_q"), t_load_kv = prog.tag("load_kv"), t_qk = prog.tag("qk"),
                     t_soft = prog.tag("softmax"), t_pv = prog.tag("pv"), t_ring = prog.tag("ring"),
                     t_merge = prog.tag("merge"), t_fin = prog.tag("finalize"), t_store = prog.tag("store_o");
  const Bytes d = s.d_head, e = s.elem_bytes;
  const auto key = [](std::int64_t qtile, std::int64_t index, int kind) { return ((qtile << 32) + index) * 8 + kind; };
  // What op `id` does to the data (see GqaOpData); returns `id`.
  const auto note = [&](OpId id, GqaRole role, std::int32_t buffer = -1) {
    if (data) {
      if (data->size() <= id) data->resize(id + 1);
      (*data)[id].role = role;
      (*data)[id].buffer = buffer;
    }
    return id;
  };

  // Per-PE state carried across Q tiles.
  struct Pe {
    NodeId node = 0;
    NodeId own = 0;  // its HBM slice
    OpId alloc = kNone;
    std::vector<OpId> kv_free;  // per K/V buffer: the op after which it may be refilled
    std::int64_t kv_count = 0;  // K/V tiles so far (which buffer next)
    OpId last_pv = kNone;       // scores and Q buffers reuse
    OpId last_qk = kNone;
    OpId o_free = kNone;  // the O accumulator is free again (written or sent)
    OpId partial = kNone;
    OpId merge_in_free = kNone;      // the received-partial buffer
    std::int64_t o_rows = 0;         // O rows written so far (their HBM address)
    std::vector<std::int64_t> rows;  // its query rows (token x h_q + head)
  };
  std::vector<std::vector<Pe>> pe(static_cast<std::size_t>(n), std::vector<Pe>(static_cast<std::size_t>(P)));
  for (int pos = 0; pos < n; ++pos)
    for (int p = 0; p < P; ++p) {
      Pe& x = pe[pos][p];
      x.node = plan.pes[pos][p];
      x.own = m.hbm_ctrl(s.sip, s.cubes[pos], s.pe_first + p);
      if (!working(s, pos)) continue;
      if (data) x.rows = pe_rows(plan, pos, p);
      x.alloc = prog.alloc(x.node, plan.scratch_per_pe, {}, "gqa scratch");
      x.kv_free.assign(s.kv_buffers, x.alloc);
      x.last_pv = x.last_qk = x.o_free = x.merge_in_free = x.alloc;
    }
  auto deps = [](std::initializer_list<OpId> l) {
    std::vector<OpId> v;
    for (OpId o : l)
      if (o != kNone) v.push_back(o);
    return v;
  };

  // A merge of `src`'s partial into `dst`'s (rows R, Q tile k, merge index idx).
  auto merge = [&](Pe& src, Pe& dst, std::int64_t R, std::int64_t k, std::int64_t idx) {
    const OpId so =
        note(prog.send(src.node, dst.node, R * d * 4, key(k, idx, 0), {src.partial}, "send O partial", t_merge),
             GqaRole::SendO);
    const OpId sm =
        note(prog.send(src.node, dst.node, R * 4, key(k, idx, 1), {src.partial}, "send m", t_merge), GqaRole::SendM);
    const OpId sl =
        note(prog.send(src.node, dst.node, R * 4, key(k, idx, 2), {src.partial}, "send l", t_merge), GqaRole::SendL);
    src.o_free = prog.barrier(src.node, {so, sm, sl}, "partial sent");
    const OpId ro =
        note(prog.recv(dst.node, src.node, key(k, idx, 0), deps({dst.merge_in_free}), "recv O partial", t_merge),
             GqaRole::RecvO);
    const OpId rm = note(prog.recv(dst.node, src.node, key(k, idx, 1), deps({dst.merge_in_free}), "recv m", t_merge),
                         GqaRole::RecvM);
    const OpId rl = note(prog.recv(dst.node, src.node, key(k, idx, 2), deps({dst.merge_in_free}), "recv l", t_merge),
                         GqaRole::RecvL);
    const OpId v =
        note(prog.vector(dst.node, (2 * R * d + 4 * R) * 4, {ro, rm, rl, dst.partial}, "softmax merge", t_merge),
             GqaRole::Merge);
    dst.partial = v;
    dst.merge_in_free = v;
  };
  // Binomial tree over `group` (root group[0]).
  auto tree = [&](std::vector<Pe*> group, std::int64_t R, std::int64_t k, std::int64_t base) {
    const auto g = static_cast<std::int64_t>(group.size());
    for (std::int64_t stride = 1; stride < g; stride *= 2)
      for (std::int64_t i = stride; i < g; i += 2 * stride) merge(*group[i], *group[i - stride], R, k, base + i);
  };
  auto finalize = [&](Pe& x, std::int64_t R) {
    const OpId f = note(prog.vector(x.node, R * d * 4, {x.partial}, "normalize O", t_fin), GqaRole::Finalize);
    const std::uint64_t at = layout.qo.at(x.node).second + static_cast<std::uint64_t>(x.o_rows * d * e);
    const OpId w = note(prog.dma(x.node, Move{x.node, x.own, R * d * e, at}, {f}, "store O", t_store), GqaRole::StoreO);
    if (data) (*data)[w].rows.assign(x.rows.begin() + x.o_rows, x.rows.begin() + x.o_rows + R);
    x.o_rows += R;
    x.o_free = w;
  };

  for (std::int64_t k = 0; k < plan.q_tiles; ++k) {
    const std::int64_t R = std::min(plan.tile_q, plan.rows_per_pe - k * plan.tile_q);
    for (int pos = 0; pos < n; ++pos) {
      if (!working(s, pos)) continue;
      for (int p = 0; p < P; ++p) {
        Pe& x = pe[pos][p];
        const NodeId next = plan.pes[(pos + 1) % n][p], prev = plan.pes[(pos + n - 1) % n][p];
        const std::uint64_t q_at = layout.qo.at(x.node).first + static_cast<std::uint64_t>(k * plan.tile_q * d * e);
        const OpId q =
            note(prog.dma(x.node, Move{x.own, x.node, R * d * e, q_at}, deps({x.last_qk}), "load Q tile", t_load_q),
                 GqaRole::LoadQ);
        if (data) (*data)[q].rows.assign(x.rows.begin() + k * plan.tile_q, x.rows.begin() + k * plan.tile_q + R);
        const auto stream = kv_stream(plan, m, pos, p);
        OpId prev_soft = kNone;
        for (std::size_t t = 0; t < stream.size(); ++t) {
          const KvTile& tile = stream[t];
          const std::int64_t L = tile.len;
          const std::size_t buf = static_cast<std::size_t>(x.kv_count++ % s.kv_buffers);
          const Bytes kvb = L * d * e;
          OpId kl, vl;
          if (tile.from_hbm) {
            const auto& [k_at, v_at] = layout.kv.at({tile.home, tile.step, tile.j});
            kl = note(prog.dma(x.node, Move{tile.home, x.node, kvb, k_at}, {x.kv_free[buf]}, "load K tile", t_load_kv),
                      GqaRole::LoadK, static_cast<std::int32_t>(buf));
            vl = note(prog.dma(x.node, Move{tile.home, x.node, kvb, v_at}, {x.kv_free[buf]}, "load V tile", t_load_kv),
                      GqaRole::LoadV, static_cast<std::int32_t>(buf));
            if (data) {
              (*data)[kl].lo = (*data)[vl].lo = tile.lo;
              (*data)[kl].hi = (*data)[vl].hi = tile.lo + L;
            }
          } else {
            const std::int64_t ti = tile.step * 65536 + tile.j;
            kl = note(prog.recv(x.node, prev, key(k, ti, 3), {x.kv_free[buf]}, "recv K tile", t_ring), GqaRole::RecvK,
                      static_cast<std::int32_t>(buf));
            vl = note(prog.recv(x.node, prev, key(k, ti, 4), {x.kv_free[buf]}, "recv V tile", t_ring), GqaRole::RecvV,
                      static_cast<std::int32_t>(buf));
          }
          const OpId qk = note(prog.gemm(x.node, 2.0 * R * L * d, s.precision, deps({q, kl, x.last_pv}), "QK^T", t_qk),
                               GqaRole::Qk, static_cast<std::int32_t>(buf));
          const OpId sm = note(prog.vector(x.node, 3 * R * L * 4 + R * d * 4, deps({qk, t == 0 ? x.o_free : prev_soft}),
                                           "online softmax", t_soft),
                               GqaRole::Softmax);
          if (data) (*data)[sm].first = t == 0;
          const OpId pv = note(prog.gemm(x.node, 2.0 * R * L * d, s.precision, {sm, vl}, "PV", t_pv), GqaRole::Pv,
                               static_cast<std::int32_t>(buf));
          x.last_qk = qk;
          x.last_pv = pv;
          prev_soft = pv;
          OpId freed = pv;
          if (tile.forward) {
            // PE p of the next cube processes this chunk one ring step later, tile for tile.
            const std::int64_t ri = (tile.step + 1) * 65536 + tile.j;
            const OpId sk = note(prog.send(x.node, next, kvb, key(k, ri, 3), {kl}, "send K tile", t_ring),
                                 GqaRole::SendK, static_cast<std::int32_t>(buf));
            const OpId sv = note(prog.send(x.node, next, kvb, key(k, ri, 4), {vl}, "send V tile", t_ring),
                                 GqaRole::SendV, static_cast<std::int32_t>(buf));
            freed = prog.barrier(x.node, {pv, sk, sv}, "K/V tile done");
          }
          x.kv_free[buf] = freed;
        }
        x.partial = prev_soft;
      }
    }
    // Merges and output per Q tile.
    switch (s.gqa_case) {
      case 1:
        if (prefill) {
          for (auto& row : pe)
            for (Pe& x : row) finalize(x, R);
        } else {
          for (int p = 0; p < P; ++p) {
            std::vector<Pe*> g;
            for (int pos = 0; pos < n; ++pos) g.push_back(&pe[pos][p]);
            tree(g, R, k, 1000);
            finalize(pe[0][p], R);
          }
        }
        break;
      case 2:
        for (Pe& x : pe[0]) finalize(x, R);
        break;
      case 3:
      case 4:
        for (int pos = 0; pos < n; ++pos) {
          std::vector<Pe*> g;
          for (Pe& x : pe[pos]) g.push_back(&x);
          tree(g, R, k, 1000);
        }
        if (s.gqa_case == 4 && !prefill) {
          std::vector<Pe*> g;
          for (int pos = 0; pos < n; ++pos) g.push_back(&pe[pos][0]);
          tree(g, R, k, 2000);
          finalize(pe[0][0], R);
        } else {
          for (int pos = 0; pos < n; ++pos) finalize(pe[pos][0], R);
        }
        break;
    }
  }
  for (auto& row : pe)
    for (Pe& x : row)
      if (x.alloc != kNone) {
        // The last user of every buffer; every earlier op precedes one of them.
        std::vector<OpId> last = x.kv_free;
        last.insert(last.end(), {x.last_pv, x.o_free, x.merge_in_free});
        prog.free(x.alloc, last, "free gqa scratch");
      }
  if (data) data->resize(prog.size());
  if (plan_out) *plan_out = std::move(plan);
  return prog;
}

GqaResult run_gqa(topology::System& system, const GqaSpec& spec) {
  GqaResult res;
  const runtime::Program prog = gqa_program(system, spec, &res.plan);
  const std::vector<Bytes> before = topology::channel_bytes(system.fabric());
  res.run = runtime::Executor(system).run(prog);
  res.latency = res.run.makespan();
  res.link_bytes = topology::link_class_bytes_since(system.fabric(), before);
  const double pes = static_cast<double>(res.plan.n_cubes) * res.plan.pes_per_cube;
  std::map<std::string, int> units;
  for (const auto& u : res.run.engines) {
    const std::string kind = runtime::to_string(u.engine);
    res.engine_busy[kind] += u.busy;
    units[kind] = u.capacity;
  }
  for (const auto& [kind, busy] : res.engine_busy)
    res.engine_occupancy[kind] = res.latency > 0 ? busy / (static_cast<double>(res.latency) * pes * units[kind]) : 0.0;
  for (const auto& [node, peak] : res.run.peak_scratch) res.peak_scratch = std::max(res.peak_scratch, peak);
  return res;
}

}  // namespace kernbench::kernels
