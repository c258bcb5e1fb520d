// grid.hpp -- the 2-D grid, a logical topology: a Group read row-major as a
// w x h grid, whose rows and columns run as rings (wraparound links: a
// torus) or as lines (none: a mesh).
//
// Reduce-scatter along every row (each rank ends with 1/w of the buffer),
// then along every column on that part (1/(w h)); all-gather in the reverse
// order. Used by torus2d, mesh2d and LRAB's inter-SIP phase.
#pragma once

#include <utility>
#include <vector>

#include "ccl/schedule.hpp"

namespace kernbench::ccl {

/// Row y of the grid, left to right.
std::vector<int> grid_row(const Group& g, int y);
/// Column x of the grid, top to bottom.
std::vector<int> grid_column(const Group& g, int x);
/// The slices each grid position owns after grid_reduce_scatter, as (rank, slices) pairs.
std::vector<std::pair<int, Slices>> grid_owned(const Group& g, Slices r, bool wrap);
/// Rows, then columns on the row's part; `wrap` picks rings (torus) or lines (mesh).
void grid_reduce_scatter(Schedule& s, const Group& g, Slices r, bool wrap);
/// Columns, then rows: the reverse of grid_reduce_scatter.
void grid_all_gather(Schedule& s, const Group& g, Slices r, bool wrap);

}  // namespace kernbench::ccl
