// export.cpp -- a machine's nodes, links and relations as an explicit graph.
#include "topology/graph/export.hpp"

namespace kernbench::topology {

ExplicitGraphConfig explicit_graph(const Machine& m) {
  ExplicitGraphConfig g;
  for (NodeId id = 0; id < m.num_nodes(); ++id) {
    const NodeInfo& n = m.node(id);
    ExplicitNode x{n.name, n.kind, n.params, {}};
    // The machine's overhead already includes the router pipeline's time:
    // export the sum, or a rebuilt machine would pay the pipeline twice.
    x.params.pipeline = {};
    x.params.clock_hz = 0;
    if (n.kind == NodeKind::Pe)
      if (const auto mem = m.memory_of(id)) x.memory = m.node(*mem).name;
    g.nodes.push_back(std::move(x));
  }
  // Channels come in pairs (a -> b, then b -> a): one edge per pair.
  for (ChannelId c = 0; c < m.num_channels(); ++c) {
    const ChannelInfo& ch = m.channel(c);
    if (ch.reverse < c) continue;
    g.edges.push_back(ExplicitEdge{m.node(ch.from).name, m.node(ch.to).name, ch.link_class, ch.link});
  }
  for (NodeId pe : m.pes()) g.layout.ranks.push_back(m.node(pe).name);
  g.layout.grid = m.rank_grid();
  const PeHierarchy& h = m.hierarchy();
  if (h.declared && !m.pes().empty()) {
    g.layout.packages = h.packages;
    g.layout.package_topology = h.package_topology;
    g.layout.groups = h.groups;
    g.layout.pes_per_group = h.pes_per_group;
  }
  return g;
}

Config as_explicit(const Config& config) {
  Config out = config;
  out.graph = explicit_graph(Machine(config));
  out.system.reset();
  out.source = config.source + " (as an explicit graph)";
  return out;
}

}  // namespace kernbench::topology
