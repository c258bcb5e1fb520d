// switch_star.hpp -- the switch star, a logical topology: the switches that
// reduce in the network (graph nodes of kind switch with `reduction:`) and
// are linked directly to every rank, each taking a part of the buffer in
// proportion to the ranks' bandwidth to it (the narrowest rank's link x
// lanes: 5/4/4/5 NVLink4 links on HGX H100 give parts of 5/18, 4/18, 4/18,
// 5/18). The in-network all-reduce (nvls) runs one switch_reduce per chunk
// of each part.
#pragma once

#include <string>
#include <vector>

#include "ccl/schedule.hpp"
#include "topology/graph/machine.hpp"

namespace kernbench::ccl {

struct Part {
  NodeId sw = 0;   ///< the switch
  int weight = 1;  ///< its slices per chunk
};

/// The reducing switches linked to every rank of `pes`, with their weights (the bandwidths over their greatest
/// common divisor, or, when that would cut the buffer too finely, rounded to 1/64 of the widest). None is a
/// UsageError naming `who` and what is missing (no switch, none reducing, or not linked to every rank).
std::vector<Part> star_parts(const topology::Machine* machine, const std::vector<NodeId>& pes, const std::string& who);
/// The slices of one chunk over every part.
int weight_sum(const std::vector<Part>& ps);

}  // namespace kernbench::ccl
