// hbm.hpp -- HBM capacity and pseudo-channel layout of the PEs' HBM slices.
//
// Capacity: an HbmAllocator hands out address ranges of each slice (an
// hbm_ctrl node) for what a workload keeps resident there -- weights, KV
// cache, GEMM operands -- and raises a CapacityError that names the slice,
// its PE, the item, what it asked, what the slice holds and what is free
// when something does not fit. Kernels plan with one before building their
// Program, so a workload that cannot fit fails before any simulation.
//
// Layout: a slice's addresses are striped over its pseudo-channels in units
// of pe.hbm.stripe bytes (address a lives on pseudo-channel
// (a / stripe) mod pseudo_channels). Moves carry the HBM-side address
// (Move::address); hbm_traffic() stripes every move of a Program that reads
// or writes a slice and reports the bytes per pseudo-channel. This is
// accounting only: pseudo-channels do not change any timing.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/program.hpp"
#include "runtime/hbm_config.hpp"
#include "topology/graph/machine.hpp"

namespace kernbench::runtime {

/// One reservation in a slice.
struct HbmRegion {
  NodeId slice = 0;
  std::uint64_t address = 0;  ///< first byte, inside the slice
  Bytes bytes = 0;
  std::string what;  ///< e.g. "KV cache (S_kv=131072)"
};

class HbmAllocator {
 public:
  /// Slices are the machine's hbm_ctrl nodes; `hbm` gives their capacity,
  /// pseudo-channels and stripe (pe.hbm of the machine's config).
  HbmAllocator(const topology::Machine& machine, const runtime::HbmConfig& hbm);

  /// Reserves `bytes` of `slice`, aligned to the stripe; returns the region.
  /// CapacityError (slice, PE, item, asked, capacity, taken, free) when it
  /// does not fit; UsageError for a node that is not an HBM slice or a
  /// negative size.
  HbmRegion alloc(NodeId slice, Bytes bytes, const std::string& what);

  Bytes capacity() const { return hbm_.capacity; }
  Bytes used(NodeId slice) const;
  Bytes free(NodeId slice) const { return hbm_.capacity - used(slice); }
  const std::vector<HbmRegion>& regions() const { return regions_; }
  const runtime::HbmConfig& config() const { return hbm_; }

 private:
  const topology::Machine& machine_;
  runtime::HbmConfig hbm_;
  std::unordered_map<NodeId, Bytes> next_;  ///< first free address per slice (a bump allocator)
  std::vector<HbmRegion> regions_;
};

/// Adds the bytes of [address, address + bytes) to `per_pc` (one entry per
/// pseudo-channel) by striping; O(pseudo-channels), whatever the size.
void stripe_bytes(std::uint64_t address, Bytes bytes, const runtime::HbmConfig& hbm, std::vector<Bytes>& per_pc);

/// Bytes read from and written to each pseudo-channel of one slice.
struct HbmSliceTraffic {
  NodeId slice = 0;
  std::vector<Bytes> read;     ///< per pseudo-channel
  std::vector<Bytes> written;  ///< per pseudo-channel
};

/// The traffic per pseudo-channel of every HBM slice that `program`'s moves
/// read or write (dma ops, sends read from a slice, composite loads and
/// stores -- tile i of a pipeline at address + i x bytes), in slice order.
std::vector<HbmSliceTraffic> hbm_traffic(const Program& program, const topology::Machine& machine,
                                         const runtime::HbmConfig& hbm);

}  // namespace kernbench::runtime
