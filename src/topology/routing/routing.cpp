// routing.cpp -- dimension-order meshes, Dijkstra elsewhere, cached.
#include "topology/routing/routing.hpp"

#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <algorithm>
#include <limits>
#include <map>

#include "sim/errors.hpp"

namespace kernbench::topology {

Router::Router(const Machine& machine) : m_(machine) {
  if (const auto& g = m_.config().graph)
    for (const PinnedRoute& p : g->routes) {  // checked at load: names exist, steps are edges
      std::vector<NodeId> path{m_.at(p.src)};
      for (const std::string& v : p.via) path.push_back(m_.at(v));
      path.push_back(m_.at(p.dst));
      pinned_[(static_cast<std::uint64_t>(path.front()) << 32) | path.back()] = std::move(path);
    }
  if (!m_.generated()) return;
  // The SIP grid as a graph of its PCIe links alone.
  const SystemConfig& s = m_.system();
  const int n = s.sips.count();
  sip_graph_ = BoostGraph(static_cast<std::size_t>(n));
  for (int a = 0; a < n; ++a)
    for (ChannelId c : m_.out_channels(m_.pcie_ep(a))) {
      const ChannelInfo& ch = m_.channel(c);
      const NodeInfo& to = m_.node(ch.to);
      if (to.kind != NodeKind::PcieEp) continue;
      boost::add_edge(static_cast<std::size_t>(a), static_cast<std::size_t>(to.sip),
                      EdgeProps{c, hop_weight(ch.link, to.params)}, sip_graph_);
    }
  // The links are symmetric: every SIP reaches every other one iff all reach
  // SIP 0 (checked now, so a broken grid fails at load, not mid-run).
  sip_next_to(0);
}

const std::vector<int>& Router::sip_next_to(int dst) {
  if (const auto it = sip_next_.find(dst); it != sip_next_.end()) return it->second;
  const std::size_t n = boost::num_vertices(sip_graph_);
  // Shortest paths *to* dst: run from dst on the (symmetric) SIP graph; the
  // predecessor of `a` on dst's tree is a's next hop towards dst.
  std::vector<std::size_t> pred(n);
  std::vector<Time> dist(n);
  boost::dijkstra_shortest_paths(
      sip_graph_, static_cast<std::size_t>(dst),
      boost::weight_map(boost::get(&EdgeProps::weight, sip_graph_))
          .predecessor_map(boost::make_iterator_property_map(pred.begin(), boost::get(boost::vertex_index, sip_graph_)))
          .distance_map(boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, sip_graph_))));
  std::vector<int> next(n, -1);
  for (std::size_t a = 0; a < n; ++a) {
    if (a != static_cast<std::size_t>(dst) && pred[a] == a)
      throw TopologyError(m_.config().source + ": SIP " + std::to_string(a) + " cannot reach SIP " +
                          std::to_string(dst) + " over PCIe");
    next[a] = static_cast<int>(pred[a]);
  }
  return sip_next_.emplace(dst, std::move(next)).first->second;
}

const std::vector<Route>& Router::paths(NodeId src, NodeId dst) {
  const std::uint64_t key = (static_cast<std::uint64_t>(src) << 32) | dst;
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  std::vector<Route> out;
  if (const auto pin = pinned_.find(key); pin != pinned_.end()) {
    Route r;
    r.src = src;
    r.dst = dst;
    r.nodes.push_back(src);
    for (std::size_t i = 1; i < pin->second.size(); ++i) append(r, pin->second[i - 1], pin->second[i]);
    out.push_back(std::move(r));
  } else if (src != dst && m_.generated() && hierarchical(src) && hierarchical(dst)) {
    Route r;
    r.src = src;
    r.dst = dst;
    r.nodes.push_back(src);
    const int ss = m_.node(src).sip, ds = m_.node(dst).sip;
    if (ss == ds) {
      intra_sip(r, src, dst);
    } else {
      intra_sip(r, src, m_.pcie_ep(ss));
      const std::vector<int>& towards = sip_next_to(ds);
      for (int at = ss; at != ds;) {
        const int next = towards[static_cast<std::size_t>(at)];
        append(r, m_.pcie_ep(at), m_.pcie_ep(next));
        at = next;
      }
      intra_sip(r, m_.pcie_ep(ds), dst);
    }
    out.push_back(std::move(r));
  } else {
    out = equal_cost_paths(src, dst, kMaxEqualCostPaths);
    // Between boxes keep the paths through the endpoints' own NICs (of a wider search, so that as many remain);
    // paths that cross no NIC (inside a box) need neither.
    const auto crosses_nic = [&](const Route& r) {
      return std::any_of(r.nodes.begin(), r.nodes.end(), [&](NodeId n) { return m_.node(n).kind == NodeKind::Nic; });
    };
    if (out.size() > 1 && !home_nics().empty() && crosses_nic(out.front())) {
      out = through_home_nics(equal_cost_paths(src, dst, 4 * kMaxEqualCostPaths));
      if (out.size() > kMaxEqualCostPaths) out.resize(kMaxEqualCostPaths);
    }
  }
  for (Route& r : out) finish(r);
  return cache_.emplace(key, std::move(out)).first->second;
}

