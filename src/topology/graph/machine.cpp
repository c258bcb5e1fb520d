// machine.cpp -- the two graph builders: SIP/CUBE/PE generator and explicit lists.
#include "topology/graph/machine.hpp"

#include <algorithm>

#include "sim/errors.hpp"

namespace kernbench::topology {
namespace {

std::string router_name(int row, int col) {
  std::string out = "r";
  out += std::to_string(row);
  out += 'c';
  out += std::to_string(col);
  return out;
}

const char* side_suffix(Side s) {
  switch (s) {
    case Side::North: return "ucie_n";
    case Side::East: return "ucie_e";
    case Side::South: return "ucie_s";
    case Side::West: return "ucie_w";
  }
  return "?";
}

}  // namespace

Time hop_weight(const LinkParams& link, const NodeParams& to) {
  // Clamped, so that no sum of weights along a path of a machine (at most
  // 2^21 nodes) overflows inside Dijkstra: a hop this slow is refused by the
  // fabric's time check anyway, whichever path it ends up on.
  const auto part = [](Time t) { return std::clamp<Time>(t, 0, kMaxHopWeight); };
  return std::min(part(link.latency) + part(to.overhead) + 1, kMaxHopWeight) + (to.transit ? 0 : kMaxHopWeight);
}

LaneCount count_lanes(const Config& config) {
  LaneCount n;
  // Both directions of `links` links of `connections` lanes each; counts stay
  // far below 2^40 (nodes are capped) and connections below 2^31.
  const auto add = [&](std::int64_t links, int connections, std::string key) {
    const std::int64_t lanes = 2 * links * std::max(connections, 0);
    n.lanes = n.lanes > kMaxLanes ? n.lanes : n.lanes + lanes;
    if (lanes > n.key_lanes) n.key = std::move(key), n.key_lanes = lanes, n.key_connections = connections;
  };
  if (config.system) {
    const SystemConfig& s = *config.system;
    const std::int64_t sips = static_cast<std::int64_t>(s.sips.w) * s.sips.h;
    const std::int64_t cw = s.cubes.w, ch = s.cubes.h, cubes = sips * cw * ch;
    const std::int64_t rw = s.routers.w, rh = s.routers.h;
    const SystemConfig::Links& l = s.links;
    add(cubes * ((rw - 1) * rh + rw * (rh - 1)), l.noc.connections, "links.noc.connections");
    add(cubes * s.pes_per_cube, l.pe.connections, "links.pe.connections");
    add(cubes * s.pes_per_cube, l.hbm.connections, "links.hbm.connections");
    add(sips * (2 * cw * (ch - 1) * rw + 2 * (cw - 1) * ch * rh), l.ucie_port.connections,
        "links.ucie_port.connections");
    add(sips * (cw * (ch - 1) + (cw - 1) * ch), l.ucie.connections, "links.ucie.connections");
    add(sips, l.pcie_port.connections, "links.pcie_port.connections");
    // The SIP grid, as build_system links it (no duplicate of a 2-long ring or torus dimension).
    const std::int64_t W = s.sips.w, H = s.sips.h;
    const auto around = [](std::int64_t k) { return k > 2 ? k : k - 1; };
    const std::int64_t pcie = s.sip_topology == SipTopology::Ring    ? around(sips)
                              : s.sip_topology == SipTopology::Torus ? H * around(W) + W * around(H)
                                                                     : H * (W - 1) + W * (H - 1);
    add(pcie, l.pcie.connections, "links.pcie.connections");
  } else if (config.graph) {
    const std::vector<ExplicitEdge>& edges = config.graph->edges;
    for (std::size_t i = 0; i < edges.size(); ++i)
      add(1, edges[i].link.connections, "graph.edges[" + std::to_string(i) + "].connections");
  }
  return n;
}

std::string lanes_over_limit(const LaneCount& n) {
  if (n.lanes <= kMaxLanes) return "";
  return "the machine is too large: more than " + std::to_string(kMaxLanes) +
         " lanes (links x connections, both directions; the limit); " + n.key + " = " +
         std::to_string(n.key_connections) + " alone brings " + std::to_string(n.key_lanes);
}

Machine::Machine(const Config& config) : config_(config) {
  // Checked before anything is built, for configs that did not come through the loader.
  if (std::string over = lanes_over_limit(count_lanes(config)); !over.empty())
    throw CapacityError(config.source + ": " + over);
  if (config.system && config.graph)
    throw TopologyError(config.source + ": a config describes either a system or an explicit graph, not both");
  if (config.system) {
    build_system(*config.system);
  } else if (config.graph) {
    build_explicit(*config.graph);
  } else {
    throw TopologyError(config.source + ": no machine: expected a `system:` or a `graph:` section");
  }
  set_relations();
}

// Ranks, coordinates and memories from the hierarchy, for every builder.
void Machine::set_relations() {
  if (config_.system) {
    const SystemConfig& s = *config_.system;
    hierarchy_ = PeHierarchy{s.sips, s.sip_topology, s.cubes, s.pes_per_cube, true};
  } else {
    const LayoutConfig& l = config_.graph->layout;
    // The loader checks these; a Config built in code is checked here, in 64 and 128 bits (no product wraps).
    const auto pes = static_cast<std::int64_t>(pe_ids_.size());
    if (l.grid && l.grid->count() != pes)
      throw TopologyError(config_.source + ": graph.layout.grid " + std::to_string(l.grid->w) + "x" +
                          std::to_string(l.grid->h) + " has " + std::to_string(l.grid->count()) +
                          " cells, but the layout has " + std::to_string(pes) + " ranks");
    if (l.packages && (!l.groups || static_cast<__int128>(l.packages->count()) * l.groups->count() * l.pes_per_group !=
                                        static_cast<__int128>(pes)))
      throw TopologyError(config_.source + ": graph.layout packages x groups x pes_per_group is not the " +
                          std::to_string(pes) + " ranks");
    if (l.packages) {
      hierarchy_ = PeHierarchy{*l.packages, l.package_topology, *l.groups, l.pes_per_group, true};
    } else {
      hierarchy_ = PeHierarchy{{1, 1}, SipTopology::Ring, {1, 1}, static_cast<int>(pe_ids_.size()), false};
    }
    rank_grid_ = l.grid;
    const int per_pkg = std::max(1, hierarchy_.pes_per_package());
    const int per_grp = std::max(1, hierarchy_.pes_per_group);
    for (std::size_t r = 0; r < pe_ids_.size(); ++r) {
      const int ri = static_cast<int>(r);
      for (NodeId id : {pe_ids_[r], hbm_ids_[r]}) {
        if (id == kNoNode) continue;
        NodeInfo& n = nodes_[id];
        n.sip = ri / per_pkg;
        n.cube = (ri / per_grp) % hierarchy_.groups.count();
        n.pe = ri % per_grp;
      }
    }
  }
  for (std::size_t r = 0; r < pe_ids_.size(); ++r) rank_.emplace(pe_ids_[r], static_cast<int>(r));
}

NodeId Machine::add_node(NodeInfo info) {
  const auto id = static_cast<NodeId>(nodes_.size());
  // The router pipeline is paid like the overhead, by every chunk passing:
  // fold it in once here, so routing weights and fabrics see one delay.
  info.params.overhead += pipeline_time(info.params);
  if (!by_name_.emplace(info.name, id).second)
    throw TopologyError(config_.source + ": duplicate node name '" + info.name + "'");
  nodes_.push_back(std::move(info));
  out_.emplace_back();
  boost::add_vertex(graph_);
  return id;
}

void Machine::add_link(NodeId a, NodeId b, const LinkParams& link, const std::string& link_class) {
  if (link.bandwidth.bytes_per_s <= 0)
    throw TopologyError(config_.source + ": link " + nodes_[a].name + " <-> " + nodes_[b].name +
                        ": bandwidth must be positive");
  if (link.connections < 1 || link.connections > kMaxConnections)
    throw TopologyError(config_.source + ": link " + nodes_[a].name + " <-> " + nodes_[b].name +
                        ": connections must be 1 to " + std::to_string(kMaxConnections) + ", got " +
                        std::to_string(link.connections));
  const auto ab = static_cast<ChannelId>(channels_.size());
  const ChannelId ba = ab + 1;
  for (const auto& [from, to, rev] : {std::tuple{a, b, ba}, std::tuple{b, a, ab}}) {
    ChannelInfo ch{from, to, link, link_class, rev, static_cast<LaneId>(lane_channel_.size())};
    const auto id = static_cast<ChannelId>(channels_.size());
    for (int k = 0; k < link.connections; ++k) lane_channel_.push_back(id);
    channels_.push_back(ch);
    out_[from].push_back(id);
    by_ends_.emplace((static_cast<std::uint64_t>(from) << 32) | to, id);
    boost::add_edge(from, to, EdgeProps{id, hop_weight(link, nodes_[to].params)}, graph_);
  }
}

void Machine::build_system(const SystemConfig& s) {
  const auto bad = [&](const std::string& what) { return TopologyError(config_.source + ": system: " + what); };
  if (s.sips.w < 1 || s.sips.h < 1) throw bad("sips.w and sips.h must be >= 1");
  if (s.cubes.w < 1 || s.cubes.h < 1) throw bad("cubes.w and cubes.h must be >= 1");
  if (s.routers.w < 1 || s.routers.h < 1) throw bad("routers.w and routers.h must be >= 1");
  if (s.pes_per_cube < 1) throw bad("pes_per_cube must be >= 1");
  if (s.pcie_attach.cube < 0 || s.pcie_attach.cube >= s.cubes.count())
    throw bad("pcie_attach.cube " + std::to_string(s.pcie_attach.cube) + " is outside the " +
              std::to_string(s.cubes.count()) + "-cube grid");
  if (s.pcie_attach.row < 0 || s.pcie_attach.row >= s.routers.h || s.pcie_attach.col < 0 ||
      s.pcie_attach.col >= s.routers.w)
    throw bad("pcie_attach.router " + router_name(s.pcie_attach.row, s.pcie_attach.col) + " is outside the " +
              std::to_string(s.routers.h) + "x" + std::to_string(s.routers.w) + " router mesh");

  const int n_sips = s.sips.count();
  const int n_cubes = s.cubes.count();
  const int rw = s.routers.w, rh = s.routers.h;
  pe_ids_.reserve(static_cast<std::size_t>(n_sips * n_cubes * s.pes_per_cube));

  for (int sip = 0; sip < n_sips; ++sip) {
    const std::string sip_name = "sip" + std::to_string(sip);
    for (int cube = 0; cube < n_cubes; ++cube) {
      const std::string prefix = sip_name + ".cube" + std::to_string(cube) + ".";
      // Router mesh.
      for (int r = 0; r < rh; ++r)
        for (int c = 0; c < rw; ++c) {
          NodeInfo n{prefix + router_name(r, c), NodeKind::Router, s.nodes.router, sip, cube, r, c};
          router_ids_.push_back(add_node(std::move(n)));
        }
      auto rid = [&](int r, int c) {
        return router_ids_[static_cast<std::size_t>((sip * n_cubes + cube) * rw * rh + r * rw + c)];
      };
      for (int r = 0; r < rh; ++r)
        for (int c = 0; c < rw; ++c) {
          if (c + 1 < rw) add_link(rid(r, c), rid(r, c + 1), s.links.noc, "noc");
          if (r + 1 < rh) add_link(rid(r, c), rid(r + 1, c), s.links.noc, "noc");
        }
      // PEs and their HBM controller slices, on router i mod (w*h).
      for (int p = 0; p < s.pes_per_cube; ++p) {
        const int idx = p % (rw * rh);
        const int r = idx / rw, c = idx % rw;
        NodeInfo pe{prefix + "pe" + std::to_string(p), NodeKind::Pe, s.nodes.pe, sip, cube, r, c, p};
        NodeInfo hbm{
            prefix + "hbm_ctrl.pe" + std::to_string(p), NodeKind::HbmCtrl, s.nodes.hbm_ctrl, sip, cube, r, c, p};
        const NodeId pe_id = add_node(std::move(pe));
        const NodeId hbm_id = add_node(std::move(hbm));
        pe_ids_.push_back(pe_id);
        hbm_ids_.push_back(hbm_id);
        add_link(pe_id, rid(r, c), s.links.pe, "pe");
        add_link(rid(r, c), hbm_id, s.links.hbm, "hbm");
      }
      // UCIe adapters on the sides that face another cube.
      const int cx = cube % s.cubes.w, cy = cube / s.cubes.w;
      for (int sd = 0; sd < 4; ++sd) {
        const auto side = static_cast<Side>(sd);
        const bool faces = (side == Side::North && cy > 0) || (side == Side::South && cy + 1 < s.cubes.h) ||
                           (side == Side::West && cx > 0) || (side == Side::East && cx + 1 < s.cubes.w);
        if (!faces) {
          ucie_ids_.push_back(std::nullopt);
          continue;
        }
        NodeInfo u{prefix + side_suffix(side), NodeKind::Ucie, s.nodes.ucie, sip, cube};
        u.side = sd;
        const NodeId uid = add_node(std::move(u));
        ucie_ids_.push_back(uid);
        // Every router on that side reaches the adapter: traffic spreads over
        // the side instead of funnelling through one entry router.
        if (side == Side::North || side == Side::South) {
          const int r = side == Side::North ? 0 : rh - 1;
          for (int c = 0; c < rw; ++c) add_link(rid(r, c), uid, s.links.ucie_port, "ucie_port");
        } else {
          const int c = side == Side::West ? 0 : rw - 1;
          for (int r = 0; r < rh; ++r) add_link(rid(r, c), uid, s.links.ucie_port, "ucie_port");
        }
      }
    }
    // Cube-to-cube UCIe links (east and south neighbours; the reverse
    // direction is the link's other channel).
    for (int cube = 0; cube < n_cubes; ++cube) {
      const int cx = cube % s.cubes.w, cy = cube / s.cubes.w;
      if (cx + 1 < s.cubes.w)
        add_link(*ucie(sip, cube, Side::East), *ucie(sip, cube + 1, Side::West), s.links.ucie, "ucie");
      if (cy + 1 < s.cubes.h)
        add_link(*ucie(sip, cube, Side::South), *ucie(sip, cube + s.cubes.w, Side::North), s.links.ucie, "ucie");
    }
    // The SIP's PCIe endpoint.
    NodeInfo ep{sip_name + ".pcie_ep", NodeKind::PcieEp, s.nodes.pcie_ep, sip};
    const NodeId ep_id = add_node(std::move(ep));
    pcie_ids_.push_back(ep_id);
    add_link(router(sip, s.pcie_attach.cube, s.pcie_attach.row, s.pcie_attach.col), ep_id, s.links.pcie_port,
             "pcie_port");
  }

  // SIP grid: ring (row-major order), torus or mesh over the PCIe endpoints.
  // Links that would duplicate an existing one (a 2-long ring or torus
  // dimension) are not added twice.
  auto link_sips = [&](int a, int b) {
    if (a == b) return;
    if (channel_between(pcie_ids_[static_cast<std::size_t>(a)], pcie_ids_[static_cast<std::size_t>(b)])) return;
    add_link(pcie_ids_[static_cast<std::size_t>(a)], pcie_ids_[static_cast<std::size_t>(b)], s.links.pcie, "pcie");
  };
  const int W = s.sips.w, H = s.sips.h;
  if (s.sip_topology == SipTopology::Ring) {
    for (int i = 0; i + 1 < n_sips; ++i) link_sips(i, i + 1);
    if (n_sips > 2) link_sips(n_sips - 1, 0);
  } else {
    const bool wrap = s.sip_topology == SipTopology::Torus;
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        const int i = y * W + x;
        if (x + 1 < W)
          link_sips(i, i + 1);
        else if (wrap && W > 2)
          link_sips(i, y * W);
        if (y + 1 < H)
          link_sips(i, i + W);
        else if (wrap && H > 2)
          link_sips(i, x);
      }
  }
}

