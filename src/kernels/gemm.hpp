// gemm.hpp -- the GEMM kernel model: C[M,N] = A[M,K] B[K,N] as tile pipelines.
//
// A GEMM is not hand-written event code: gemm_program() builds a runtime
// Program -- per PE one scratch Alloc, one composite tile pipeline (DMA-load
// A and B tiles from HBM to scratch, GEMM engine, DMA-store C) and one Free
// -- and the Executor times it. plan_gemm() makes the decisions the program
// follows (how M and N are split over the PEs, the tile sizes, the scratch
// each PE needs) and estimates, from the config alone, the per-tile stage
// times and the steady-state stage limit the simulated run is compared with.
//
// Data layout (the "placement"):
//   - Operands live in HBM. Each PE's share of A, B and C has a home HBM
//     slice: by default the PE's own slice (hbm_ctrl of the same sip, cube
//     and PE index), i.e. the operands are assumed laid out for this split
//     beforehand (an A row block needed by several PEs is present in each of
//     their slices); laying them out is not part of the GEMM. GemmSpec::homes
//     places the shares elsewhere (e.g. all on one slice, to study contention).
//   - Element sizes: A and B in the precision's width (fp32 4 B, fp16/bf16
//     2 B, int8 1 B). The accumulator in scratch is 4 B (fp32; int32 for
//     int8). C is written to HBM as fp32 for fp32, fp16/bf16 for 16-bit
//     inputs (rounded from the fp32 accumulator at write-back) and int32 for
//     int8: 4, 2, 2 and 4 B.
//   - C starts at zero in scratch (the beta = 0 GEMM of ML layers); the "+="
//     is the accumulation over K. Adding into an existing C would cost one
//     more load of C per output block, which this model does not issue.
//
// Split and loop order:
//   - P PEs form a pm x pn grid (pm * pn = P, pm <= M, pn <= N); PE
//     pes[gm * pn + gn] owns the C block of row group gm and column group gn
//     (rows and columns split as evenly as integers allow). K is never
//     split, so no cross-PE reduction is needed.
//   - The grid and the tiles (unless given) are chosen together: every
//     grid and every tiling that fits the scratch is estimated (per-step
//     stage times from the config, pipeline fill and drain, dispatches);
//     among those within 1 % of the best estimate the one with the fewest
//     steps wins (fewer, larger DMAs), then the least HBM traffic. Tile
//     sizes tried per dimension d: ceil(d / c) for c = ceil(d / 2^j).
//   - Each PE walks its block in tiles tm x tn x tk, loop order i (M tiles),
//     j (N tiles), k (K tiles) innermost: every pipeline tile ("step") loads
//     A(i,k) and B(k,j), runs 2 tm tn tk FLOPs, and stores 1/kt of a C block.
//     The C block finished at the end of a k-loop drains to HBM in kt slices
//     during the next block's k-loop (so scratch holds two C accumulators:
//     one accumulating, one draining). The composite pipeline has identical
//     stages, so each step moves the *average* bytes and FLOPs of its tiles:
//     when a tile size does not divide the share, the edge tiles' smaller
//     work is spread over all steps. Totals are exact (bytes rounded up to
//     whole bytes per step); for shares the tiles divide, every step is exact.
//   - Pinned variant: B, the operand reused by every M tile, is loaded whole
//     (its K x n share) into scratch by one plain DMA before the composite;
//     the composite then loads only A tiles, so its window excludes B's load.
//
// The per-PE scratch budget (pe.scratch) holds: `buffers` copies of the A
// tile and of the B tile (B: none when pinned), the pinned B share, and two
// tm x tn accumulators of 4 B.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/program.hpp"
#include "topology/system.hpp"

