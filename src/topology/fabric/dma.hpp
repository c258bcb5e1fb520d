// dma.hpp -- the DMA transfer primitive on a Fabric: the one implementation
// of a DMA's legs, used by System::dma (pe-dma-perf, calibrate's fabric.dma)
// and by the runtime's DMA engine (every Program's dma op and composite
// load/store), so what the one measures is what the other pays.
//
// A move of `bytes` from `src` to `dst` issued by `agent`: when src is not
// the agent (a read), a request packet (fabric.request bytes) first goes
// agent -> src; then the data goes src -> dst (no transfer when they are the
// same node), without paying src's overhead again after a request. Its
// latency breakdown is the sum of its legs'. dma_read / dma_write are the
// two moves of System::dma, recorded in the simulation's op log (kind
// "dma_read" or "dma_write", agent = issuer node, resource = memory node).
#pragma once

#include "sim/process.hpp"
#include "topology/fabric/fabric.hpp"

namespace kernbench::topology {

struct DmaResult {
  Time issue = 0;
  Time end = 0;
  Bytes bytes = 0;
  Breakdown parts;             ///< request leg + data leg
  TransferId request_leg = 0;  ///< the request packet (reads only)
  TransferId data_leg = 0;
  Time latency() const { return end - issue; }
};

/// The fabric transfers of a move (see above): the request leg of a read,
/// then the data leg. The critical path and the energy model price them.
struct MoveLegs {
  struct Leg {
    NodeId src = 0, dst = 0;
    Bytes bytes = 0;
    bool request = false;
  };
  Leg leg[2];
  int count = 0;
};
inline MoveLegs move_legs(NodeId agent, NodeId src, NodeId dst, Bytes bytes, Bytes request) {
  MoveLegs l;
  if (src != agent) l.leg[l.count++] = {agent, src, request, true};
  if (src != dst) l.leg[l.count++] = {src, dst, bytes, false};
  return l;
}

/// `agent` moves `bytes` from `src` to `dst` (its legs: move_legs); not logged.
sim::Task<DmaResult> dma_move(Fabric& fabric, NodeId agent, NodeId src, NodeId dst, Bytes bytes,
                              std::uint64_t address = 0, std::int32_t tag = 0);

/// `issuer` reads `bytes` from `memory` (e.g. a PE reading an HBM slice).
sim::Task<DmaResult> dma_read(Fabric& fabric, NodeId issuer, NodeId memory, Bytes bytes, std::uint64_t address = 0,
                              std::int32_t tag = 0);

/// `issuer` writes `bytes` to `memory`.
sim::Task<DmaResult> dma_write(Fabric& fabric, NodeId issuer, NodeId memory, Bytes bytes, std::uint64_t address = 0,
                               std::int32_t tag = 0);

}  // namespace kernbench::topology