void Machine::build_explicit(const ExplicitGraphConfig& g) {
  for (const ExplicitNode& n : g.nodes) add_node(NodeInfo{n.name, n.kind, n.params});
  for (const ExplicitEdge& e : g.edges) add_link(at(e.a), at(e.b), e.link, e.link_class);
  // The ranks: graph.layout.ranks, or every pe node in the order listed.
  if (!g.layout.ranks.empty()) {
    for (const std::string& name : g.layout.ranks) pe_ids_.push_back(at(name));
  } else {
    for (NodeId id = 0; id < nodes_.size(); ++id)
      if (nodes_[id].kind == NodeKind::Pe) pe_ids_.push_back(id);
  }
  std::unordered_map<std::string, const ExplicitNode*> decl;
  for (const ExplicitNode& n : g.nodes) decl.emplace(n.name, &n);
  for (NodeId pe : pe_ids_) {
    const std::string& mem = decl.at(nodes_[pe].name)->memory;
    hbm_ids_.push_back(mem.empty() ? kNoNode : at(mem));
  }
}

std::optional<NodeId> Machine::memory_of(NodeId pe) const {
  const int r = rank_of(pe);
  if (r < 0 || hbm_ids_[static_cast<std::size_t>(r)] == kNoNode) return std::nullopt;
  return hbm_ids_[static_cast<std::size_t>(r)];
}

