// grid2d.cpp -- torus2d and mesh2d, the two algorithms of the grid
// (logical/grid.hpp): one implementation, apart in one flag.
//
// Reduce-scatter along every row (each rank ends with 1/w of the buffer),
// then along every column on that part (1/(w h)); all-gather in the
// reverse order. Rows and columns run as rings (torus2d: wraparound links)
// or as lines (mesh2d: none; logical/line.hpp).
//
// With a w x h grid the row rings move (w-1)/w of the buffer per rank and
// the column rings (h-1)/(wh) more, in 2(w-1) + 2(h-1) steps instead of a
// flat ring's 2(wh-1): fewer, larger steps for the same bandwidth term.
#include <string>
#include <utility>

#include "ccl/algorithms/algorithm.hpp"
#include "ccl/logical/grid.hpp"

namespace kernbench::ccl {
namespace {

// Both algorithms, `Wrap` picking rings (torus2d) or lines (mesh2d); a
// template so each stays a set of plain function pointers.
template <bool Wrap>
Algorithm grid_algorithm(std::string name, std::string description) {
  Algorithm a;
  a.name = std::move(name);
  a.needs_grid = true;
  a.description = std::move(description);
  a.slices = [](const Plan& p) { return p.world.w * p.world.h; };
  a.check = [](const Plan&) {};
  a.reduce_scatter = [](Schedule& s, const Plan& p) {
    s.phase("reduce-scatter");
    grid_reduce_scatter(s, p.world, p.all(), Wrap);
  };
  a.all_gather = [](Schedule& s, const Plan& p) {
    s.phase("all-gather");
    grid_all_gather(s, p.world, p.all(), Wrap);
  };
  a.all_reduce = [](Schedule& s, const Plan& p) {
    s.phase("reduce-scatter");
    grid_reduce_scatter(s, p.world, p.all(), Wrap);
    s.phase("all-gather");
    grid_all_gather(s, p.world, p.all(), Wrap);
  };
  a.owned = [](const Plan& p) { return grid_owned(p.world, p.all(), Wrap); };
  return a;
}

}  // namespace

Algorithm torus2d_algorithm() {
  return grid_algorithm<true>(
      "torus2d", "2-D dimension by dimension: ring reduce-scatter along rows then columns, all-gather back");
}

Algorithm mesh2d_algorithm() {
  return grid_algorithm<false>(
      "mesh2d", "2-D dimension by dimension with line (no wraparound) reduce-scatter/all-gather per row and column");
}

}  // namespace kernbench::ccl