const std::vector<NodeId>& Router::home_nics() const {
  if (homes_known_) return home_nics_;
  homes_known_ = true;
  bool any = false;
  for (NodeId n = 0; n < m_.num_nodes() && !any; ++n) any = m_.node(n).kind == NodeKind::Nic;
  if (!any) return home_nics_;
  home_nics_.assign(m_.num_nodes(), kNoNic);
  std::map<std::vector<NodeId>, std::vector<NodeId>> sharing;  // nearest NICs -> the PEs with them, by id
  std::vector<int> dist(m_.num_nodes(), -1);
  std::vector<NodeId> seen, frontier, next;
  for (NodeId pe = 0; pe < m_.num_nodes(); ++pe) {
    if (m_.node(pe).kind != NodeKind::Pe) continue;
    // Breadth first, level by level, never through another PE or a NIC, until a level holds NICs.
    std::vector<NodeId> nics;
    for (NodeId v : seen) dist[v] = -1;
    seen.assign(1, pe);
    frontier.assign(1, pe);
    dist[pe] = 0;
    while (!frontier.empty() && nics.empty()) {
      next.clear();
      for (NodeId u : frontier) {
        if (u != pe && (m_.node(u).kind == NodeKind::Pe || m_.node(u).kind == NodeKind::Nic)) continue;
        for (ChannelId c : m_.out_channels(u)) {
          const NodeId v = m_.channel(c).to;
          if (dist[v] >= 0) continue;
          dist[v] = dist[u] + 1;
          seen.push_back(v);
          next.push_back(v);
          if (m_.node(v).kind == NodeKind::Nic) nics.push_back(v);
        }
      }
      frontier.swap(next);
    }
    if (nics.empty()) continue;
    std::sort(nics.begin(), nics.end());
    sharing[nics].push_back(pe);
  }
  for (const auto& [nics, pes] : sharing)
    for (std::size_t k = 0; k < pes.size(); ++k) home_nics_[pes[k]] = nics[k % nics.size()];
  return home_nics_;
}

std::vector<Route> Router::through_home_nics(std::vector<Route> paths) const {
  const std::vector<NodeId>& home = home_nics();
  const auto ok = [&](const Route& r) {
    const std::vector<NodeId>& n = r.nodes;
    std::size_t first = n.size(), last = n.size();
    for (std::size_t i = 0; i < n.size(); ++i)
      if (m_.node(n[i]).kind == NodeKind::Nic) {
        if (first == n.size()) first = i;
        last = i;
      }
    if (first == n.size()) return true;
    for (std::size_t i = first; i-- > 0;)  // the source side's PE nearest the NIC
      if (m_.node(n[i]).kind == NodeKind::Pe) {
        if (home[n[i]] != kNoNic && home[n[i]] != n[first]) return false;
        break;
      }
    for (std::size_t i = last + 1; i < n.size(); ++i)  // the destination side's
      if (m_.node(n[i]).kind == NodeKind::Pe) return home[n[i]] == kNoNic || home[n[i]] == n[last];
    return true;
  };
  std::vector<Route> kept;
  for (Route& r : paths)
    if (ok(r)) kept.push_back(std::move(r));
  return kept.empty() ? paths : kept;
}

bool Router::hierarchical(NodeId n) const {
  const NodeKind k = m_.node(n).kind;
  return k == NodeKind::Pe || k == NodeKind::HbmCtrl || k == NodeKind::Router || k == NodeKind::PcieEp;
}

NodeId Router::attach_router(NodeId n) const {
  const NodeInfo& info = m_.node(n);
  switch (info.kind) {
    case NodeKind::Router: return n;
    case NodeKind::Pe:
    case NodeKind::HbmCtrl: return m_.router(info.sip, info.cube, info.row, info.col);
    case NodeKind::PcieEp: {
      const PcieAttach& a = m_.system().pcie_attach;
      return m_.router(info.sip, a.cube, a.row, a.col);
    }
    default: throw InternalError("attach_router: " + info.name + " has no attach router");
  }
}

void Router::append(Route& r, NodeId from, NodeId to) const {
  const auto c = m_.channel_between(from, to);
  if (!c) throw InternalError("routing: no channel " + m_.node(from).name + " -> " + m_.node(to).name);
  r.channels.push_back(*c);
  r.nodes.push_back(to);
}