NodeId Machine::memory(NodeId pe, const std::string& what) const {
  if (auto m = memory_of(pe)) return *m;
  const std::string name = pe < nodes_.size() ? nodes_[pe].name : "node " + std::to_string(pe);
  if (rank_of(pe) < 0) throw TopologyError(what + ": " + name + " is not one of the machine's PEs");
  throw TopologyError(what + ": " + name +
                      " has no memory of its own: declare it in the config with `memory: NODE` "
                      "on its graph.nodes entry (a hbm_ctrl or memory node)");
}

int Machine::rank_of(NodeId pe) const {
  const auto it = rank_.find(pe);
  return it == rank_.end() ? -1 : it->second;
}

const SystemConfig& Machine::system() const {
  if (!config_.system) throw TopologyError(config_.source + ": not a generated (system:) machine");
  return *config_.system;
}

std::optional<NodeId> Machine::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

NodeId Machine::at(std::string_view name) const {
  if (auto id = find(name)) return *id;
  // Name a few nodes of the same shape to help the user.
  std::string hint;
  int shown = 0;
  const auto dot = name.rfind('.');
  const std::string tail(dot == std::string_view::npos ? name : name.substr(dot + 1));
  for (const NodeInfo& n : nodes_) {
    if (shown == 3) break;
    if (!tail.empty() && n.name.size() >= tail.size() &&
        n.name.compare(n.name.size() - tail.size(), tail.size(), tail) == 0) {
      hint += (shown++ ? ", " : "") + n.name;
    }
  }
  if (hint.empty() && !nodes_.empty()) hint = nodes_.front().name + ", ...";
  throw TopologyError(config_.source + ": unknown node '" + std::string(name) + "' (e.g. " + hint + ")");
}

