// lrab.cpp -- hierarchical all-reduce: local reduce to the centre cube, an
// all-reduce between SIPs, broadcast back (LRAB).
//
// Per SIP, with PE lane j = the PE index inside a cube:
//   1. intra-reduce: lane j of every cube reduces towards lane j of the
//      centre cube -- along each cube row from both ends to the centre
//      column, then along the centre column from both ends (bidirectional
//      chains, pipelined in pieces);
//   2. the centre cube's lanes reduce-scatter around a ring, so lane j
//      holds 1/L of the SIP's sum;
//   3. inter-SIP: lane j of every SIP's centre cube all-reduces its part
//      over the SIP grid as a ring, a 2-D torus or a 2-D mesh (`inter`);
//   4. the centre lanes all-gather, and 5. broadcast back out along the
//      reverse chains.
// Only the centre cubes' PEs cross PCIe, each with 1/L of the data.
#include <algorithm>

#include "ccl/algorithms/algorithm.hpp"
#include "ccl/logical/grid.hpp"
#include "ccl/logical/hierarchy.hpp"
#include "ccl/logical/line.hpp"
#include "ccl/logical/ring.hpp"

#include "sim/errors.hpp"

namespace kernbench::ccl {
namespace {

void all_reduce(Schedule& s, const Plan& p) {
  const Hierarchy l = hierarchy_of(p.machine, p.pes, "lrab");
  const Slices all = p.all();
  const auto chains = inward_chains(l);
  s.phase("intra-reduce");
  for (int sp = 0; sp < l.sips(); ++sp)
    for (int j = 0; j < l.L; ++j)
      for (const auto& c : chains) chain_reduce(s, chain_ranks(l, sp, j, c), all, p.pieces);
  s.phase("centre-reduce-scatter");
  std::vector<std::vector<int>> centre(static_cast<std::size_t>(l.sips()));
  for (int sp = 0; sp < l.sips(); ++sp) {
    for (int j = 0; j < l.L; ++j) centre[static_cast<std::size_t>(sp)].push_back(l.at(sp, l.cx, l.cy, j));
    ring_reduce_scatter(s, centre[static_cast<std::size_t>(sp)], all);
  }
  if (l.sips() > 1) {
    s.phase("inter-sip");
    for (int j = 0; j < l.L; ++j) {
      Group g;
      g.w = l.grid_w;
      g.h = l.grid_h;
      for (int sp = 0; sp < l.sips(); ++sp)
        g.ranks.push_back(centre[static_cast<std::size_t>(sp)][static_cast<std::size_t>(j)]);
      const Slices part = ring_owned(all, l.L, j);
      if (p.inter == "ring") {
        ring_reduce_scatter(s, g.ranks, part);
        ring_all_gather(s, g.ranks, part);
      } else {
        const bool wrap = p.inter == "torus";
        grid_reduce_scatter(s, g, part, wrap);
        grid_all_gather(s, g, part, wrap);
      }
    }
  }
  s.phase("centre-all-gather");
  for (int sp = 0; sp < l.sips(); ++sp) ring_all_gather(s, centre[static_cast<std::size_t>(sp)], all);
  s.phase("broadcast");
  for (int sp = 0; sp < l.sips(); ++sp)
    for (int j = 0; j < l.L; ++j)
      for (auto it = chains.rbegin(); it != chains.rend(); ++it) {  // columns first, then rows, outwards
        std::vector<int> out = chain_ranks(l, sp, j, *it);
        std::reverse(out.begin(), out.end());
        chain_broadcast(s, out, all, p.pieces);
      }
}

}  // namespace

Algorithm lrab_algorithm() {
  Algorithm a;
  a.name = "lrab";
  a.description =
      "hierarchical: bidirectional local reduce to the centre cube, all-reduce across SIPs "
      "(inter = ring | torus | mesh), broadcast back";
  a.slices = [](const Plan& p) {
    const Hierarchy l = hierarchy_of(p.machine, p.pes, "lrab");
    const int base = l.L * l.sips();
    return base * std::max(1, (p.pieces + base - 1) / base);
  };
  a.check = [](const Plan& p) {
    hierarchy_of(p.machine, p.pes, "lrab");
    if (p.inter != "ring" && p.inter != "torus" && p.inter != "mesh")
      throw UsageError("lrab: inter must be ring, torus or mesh, got '" + p.inter + "'");
  };
  a.all_reduce = all_reduce;
  return a;
}

}  // namespace kernbench::ccl
