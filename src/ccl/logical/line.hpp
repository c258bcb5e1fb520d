// line.hpp -- the line, a logical topology: ranks in a row with no
// wraparound link (mesh2d's rows and columns, LRAB's chains of cubes).
//
// A line of n ranks reduces block b from both ends towards rank b (partial
// sums flow inwards along the line), so every hop is between neighbours and
// no message has to cross the line to close a ring. A chain is a line used
// one way: a reduce into its last rank or a copy from its first, pipelined
// in pieces.
#pragma once

#include <vector>

#include "ccl/schedule.hpp"

namespace kernbench::ccl {

/// Line reduce-scatter: block b is reduced from both ends towards line[b];
/// afterwards line[i] holds block i.
void line_reduce_scatter(Schedule& s, const std::vector<int>& line, Slices r);
/// Line all-gather: line[b] sends block b both ways along the line.
void line_all_gather(Schedule& s, const std::vector<int>& line, Slices r);

/// Reduces `r` along `chain` into its last rank, in `pieces` pipelined parts.
void chain_reduce(Schedule& s, const std::vector<int>& chain, Slices r, int pieces);
/// Copies `r` from chain[0] along the chain to its end, pipelined.
void chain_broadcast(Schedule& s, const std::vector<int>& chain, Slices r, int pieces);

}  // namespace kernbench::ccl
