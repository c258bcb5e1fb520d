// energy.hpp -- what a finished run cost in joules (the `energy:` model).
//
// Dynamic energy (docs/energy.md):
//   links    bytes that crossed each channel during the run (the fabric's
//            transfer records issued in [start, end]: payloads, DMA read
//            requests, IPCQ segments) x the price per byte of its link class;
//   memory   bytes the Program's moves read from or wrote to an HBM slice
//            (memory.hbm) and moved into or out of a PE's scratch
//            (memory.sram; a move whose end is the PE node itself);
//   compute  GEMM FLOPs by precision (plain ops and composite tiles) and
//            vector-engine bytes (vector ops, composite vector tiles,
//            reducing recvs) x their prices.
// Static energy: every node of each kind x its static power x the makespan.
// Every price is configured (energy_config.hpp), so each part is linear in
// the bytes, FLOPs or time it counts: doubling the bytes doubles it exactly.
//
// Dynamic energy is also attributed to the op kinds that caused it (dma,
// send, recv, gemm, vector, composite), from each op's moves and routes;
// link energy the Program's ops do not account for (another traffic source
// running at the same time) is reported as `unattributed`.
#pragma once

#include <map>
#include <string>

#include "runtime/executor.hpp"
#include "runtime/program.hpp"
#include "topology/system.hpp"

namespace kernbench::runtime {

struct EnergyReport {
  double total_j = 0.0;
  double dynamic_j = 0.0;
  double static_j = 0.0;
  Time makespan = 0;
  /// By the shared labels: dynamic:link:<class>, dynamic:memory:<hbm|sram>,
  /// dynamic:compute:<gemm|vector>:<precision|any>, static:<node kind>.
  std::map<std::string, double> by;
  /// Dynamic energy by op kind (plus `unattributed` link energy, if any).
  std::map<std::string, double> by_op_kind;
  /// What was counted: link:<class> and memory:<name> bytes,
  /// compute:gemm:<precision> FLOPs, compute:vector bytes, nodes:<kind>.
  std::map<std::string, double> counts;
};

/// The energy of `result`, the run of `program` on `system` (just finished:
/// the fabric's records of the run are read). Prices: system.config().energy.
EnergyReport energy(topology::System& system, const Program& program, const RunResult& result);

}  // namespace kernbench::runtime