std::optional<ChannelId> Machine::channel_between(NodeId a, NodeId b) const {
  const auto it = by_ends_.find((static_cast<std::uint64_t>(a) << 32) | b);
  if (it == by_ends_.end()) return std::nullopt;
  return it->second;
}

std::string Machine::lane_name(LaneId lane) const {
  const ChannelId c = lane_channel_.at(lane);
  const ChannelInfo& ch = channels_[c];
  const int k = static_cast<int>(lane - ch.first_lane);
  // A node with one multi-lane channel out names its lanes after itself.
  int multi = 0;
  for (ChannelId o : out_[ch.from]) multi += channels_[o].link.connections > 1 ? 1 : 0;
  if (ch.link.connections > 1 && multi == 1) return nodes_[ch.from].name + ".conn" + std::to_string(k);
  return nodes_[ch.from].name + "->" + nodes_[ch.to].name + ".conn" + std::to_string(k);
}

NodeId Machine::pe(int sip, int cube, int p) const {
  const PeHierarchy& h = hierarchy_;
  if (sip < 0 || sip >= h.packages.count() || cube < 0 || cube >= h.groups.count() || p < 0 || p >= h.pes_per_group)
    throw TopologyError("no PE sip" + std::to_string(sip) + ".cube" + std::to_string(cube) + ".pe" + std::to_string(p) +
                        " in this machine");
  return pe_ids_[static_cast<std::size_t>((sip * h.groups.count() + cube) * h.pes_per_group + p)];
}

