// torus2d.cpp -- 2-D all-reduce on a torus: rings along rows, then columns.
//
// With a w x h grid the row rings move (w-1)/w of the buffer per rank and
// the column rings (h-1)/(wh) more, in 2(w-1) + 2(h-1) steps instead of a
// flat ring's 2(wh-1): fewer, larger steps for the same bandwidth term.
#include "ccl/algorithms.hpp"

namespace kernbench::ccl {

Algorithm torus2d_algorithm() {
  Algorithm a;
  a.name = "torus2d";
  a.needs_grid = true;
  a.description = "2-D dimension by dimension: ring reduce-scatter along rows then columns, all-gather back";
  a.slices = [](const Plan& p) { return p.world.w * p.world.h; };
  a.check = [](const Plan&) {};
  a.reduce_scatter = [](Schedule& s, const Plan& p) {
    s.phase("reduce-scatter");
    grid_reduce_scatter(s, p.world, p.all(), true);
  };
  a.all_gather = [](Schedule& s, const Plan& p) {
    s.phase("all-gather");
    grid_all_gather(s, p.world, p.all(), true);
  };
  a.all_reduce = [](Schedule& s, const Plan& p) {
    s.phase("reduce-scatter");
    grid_reduce_scatter(s, p.world, p.all(), true);
    s.phase("all-gather");
    grid_all_gather(s, p.world, p.all(), true);
  };
  a.owned = [](const Plan& p) { return grid_owned(p.world, p.all(), true); };
  return a;
}

}  // namespace kernbench::ccl
