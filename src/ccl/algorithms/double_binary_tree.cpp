// double_binary_tree.cpp -- two complementary binary trees, half the data each.
//
// Tree A is the in-order binary tree over positions 0..p-1; tree B is its
// mirror (p even) or its shift by one (p odd), so a rank that is a leaf in
// one tree is an inner node in the other and every rank sends and receives
// about the same in total. Each half is cut into pieces that stream up the
// tree (children's partials reduced into the parent) and back down
// (copies), pipelined: ~2 log2(p) latencies plus the bandwidth term.
//
// Over several boxes (logical/boxes.hpp) the tree is NCCL's: inside a box a
// chain, across boxes NCCL's double binary tree over the boxes (its
// bit-pattern trees, logical/tree.hpp nccl_double_trees). Channel c runs
// tree c mod 2 with each box's head at local rank (c / 2) (its NIC's rail):
// a piece is reduced along the box's chain into the head, up the tree of
// heads, back down it, and along the chain again. The latency is then
// 2 ((ranks per box - 1) intra-box steps + log2(boxes) network steps), as
// NCCL prices it (src/graph/tuning.cc).
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

void multi_node_all_reduce(Schedule& s, const Plan& p) {
  const BoxTree bt = box_tree(p);
  const Tree& t = bt.tree;
  const std::vector<std::vector<int>>& chains = bt.chains;
  const std::vector<int>& heads = bt.heads;
  const Slices all = p.all();
  const int k = std::max(1, std::min(p.pieces, all.hi - all.lo));
  for (int piece = 0; piece < k; ++piece) {
    const Slices part = block(all, k, piece);
    for (const std::vector<int>& c : chains)
      for (std::size_t j = 0; j + 1 < c.size(); ++j) s.transfer(c[j], c[j + 1], part, Combine::Reduce);
    tree_reduce_up(s, t, heads, t.root, part);
    tree_copy_down(s, t, heads, t.root, part);
    for (const std::vector<int>& c : chains)
      for (std::size_t j = c.size() - 1; j > 0; --j) s.transfer(c[j], c[j - 1], part, Combine::Copy);
  }
}

}  // namespace

BoxTree box_tree(const Plan& p) {
  const Boxes& boxes = *p.boxes;
  std::pair<Tree, Tree> ab = nccl_double_trees(boxes.count());
  BoxTree out{p.channel % 2 == 0 ? std::move(ab.first) : std::move(ab.second), {}, {}};
  for (int b = 0; b < boxes.count(); ++b) {
    out.chains.push_back(boxes.chain_to(b, p.channel / 2));
    out.heads.push_back(out.chains.back().back());
  }
  return out;
}

Algorithm double_binary_tree_algorithm() {
  Algorithm a;
  a.name = "double_binary_tree";
  a.description = "two complementary binary trees, each reducing then broadcasting half the buffer in pipelined pieces";
  a.slices = [](const Plan& p) { return 2 * std::max(1, p.pieces); };
  a.check = [](const Plan&) {};
  a.all_reduce = [](Schedule& s, const Plan& p) {
    s.phase("reduce-broadcast");
    if (p.multi_node())
      multi_node_all_reduce(s, p);
    else
      run_trees(s, p, double_trees(p.world.size()), true, true);
  };
  a.broadcast = [](Schedule& s, const Plan& p) {
    s.phase("broadcast");
    run_trees(s, p, rooted_double_trees(p.world.size(), p.root), false, true);
  };
  return a;
}

}  // namespace kernbench::ccl
