// tree.hpp -- the binary tree, a logical topology: the in-order binary tree
// over positions 0..n-1, each position mapped to a world index, and the two
// phases a tree algorithm streams pieces through (children's partials
// reduced into the parent; copies back down). double_binary_tree pairs two
// complementary trees so a leaf of one is an inner node of the other.
#pragma once

#include <utility>
#include <vector>

#include "ccl/schedule.hpp"

namespace kernbench::ccl {

struct Tree {
  std::vector<int> rank;                   ///< position -> world index
  std::vector<std::vector<int>> children;  ///< by position
  int root = 0;                            ///< the root's position
};

/// The in-order binary tree over n positions, position j holding world index map(j, n, root).
Tree make_tree(int n, int (*map)(int pos, int n, int root), int root);
/// Reduces `piece` from the leaves of the subtree at position v into v (world: index -> rank).
void tree_reduce_up(Schedule& s, const Tree& t, const std::vector<int>& world, int v, Slices piece);
/// Copies `piece` from position v down to every position of its subtree.
void tree_copy_down(Schedule& s, const Tree& t, const std::vector<int>& world, int v, Slices piece);
/// The two trees over world positions: A the identity, B its mirror (n even) or its shift by one (n odd).
std::pair<Tree, Tree> double_trees(int n);
/// NCCL's double binary tree (src/graph/trees.cc, ncclGetDtree): tree A its bit-pattern binary tree over
/// positions 0..n-1 (0 the root, with one child; a node's children at +- half its lowest set bit, so the odd
/// positions are its leaves), B its mirror (n even) or its shift by one (n odd). A node that is inner in one is a
/// leaf in the other (the in-order trees of double_trees are not so balanced: some nodes have two children in
/// one and one in the other), so with half the data on each, no node sends or receives more than twice it.
std::pair<Tree, Tree> nccl_double_trees(int n);
/// Two complementary trees with world index `root` at both roots, for broadcast.
std::pair<Tree, Tree> rooted_double_trees(int n, int root);

}  // namespace kernbench::ccl
