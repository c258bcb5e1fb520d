// tree.cpp -- binary trees over positions and their reduce / copy phases (tree.hpp).
#include "ccl/logical/tree.hpp"

namespace kernbench::ccl {

namespace {

int build(Tree& t, int lo, int hi) {
  if (lo >= hi) return -1;
  const int mid = (lo + hi) / 2;
  const int l = build(t, lo, mid), r = build(t, mid + 1, hi);
  if (l >= 0) t.children[static_cast<std::size_t>(mid)].push_back(l);
  if (r >= 0) t.children[static_cast<std::size_t>(mid)].push_back(r);
  return mid;
}

}  // namespace

Tree make_tree(int n, int (*map)(int pos, int n, int root), int root) {
  Tree t;
  t.children.resize(static_cast<std::size_t>(n));
  t.root = build(t, 0, n);
  for (int j = 0; j < n; ++j) t.rank.push_back(map(j, n, root));
  return t;
}

void tree_reduce_up(Schedule& s, const Tree& t, const std::vector<int>& world, int v, Slices piece) {
  for (int c : t.children[static_cast<std::size_t>(v)]) {
    tree_reduce_up(s, t, world, c, piece);
    s.transfer(world[static_cast<std::size_t>(t.rank[static_cast<std::size_t>(c)])],
               world[static_cast<std::size_t>(t.rank[static_cast<std::size_t>(v)])], piece, Combine::Reduce);
  }
}

void tree_copy_down(Schedule& s, const Tree& t, const std::vector<int>& world, int v, Slices piece) {
  for (int c : t.children[static_cast<std::size_t>(v)]) {
    s.transfer(world[static_cast<std::size_t>(t.rank[static_cast<std::size_t>(v)])],
               world[static_cast<std::size_t>(t.rank[static_cast<std::size_t>(c)])], piece, Combine::Copy);
    tree_copy_down(s, t, world, c, piece);
  }
}

std::pair<Tree, Tree> double_trees(int n) {
  return {make_tree(
              n, [](int j, int, int) { return j; }, 0),
          make_tree(n, [](int j, int m, int) { return m % 2 == 0 ? m - 1 - j : (j + 1) % m; }, 0)};
}

std::pair<Tree, Tree> nccl_double_trees(int n) {
  Tree a;
  a.children.resize(static_cast<std::size_t>(n));
  a.root = 0;
  for (int v = 0; v < n; ++v) {
    if (v == 0) {  // the root's one child: the largest power of two below n
      int top = 1;
      while (top < n) top <<= 1;
      if (n > 1) a.children[0].push_back(top >> 1);
      continue;
    }
    const int half = (v & -v) >> 1;  // half the lowest set bit
    if (half == 0) continue;         // odd: a leaf
    a.children[static_cast<std::size_t>(v)].push_back(v - half);
    int up = half;
    while (up > 0 && v + up >= n) up >>= 1;
    if (up > 0) a.children[static_cast<std::size_t>(v)].push_back(v + up);
  }
  Tree b = a;
  for (int j = 0; j < n; ++j) {
    a.rank.push_back(j);
    b.rank.push_back(n % 2 == 0 ? n - 1 - j : (j + 1) % n);
  }
  return {std::move(a), std::move(b)};
}

std::pair<Tree, Tree> rooted_double_trees(int n, int root) {
  return {make_tree(
              n, [](int j, int m, int r) { return ((j - m / 2 + r) % m + m) % m; }, root),
          make_tree(n, [](int j, int m, int r) { return ((m / 2 - j + r) % m + m) % m; }, root)};
}

}  // namespace kernbench::ccl
