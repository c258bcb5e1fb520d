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
#include "ccl/algorithms.hpp"

#include <algorithm>
#include <map>

#include "sim/errors.hpp"

namespace kernbench::ccl {

namespace {

struct Layout {
  std::vector<int> sip_ids;    // machine indices of the SIPs taking part, ascending
  int W = 1, H = 1, L = 1;     // cube grid and lanes (PEs per cube)
  int cx = 0, cy = 0;          // the centre cube
  int grid_w = 1, grid_h = 1;  // SIP grid of the inter phase
  std::vector<int> rank;       // (sip position, y, x, lane) -> rank
  int sips() const { return static_cast<int>(sip_ids.size()); }
  int at(int sp, int x, int y, int j) const { return rank[static_cast<std::size_t>(((sp * H + y) * W + x) * L + j)]; }
};

Layout layout(const Plan& p) {
  if (!p.machine) throw InternalError("lrab: no machine");
  const topology::Machine& m = *p.machine;
  const topology::PeHierarchy& sys = m.hierarchy();
  if (!sys.declared)
    throw UsageError(
        "lrab needs a group hierarchy (it follows the cube grid) and the machine declares none: give "
        "graph.layout.packages, graph.layout.groups and graph.layout.pes_per_group in the config");
  Layout l;
  l.W = sys.groups.w;
  l.H = sys.groups.h;
  l.L = sys.pes_per_group;
  l.cx = (l.W - 1) / 2;
  l.cy = (l.H - 1) / 2;
  const int per_sip = l.W * l.H * l.L;
  std::map<int, int> count;
  for (NodeId pe : p.pes) {
    if (m.rank_of(pe) < 0) throw UsageError("lrab: " + m.node(pe).name + " is not one of the machine's ranks");
    count[m.node(pe).sip]++;
  }
  for (const auto& [sip, c] : count) {
    if (c != per_sip)
      throw UsageError("lrab needs every PE of each SIP it uses: sip" + std::to_string(sip) + " has " +
                       std::to_string(c) + " of its " + std::to_string(per_sip) + " PEs among the ranks");
    l.sip_ids.push_back(sip);
  }
  if (l.sips() == sys.packages.count()) {
    l.grid_w = sys.packages.w;
    l.grid_h = sys.packages.h;
  } else {
    l.grid_w = l.sips();  // a subset of SIPs: taken as one row
  }
  std::map<int, int> pos;
  for (int i = 0; i < l.sips(); ++i) pos[l.sip_ids[static_cast<std::size_t>(i)]] = i;
  l.rank.assign(static_cast<std::size_t>(l.sips() * per_sip), -1);
  for (int r = 0; r < static_cast<int>(p.pes.size()); ++r) {
    const topology::NodeInfo& n = m.node(p.pes[static_cast<std::size_t>(r)]);
    const int x = n.cube % l.W, y = n.cube / l.W;
    l.rank[static_cast<std::size_t>(((pos[n.sip] * l.H + y) * l.W + x) * l.L + n.pe)] = r;
  }
  return l;
}

// Chains of cubes towards the centre, as (x, y) lists ending at the centre.
std::vector<std::vector<std::pair<int, int>>> inward_chains(const Layout& l) {
  std::vector<std::vector<std::pair<int, int>>> rows, cols;
  for (int y = 0; y < l.H; ++y) {
    std::vector<std::pair<int, int>> left, right;
    for (int x = 0; x <= l.cx; ++x) left.push_back({x, y});
    for (int x = l.W - 1; x >= l.cx; --x) right.push_back({x, y});
    if (left.size() > 1) rows.push_back(left);
    if (right.size() > 1) rows.push_back(right);
  }
  std::vector<std::pair<int, int>> up, down;
  for (int y = 0; y <= l.cy; ++y) up.push_back({l.cx, y});
  for (int y = l.H - 1; y >= l.cy; --y) down.push_back({l.cx, y});
  if (up.size() > 1) rows.push_back(up);  // columns after rows: they carry the rows' sums
  if (down.size() > 1) rows.push_back(down);
  return rows;
}

std::vector<int> to_ranks(const Layout& l, int sp, int j, const std::vector<std::pair<int, int>>& cubes) {
  std::vector<int> out;
  for (auto [x, y] : cubes) out.push_back(l.at(sp, x, y, j));
  return out;
}

void all_reduce(Schedule& s, const Plan& p) {
  const Layout l = layout(p);
  const Slices all = p.all();
  const auto chains = inward_chains(l);
  s.phase("intra-reduce");
  for (int sp = 0; sp < l.sips(); ++sp)
    for (int j = 0; j < l.L; ++j)
      for (const auto& c : chains) chain_reduce(s, to_ranks(l, sp, j, c), all, p.pieces);
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
        std::vector<int> out = to_ranks(l, sp, j, *it);
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
    const Layout l = layout(p);
    const int base = l.L * l.sips();
    return base * std::max(1, (p.pieces + base - 1) / base);
  };
  a.check = [](const Plan& p) {
    layout(p);
    if (p.inter != "ring" && p.inter != "torus" && p.inter != "mesh")
      throw UsageError("lrab: inter must be ring, torus or mesh, got '" + p.inter + "'");
  };
  a.all_reduce = all_reduce;
  return a;
}

}  // namespace kernbench::ccl
