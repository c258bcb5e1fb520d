// paths.cpp -- every shortest path of a (src, dst) pair, in the tie order.
//
// Dijkstra from src gives each node's distance (hop weights, machine.hpp);
// a channel u -> v is *tight* when dist[u] + weight == dist[v]; the shortest
// paths to dst are exactly the chains of tight channels from src to dst.
// A depth-first walk from src that tries a node's tight channels in the
// order (next node id, channel id) and only enters nodes that still reach
// dst by tight channels meets the paths in lexicographic order of their
// node-id sequences: stopping after `cap` keeps the first `cap` of that
// order, whatever order the edges were listed in.
//
// The search depends on src alone: it runs once per source and is shared by
// every destination (a barrier on a 100,000-PE star ran one per pair, for
// over 8 minutes). A source whose channels all lead to one node v (a leaf)
// has exactly v's paths behind its cheapest channels to v (a shortest path
// from v never comes back through the leaf), so every leaf of a star routes
// through the hub's one search. Per pair, only the tight channels that reach
// dst are walked (back from dst), not the whole graph.
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "sim/errors.hpp"
#include "topology/routing/routing.hpp"

namespace kernbench::topology {

namespace {
constexpr Time kInf = std::numeric_limits<Time>::max();
}  // namespace

std::shared_ptr<const Router::Search> Router::search_from(NodeId src) const {
  if (const auto it = searches_.find(src); it != searches_.end()) return it->second;
  const BoostGraph& g = m_.graph();
  const std::size_t n = boost::num_vertices(g);
  auto s = std::make_shared<Search>();
  s->dist.assign(n, kInf);
  boost::dijkstra_shortest_paths(
      g, src,
      boost::weight_map(boost::get(&EdgeProps::weight, g))
          .distance_map(boost::make_iterator_property_map(s->dist.begin(), boost::get(boost::vertex_index, g))));
  ++searches_run_;
  const auto tight = [&](const ChannelInfo& ch) {
    return s->dist[ch.from] != kInf && s->dist[ch.to] != kInf &&
           s->dist[ch.from] + hop_weight(ch.link, m_.node(ch.to).params) == s->dist[ch.to];
  };
  s->in_begin.assign(n + 1, 0);
  for (ChannelId c = 0; c < m_.num_channels(); ++c)
    if (tight(m_.channel(c))) ++s->in_begin[m_.channel(c).to + 1];
  for (std::size_t v = 0; v < n; ++v) s->in_begin[v + 1] += s->in_begin[v];
  s->in.resize(s->in_begin[n]);
  std::vector<std::uint32_t> fill(s->in_begin.begin(), s->in_begin.end() - 1);
  for (ChannelId c = 0; c < m_.num_channels(); ++c)
    if (tight(m_.channel(c))) s->in[fill[m_.channel(c).to]++] = c;
  // Keep it while the kept searches fit the budget (the newest always stays).
  const std::size_t bytes =
      s->dist.size() * sizeof(Time) + s->in_begin.size() * sizeof(std::uint32_t) + s->in.size() * sizeof(ChannelId);
  while (!search_order_.empty() && search_bytes_ + bytes > kSearchCacheBytes) {
    const auto old = searches_.find(search_order_.front());
    search_bytes_ -= old->second->dist.size() * sizeof(Time) + old->second->in_begin.size() * sizeof(std::uint32_t) +
                     old->second->in.size() * sizeof(ChannelId);
    searches_.erase(old);
    search_order_.pop_front();
  }
  searches_.emplace(src, s);
  search_order_.push_back(src);
  search_bytes_ += bytes;
  return s;
}

std::vector<Route> Router::equal_cost_paths(NodeId src, NodeId dst, std::size_t cap) const {
  if (src == dst || cap == 0) return search_paths(src, dst, cap);
  // A leaf: every channel out of src leads to the same node v.
  const std::vector<ChannelId>& out = m_.out_channels(src);
  if (out.empty()) return search_paths(src, dst, cap);
  const NodeId v = m_.channel(out.front()).to;
  for (ChannelId c : out)
    if (m_.channel(c).to != v) return search_paths(src, dst, cap);
  // Its cheapest channels to v, in channel order (the tie order at src).
  const auto weight = [&](ChannelId c) { return hop_weight(m_.channel(c).link, m_.node(v).params); };
  Time best = kInf;
  for (ChannelId c : out) best = std::min(best, weight(c));
  std::vector<ChannelId> first;
  for (ChannelId c : out)
    if (weight(c) == best) first.push_back(c);
  std::sort(first.begin(), first.end());
  std::vector<Route> rest;
  if (v == dst) {
    rest.resize(1);  // the empty path at v
  } else {
    const std::shared_ptr<const Search> s = search_from(v);
    if (s->dist[dst] == kInf)
      throw TopologyError(m_.config().source + ": no path from " + m_.node(src).name + " to " + m_.node(dst).name);
    rest = search_paths(v, dst, cap);
  }
  std::vector<Route> paths;
  for (ChannelId c : first)
    for (const Route& r : rest) {
      if (paths.size() == cap) return paths;
      Route p;
      p.src = src;
      p.dst = dst;
      p.nodes.push_back(src);
      p.channels.push_back(c);
      p.nodes.push_back(v);
      p.channels.insert(p.channels.end(), r.channels.begin(), r.channels.end());
      if (!r.nodes.empty()) p.nodes.insert(p.nodes.end(), r.nodes.begin() + 1, r.nodes.end());
      paths.push_back(std::move(p));
    }
  return paths;
}

std::vector<Route> Router::search_paths(NodeId src, NodeId dst, std::size_t cap) const {
  std::vector<Route> out;
  Route base;
  base.src = src;
  base.dst = dst;
  base.nodes.push_back(src);
  if (src == dst || cap == 0) {
    out.push_back(base);
    return out;
  }
  const std::shared_ptr<const Search> s = search_from(src);
  if (s->dist[dst] == kInf)
    throw TopologyError(m_.config().source + ": no path from " + m_.node(src).name + " to " + m_.node(dst).name);
  // The tight channels into nodes that reach dst along tight channels, walked back from dst: each is met
  // once, from its head, and becomes one of its tail's next steps.
  std::unordered_map<NodeId, std::vector<ChannelId>> next;
  std::unordered_set<NodeId> reaches{dst};
  std::vector<NodeId> todo{dst};
  while (!todo.empty()) {
    const NodeId v = todo.back();
    todo.pop_back();
    for (std::uint32_t i = s->in_begin[v]; i < s->in_begin[v + 1]; ++i) {
      const ChannelId c = s->in[i];
      const NodeId u = m_.channel(c).from;
      next[u].push_back(c);
      if (reaches.insert(u).second) todo.push_back(u);
    }
  }
  for (auto& [u, list] : next)
    std::sort(list.begin(), list.end(), [&](ChannelId a, ChannelId b) {
      const NodeId ta = m_.channel(a).to, tb = m_.channel(b).to;
      return ta != tb ? ta < tb : a < b;
    });
  const std::vector<ChannelId> none;
  const auto next_of = [&](NodeId u) -> const std::vector<ChannelId>& {
    const auto it = next.find(u);
    return it == next.end() ? none : it->second;
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
  if (out.empty())
    throw InternalError("routing: no shortest path found from " + m_.node(src).name + " to " + m_.node(dst).name +
                        " although it is reachable");
  return out;
}

}  // namespace kernbench::topology
