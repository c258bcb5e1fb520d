// hbm.cpp -- HBM slice capacity (a bump allocator per slice) and
// pseudo-channel striping of a Program's moves.
#include "runtime/hbm.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "config/quantity.hpp"
#include "sim/errors.hpp"

namespace kernbench::runtime {

HbmAllocator::HbmAllocator(const topology::Machine& machine, const runtime::HbmConfig& hbm)
    : machine_(machine), hbm_(hbm) {
  if (hbm_.capacity <= 0 || hbm_.pseudo_channels <= 0 || hbm_.stripe <= 0)
    throw ConfigError("pe.hbm: capacity, pseudo_channels and stripe must be positive");
}

Bytes HbmAllocator::used(NodeId slice) const {
  const auto it = next_.find(slice);
  return it == next_.end() ? 0 : static_cast<Bytes>(it->second);
}

HbmRegion HbmAllocator::alloc(NodeId slice, Bytes bytes, const std::string& what) {
  if (slice >= machine_.num_nodes() || machine_.node(slice).kind != topology::NodeKind::HbmCtrl)
    throw UsageError("HBM alloc of " + what + ": node " +
                     (slice < machine_.num_nodes() ? machine_.node(slice).name : std::to_string(slice)) +
                     " is not an HBM slice (hbm_ctrl)");
  if (bytes < 0) throw UsageError("HBM alloc of " + what + ": negative size " + std::to_string(bytes) + " B");
  const Bytes at = used(slice);
  const Bytes aligned = (at + hbm_.stripe - 1) / hbm_.stripe * hbm_.stripe;
  if (bytes > hbm_.capacity - aligned) {
    const topology::NodeInfo& n = machine_.node(slice);
    const std::string pe =
        n.sip >= 0 ? "sip" + std::to_string(n.sip) + ".cube" + std::to_string(n.cube) + ".pe" + std::to_string(n.pe)
                   : n.name;
    std::string taken;
    int listed = 0;
    for (const HbmRegion& r : regions_) {
      if (r.slice != slice) continue;
      if (listed++ < 3)
        taken += (taken.empty() ? "" : ", ") + r.what + " " + config::format_bytes(r.bytes, config::ByteUnits::Rounded);
    }
    if (listed > 3) taken += ", ...";
    throw CapacityError(
        what + " needs " + config::format_bytes(bytes, config::ByteUnits::Rounded) + " on " + pe + "'s HBM slice " +
        n.name + ", which holds " + config::format_bytes(hbm_.capacity, config::ByteUnits::Rounded) +
        " (pe.hbm.capacity)" +
        (at > 0 ? " with " + config::format_bytes(at, config::ByteUnits::Rounded) + " already taken (" + taken + ")"
                : std::string()) +
        ": " + config::format_bytes(std::max<Bytes>(0, hbm_.capacity - aligned), config::ByteUnits::Rounded) +
        " free; spread it over more PEs or raise pe.hbm.capacity");
  }
  next_[slice] = aligned + bytes;
  regions_.push_back(HbmRegion{slice, static_cast<std::uint64_t>(aligned), bytes, what});
  return regions_.back();
}

void stripe_bytes(std::uint64_t address, Bytes bytes, const runtime::HbmConfig& hbm, std::vector<Bytes>& per_pc) {
  const auto pcs = static_cast<std::uint64_t>(hbm.pseudo_channels);
  const auto stripe = static_cast<std::uint64_t>(hbm.stripe);
  if (per_pc.size() < pcs) per_pc.resize(pcs, 0);
  auto left = static_cast<std::uint64_t>(std::max<Bytes>(bytes, 0));
  std::uint64_t stripe_no = address / stripe;
  // The head: the rest of the first stripe.
  if (left > 0 && address % stripe != 0) {
    const std::uint64_t take = std::min(left, stripe - address % stripe);
    per_pc[stripe_no % pcs] += static_cast<Bytes>(take);
    left -= take;
    ++stripe_no;
  }
  // Whole stripes: each full round adds one stripe to every pseudo-channel.
  const std::uint64_t whole = left / stripe;
  const std::uint64_t rounds = whole / pcs;
  if (rounds > 0)
    for (auto& b : per_pc) b += static_cast<Bytes>(rounds * stripe);
  for (std::uint64_t k = 0; k < whole % pcs; ++k)
    per_pc[(stripe_no + rounds * pcs + k) % pcs] += static_cast<Bytes>(stripe);
  stripe_no += whole;
  left -= whole * stripe;
  // The tail.
  if (left > 0) per_pc[stripe_no % pcs] += static_cast<Bytes>(left);
}

std::vector<HbmSliceTraffic> hbm_traffic(const Program& program, const topology::Machine& machine,
                                         const runtime::HbmConfig& hbm) {
  std::map<NodeId, HbmSliceTraffic> by_slice;
  const auto is_hbm = [&](NodeId n) { return machine.node(n).kind == topology::NodeKind::HbmCtrl; };
  const auto slice = [&](NodeId n) -> HbmSliceTraffic& {
    HbmSliceTraffic& t = by_slice[n];
    t.slice = n;
    t.read.resize(static_cast<std::size_t>(hbm.pseudo_channels), 0);
    t.written.resize(static_cast<std::size_t>(hbm.pseudo_channels), 0);
    return t;
  };
  // `tiles` copies of a move, tile t at address + t x bytes: one contiguous
  // span, striped at once (striping is additive over consecutive ranges).
  const auto account = [&](const Move& m, std::uint64_t tiles) {
    if (m.src == m.dst || m.bytes <= 0) return;
    const Bytes span = m.bytes * static_cast<Bytes>(tiles);
    if (is_hbm(m.src)) stripe_bytes(m.address, span, hbm, slice(m.src).read);
    if (is_hbm(m.dst)) stripe_bytes(m.address, span, hbm, slice(m.dst).written);
  };
  for (const Op& op : program.ops()) {
    if (op.kind == OpKind::Dma || op.kind == OpKind::Send) {
      account(op.move, 1);
    } else if (op.kind == OpKind::Composite) {
      const Pipeline& p = program.pipelines().at(op.pipeline);
      for (const Move& m : p.loads) account(m, p.tiles);
      for (const Move& m : p.stores) account(m, p.tiles);
    }
  }
  std::vector<HbmSliceTraffic> out;
  out.reserve(by_slice.size());
  for (auto& [n, t] : by_slice) out.push_back(std::move(t));
  return out;
}

}  // namespace kernbench::runtime
