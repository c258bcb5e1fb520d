// sharp.cpp -- the network's reducing switches and a group's aggregation tree (sharp.hpp).
#include "ccl/logical/sharp.hpp"

#include <algorithm>
#include <deque>

#include "sim/errors.hpp"

namespace kernbench::ccl {

std::vector<NodeId> network_reducers(const topology::Machine& m, const std::vector<NodeId>& pes) {
  using topology::NodeKind;
  // The boxes' nodes: what the ranks reach without crossing a NIC.
  std::vector<char> boxed(m.num_nodes(), 0);
  std::vector<NodeId> stack(pes.begin(), pes.end());
  for (NodeId p : pes) boxed[p] = 1;
  while (!stack.empty()) {
    const NodeId u = stack.back();
    stack.pop_back();
    for (topology::ChannelId c : m.out_channels(u)) {
      const NodeId v = m.channel(c).to;
      if (boxed[v] || m.node(v).kind == NodeKind::Nic) continue;
      boxed[v] = 1;
      stack.push_back(v);
    }
  }
  std::vector<NodeId> out;
  for (NodeId s = 0; s < m.num_nodes(); ++s) {
    const topology::NodeInfo& n = m.node(s);
    if (!boxed[s] && n.kind == NodeKind::Switch && n.params.reduction.bytes_per_s > 0) out.push_back(s);
  }
  return out;
}

SharpNet sharp_net(const topology::Machine& m, const std::vector<NodeId>& pes) {
  using topology::NodeKind;
  SharpNet net;
  std::vector<int> dist(m.num_nodes());
  std::deque<NodeId> queue;
  for (NodeId s : network_reducers(m, pes)) {
    // Hops to every node, never forwarding through a PE (a GPU does not route between its ports).
    std::fill(dist.begin(), dist.end(), -1);
    dist[s] = 0;
    queue.assign(1, s);
    while (!queue.empty()) {
      const NodeId u = queue.front();
      queue.pop_front();
      if (u != s && m.node(u).kind == NodeKind::Pe) continue;
      for (topology::ChannelId c : m.out_channels(u)) {
        const NodeId v = m.channel(c).to;
        if (dist[v] >= 0) continue;
        dist[v] = dist[u] + 1;
        queue.push_back(v);
      }
    }
    net.switches.push_back(s);
    std::vector<int>& h = net.hops.emplace_back(pes.size(), -1);
    for (std::size_t r = 0; r < pes.size(); ++r) h[r] = dist[pes[r]];
  }
  return net;
}

std::vector<NodeId> require_network_reducers(const topology::Machine& m, const std::vector<NodeId>& pes,
                                             const std::string& who) {
  std::vector<NodeId> out = network_reducers(m, pes);
  if (out.empty())
    throw UsageError("collective: " + who +
                     " reduces across boxes in the network (IB SHARP) and no switch outside the boxes declares a "
                     "reduction: set cluster.fabric.reduction (a cluster: config), or reduction: {bandwidth: ...} on "
                     "the scale-out switches of the graph; or use nvls_tree (NVLS in each box, NCCL's tree across "
                     "them)");
  return out;
}

SharpNet require_sharp_net(const topology::Machine& m, const std::vector<NodeId>& pes, const std::string& who) {
  require_network_reducers(m, pes, who);
  return sharp_net(m, pes);
}

SharpTree sharp_tree(SharpNet& net, const std::vector<int>& ranks, const std::string& who) {
  net.used.resize(net.switches.size(), 0);
  // The root: the switch whose farthest rank is nearest (ties: the one fewer trees use, then the lowest node id).
  int best = -1, best_far = 0;
  for (std::size_t k = 0; k < net.switches.size(); ++k) {
    int far = 0;
    for (int r : ranks) {
      const int h = net.hops[k][static_cast<std::size_t>(r)];
      far = h < 0 ? -1 : std::max(far, h);
      if (far < 0) break;
    }
    if (far >= 0 &&
        (best < 0 || far < best_far || (far == best_far && net.used[k] < net.used[static_cast<std::size_t>(best)])))
      best = static_cast<int>(k), best_far = far;
  }
  if (best < 0)
    throw UsageError("collective: " + who + ": no reducing switch outside the boxes reaches all of the " +
                     std::to_string(ranks.size()) + " ranks of an aggregation group");
  SharpTree t;
  t.root = net.switches[static_cast<std::size_t>(best)];
  std::vector<std::size_t> touched{static_cast<std::size_t>(best)};
  for (int r : ranks) {
    // The rank's nearest reducing switch (its leaf; ties: the root, then the one fewer trees use); the root when
    // none is nearer.
    std::size_t near = static_cast<std::size_t>(best);
    for (std::size_t k = 0; k < net.switches.size(); ++k) {
      const int h = net.hops[k][static_cast<std::size_t>(r)], n = net.hops[near][static_cast<std::size_t>(r)];
      if (h >= 0 && (h < n || (h == n && near != static_cast<std::size_t>(best) && net.used[k] < net.used[near])))
        near = k;
    }
    t.via.push_back(net.switches[near]);
    touched.push_back(near);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (std::size_t k : touched) ++net.used[k];
  return t;
}

}  // namespace kernbench::ccl
