// sharp.hpp -- the network's aggregation trees, a logical topology (IB
// SHARP): the reducing switches outside every box (graph nodes of kind
// switch with `reduction:` that no rank reaches without crossing a NIC),
// and for a group of ranks in different boxes the switch that roots their
// reduction -- the one whose farthest rank is nearest, the lowest common
// ancestor on a fat-tree -- and the switch each rank's chunk is first
// aggregated at: its nearest reducing switch (its leaf) when that is not
// the root. Where several are as near (two NICs behind one PCIe switch put
// two rails' leaves at one distance from both GPUs), the one fewer earlier
// groups use wins, so each rail gets its own leaves and NIC, as NCCL gives
// each GPU its own NIC. The runtime's switch_reduce then moves one partial sum per leaf
// up to the root and the sum once down to each leaf (SwitchGroup).
#pragma once

#include <string>
#include <vector>

#include "topology/graph/machine.hpp"

namespace kernbench::ccl {

using topology::NodeId;

/// The network's reducing switches and their hop distances to the ranks.
struct SharpNet {
  std::vector<NodeId> switches;        ///< reducing switches outside every box, by node id
  std::vector<std::vector<int>> hops;  ///< [switch][rank]: hops from the switch to the rank's PE (-1: unreachable)
  std::vector<int> used;               ///< [switch]: trees so far that use it (sharp_tree spreads them)
};

/// One group's tree: its root and, per rank of the group, the switch its
/// chunk is aggregated at first (the root itself: a direct leg).
struct SharpTree {
  NodeId root = 0;
  std::vector<NodeId> via;
};

/// The reducing switches outside the boxes of `pes` (rank -> PE node), by node id: what the tuner asks (does the
/// network reduce?), without the hop distances.
std::vector<NodeId> network_reducers(const topology::Machine& m, const std::vector<NodeId>& pes);
/// The same, none being a UsageError naming `who` and how to declare one (cluster.fabric.reduction, or
/// reduction: on the graph's scale-out switches).
std::vector<NodeId> require_network_reducers(const topology::Machine& m, const std::vector<NodeId>& pes,
                                             const std::string& who);
/// Those switches and their hop distances to the ranks; none: an empty net.
SharpNet sharp_net(const topology::Machine& m, const std::vector<NodeId>& pes);
/// The same, none being a UsageError (as require_network_reducers).
SharpNet require_sharp_net(const topology::Machine& m, const std::vector<NodeId>& pes, const std::string& who);
/// The tree over `ranks` (indices into pes); a group no switch reaches whole is a UsageError naming `who`.
SharpTree sharp_tree(SharpNet& net, const std::vector<int>& ranks, const std::string& who);

}  // namespace kernbench::ccl
