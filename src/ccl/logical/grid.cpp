// grid.cpp -- the grid's rows, columns and 2-D phases (grid.hpp).
#include "ccl/logical/grid.hpp"

#include "ccl/logical/line.hpp"
#include "ccl/logical/ring.hpp"

namespace kernbench::ccl {

std::vector<int> grid_row(const Group& g, int y) {
  return {g.ranks.begin() + static_cast<std::ptrdiff_t>(y) * g.w,
          g.ranks.begin() + static_cast<std::ptrdiff_t>(y + 1) * g.w};
}

std::vector<int> grid_column(const Group& g, int x) {
  std::vector<int> c;
  for (int y = 0; y < g.h; ++y) c.push_back(g.ranks[static_cast<std::size_t>(y * g.w + x)]);
  return c;
}

namespace {

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
  for (int y = 0; y < g.h; ++y) rs_1d(s, grid_row(g, y), r, wrap);
  for (int x = 0; x < g.w; ++x) rs_1d(s, grid_column(g, x), owned_1d(r, g.w, x, wrap), wrap);
}

void grid_all_gather(Schedule& s, const Group& g, Slices r, bool wrap) {
  for (int x = 0; x < g.w; ++x) ag_1d(s, grid_column(g, x), owned_1d(r, g.w, x, wrap), wrap);
  for (int y = 0; y < g.h; ++y) ag_1d(s, grid_row(g, y), r, wrap);
}

}  // namespace kernbench::ccl
