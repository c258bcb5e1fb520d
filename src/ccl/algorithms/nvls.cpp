// nvls.cpp -- in-network all-reduce (NVLink SHARP, "NVLS"-like) over the
// reducing switches every rank is linked to.
//
// Each switch that declares `reduction:` and has a direct link from every
// rank takes a part of the buffer, in proportion to the ranks' bandwidth to
// it (the narrowest rank's link x lanes: 5/4/4/5 NVLink4 links on HGX H100
// give parts of 5/18, 4/18, 4/18, 5/18). Each part is cut into `pieces`
// chunks; every chunk is one switch_reduce: each rank sends it to the
// switch once, the switch reduces the contributions and multicasts the sum
// back. The chunks of one switch pipeline through its gather, reduce and
// multicast stages, and the switches work in parallel, so each rank sends
// its whole buffer once and receives it once: on uncontended links
// T ~ (B / port bandwidth) + two chunk times, against ring's
// 2 (p-1)/p B / port bandwidth (docs/ccl.md derives the closed form).
//
// Over several boxes (logical/boxes.hpp) it is NCCL's multi-node NVLS: each
// chunk's part i is load-reduced by the box's switches into local rank i
// (a switch_reduce from every rank of the box into that one), all-reduced
// across the boxes by the ranks at local index i -- in the network by IB
// SHARP (`nvls`: one switch_reduce on the reducing switch that roots their
// aggregation tree, logical/sharp.hpp) or by NCCL's double binary tree over
// them (`nvls_tree`, nvls_tree.cpp) -- and multicast back by the switches
// from local rank i to every rank of the box. Each part leaves and enters a
// box once, through the NIC on its head's rail.
#include <numeric>

#include "ccl/algorithms/algorithm.hpp"
#include "ccl/logical/sharp.hpp"
#include "ccl/logical/switch_star.hpp"
#include "ccl/logical/tree.hpp"
#include "sim/errors.hpp"

