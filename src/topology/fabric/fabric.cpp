// fabric.cpp -- what the two fabric models share: records and completion.
#include "topology/fabric/fabric.hpp"

#include <algorithm>
#include <cstdint>

#include "config/text.hpp"
#include "sim/errors.hpp"
#include "topology/fabric/flow/flow_fabric.hpp"
#include "topology/fabric/packet/packet_fabric.hpp"

namespace kernbench::topology {

Fabric::Fabric(sim::Simulation& sim, const Machine& machine, const FabricConfig& config)
    : sim_(sim), machine_(machine), config_(config), router_(machine) {
  if (config_.flit <= 0) throw ConfigError("fabric.flit must be > 0");
  if (config_.chunk <= 0 || config_.chunk % config_.flit != 0)
    throw ConfigError("fabric.chunk must be a positive multiple of fabric.flit (" + std::to_string(config_.flit) +
                      " B), got " + std::to_string(config_.chunk) + " B");
  if (config_.stripe < 0) throw ConfigError("fabric.stripe must be >= 0");
  if (config_.stripe == 0) config_.stripe = config_.chunk;
  policy_ = find_multipath_policy(config_.multipath);
  if (!policy_)
    throw ConfigError("fabric.multipath: no policy named '" + config_.multipath +
                      "' (registered: " + config::join(multipath_policy_names(), ", ") + ")");
}

void check_transfer_size(Bytes bytes, const std::string& what) {
  if (bytes < 0) throw UsageError(what + ": negative size " + std::to_string(bytes) + " B");
  if (bytes > kMaxTransferBytes)
    throw UsageError(what + ": " + std::to_string(bytes) + " B is too large (at most " +
                     std::to_string(kMaxTransferBytes) + " B = 1 TiB per transfer)");
}

const Route& Fabric::open(const TransferSpec& spec, TransferId& id) {
  if (spec.src >= machine_.num_nodes() || spec.dst >= machine_.num_nodes())
    throw UsageError("transfer: node id out of range");
  check_transfer_size(spec.bytes, "transfer " + machine_.node(spec.src).name + " -> " + machine_.node(spec.dst).name);
  const std::vector<Route>& paths = router_.paths(spec.src, spec.dst);
  if (spec.path < 0 || static_cast<std::size_t>(spec.path) >= paths.size())
    throw UsageError("transfer " + machine_.node(spec.src).name + " -> " + machine_.node(spec.dst).name + ": path " +
                     std::to_string(spec.path) + " out of range (the pair has " + std::to_string(paths.size()) +
                     " equal-cost path" + (paths.size() == 1 ? "" : "s") + ")");
  const Route& route = paths[static_cast<std::size_t>(spec.path)];
  check_transfer_time(route, spec, sim_.now());
  id = records_.size();
  TransferRecord r;
  r.id = id;
  r.src = spec.src;
  r.dst = spec.dst;
  r.bytes = spec.bytes;
  r.issue = sim_.now();
  r.hops = static_cast<std::uint32_t>(route.hops());
  r.tag = spec.tag;
  r.agent = spec.agent;
  r.request = spec.request;
  r.path = static_cast<std::uint32_t>(spec.path);
  r.parent = opening_stripe_of_;
  records_.push_back(r);
  if (r.parent == kNoTransfer) ++in_flight_;  // a stripe is part of its parent's count
  return route;
}

namespace {

std::string i128_text(__int128 v) {
  if (v == 0) return "0";
  const bool neg = v < 0;
  std::string out;
  for (__int128 x = neg ? -v : v; x > 0; x /= 10)
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(x % 10)));
  return neg ? "-" + out : out;
}

}  // namespace

