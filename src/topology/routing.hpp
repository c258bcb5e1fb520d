// routing.hpp -- which channels a transfer crosses.
//
// Generated machines route hierarchically: dimension order (X then Y) inside
// a cube's router mesh and across the cube grid -- leaving a cube through
// the router of the current row (east/west) or column (north/south), so
// traffic spreads over the side's routers -- and shortest path (Dijkstra on
// latency) over the SIP grid between PCIe endpoints. Anything else
// (explicit graphs, unusual endpoints) takes the Dijkstra shortest path on
// the whole graph. Routes are computed once per (src, dst) and cached, and
// the SIP grid's next hops once per destination SIP, when first needed.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "topology/machine.hpp"

namespace kernbench::topology {

/// What a fabric needs about one hop, copied into the route so the hot path
/// reads one compact array instead of the machine's node and channel tables.
struct Hop {
  ChannelId channel = 0;
  LaneId first_lane = 0;
  std::int32_t connections = 1;
  Bandwidth bandwidth{};       ///< per lane
  Time latency = 0;
  Time next_overhead = 0;      ///< overhead of the node this hop leads to
  bool next_flit_aware = true;
};

struct Route {
  NodeId src = 0;
  NodeId dst = 0;
  std::vector<ChannelId> channels;  ///< in order, src -> dst
  std::vector<NodeId> nodes;        ///< src, every intermediate node, dst
  std::vector<Hop> hop;             ///< per channel, in order
  Time wire_latency = 0;            ///< sum of the channels' latencies
  Time node_overhead = 0;           ///< sum of the overheads of every node on the path
  Bandwidth bottleneck{};           ///< smallest per-lane bandwidth on the path
  std::size_t hops() const { return channels.size(); }
};

class Router {
 public:
  explicit Router(const Machine& machine);

  /// The route from src to dst (cached; the reference stays valid).
  const Route& route(NodeId src, NodeId dst);

  /// Dijkstra on the whole graph, ignoring the hierarchy (for tests and
  /// explicit graphs).
  Route shortest_path(NodeId src, NodeId dst) const;

 private:
  void append(Route& r, NodeId from, NodeId to) const;  // one channel
  void mesh_path(Route& r, int sip, int cube, int r0, int c0, int r1, int c1) const;
  void intra_sip(Route& r, NodeId src, NodeId dst) const;
  NodeId attach_router(NodeId n) const;
  bool hierarchical(NodeId n) const;
  void finish(Route& r) const;

  /// Next hops towards SIP `dst`: [from_sip] -> sip (computed on first use).
  const std::vector<int>& sip_next_to(int dst);

  const Machine& m_;
  std::unordered_map<std::uint64_t, Route> cache_;
  // SIP-level shortest paths over the PCIe links, one next-hop table per
  // destination SIP that a route has needed: memory grows with the
  // destinations used, not with the square of the SIP count.
  BoostGraph sip_graph_;
  std::unordered_map<int, std::vector<int>> sip_next_;
};

}  // namespace kernbench::topology