namespace kernbench::ccl {
namespace {

void all_reduce(Schedule& s, const Plan& p) {
  const std::vector<Part> ps = star_parts(p.machine, p.pes, "nvls");
  s.phase("in-network");
  // Chunk c of switch j: slices [base_j + c w_j, base_j + (c + 1) w_j),
  // where switch j's part starts at base_j = pieces x (w_0 + ... + w_{j-1}).
  // Chunks are emitted in pipeline order: chunk 0 of every switch first.
  const double total = weight_sum(ps);
  for (int c = 0; c < p.pieces; ++c) {
    std::int32_t base = 0;
    for (const Part& q : ps) {
      const std::int32_t lo = base + c * q.weight;
      s.switch_reduce(q.sw, p.world.ranks, Slices{lo, lo + q.weight}, q.weight / total);
      base += p.pieces * q.weight;
    }
  }
}

}  // namespace

std::vector<std::vector<Part>> nvls_box_parts(const Plan& p, const std::string& who) {
  const Boxes& b = *p.boxes;
  std::vector<std::vector<Part>> out;
  for (const std::vector<int>& box : b.ranks)
    if (box.size() < 2)
      throw UsageError("collective: " + who +
                       " across boxes reduces among each box's ranks in its switches, and "
                       "the box of rank " +
                       std::to_string(box.front()) + " holds only that rank: use ring or tree");
  for (int k = 0; k < b.count(); ++k) {
    std::vector<NodeId> pes;
    for (int r : b.ranks[static_cast<std::size_t>(k)]) pes.push_back(p.pes[static_cast<std::size_t>(r)]);
    out.push_back(star_parts(p.machine, pes, who + " (box of rank " + std::to_string(b.ranks[k].front()) + ")"));
    const std::vector<Part>& a = out.front();
    const std::vector<Part>& c = out.back();
    bool same = b.ranks[static_cast<std::size_t>(k)].size() == b.ranks.front().size() && a.size() == c.size();
    for (std::size_t j = 0; same && j < a.size(); ++j) same = a[j].weight == c[j].weight;
    if (!same)
      throw UsageError("collective: " + who +
                       " across boxes needs boxes alike (as many ranks, switches of the same "
                       "bandwidths); the box of rank " +
                       std::to_string(b.ranks[static_cast<std::size_t>(k)].front()) +
                       " differs from the box of rank 0");
  }
  return out;
}

int nvls_slices(const Plan& p, const std::string& who) {
  if (!p.multi_node()) return p.pieces * weight_sum(star_parts(p.machine, p.pes, who));
  return p.pieces * weight_sum(nvls_box_parts(p, who).front()) * p.boxes->smallest();
}

void nvls_across_boxes(Schedule& s, const Plan& p, bool sharp) {
  const std::string who = sharp ? "nvls" : "nvls_tree";
  const Boxes& b = *p.boxes;
  const std::vector<std::vector<Part>> parts = nvls_box_parts(p, who);
  const int ppn = b.smallest(), boxes = b.count();
  const int w = weight_sum(parts.front());
  // Per local index i, the ranks that carry part i across the boxes, and their aggregation tree or binary trees.
  std::vector<std::vector<int>> heads(static_cast<std::size_t>(ppn));
  for (int i = 0; i < ppn; ++i)
    for (int k = 0; k < boxes; ++k) heads[static_cast<std::size_t>(i)].push_back(b.at(k, i));
  std::vector<SharpTree> trees;
  if (sharp) {
    SharpNet net = require_sharp_net(*p.machine, p.pes, who);
    for (const std::vector<int>& h : heads) trees.push_back(sharp_tree(net, h, who));
  }
  const std::pair<Tree, Tree> ab = nccl_double_trees(boxes);
  // Chunk c, head i: slices [(c ppn + i) w, + w), switch j's part of them at offset off_j (weight w_j). The
  // switches reduce and multicast each part; the network moves the head's whole share of the chunk at once.
  for (int c = 0; c < p.pieces; ++c)
    for (int i = 0; i < ppn; ++i) {
      const std::int32_t lo = (c * ppn + i) * w;
      const std::vector<int>& across = heads[static_cast<std::size_t>(i)];
      const auto in_box = [&](bool reduce) {
        s.phase(reduce ? "nvls reduce" : "nvls multicast");
        int off = 0;
        for (std::size_t j = 0; j < parts.front().size(); ++j) {
          const int wj = parts.front()[j].weight;
          for (int k = 0; k < boxes; ++k) {
            const std::vector<int>& box = b.ranks[static_cast<std::size_t>(k)];
            const std::vector<int> head{b.at(k, i)};
            s.switch_reduce(parts[static_cast<std::size_t>(k)][j].sw,
                            Schedule::SwitchRanks{reduce ? box : head, reduce ? head : box, {}, {}},
                            Slices{lo + off, lo + off + wj}, static_cast<double>(wj) / w);
          }
          off += wj;
        }
      };
      in_box(true);
      const Slices share{lo, lo + w};
      if (sharp) {
        s.phase("sharp all-reduce");
        const SharpTree& t = trees[static_cast<std::size_t>(i)];
        s.switch_reduce(t.root, Schedule::SwitchRanks{across, across, t.via, t.via}, share, 0.0);
      } else {
        s.phase("tree all-reduce");
        const Tree& t = (c + i) % 2 == 0 ? ab.first : ab.second;  // each rail on both trees, alternately
        tree_reduce_up(s, t, across, t.root, share);
        tree_copy_down(s, t, across, t.root, share);
      }
      in_box(false);
    }
}

Algorithm nvls_algorithm() {
  Algorithm a;
  a.name = "nvls";
  a.description =
      "in-network all-reduce (NVLink SHARP-like): each rank sends every chunk once to a reducing switch, which "
      "reduces and multicasts it back; chunks pipelined over every reducing switch linked to all ranks; across "
      "boxes, each box's part i all-reduced by IB SHARP among the ranks at local index i";
  a.in_network = true;
  a.slices = [](const Plan& p) { return nvls_slices(p, "nvls"); };
  a.check = [](const Plan& p) {
    nvls_slices(p, "nvls");
    if (p.multi_node()) require_network_reducers(*p.machine, p.pes, "nvls");
  };
  a.all_reduce = [](Schedule& s, const Plan& p) {
    if (p.multi_node())
      nvls_across_boxes(s, p, true);
    else
      all_reduce(s, p);
  };
  return a;
}

}  // namespace kernbench::ccl