NodeId Machine::hbm_ctrl(int sip, int cube, int p) const {
  return memory(pe(sip, cube, p), "the HBM slice of sip" + std::to_string(sip) + ".cube" + std::to_string(cube) +
                                      ".pe" + std::to_string(p));
}

NodeId Machine::router(int sip, int cube, int row, int col) const {
  const SystemConfig& s = system();
  if (sip < 0 || sip >= s.sips.count() || cube < 0 || cube >= s.cubes.count() || row < 0 || row >= s.routers.h ||
      col < 0 || col >= s.routers.w)
    throw TopologyError("no router sip" + std::to_string(sip) + ".cube" + std::to_string(cube) + "." +
                        router_name(row, col) + " in this machine");
  return router_ids_[static_cast<std::size_t>((sip * s.cubes.count() + cube) * s.routers.count() + row * s.routers.w +
                                              col)];
}

NodeId Machine::pcie_ep(int sip) const {
  if (sip < 0 || sip >= static_cast<int>(pcie_ids_.size()))
    throw TopologyError("no SIP " + std::to_string(sip) + " in this machine");
  return pcie_ids_[static_cast<std::size_t>(sip)];
}

std::optional<NodeId> Machine::ucie(int sip, int cube, Side side) const {
  const SystemConfig& s = system();
  return ucie_ids_.at(static_cast<std::size_t>((sip * s.cubes.count() + cube) * 4 + static_cast<int>(side)));
}

}  // namespace kernbench::topology