void Router::mesh_path(Route& r, int sip, int cube, int r0, int c0, int r1, int c1) const {
  while (c0 != c1) {  // X first
    const int c = c0 + (c1 > c0 ? 1 : -1);
    append(r, m_.router(sip, cube, r0, c0), m_.router(sip, cube, r0, c));
    c0 = c;
  }
  while (r0 != r1) {  // then Y
    const int rr = r0 + (r1 > r0 ? 1 : -1);
    append(r, m_.router(sip, cube, r0, c0), m_.router(sip, cube, rr, c0));
    r0 = rr;
  }
}

void Router::intra_sip(Route& r, NodeId src, NodeId dst) const {
  const SystemConfig& s = m_.system();
  const NodeId ra = attach_router(src), rb = attach_router(dst);
  if (src != ra) append(r, src, ra);
  const NodeInfo& a = m_.node(ra);
  const NodeInfo& b = m_.node(rb);
  const int sip = a.sip;
  int cube = a.cube, row = a.row, col = a.col;
  int cx = cube % s.cubes.w, cy = cube / s.cubes.w;
  const int bx = b.cube % s.cubes.w, by = b.cube / s.cubes.w;
  const int last_col = s.routers.w - 1, last_row = s.routers.h - 1;
  // Across the cube grid, X then Y; each crossing leaves through the side's
  // router in the current row (E/W) or column (N/S).
  auto cross = [&](Side out, Side in, int next_cube, int exit_r, int exit_c, int entry_r, int entry_c) {
    mesh_path(r, sip, cube, row, col, exit_r, exit_c);
    const NodeId out_ucie = *m_.ucie(sip, cube, out);
    const NodeId in_ucie = *m_.ucie(sip, next_cube, in);
    append(r, m_.router(sip, cube, exit_r, exit_c), out_ucie);
    append(r, out_ucie, in_ucie);
    append(r, in_ucie, m_.router(sip, next_cube, entry_r, entry_c));
    cube = next_cube;
    row = entry_r;
    col = entry_c;
  };
  while (cx != bx) {
    if (bx > cx) {
      cross(Side::East, Side::West, cube + 1, row, last_col, row, 0);
      ++cx;
    } else {
      cross(Side::West, Side::East, cube - 1, row, 0, row, last_col);
      --cx;
    }
  }
  while (cy != by) {
    if (by > cy) {
      cross(Side::South, Side::North, cube + s.cubes.w, last_row, col, 0, col);
      ++cy;
    } else {
      cross(Side::North, Side::South, cube - s.cubes.w, 0, col, last_row, col);
      --cy;
    }
  }
  mesh_path(r, sip, cube, row, col, b.row, b.col);
  if (dst != rb) append(r, rb, dst);
}

namespace {
// Sums of per-hop latencies and overheads saturate instead of wrapping: a
// route whose total is past the time range is refused, with the per-hop
// figures, by the fabric's check_transfer_time before it is ever used.
Time saturating_add(Time a, Time b) {
  Time out = 0;
  return __builtin_add_overflow(a, b, &out) ? std::numeric_limits<Time>::max() : out;
}
}  // namespace

std::int64_t path_rate(const Route& route) {
  std::int64_t rate = 0;
  for (const Hop& h : route.hop) {
    const __int128 r = static_cast<__int128>(h.bandwidth.bytes_per_s) * std::max(h.connections, 1);
    const std::int64_t hop_rate = static_cast<std::int64_t>(std::min<__int128>(r, INT64_MAX));
    rate = rate == 0 ? hop_rate : std::min(rate, hop_rate);
  }
  return rate;
}

void Router::finish(Route& r) const {
  r.wire_latency = 0;
  r.node_overhead = 0;
  r.bottleneck = Bandwidth{std::numeric_limits<std::int64_t>::max()};
  for (NodeId n : r.nodes) r.node_overhead = saturating_add(r.node_overhead, m_.node(n).params.overhead);
  r.hop.clear();
  for (std::size_t h = 0; h < r.channels.size(); ++h) {
    const ChannelId c = r.channels[h];
    const ChannelInfo& ch = m_.channel(c);
    const NodeParams& next = m_.node(r.nodes[h + 1]).params;
    r.hop.push_back(
        Hop{c, ch.first_lane, ch.link.connections, ch.link.bandwidth, ch.link.latency, next.overhead, next.flit_aware});
    r.wire_latency = saturating_add(r.wire_latency, ch.link.latency);
    r.bottleneck.bytes_per_s = std::min(r.bottleneck.bytes_per_s, ch.link.bandwidth.bytes_per_s);
  }
  if (r.channels.empty()) r.bottleneck = Bandwidth{};
}

}  // namespace kernbench::topology
