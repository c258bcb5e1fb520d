// grid2d.cpp -- the 2-D composition, and the two algorithms made of it:
// torus2d and mesh2d are one implementation, apart in one flag.
//
// Reduce-scatter along every row (each rank ends with 1/w of the buffer),
// then along every column on that part (1/(w h)); all-gather in the
// reverse order. Rows and columns run as rings (torus2d: wraparound links)
// or as lines (mesh2d: none; line.cpp).
//
// With a w x h grid the row rings move (w-1)/w of the buffer per rank and
// the column rings (h-1)/(wh) more, in 2(w-1) + 2(h-1) steps instead of a
// flat ring's 2(wh-1): fewer, larger steps for the same bandwidth term.
#include <string>
#include <utility>

#include "ccl/algorithms.hpp"

namespace kernbench::ccl {

namespace {

std::vector<int> row(const Group& g, int y) {
  return {g.ranks.begin() + static_cast<std::ptrdiff_t>(y) * g.w,
          g.ranks.begin() + static_cast<std::ptrdiff_t>(y + 1) * g.w};
}

std::vector<int> column(const Group& g, int x) {
  std::vector<int> c;
  for (int y = 0; y < g.h; ++y) c.push_back(g.ranks[static_cast<std::size_t>(y * g.w + x)]);
  return c;
}

Slices owned_1d(Slices r, int n, int i, bool wrap) { return wrap ? ring_owned(r, n, i) : block(r, n, i); }

void rs_1d(Schedule& s, const std::vector<int>& ranks, Slices r, bool wrap) {
  if (wrap)
    ring_reduce_scatter(s, ranks, r);
  else
    line_reduce_scatter(s, ranks, r);
}

void ag_1d(Schedule& s, const std::vector<int>& ranks, Slices r, bool wrap) {
  if (wrap)
    ring_all_gather(s, ranks, r);
  else
    line_all_gather(s, ranks, r);
}

}  // namespace

std::vector<std::pair<int, Slices>> grid_owned(const Group& g, Slices r, bool wrap) {
  std::vector<std::pair<int, Slices>> out;
  for (int y = 0; y < g.h; ++y)
    for (int x = 0; x < g.w; ++x)
      out.push_back(
          {g.ranks[static_cast<std::size_t>(y * g.w + x)], owned_1d(owned_1d(r, g.w, x, wrap), g.h, y, wrap)});
  return out;
}

void grid_reduce_scatter(Schedule& s, const Group& g, Slices r, bool wrap) {
  for (int y = 0; y < g.h; ++y) rs_1d(s, row(g, y), r, wrap);
  for (int x = 0; x < g.w; ++x) rs_1d(s, column(g, x), owned_1d(r, g.w, x, wrap), wrap);
}

void grid_all_gather(Schedule& s, const Group& g, Slices r, bool wrap) {
  for (int x = 0; x < g.w; ++x) ag_1d(s, column(g, x), owned_1d(r, g.w, x, wrap), wrap);
  for (int y = 0; y < g.h; ++y) ag_1d(s, row(g, y), r, wrap);
}

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
