// hierarchy.hpp -- the group hierarchy, a logical topology: the ranks laid
// out as packages (SIPs) x a W x H grid of groups (cubes) x L lanes (the PEs
// of a group), read from the machine's declared hierarchy (generated
// machines, or graph.layout's packages, groups and pes_per_group), with the
// centre group and the chains of groups that lead to it. The hierarchical
// all-reduce (lrab) reduces along the chains, across packages and back.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ccl/schedule.hpp"
#include "topology/graph/machine.hpp"

namespace kernbench::ccl {

struct Hierarchy {
  std::vector<int> sip_ids;    ///< machine indices of the packages taking part, ascending
  int W = 1, H = 1, L = 1;     ///< group grid and lanes (PEs per group)
  int cx = 0, cy = 0;          ///< the centre group
  int grid_w = 1, grid_h = 1;  ///< the package grid of the inter-package phase
  std::vector<int> rank;       ///< (package position, y, x, lane) -> rank
  int sips() const { return static_cast<int>(sip_ids.size()); }
  int at(int sp, int x, int y, int j) const { return rank[static_cast<std::size_t>(((sp * H + y) * W + x) * L + j)]; }
};

/// The hierarchy of the ranks `pes` (rank -> PE node) on `machine`. A machine without a declared hierarchy, a PE
/// that is not a rank, or a package taking part with only some of its PEs is a UsageError naming `who` (the
/// algorithm) and what is missing.
Hierarchy hierarchy_of(const topology::Machine* machine, const std::vector<NodeId>& pes, const std::string& who);
/// Chains of groups towards the centre, as (x, y) lists ending at the centre: rows from both ends to the centre
/// column, then the centre column from both ends (the columns carry the rows' sums).
std::vector<std::vector<std::pair<int, int>>> inward_chains(const Hierarchy& l);
/// The ranks of lane j of package position sp along a chain of groups.
std::vector<int> chain_ranks(const Hierarchy& l, int sp, int j, const std::vector<std::pair<int, int>>& cubes);

}  // namespace kernbench::ccl
