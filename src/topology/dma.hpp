// dma.hpp -- the DMA transfer primitive on a Fabric.
//
// A read sends a request packet (fabric.request bytes) from the issuing
// agent to the memory node and streams the data back; a write streams the
// data out. The op is recorded in the simulation's op log (kind "dma_read"
// or "dma_write", agent = issuer node, resource = memory node) and its
// latency breakdown is the sum of its legs' breakdowns. The runtime's DMA
// engine will hold a channel around this from acquisition to completion.
#pragma once

#include "sim/process.hpp"
#include "topology/fabric.hpp"

namespace kernbench::topology {

struct DmaResult {
  Time issue = 0;
  Time end = 0;
  Bytes bytes = 0;
  Breakdown parts;              ///< request leg + data leg
  TransferId request_leg = 0;   ///< the request packet (reads only)
  TransferId data_leg = 0;
  Time latency() const { return end - issue; }
};

/// `issuer` reads `bytes` from `memory` (e.g. a PE reading an HBM slice).
sim::Task<DmaResult> dma_read(Fabric& fabric, NodeId issuer, NodeId memory, Bytes bytes, std::uint64_t address = 0,
                              std::int32_t tag = 0);

/// `issuer` writes `bytes` to `memory`.
sim::Task<DmaResult> dma_write(Fabric& fabric, NodeId issuer, NodeId memory, Bytes bytes, std::uint64_t address = 0,
                               std::int32_t tag = 0);

}  // namespace kernbench::topology
