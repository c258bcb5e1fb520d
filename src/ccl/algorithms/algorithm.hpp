// algorithm.hpp -- what a collective algorithm is, and the registry of them.
//
// Each algorithm lives in its own file of src/ccl/algorithms/ and describes
// itself with an `Algorithm`: how finely it cuts the buffer, its all-reduce,
// and -- where the pieces allow -- reduce-scatter, all-gather, broadcast and
// all-to-all. Algorithms are written over the logical topologies of
// src/ccl/logical/ (ring, line and chain, grid, tree, group hierarchy,
// switch star), which turn ranks and slices into a Schedule's transfers;
// docs/contributing.md walks through adding one.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "ccl/logical/boxes.hpp"
#include "ccl/logical/switch_star.hpp"
#include "ccl/logical/tree.hpp"
#include "ccl/schedule.hpp"

namespace kernbench::ccl {

/// What an algorithm is asked to do.
struct Plan {
  Group world;        ///< every rank, with the 2-D grid shape
  int slices = 1;     ///< the cut of every buffer
  int pieces = 4;     ///< pipeline pieces of chains and trees
  int root = 0;       ///< broadcast root
  std::string inter;  ///< hierarchical: ring | torus | mesh across SIPs
  const topology::Machine* machine = nullptr;
  std::vector<NodeId> pes;  ///< rank -> PE node
  /// The part of every buffer this plan covers: all of it, or one NCCL
  /// channel's part (nccl.hpp: each channel runs the algorithm on its own).
  Slices range{0, -1};
  Slices all() const { return range.hi >= 0 ? range : Slices{0, slices}; }
  /// alltoall: channels each pair of ranks uses (NCCL's p2p channels per peer).
  int peer_channels = 1;
  /// The NCCL channel this plan runs (0 .. channels - 1) and how many run.
  int channel = 0;
  int channels = 1;
  /// The ranks' boxes (logical/boxes.hpp); null: one box. NCCL's multi-node
  /// forms of ring and tree run when the ranks span several.
  std::shared_ptr<const Boxes> boxes;
  bool multi_node() const { return boxes && boxes->multi(); }
};

struct Algorithm {
  std::string name;
  std::string description;
  /// Needs a rank grid: the spec's, the machine's declared one (graph.layout.grid),
  /// or, on a generated machine, the most square factorisation.
  bool needs_grid = false;
  /// Reduces in the network, on switches that declare `reduction:` (nvls): a
  /// machine without one refuses it, and benches of PE machines skip it.
  bool in_network = false;
  /// Slices each buffer is cut into (a multiple of what the pattern needs).
  int (*slices)(const Plan& plan) = nullptr;
  /// Throws UsageError when the ranks or grid do not suit the algorithm.
  void (*check)(const Plan& plan) = nullptr;
  void (*all_reduce)(Schedule& s, const Plan& plan) = nullptr;
  /// Which slices each rank owns after reduce-scatter / before all-gather,
  /// as (rank, slices) pairs (a rank may own several ranges).
  std::vector<std::pair<int, Slices>> (*owned)(const Plan& plan) = nullptr;
  void (*reduce_scatter)(Schedule& s, const Plan& plan) = nullptr;
  void (*all_gather)(Schedule& s, const Plan& plan) = nullptr;
  void (*broadcast)(Schedule& s, const Plan& plan) = nullptr;
  /// Out of place: slices [0, slices/2) of every buffer are what the rank
  /// sends (block j for rank j), [slices/2, slices) what it receives (block i
  /// from rank i); see alltoall_send_block / alltoall_recv_block.
  void (*all_to_all)(Schedule& s, const Plan& plan) = nullptr;
};

/// alltoall's layout of one rank's cut: its send buffer's block for `peer`,
/// and its receive buffer's block from `peer`.
inline Slices alltoall_send_block(const Plan& p, int peer) {
  return block(Slices{0, p.slices / 2}, p.world.size(), peer);
}
inline Slices alltoall_recv_block(const Plan& p, int peer) {
  return block(Slices{p.slices / 2, p.slices}, p.world.size(), peer);
}

/// `a` with what it left out filled in safely, so that no caller can reach
/// a null function: no `check` accepts any ranks (the pattern's own errors
/// still name what is wrong), no `slices` cuts one slice per rank, no `owned`
/// says rank i owns block i of the buffer (a wrong guess fails the symbolic
/// check with a message, never a crash). An algorithm with no name or with no
/// collective at all is a UsageError naming it.
Algorithm complete(Algorithm a);

/// The ring of a plan's channel (ring.cpp): the world's order, or over
/// several boxes NCCL's, box after box, each box entered at the channel's
/// local rank.
std::vector<int> ring_order(const Plan& p);

/// NCCL's tree across boxes for a plan's channel (double_binary_tree.cpp):
/// tree channel % 2 of the double binary tree over the boxes, each box's
/// chain (ranks) into its head at local rank channel / 2.
struct BoxTree {
  Tree tree;
  std::vector<std::vector<int>> chains;  ///< per box, ending at its head
  std::vector<int> heads;                ///< per box: the rank the tree joins
};
BoxTree box_tree(const Plan& p);

/// NVLS over several boxes (nvls.cpp): each box's reducing switches (logical/switch_star.hpp) and their parts,
/// the boxes alike (UsageError naming `who` otherwise); the slices a plan cuts every buffer into (one box or
/// several); and the all-reduce: part i of each chunk reduced into local rank i by its box's switches,
/// all-reduced across the boxes by IB SHARP (`sharp`) or a binary tree, multicast back.
std::vector<std::vector<Part>> nvls_box_parts(const Plan& p, const std::string& who);
int nvls_slices(const Plan& p, const std::string& who);
void nvls_across_boxes(Schedule& s, const Plan& p, bool sharp);

/// Every algorithm: the built-ins in a fixed order, then the registered ones (each passed through complete()).
const std::deque<Algorithm>& registry();
/// Adds an algorithm (passed through complete()); a name already taken is a UsageError. Every entry point that
/// takes an algorithm name (ccl.all_reduce, Program collectives, kernbench.ccl.algorithms()) sees it from then on.
/// Not thread-safe: register before running collectives.
const Algorithm& register_algorithm(Algorithm a);
/// The algorithm called `name`; UsageError listing the known names otherwise.
const Algorithm& find_algorithm(const std::string& name);

// ---- the built-in algorithms (one file each, one line each in algorithms.def) ----
#define KERNBENCH_ALGORITHM(factory) Algorithm factory##_algorithm();
#include "ccl/algorithms/algorithms.def"
#undef KERNBENCH_ALGORITHM

}  // namespace kernbench::ccl
