// algorithms.hpp -- the registry of collective algorithms and the shared
// pieces they are made of (ring and line reduce-scatter / all-gather,
// pipelined chains, the 2-D composition).
//
// Each algorithm lives in its own file and describes itself with an
// `Algorithm`: how finely it cuts the buffer, its all-reduce, and -- where
// the pieces allow -- reduce-scatter, all-gather and broadcast.
#pragma once

#include <string>
#include <vector>

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

/// Every algorithm, in a fixed order (each passed through complete()).
const std::vector<Algorithm>& registry();
/// The algorithm called `name`; UsageError listing the known names otherwise.
const Algorithm& find_algorithm(const std::string& name);

// ---- the algorithms (one file each) ------------------------------------------
Algorithm ring_algorithm();
Algorithm bidir_ring_algorithm();
Algorithm torus2d_algorithm();
Algorithm mesh2d_algorithm();
Algorithm halving_doubling_algorithm();
Algorithm double_binary_tree_algorithm();
Algorithm lrab_algorithm();
Algorithm nvls_algorithm();
Algorithm pairwise_algorithm();

// ---- shared pieces ------------------------------------------------------------
/// Ring reduce-scatter of `r` over `ring` (ranks in ring order) in n - 1
/// steps: afterwards ring[i] holds block (i + 1) % n of r, reduced.
void ring_reduce_scatter(Schedule& s, const std::vector<int>& ring, Slices r);
/// Ring all-gather: ring[i] starts with block (i + 1) % n, ends with all of r.
void ring_all_gather(Schedule& s, const std::vector<int>& ring, Slices r);
/// The block ring[i] owns after ring_reduce_scatter.
inline Slices ring_owned(Slices r, int n, int i) { return block(r, n, (i + 1) % n); }

/// Line (no wraparound) reduce-scatter: block b is reduced from both ends
/// towards line[b]; afterwards line[i] holds block i.
void line_reduce_scatter(Schedule& s, const std::vector<int>& line, Slices r);
/// Line all-gather: line[b] sends block b both ways along the line.
void line_all_gather(Schedule& s, const std::vector<int>& line, Slices r);

/// 2-D dimension by dimension over `g` (a g.w x g.h grid, row-major):
/// reduce-scatter along rows, then along columns; `wrap` picks rings
/// (torus) or lines (mesh). Owned slices per grid position after it:
std::vector<std::pair<int, Slices>> grid_owned(const Group& g, Slices r, bool wrap);
void grid_reduce_scatter(Schedule& s, const Group& g, Slices r, bool wrap);
void grid_all_gather(Schedule& s, const Group& g, Slices r, bool wrap);

/// Reduces `r` along `chain` into its last rank, in `pieces` pipelined parts.
void chain_reduce(Schedule& s, const std::vector<int>& chain, Slices r, int pieces);
/// Copies `r` from chain[0] along the chain to its end, pipelined.
void chain_broadcast(Schedule& s, const std::vector<int>& chain, Slices r, int pieces);

/// The world's ranks 0..n-1 (a helper for 1-D algorithms).
std::vector<int> iota_ranks(int n);

}  // namespace kernbench::ccl
