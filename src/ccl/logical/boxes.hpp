// boxes.hpp -- the boxes of a machine, a logical topology: the ranks that
// reach each other without crossing a NIC (a node of kind nic) share a box,
// what NCCL calls a node (one host, one scale-up fabric). NCCL's multi-node
// algorithms are written over them: a ring that crosses every box once per
// channel, a tree whose intra-box part is a chain, sends relayed through the
// peer on the destination's rail (PXN). A machine without NICs is one box.
#pragma once

#include <vector>

#include "topology/graph/machine.hpp"

namespace kernbench::ccl {

using topology::NodeId;

struct Boxes {
  std::vector<int> box;                 ///< rank -> its box (boxes numbered in order of their first rank)
  std::vector<int> local;               ///< rank -> its index among its box's ranks (its rail)
  std::vector<std::vector<int>> ranks;  ///< box -> its ranks, in rank order
  /// box -> B/s its NICs carry out of it (every NIC's links to nodes outside
  /// the box, bandwidth x connections): the box's scale-out rate.
  std::vector<double> egress;
  int count() const { return static_cast<int>(ranks.size()); }
  bool multi() const { return ranks.size() > 1; }
  /// Ranks of the smallest box (NCCL's ppn when every box holds as many).
  int smallest() const;
  /// The rank of box `b` at local index `i` modulo the box's size.
  int at(int b, int i) const;
  /// Box b's chain to a head at local index h (NCCL's tree inside a box):
  /// the ranks at h + 1, h + 2, ..., ending at the head.
  std::vector<int> chain_to(int b, int h) const;
  /// PXN (NCCL's default since 2.12): the rank a send from `src` to `dst`
  /// (in another box) is relayed through -- src's box peer at dst's local
  /// index, on dst's rail -- or -1 when src is on that rail itself.
  int pxn_relay(int src, int dst) const;
};

/// The boxes of the ranks `pes` (rank -> PE node) on `machine`: connected
/// components of the graph without its NIC nodes.
Boxes boxes_of(const topology::Machine& machine, const std::vector<NodeId>& pes);

}  // namespace kernbench::ccl
