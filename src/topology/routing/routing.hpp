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
//
// Equal-cost paths (the Dijkstra part only; dimension-order routes are one
// path by construction): every shortest path by the same hop weight, in the
// tie order -- lexicographic by the node ids along the path (node ids are
// the order the config lists the nodes), then by channel id where two
// channels join the same pair -- and at most kMaxEqualCostPaths of them,
// the first ones in that order. route() is the first; the fabric uses the
// others as fabric.multipath says. A pinned route (graph.routes) is the
// only path of its pair. Edge order never decides anything.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "topology/graph/machine.hpp"

namespace kernbench::topology {

/// What a fabric needs about one hop, copied into the route so the hot path
/// reads one compact array instead of the machine's node and channel tables.
struct Hop {
  ChannelId channel = 0;
  LaneId first_lane = 0;
  std::int32_t connections = 1;
  Bandwidth bandwidth{};  ///< per lane
  Time latency = 0;
  Time next_overhead = 0;  ///< overhead of the node this hop leads to
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

/// The most equal-cost paths kept per (src, dst): the first ones in the tie order.
inline constexpr std::size_t kMaxEqualCostPaths = 16;

/// Per-lane bandwidth x connections of the path's slowest hop (B/s): what
/// the path can carry alone, the weight of its stripe under `spread`.
std::int64_t path_rate(const Route& route);

class Router {
 public:
  explicit Router(const Machine& machine);

  /// The route from src to dst: the first of paths() (cached; the reference stays valid).
  const Route& route(NodeId src, NodeId dst) { return paths(src, dst).front(); }

  /// Every equal-cost route from src to dst in the tie order (at least one;
  /// one for a pinned pair and on dimension-order routes). Cached; the
  /// references stay valid.
  const std::vector<Route>& paths(NodeId src, NodeId dst);

  /// Dijkstra on the whole graph, ignoring the hierarchy (for tests and
  /// explicit graphs): the first equal-cost path in the tie order.
  Route shortest_path(NodeId src, NodeId dst) const { return equal_cost_paths(src, dst, 1).front(); }

  /// The first `cap` shortest paths (by hop weight) in the tie order. One
  /// Dijkstra search per source, shared by every destination (kept while
  /// they fit kSearchCacheBytes); a source whose channels all lead to one
  /// node (a leaf: a star's PE) routes through that node's search.
  std::vector<Route> equal_cost_paths(NodeId src, NodeId dst, std::size_t cap) const;

  /// Dijkstra searches run so far (for tests: one per source, not per pair).
  std::size_t searches() const { return searches_run_; }

  /// Memory the shared searches may keep (the oldest are dropped past it).
  static constexpr std::size_t kSearchCacheBytes = std::size_t{256} << 20;

 private:
  void append(Route& r, NodeId from, NodeId to) const;  // one channel
  void mesh_path(Route& r, int sip, int cube, int r0, int c0, int r1, int c1) const;
  void intra_sip(Route& r, NodeId src, NodeId dst) const;
  NodeId attach_router(NodeId n) const;
  bool hierarchical(NodeId n) const;
  void finish(Route& r) const;

  /// Each PE's own NIC (kNoNic where none; empty on a machine without NICs), computed on first use: the NIC
  /// nearest it (not through another PE or NIC); where several are as near (two GPUs and two NICs on one PCIe
  /// switch), the PEs that share the same nearest NICs take them in order, one each, as the cluster pairs NIC j
  /// with GPU j and NCCL gives each GPU its own.
  const std::vector<NodeId>& home_nics() const;
  /// Of `paths` that cross NICs, those that leave through the source side's PE's own NIC and enter through the
  /// destination side's (a network is addressed by NIC); all of them where none does.
  std::vector<Route> through_home_nics(std::vector<Route> paths) const;
  static constexpr NodeId kNoNic = 0xffffffffU;

  /// Next hops towards SIP `dst`: [from_sip] -> sip (computed on first use).
  const std::vector<int>& sip_next_to(int dst);

  /// One source's Dijkstra: every node's distance and, per node, the tight channels into it (CSR).
  struct Search {
    std::vector<Time> dist;
    std::vector<std::uint32_t> in_begin;  // node v's tight in-channels: in[in_begin[v] .. in_begin[v + 1])
    std::vector<ChannelId> in;
  };
  std::shared_ptr<const Search> search_from(NodeId src) const;
  std::vector<Route> search_paths(NodeId src, NodeId dst, std::size_t cap) const;

  const Machine& m_;
  mutable std::unordered_map<NodeId, std::shared_ptr<const Search>> searches_;
  mutable std::deque<NodeId> search_order_;  // oldest first
  mutable std::size_t search_bytes_ = 0;
  mutable std::size_t searches_run_ = 0;
  std::unordered_map<std::uint64_t, std::vector<Route>> cache_;
  std::unordered_map<std::uint64_t, std::vector<NodeId>> pinned_;  // (src << 32 | dst) -> node path
  mutable std::vector<NodeId> home_nics_;
  mutable bool homes_known_ = false;
  // SIP-level shortest paths over the PCIe links, one next-hop table per
  // destination SIP that a route has needed: memory grows with the
  // destinations used, not with the square of the SIP count.
  BoostGraph sip_graph_;
  std::unordered_map<int, std::vector<int>> sip_next_;
};

}  // namespace kernbench::topology
