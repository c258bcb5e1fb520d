// routing_paths.cpp -- every shortest path of a (src, dst) pair, in the tie order.
//
// Dijkstra from src gives each node's distance (hop weights, machine.hpp);
// a channel u -> v is *tight* when dist[u] + weight == dist[v]; the shortest
// paths to dst are exactly the chains of tight channels from src to dst.
// A depth-first walk from src that tries a node's tight channels in the
// order (next node id, channel id) and only enters nodes that still reach
// dst by tight channels meets the paths in lexicographic order of their
// node-id sequences: stopping after `cap` keeps the first `cap` of that
// order, whatever order the edges were listed in.
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <algorithm>
#include <limits>

#include "sim/errors.hpp"
#include "topology/routing.hpp"

namespace kernbench::topology {

std::vector<Route> Router::equal_cost_paths(NodeId src, NodeId dst, std::size_t cap) const {
  std::vector<Route> out;
  Route base;
  base.src = src;
  base.dst = dst;
  base.nodes.push_back(src);
  if (src == dst || cap == 0) {
    out.push_back(base);
    return out;
  }
  const BoostGraph& g = m_.graph();
  const std::size_t n = boost::num_vertices(g);
  std::vector<Time> dist(n);
  boost::dijkstra_shortest_paths(
      g, src,
      boost::weight_map(boost::get(&EdgeProps::weight, g))
          .distance_map(boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, g))));
  constexpr Time kInf = std::numeric_limits<Time>::max();
  if (dist[dst] == kInf)
    throw TopologyError(m_.config().source + ": no path from " + m_.node(src).name + " to " + m_.node(dst).name);

  const auto weight = [&](const ChannelInfo& ch) { return hop_weight(ch.link, m_.node(ch.to).params); };
  const auto tight = [&](const ChannelInfo& ch) {
    return dist[ch.from] != kInf && dist[ch.to] != kInf && dist[ch.from] + weight(ch) == dist[ch.to];
  };
  // The nodes that reach dst along tight channels (walked back from dst).
  std::vector<std::vector<ChannelId>> tight_in(n);
  for (ChannelId c = 0; c < m_.num_channels(); ++c)
    if (tight(m_.channel(c))) tight_in[m_.channel(c).to].push_back(c);
  std::vector<bool> reaches(n, false);
  std::vector<NodeId> todo{dst};
  reaches[dst] = true;
  while (!todo.empty()) {
    const NodeId v = todo.back();
    todo.pop_back();
    for (ChannelId c : tight_in[v])
      if (const NodeId u = m_.channel(c).from; !reaches[u]) reaches[u] = true, todo.push_back(u);
  }
  // A node's tight channels into `reaches`, in the tie order (filled on first visit).
  std::vector<std::vector<ChannelId>> next(n);
  std::vector<bool> listed(n, false);
  const auto next_of = [&](NodeId u) -> const std::vector<ChannelId>& {
    if (!listed[u]) {
      listed[u] = true;
      for (ChannelId c : m_.out_channels(u))
        if (reaches[m_.channel(c).to] && tight(m_.channel(c))) next[u].push_back(c);
      std::sort(next[u].begin(), next[u].end(), [&](ChannelId a, ChannelId b) {
        const NodeId ta = m_.channel(a).to, tb = m_.channel(b).to;
        return ta != tb ? ta < tb : a < b;
      });
    }
    return next[u];
  };
  // Depth-first, iterative: pos[k] is the next candidate to try at the k-th
  // node of the current path; weights are >= 1 ps, so tight chains never loop.
  std::vector<ChannelId> chans;
  std::vector<std::size_t> pos{0};
  while (!pos.empty()) {
    const NodeId u = chans.empty() ? src : m_.channel(chans.back()).to;
    if (u == dst) {
      Route r = base;
      for (ChannelId c : chans) {
        r.channels.push_back(c);
        r.nodes.push_back(m_.channel(c).to);
      }
      out.push_back(std::move(r));
      if (out.size() == cap) break;
      pos.pop_back();
      chans.pop_back();
      continue;
    }
    const std::vector<ChannelId>& cand = next_of(u);
    if (std::size_t& i = pos.back(); i < cand.size()) {
      chans.push_back(cand[i++]);
      pos.push_back(0);
    } else {
      pos.pop_back();
      if (!chans.empty()) chans.pop_back();
    }
  }
  if (out.empty()) throw InternalError("routing: no shortest path found from " + m_.node(src).name + " to " +
                                       m_.node(dst).name + " although it is reachable");
  return out;
}

}  // namespace kernbench::topology