namespace kernbench::kernels {

using runtime::NodeId;
using runtime::Precision;
using sim::Bytes;
using sim::Time;

/// The most multiply-adds (M x N x K) a GEMM may ask for: 2^60. Larger shapes
/// are refused by plan_gemm with a ConfigError naming M, N, K and the product
/// (their tile and step counts would no longer fit 64-bit arithmetic).
inline constexpr std::int64_t kMaxGemmMacs = std::int64_t{1} << 60;

/// What to compute and where. Tiles of 0 are chosen by plan_gemm.
struct GemmSpec {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  Precision precision = Precision::Fp16;
  std::vector<NodeId> pes;    ///< PEs sharing the work (empty: the machine's first PE)
  std::vector<NodeId> homes;  ///< home HBM slice of each PE's share (empty: each PE's own slice)
  std::int64_t tile_m = 0;    ///< 0: chosen by the search; larger than a share: clamped to it
  std::int64_t tile_n = 0;
  std::int64_t tile_k = 0;
  bool pinned = false;        ///< load B once before the composite
  std::uint32_t buffers = 2;  ///< A/B tile buffers (2: double buffering)
};

/// One PE's part of the GEMM, with its per-step estimates.
struct GemmShare {
  NodeId pe = 0;
  NodeId home = 0;             ///< HBM slice holding this share of A, B and C
  std::int64_t m0 = 0, m = 0;  ///< rows [m0, m0 + m) of C
  std::int64_t n0 = 0, n = 0;  ///< columns [n0, n0 + n) of C
  std::int64_t tiles_m = 0, tiles_n = 0, tiles_k = 0;
  std::uint32_t steps = 0;  ///< pipeline tiles = tiles_m * tiles_n * tiles_k
  Bytes load_a = 0;         ///< per step (averaged over edge tiles)
  Bytes load_b = 0;         ///< per step (0 when pinned)
  Bytes store_c = 0;        ///< per step
  double flops = 0.0;       ///< per step
  Bytes pinned = 0;         ///< the B share loaded before the composite (pinned variant)
  Bytes scratch = 0;        ///< bytes allocated on the PE
  Time load_ps = 0;         ///< per step: A + B bytes / the home -> PE path bandwidth
  Time store_ps = 0;        ///< per step: C bytes / the PE -> home path bandwidth
  Time dma_ps = 0;          ///< per step: DMA stage (bandwidth and DMA-channel bounds)
  Time compute_ps = 0;      ///< per step: GEMM engine time
  Time latency_ps = 0;      ///< per step: (load latency + compute) / buffers, what buffering cannot hide
  Time step_ps = 0;         ///< steady-state period: max(dma_ps, compute_ps, latency_ps)
  Time pinned_ps = 0;       ///< estimated time of the pinned load
  Time ideal_ps = 0;        ///< steps x step_ps: the steady-state bound
  Time estimate_ps = 0;     ///< ideal plus pipeline fill and drain, dispatches, pinned load
};

/// The decisions and estimates for one GEMM (see the file header).
struct GemmPlan {
  GemmSpec spec;                        ///< as given, with pes and homes resolved
  std::int64_t grid_m = 1, grid_n = 1;  ///< PE grid: M split grid_m ways, N split grid_n ways
  std::int64_t tile_m = 0, tile_n = 0, tile_k = 0;
  Bytes elem_bytes = 0;            ///< A and B element size
  Bytes c_elem_bytes = 0;          ///< C element size in HBM
  Bytes acc_elem_bytes = 4;        ///< accumulator element size in scratch
  Bytes scratch_budget = 0;        ///< pe.scratch
  Bytes scratch_per_pe = 0;        ///< the most any PE allocates
  std::uint64_t steps_total = 0;   ///< pipeline tiles over all PEs
  std::vector<GemmShare> shares;   ///< one per PE, in spec.pes order
  std::size_t critical = 0;        ///< index of the share with the largest estimate
  std::string limit;               ///< the critical share's steady-state limit: "dma" (bandwidth, channels or
                                   ///< unhidden load latency) or "compute"
  Time ideal_ps = 0;               ///< the critical share's steady-state bound
  Time estimate_ps = 0;            ///< the critical share's estimate of the whole run
  double flops = 0.0;              ///< 2 M N K
  double peak_flops_per_s = 0.0;   ///< GEMM engines of all PEs in spec.pes at this precision
  double read_bytes_per_s = 0.0;   ///< critical share: home -> PE path bandwidth
  double write_bytes_per_s = 0.0;  ///< critical share: PE -> home path bandwidth
  Bytes hbm_bytes = 0;             ///< bytes moved between HBM and scratch, all PEs

  const GemmShare& critical_share() const { return shares.at(critical); }
};

/// A element size, C element size in HBM, for a precision (see the header).
Bytes gemm_elem_bytes(Precision precision);
Bytes gemm_c_elem_bytes(Precision precision);

/// Checks the spec and decides the split and tiles. Throws ConfigError for
/// bad dimensions, unknown or duplicate PEs, a precision the GEMM engine
/// lacks, or a split that cannot give every PE a block; CapacityError when
/// the given tiles (or, searching, even the smallest tiles) overflow a PE's
/// scratch, with the bytes needed, the budget and the PE.
GemmPlan plan_gemm(const topology::System& system, const GemmSpec& spec);

/// The Program computing the GEMM as planned (per PE: alloc, [pinned B
/// DMA], composite, free; stage tags "load", "compute", "store", the pinned
/// DMA "pinned", the composites "gemm"). If `plan` is given, the plan is
/// stored there.
runtime::Program gemm_program(const topology::System& system, const GemmSpec& spec, GemmPlan* plan = nullptr);

}  // namespace kernbench::kernels
