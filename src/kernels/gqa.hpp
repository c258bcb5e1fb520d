// gqa.hpp -- GQA attention of one KV-head group on cubes x PEs: the four
// sharding cases, prefill and decode, as runtime Programs.
//
// One KV-head group of LLaMA-3.1-70B: h_q = 8 query heads share h_kv = 1 K/V
// head, d_head = 128, 2-byte elements (kernbench-model.md, "GQA attention").
// The sub-mesh is a ring of cubes (default: the 2 x 4 snake of cubes of SIP
// 0, i.e. cubes 0 1 2 3 7 6 5 4 of a 4-wide grid, whose neighbours are all
// UCIe-adjacent, position 7 included) with every PE of each cube.
//
// A "query row" is one (token, head) pair: the 8 heads of the group share the
// K/V head, so a PE batches its rows against each K/V tile. Per PE:
//   rows       its query rows; tiled by tile_q rows (a "Q tile")
//   KV stream  the K/V tokens it processes, tiled by tile_s tokens
// Per Q tile, per K/V tile of L tokens (R rows in the Q tile):
//   K, V       DMA from the tile's HBM slice, or IPCQ recv from the ring
//   QK^T       GEMM engine, 2 R L d FLOPs
//   softmax    vector engine, 3 R L 4 B (max pass, exp + sum pass, P write
//              over the fp32 scores) + R d 4 B (rescale the O accumulator)
//              -- the online-softmax (flash) update
//   PV         GEMM engine, 2 R L d FLOPs
// then either finalize (vector R d 4 B: divide by l) and DMA-write O (R d
// 2 B) to the writer's own slice, or send the partial (O, m, l: three IPCQ
// messages of R d 4, R 4 and R 4 B) to a merge; a merge receives the three
// and combines them on the vector engine ((2 R d + 4 R) 4 B).
//
// Layout: a PE reads its Q tiles from its own HBM slice (the rows it needs
// are laid out there beforehand, as GemmSpec assumes for its operands) and
// the writer puts O in its own slice; K/V placement is per case, below.
//
// The cases (n cubes, P PEs per cube; "SP" splits K/V, "TP" splits Q):
//   1 Cube-SP x PE-TP  K/V split n ways over cubes, each cube's share striped
//                      over its P slices. Prefill: Q split n P ways along
//                      T_q; every PE streams its cube's share, then the K/V
//                      rotates around the ring of cubes (PE p forwards every
//                      tile to PE p of the next cube: (n - 1) x K and V x
//                      n P sends per K/V tile position). Decode: PE p takes
//                      head p (TP over heads; our reading, see the
//                      reference); each PE's partial over its cube's share
//                      is merged over the cubes by a binomial tree to
//                      position 0 (K/V does not move: the query is tiny).
//   2 Cube-Repl x PE-TP full K/V in every cube (striped over its slices);
//                      only cube 0 works: its PEs split T_q (decode: heads)
//                      and stream all of K/V. (n - 1) P PEs idle.
//   3 Cube-Repl x PE-SP full K/V per cube; PE p streams S_kv share p (its own
//                      slice) for all rows; partials merged per Q tile by a
//                      binomial tree to PE 0 of each cube, which writes O.
//                      Every cube computes the same: n x redundant work.
//   4 Cube-SP x PE-SP  K/V split n P ways (PE's own slice). Prefill: Q split
//                      n ways along T_q (all PEs of a cube share its rows),
//                      the K/V shares rotate around the ring of cubes as in
//                      case 1, then the cube's P partials are merged per Q
//                      tile to PE 0, which writes O. Decode: no ring; the
//                      64 partials merge within each cube, then over the
//                      cube roots, to one writer (63 merges x 3 sends = 189
//                      IPCQ copies and 1 output write: the counts the
//                      reference reports for its decode study).
// In the ring cases a PE takes the K/V tiles tile-major (tile j of every ring
// step, then tile j + 1): it forwards each tile to the next cube, which needs
// it as its very next tile, so no sender runs more than a tile ahead (in
// step-major order the IPCQ slots fill around the ring and deadlock).
// In the ring cases a PE whose rows need several Q tiles streams the ring
// once per Q tile (the K/V is re-read and re-rotated): the O accumulator of
// one Q tile is all that scratch holds.
//
// Scratch per PE (one alloc for the whole program, buffer reuse expressed by
// dependencies): Q tile R d e + O accumulator R d 4 + m, l 2 R 4 + scores
// R L 4 + kv_buffers x (K + V tiles) 2 L d e [+ a received partial R d 4 +
// 2 R 4 where merges happen]. A spec whose tiles do not fit pe.scratch is a
// CapacityError with the breakdown. Attention is not causally masked.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/executor.hpp"
#include "runtime/program.hpp"
#include "topology/system.hpp"

