// machine.hpp -- the hardware as a graph.
//
// Nodes (PEs, routers, HBM controller slices, UCIe adapters, PCIe endpoints,
// or any explicit node) and channels: one channel per direction of each
// physical link, each with `connections` lanes. Lanes are what the fabric
// models queue on (one sim::Server per lane). The graph itself is a
// Boost.Graph adjacency_list with bundled properties; the Machine adds the
// name index and, for generated machines, the coordinate lookups.
#pragma once

// Boost.Graph is third-party: GCC 12's -Wmaybe-uninitialized misreads its
// edge iterator when an adjacency_list is copied; its header is exempt from
// the -Werror of our own code (CMakeLists.txt), nothing else is.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#pragma GCC diagnostic pop
#else
#include <boost/graph/adjacency_list.hpp>
#endif
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "topology/config/config.hpp"

namespace kernbench::topology {

using NodeId = std::uint32_t;
using ChannelId = std::uint32_t;
using LaneId = std::uint32_t;

enum class Side { North = 0, East = 1, South = 2, West = 3 };

struct NodeInfo {
  std::string name;
  NodeKind kind = NodeKind::Other;
  NodeParams params;  ///< params.overhead includes pipeline_time(): the node's whole delay per chunk
  // Coordinates in a generated machine (-1 where they do not apply).
  int sip = -1;
  int cube = -1;
  int row = -1;  ///< router row (routers), or the attach router's row (PE, hbm_ctrl)
  int col = -1;
  int pe = -1;    ///< PE index within its cube (PEs and their HBM slices)
  int side = -1;  ///< Side of a UCIe adapter
};

/// One direction of a physical link.
struct ChannelInfo {
  NodeId from = 0;
  NodeId to = 0;
  LinkParams link;
  std::string link_class;
  ChannelId reverse = 0;
  LaneId first_lane = 0;  ///< lanes first_lane .. first_lane + link.connections - 1
};

/// Parallel lanes (connections) one link may have: each lane is a server
/// with its own queue, and a packet-model transfer keeps a slot for every
/// lane of every hop it crosses.
inline constexpr int kMaxConnections = 1024;
/// Lanes (links x connections, both directions) one machine may have: each
/// costs about 70 bytes across the machine and the packet fabric (measured:
/// 9.2 M lanes took 613 MB), so about 1.1 GiB at the limit.
inline constexpr std::int64_t kMaxLanes = std::int64_t{1} << 24;

/// The lanes a config's machine would have, counted from the config alone
/// (nothing is built), and the link class that brings the most: `key` is its
/// YAML path (links.noc.connections, graph.edges[3].connections).
struct LaneCount {
  std::int64_t lanes = 0;
  std::string key;
  std::int64_t key_lanes = 0;  ///< the lanes of that class (or edge)
  int key_connections = 0;
};
LaneCount count_lanes(const Config& config);
/// "" within kMaxLanes, else the message: "the machine is too large: more
/// than ... lanes ...; <key> = <connections> alone brings <lanes>".
std::string lanes_over_limit(const LaneCount& n);

/// The routing weight of a hop (ps): wire latency plus the next node's
/// overhead, plus one ps so that, between equal-latency paths, the one with
/// fewer hops wins; at most kMaxHopWeight (2^40 ps, about 1.1 s). A hop
/// into a node that is not a transit node (NodeParams::transit) adds
/// kMaxHopWeight more: every path to that node pays it once, so its own
/// shortest paths are unchanged, while a path through it pays it again and
/// loses to any path around it. At most 2^41 per hop over at most 2^21 nodes:
/// path sums cannot overflow.
inline constexpr Time kMaxHopWeight = Time{1} << 40;
Time hop_weight(const LinkParams& link, const NodeParams& to);

/// Boost.Graph view: vertex index == NodeId, edge carries its ChannelId and
/// the routing weight (ps).
struct EdgeProps {
  ChannelId channel = 0;
  Time weight = 0;
};
using BoostGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, EdgeProps>;

/// Which PEs share a group (a cube) and a package (a SIP): rank r is PE
/// r % pes_per_group of group (r / pes_per_group) % groups.count() of
/// package r / (groups.count() * pes_per_group). The generator states its
/// SIPs of cubes of PEs; an explicit graph declares one in graph.layout, or
/// gets the implied one (one package, one group of every rank) with
/// `declared` false.
struct PeHierarchy {
  GridSize packages{1, 1};
  SipTopology package_topology = SipTopology::Ring;
  GridSize groups{1, 1};
  int pes_per_group = 0;
  bool declared = false;
  int pes_per_package() const {
    return static_cast<int>(groups.count() * pes_per_group);
  }  // checked at load: the ranks
};

class Machine {
 public:
  /// Builds the graph from a config (system generator or explicit graph).
  explicit Machine(const Config& config);

