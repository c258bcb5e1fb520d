// double_binary_tree.cpp -- two complementary binary trees, half the data each.
//
// Tree A is the in-order binary tree over positions 0..p-1; tree B is its
// mirror (p even) or its shift by one (p odd), so a rank that is a leaf in
// one tree is an inner node in the other and every rank sends and receives
// about the same in total. Each half is cut into pieces that stream up the
// tree (children's partials reduced into the parent) and back down
// (copies), pipelined: ~2 log2(p) latencies plus the bandwidth term.
#include "ccl/algorithms.hpp"

namespace kernbench::ccl {

namespace {

struct Tree {
  std::vector<int> rank;                   // position -> rank
  std::vector<std::vector<int>> children;  // by position
  int root = 0;
};

int build(Tree& t, int lo, int hi) {
  if (lo >= hi) return -1;
  const int mid = (lo + hi) / 2;
  const int l = build(t, lo, mid), r = build(t, mid + 1, hi);
  if (l >= 0) t.children[static_cast<std::size_t>(mid)].push_back(l);
  if (r >= 0) t.children[static_cast<std::size_t>(mid)].push_back(r);
  return mid;
}

Tree make_tree(int n, int (*map)(int pos, int n, int root), int root) {
  Tree t;
  t.children.resize(static_cast<std::size_t>(n));
  t.root = build(t, 0, n);
  for (int j = 0; j < n; ++j) t.rank.push_back(map(j, n, root));
  return t;
}

void reduce_up(Schedule& s, const Tree& t, const std::vector<int>& world, int v, Slices piece) {
  for (int c : t.children[static_cast<std::size_t>(v)]) {
    reduce_up(s, t, world, c, piece);
    s.transfer(world[static_cast<std::size_t>(t.rank[static_cast<std::size_t>(c)])],
               world[static_cast<std::size_t>(t.rank[static_cast<std::size_t>(v)])], piece, Combine::Reduce);
  }
}

void copy_down(Schedule& s, const Tree& t, const std::vector<int>& world, int v, Slices piece) {
  for (int c : t.children[static_cast<std::size_t>(v)]) {
    s.transfer(world[static_cast<std::size_t>(t.rank[static_cast<std::size_t>(v)])],
               world[static_cast<std::size_t>(t.rank[static_cast<std::size_t>(c)])], piece, Combine::Copy);
    copy_down(s, t, world, c, piece);
  }
}

// The two trees over world positions: A identity, B mirror (even) / shift (odd).
std::pair<Tree, Tree> trees(int n) {
  return {make_tree(
              n, [](int j, int, int) { return j; }, 0),
          make_tree(n, [](int j, int m, int) { return m % 2 == 0 ? m - 1 - j : (j + 1) % m; }, 0)};
}

// Trees with `root` (a world index) at their roots, for broadcast.
std::pair<Tree, Tree> rooted_trees(int n, int root) {
  return {make_tree(
              n, [](int j, int m, int r) { return ((j - m / 2 + r) % m + m) % m; }, root),
          make_tree(n, [](int j, int m, int r) { return ((m / 2 - j + r) % m + m) % m; }, root)};
}

void run_trees(Schedule& s, const Plan& p, const std::pair<Tree, Tree>& ab, bool up, bool down) {
  const Slices all = p.all();
  const int k = std::max(1, std::min(p.pieces, (all.hi - all.lo) / 2));
  const Tree* both[2] = {&ab.first, &ab.second};
  for (int h = 0; h < 2; ++h) {
    const Slices half = block(p.all(), 2, h);
    for (int piece = 0; piece < k; ++piece) {
      const Slices part = block(half, k, piece);
      if (up) reduce_up(s, *both[h], p.world.ranks, both[h]->root, part);
      if (down) copy_down(s, *both[h], p.world.ranks, both[h]->root, part);
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
    run_trees(s, p, trees(p.world.size()), true, true);
  };
  a.broadcast = [](Schedule& s, const Plan& p) {
    s.phase("broadcast");
    run_trees(s, p, rooted_trees(p.world.size(), p.root), false, true);
  };
  return a;
}

}  // namespace kernbench::ccl