namespace kernbench::kernels {

enum class GqaPhase { Prefill, Decode };
const char* to_string(GqaPhase phase);
GqaPhase gqa_phase_from(const std::string& name);

struct GqaSpec {
  GqaPhase phase = GqaPhase::Prefill;
  int gqa_case = 4;       ///< 1..4 (see the header)
  std::int64_t t_q = 0;   ///< query tokens (decode: 1 or a few speculative)
  std::int64_t s_kv = 0;  ///< K/V tokens
  int h_q = 8;            ///< query heads of the group
  int h_kv = 1;           ///< K/V heads of the group (1)
  std::int64_t d_head = 128;
  runtime::Bytes elem_bytes = 2;  ///< Q, K, V, O element size
  std::int64_t tile_q = 256;      ///< query rows per Q tile
  std::int64_t tile_s = 256;      ///< K/V tokens per tile
  std::uint32_t kv_buffers = 2;   ///< K/V tile buffers per PE
  int sip = 0;
  std::vector<int> cubes;  ///< ring order (empty: the 2 x 4 snake of the SIP)
  int pe_first = 0;        ///< first PE index used in each cube
  int pe_count = 0;        ///< PEs used per cube, pe_first.. (0: every PE of the cube from pe_first)
  runtime::Precision precision = runtime::Precision::Fp16;
};

/// The decisions and the closed-form op counts of one GQA program.
struct GqaPlan {
  GqaSpec spec;                                   ///< cubes resolved
  std::vector<std::vector<runtime::NodeId>> pes;  ///< [ring position][pe]
  int n_cubes = 0, pes_per_cube = 0;
  std::int64_t rows_per_pe = 0;         ///< query rows of a working PE
  std::int64_t tile_q = 0, tile_s = 0;  ///< after clamping to the shares
  std::int64_t q_tiles = 0;             ///< Q tiles per working PE
  std::int64_t kv_tokens_per_pe = 0;    ///< K/V tokens a working PE processes per Q tile
  int active_pes = 0;
  double compute_work = 0.0;             ///< sum over PEs of rows x K/V tokens processed (score elements)
  double flops = 0.0;                    ///< 4 d compute_work
  runtime::Bytes kv_bytes_per_cube = 0;  ///< K and V resident in a working cube's HBM
  runtime::Bytes scratch_per_pe = 0;
  runtime::Bytes scratch_budget = 0;
  std::string scratch_breakdown;
  // Closed-form counts of the program (the tests compare them with the run).
  std::uint64_t dma_q = 0, dma_kv = 0, dma_out = 0;
  std::uint64_t ipcq_ring = 0, ipcq_merge = 0;
  std::uint64_t gemm_ops = 0, vector_ops = 0;
};

/// Checks the spec (ConfigError naming the bad field) and plans; a tiling
/// that overflows pe.scratch is a CapacityError with the bytes.
GqaPlan plan_gqa(const topology::System& system, const GqaSpec& spec);

/// What one op of a GQA program does to the data -- the tensor slices it
/// reads and writes -- for the numeric check that interprets the executed
/// Program (kernbench.gqa_reference; docs/gqa.md). Per PE the buffers are:
/// q (the Q tile), k[b], v[b] (K/V buffer b), s (scores, then P), the
/// partial state m, l, o, and the received partial m_in, l_in, o_in.
/// Sends and recvs say which buffer they carry; the message they share is
/// the Program's own (receiver, sender, key), not this table's.
enum class GqaRole {
  None,     ///< alloc, free, barriers: no data
  LoadQ,    ///< q <- Q[rows]
  LoadK,    ///< k[buffer] <- K[lo, hi)
  LoadV,    ///< v[buffer] <- V[lo, hi)
  RecvK,    ///< k[buffer] <- the message
  RecvV,    ///< v[buffer] <- the message
  SendK,    ///< the message <- k[buffer]
  SendV,    ///< the message <- v[buffer]
  Qk,       ///< s <- q k[buffer]^T / sqrt(d)
  Softmax,  ///< online softmax: m, l, o rescaled to the new row max, s <- exp(s - m) (first: fresh m, l, o)
  Pv,       ///< o <- o + s v[buffer]
  SendO,    ///< the message <- o (likewise SendM: m, SendL: l)
  SendM,
  SendL,
  RecvO,  ///< o_in <- the message (likewise RecvM: m_in, RecvL: l_in)
  RecvM,
  RecvL,
  Merge,     ///< (m, l, o) <- merge of (m, l, o) and (m_in, l_in, o_in)
  Finalize,  ///< o <- o / l
  StoreO,    ///< O[rows] <- o
};
const char* to_string(GqaRole role);

struct GqaOpData {
  GqaRole role = GqaRole::None;
  std::int32_t buffer = -1;        ///< the K/V buffer (K/V loads, recvs, sends; QK^T; PV)
  bool first = false;              ///< Softmax: the first K/V tile of a Q tile
  std::int64_t lo = 0, hi = 0;     ///< LoadK, LoadV: K/V tokens [lo, hi)
  std::vector<std::int64_t> rows;  ///< LoadQ, StoreO: query rows (token x h_q + head), in order
};

/// The Program of the planned case (tags: "load_q", "load_kv", "qk",
/// "softmax", "pv", "ring", "merge", "finalize", "store_o"); with `data`,
/// what each of its ops does to the data (one entry per op).
runtime::Program gqa_program(const topology::System& system, const GqaSpec& spec, GqaPlan* plan = nullptr,
                             std::vector<GqaOpData>* data = nullptr);

/// One simulated run and its metrics.
struct GqaResult {
  GqaPlan plan;
  runtime::RunResult run;
  runtime::Time latency = 0;                         ///< makespan, ps
  std::map<std::string, double> engine_busy;         ///< per engine kind, unit-ps summed over the PEs
  std::map<std::string, double> engine_occupancy;    ///< busy / (latency x PEs of the sub-mesh x units)
  std::map<std::string, runtime::Bytes> link_bytes;  ///< bytes through the fabric per link class
  runtime::Bytes peak_scratch = 0;                   ///< most any PE held
};

GqaResult run_gqa(topology::System& system, const GqaSpec& spec);

}  // namespace kernbench::kernels