void Fabric::check_transfer_time(const Route& route, const TransferSpec& spec, Time start) const {
  // The whole transfer, checked once before any chunk or flow is scheduled:
  // per store-and-forward segment, the payload through its slowest hop (at
  // bandwidth x connections, as the flow model streams it), plus every wire
  // latency and node overhead (summed in 128 bits: a huge latency cannot
  // wrap). Both models refuse the same transfers, and an uncontended run of
  // an accepted one never passes the time range (contention beyond it is
  // caught by Simulation::schedule).
  const std::string what = "transfer " + machine_.node(spec.src).name + " -> " + machine_.node(spec.dst).name;
  // The packet model's chunk indices are 32-bit (records, events).
  if (config_.model == FabricModel::Packet && spec.bytes > 0 &&
      (spec.bytes + config_.chunk - 1) / config_.chunk > Bytes{UINT32_MAX})
    throw UsageError(what + ": " + std::to_string(spec.bytes) +
                     " B is more than 2^32 - 1 chunks of fabric.chunk = " + std::to_string(config_.chunk) + " B");
  const __int128 src_overhead = spec.charge_src_overhead ? machine_.node(spec.src).params.overhead : 0;
  __int128 latency = 0, overhead = src_overhead, streaming = 0;
  Time segment = 0;
  for (std::size_t h = 0; h < route.hop.size(); ++h) {
    const Hop& hop = route.hop[h];
    Time t = 0;
    try {
      const __int128 bw = static_cast<__int128>(hop.bandwidth.bytes_per_s) * std::max(hop.connections, 1);
      t = sim::transfer_time(spec.bytes, Bandwidth{static_cast<std::int64_t>(std::min<__int128>(bw, INT64_MAX))});
    } catch (Error& e) {
      e.add_context(what + " (hop " + std::to_string(h) + ": " + machine_.lane_name(hop.first_lane) + ")");
      throw;
    }
    segment = std::max(segment, t);
    latency += hop.latency;
    overhead += hop.next_overhead;
    if (!hop.next_flit_aware || h + 1 == route.hop.size()) {  // a segment ends here
      streaming += segment;
      segment = 0;
    }
  }
  const __int128 total = latency + overhead + streaming;
  if (static_cast<__int128>(start) + total > static_cast<__int128>(sim::kMaxTime))
    throw UsageError(what + ": " + std::to_string(spec.bytes) + " B over " + std::to_string(route.hops()) +
                     " hops takes " + i128_text(total) + " ps (wire latency " + i128_text(latency) +
                     " ps, node overheads " + i128_text(overhead) + " ps, streaming " + i128_text(streaming) +
                     " ps) from t=" + std::to_string(start) +
                     " ps, past the simulator's time range (2^62 ps, ~53 days)");
}

void Fabric::close(TransferId id, Time end, const Breakdown& parts, sim::Target on_done) {
  TransferRecord& r = records_[id];
  r.end = end;
  r.parts = parts;
  if (parts.total() != end - r.issue)
    throw InternalError("fabric: breakdown of transfer " + std::to_string(id) + " sums to " +
                        std::to_string(parts.total()) + " ps, latency is " + std::to_string(end - r.issue) + " ps");
  if (r.parent == kNoTransfer) {
    --in_flight_;
    if (!on_done.empty()) sim_.schedule(end - sim_.now(), on_done, id);
    return;
  }
  // A stripe: the parent completes with its last stripe (the latest end; of
  // equal ends, the one closed last), whose breakdown it takes.
  const TransferId parent = r.parent;
  auto it = splits_.find(parent);
  if (it == splits_.end()) throw InternalError("fabric: stripe " + std::to_string(id) + " of an unknown transfer");
  Split& s = it->second;
  if (end >= s.end) {
    s.end = end;
    s.parts = parts;
  }
  if (--s.remaining > 0) return;
  const Split done = s;
  splits_.erase(it);
  close(parent, done.end, done.parts, done.on_done);
}

std::unique_ptr<Fabric> make_fabric(sim::Simulation& sim, const Machine& machine, const FabricConfig& config) {
  if (config.model == FabricModel::Flow) return std::make_unique<FlowFabric>(sim, machine, config);
  return std::make_unique<PacketFabric>(sim, machine, config);
}

std::vector<Bytes> channel_bytes(const Fabric& fabric) {
  std::vector<Bytes> out(fabric.machine().num_channels());
  for (ChannelId c = 0; c < out.size(); ++c) out[c] = fabric.channel_stats(c).bytes;
  return out;
}

std::map<std::string, Bytes> link_class_bytes_since(const Fabric& fabric, const std::vector<Bytes>& before) {
  std::map<std::string, Bytes> out;
  const Machine& m = fabric.machine();
  for (ChannelId c = 0; c < m.num_channels(); ++c) {
    const Bytes moved = fabric.channel_stats(c).bytes - before.at(c);
    if (moved > 0) out[m.channel(c).link_class] += moved;
  }
  return out;
}

}  // namespace kernbench::topology
