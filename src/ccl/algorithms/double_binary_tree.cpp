// double_binary_tree.cpp -- two complementary binary trees, half the data each.
//
// Tree A is the in-order binary tree over positions 0..p-1; tree B is its
// mirror (p even) or its shift by one (p odd), so a rank that is a leaf in
// one tree is an inner node in the other and every rank sends and receives
// about the same in total. Each half is cut into pieces that stream up the
// tree (children's partials reduced into the parent) and back down
// (copies), pipelined: ~2 log2(p) latencies plus the bandwidth term.
#include "ccl/algorithms/algorithm.hpp"
#include "ccl/logical/tree.hpp"

namespace kernbench::ccl {
namespace {

void run_trees(Schedule& s, const Plan& p, const std::pair<Tree, Tree>& ab, bool up, bool down) {
  const Slices all = p.all();
  const int k = std::max(1, std::min(p.pieces, (all.hi - all.lo) / 2));
  const Tree* both[2] = {&ab.first, &ab.second};
  for (int h = 0; h < 2; ++h) {
    const Slices half = block(p.all(), 2, h);
    for (int piece = 0; piece < k; ++piece) {
      const Slices part = block(half, k, piece);
      if (up) tree_reduce_up(s, *both[h], p.world.ranks, both[h]->root, part);
      if (down) tree_copy_down(s, *both[h], p.world.ranks, both[h]->root, part);
    }
  }
}

}  // namespace

Algorithm double_binary_tree_algorithm() {
  Algorithm a;
  a.name = "double_binary_tree";
  a.description = "two complementary binary trees, each reducing then broadcasting half the buffer in pipelined pieces";
  a.slices = [](const Plan& p) { return 2 * std::max(1, p.pieces); };
  a.check = [](const Plan&) {};
  a.all_reduce = [](Schedule& s, const Plan& p) {
    s.phase("reduce-broadcast");
    run_trees(s, p, double_trees(p.world.size()), true, true);
  };
  a.broadcast = [](Schedule& s, const Plan& p) {
    s.phase("broadcast");
    run_trees(s, p, rooted_double_trees(p.world.size(), p.root), false, true);
  };
  return a;
}

}  // namespace kernbench::ccl
