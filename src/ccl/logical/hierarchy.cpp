// hierarchy.cpp -- the group hierarchy of a set of ranks, and its chains of
// groups towards the centre (hierarchy.hpp).
#include "ccl/logical/hierarchy.hpp"

#include <map>

#include "sim/errors.hpp"

namespace kernbench::ccl {

Hierarchy hierarchy_of(const topology::Machine* machine, const std::vector<NodeId>& pes, const std::string& who) {
  if (!machine) throw InternalError(who + ": no machine");
  const topology::Machine& m = *machine;
  const topology::PeHierarchy& sys = m.hierarchy();
  if (!sys.declared)
    throw UsageError(who +
                     " needs a group hierarchy (it follows the cube grid) and the machine declares none: give "
                     "graph.layout.packages, graph.layout.groups and graph.layout.pes_per_group in the config");
  Hierarchy l;
  l.W = sys.groups.w;
  l.H = sys.groups.h;
  l.L = sys.pes_per_group;
  l.cx = (l.W - 1) / 2;
  l.cy = (l.H - 1) / 2;
  const int per_sip = l.W * l.H * l.L;
  std::map<int, int> count;
  for (NodeId pe : pes) {
    if (m.rank_of(pe) < 0) throw UsageError(who + ": " + m.node(pe).name + " is not one of the machine's ranks");
    count[m.node(pe).sip]++;
  }
  for (const auto& [sip, c] : count) {
    if (c != per_sip)
      throw UsageError(who + " needs every PE of each SIP it uses: sip" + std::to_string(sip) + " has " +
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
  for (int r = 0; r < static_cast<int>(pes.size()); ++r) {
    const topology::NodeInfo& n = m.node(pes[static_cast<std::size_t>(r)]);
    const int x = n.cube % l.W, y = n.cube / l.W;
    l.rank[static_cast<std::size_t>(((pos[n.sip] * l.H + y) * l.W + x) * l.L + n.pe)] = r;
  }
  return l;
}

std::vector<std::vector<std::pair<int, int>>> inward_chains(const Hierarchy& l) {
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

std::vector<int> chain_ranks(const Hierarchy& l, int sp, int j, const std::vector<std::pair<int, int>>& cubes) {
  std::vector<int> out;
  for (auto [x, y] : cubes) out.push_back(l.at(sp, x, y, j));
  return out;
}

}  // namespace kernbench::ccl