  std::size_t num_nodes() const { return nodes_.size(); }
  std::size_t num_channels() const { return channels_.size(); }
  std::size_t num_lanes() const { return lane_channel_.size(); }

  const NodeInfo& node(NodeId id) const { return nodes_.at(id); }
  const ChannelInfo& channel(ChannelId id) const { return channels_.at(id); }
  const std::vector<NodeInfo>& nodes() const { return nodes_; }
  const std::vector<ChannelInfo>& channels() const { return channels_; }
  ChannelId lane_channel(LaneId lane) const { return lane_channel_.at(lane); }
  /// `sip0.cube3.ucie_e.conn2`-style name of a lane.
  std::string lane_name(LaneId lane) const;

  std::optional<NodeId> find(std::string_view name) const;
  /// The node called `name`; a TopologyError naming it otherwise.
  NodeId at(std::string_view name) const;
  /// The channel from a to b, if they are adjacent.
  std::optional<ChannelId> channel_between(NodeId a, NodeId b) const;
  const std::vector<ChannelId>& out_channels(NodeId id) const { return out_.at(id); }

  const BoostGraph& graph() const { return graph_; }
  const Config& config() const { return config_; }
  bool generated() const { return config_.system.has_value(); }
  const SystemConfig& system() const;

  // ---- the PE relations, whatever built the machine ---------------------------
  /// All PEs of the machine in rank order: (sip, cube, pe) order on a
  /// generated machine, graph.layout.ranks (or the pe nodes as listed) on
  /// an explicit graph.
  const std::vector<NodeId>& pes() const { return pe_ids_; }
  /// The node holding `pe`'s own memory (its HBM slice), if it has one.
  std::optional<NodeId> memory_of(NodeId pe) const;
  /// memory_of, or a TopologyError naming the PE and the config key that
  /// would declare it (`what` names the asking op).
  NodeId memory(NodeId pe, const std::string& what) const;
  /// The group hierarchy (always present; see PeHierarchy::declared).
  const PeHierarchy& hierarchy() const { return hierarchy_; }
  /// The declared rank grid (graph.layout.grid), if any.
  const std::optional<GridSize>& rank_grid() const { return rank_grid_; }
  /// The rank of a PE in pes(), or -1.
  int rank_of(NodeId pe) const;

  // Coordinates (package = sip, group = cube, pe) -> nodes, on any machine
  // with PEs (TopologyError when out of range).
  NodeId pe(int sip, int cube, int pe) const;
  NodeId hbm_ctrl(int sip, int cube, int pe) const;
  // Generated machines only.
  NodeId router(int sip, int cube, int row, int col) const;
  NodeId pcie_ep(int sip) const;
  std::optional<NodeId> ucie(int sip, int cube, Side side) const;
  /// PEs per package (per SIP on a generated machine).
  int pes_per_sip() const { return hierarchy_.pes_per_package(); }

 private:
  NodeId add_node(NodeInfo info);
  void add_link(NodeId a, NodeId b, const LinkParams& link, const std::string& link_class);
  void build_system(const SystemConfig& s);
  void build_explicit(const ExplicitGraphConfig& g);

  Config config_;
  std::vector<NodeInfo> nodes_;
  std::vector<ChannelInfo> channels_;
  std::vector<ChannelId> lane_channel_;
  std::vector<std::vector<ChannelId>> out_;
  std::unordered_map<std::string, NodeId> by_name_;
  std::unordered_map<std::uint64_t, ChannelId> by_ends_;  // (from << 32 | to) -> channel
  BoostGraph graph_;
  void set_relations();
  // PE relations: ranks, memories (by rank; kNoNode: none), hierarchy, grid.
  static constexpr NodeId kNoNode = ~NodeId{0};
  std::vector<NodeId> pe_ids_, hbm_ids_;
  std::unordered_map<NodeId, int> rank_;
  PeHierarchy hierarchy_;
  std::optional<GridSize> rank_grid_;
  // Generated-machine lookups (flattened tables).
  std::vector<NodeId> router_ids_, pcie_ids_;
  std::vector<std::optional<NodeId>> ucie_ids_;
};

}  // namespace kernbench::topology
