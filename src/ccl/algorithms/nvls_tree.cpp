// nvls_tree.cpp -- NCCL's NVLS+tree (NVLS_TREE): NVLS inside each box, NCCL's
// double binary tree across the boxes.
//
// Each chunk's part i is load-reduced by the box's reducing switches into
// local rank i, all-reduced across the boxes along a binary tree of the
// ranks at local index i (up, then back down; the two complementary trees
// alternate over the parts), and multicast back by the switches to every
// rank of the box (nvls.cpp, nvls_across_boxes). So every part crosses a
// box's NICs once per tree edge up and once down, on its head's rail, and
// the latency is NVLS's plus 2 log2(boxes) network steps, as NCCL prices it.
// NCCL runs it across boxes only (src/graph/tuning.cc disables it on one).
#include "ccl/algorithms/algorithm.hpp"
#include "sim/errors.hpp"

namespace kernbench::ccl {

Algorithm nvls_tree_algorithm() {
  Algorithm a;
  a.name = "nvls_tree";
  a.description =
      "NVLS inside each box (the switches reduce each part into one rank and multicast it back) and a binary tree "
      "across the boxes among the ranks on one rail (NCCL's NVLS_TREE)";
  a.in_network = true;
  a.slices = [](const Plan& p) { return nvls_slices(p, "nvls_tree"); };
  a.check = [](const Plan& p) {
    if (!p.multi_node())
      throw UsageError(
          "collective: nvls_tree is NCCL's NVLS across boxes, and these ranks are one box (a machine "
          "without NICs between them): use nvls");
    nvls_slices(p, "nvls_tree");
  };
  a.all_reduce = [](Schedule& s, const Plan& p) { nvls_across_boxes(s, p, false); };
  return a;
}

}  // namespace kernbench::ccl
