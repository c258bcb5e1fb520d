// fabric.cpp -- what the two fabric models share: records and completion.
#include "topology/fabric.hpp"

#include "sim/errors.hpp"
#include "topology/flow_fabric.hpp"
#include "topology/packet_fabric.hpp"

namespace kernbench::topology {

Fabric::Fabric(sim::Simulation& sim, const Machine& machine, const FabricConfig& config)
    : sim_(sim), machine_(machine), config_(config), router_(machine) {
  if (config_.flit <= 0) throw ConfigError("fabric.flit must be > 0");
  if (config_.chunk <= 0 || config_.chunk % config_.flit != 0)
    throw ConfigError("fabric.chunk must be a positive multiple of fabric.flit (" + std::to_string(config_.flit) +
                      " B), got " + std::to_string(config_.chunk) + " B");
  if (config_.stripe < 0) throw ConfigError("fabric.stripe must be >= 0");
  if (config_.stripe == 0) config_.stripe = config_.chunk;
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
  const Route& route = router_.route(spec.src, spec.dst);
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
  records_.push_back(r);
  ++in_flight_;
  return route;
}

void Fabric::close(TransferId id, Time end, const Breakdown& parts, sim::Target on_done) {
  TransferRecord& r = records_[id];
  r.end = end;
  r.parts = parts;
  if (parts.total() != end - r.issue)
    throw InternalError("fabric: breakdown of transfer " + std::to_string(id) + " sums to " +
                        std::to_string(parts.total()) + " ps, latency is " + std::to_string(end - r.issue) + " ps");
  --in_flight_;
  if (!on_done.empty()) sim_.schedule(end - sim_.now(), on_done, id);
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
