// boxes.cpp -- ranks grouped by the component of the graph they reach without crossing a NIC (boxes.hpp).
#include "ccl/logical/boxes.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace kernbench::ccl {

int Boxes::smallest() const {
  int n = std::numeric_limits<int>::max();
  for (const std::vector<int>& r : ranks) n = std::min(n, static_cast<int>(r.size()));
  return ranks.empty() ? 0 : n;
}

int Boxes::at(int b, int i) const {
  const std::vector<int>& r = ranks[static_cast<std::size_t>(b)];
  const int n = static_cast<int>(r.size());
  return r[static_cast<std::size_t>(((i % n) + n) % n)];
}

std::vector<int> Boxes::chain_to(int b, int h) const {
  const int g = static_cast<int>(ranks[static_cast<std::size_t>(b)].size());
  std::vector<int> chain;
  for (int k = 1; k <= g; ++k) chain.push_back(at(b, h + k));
  return chain;
}

int Boxes::pxn_relay(int src, int dst) const {
  const int rail = local[static_cast<std::size_t>(dst)];
  const std::vector<int>& mine = ranks[static_cast<std::size_t>(box[static_cast<std::size_t>(src)])];
  if (rail >= static_cast<int>(mine.size()) || mine[static_cast<std::size_t>(rail)] == src) return -1;
  return mine[static_cast<std::size_t>(rail)];
}

Boxes boxes_of(const topology::Machine& m, const std::vector<NodeId>& pes) {
  constexpr int kNone = -1;
  std::vector<int> component(m.num_nodes(), kNone);
  std::vector<NodeId> stack;
  int next = 0;
  // One flood fill per component that holds a rank, never entering a NIC.
  for (NodeId start : pes) {
    if (component[start] != kNone) continue;
    component[start] = next;
    stack.assign(1, start);
    while (!stack.empty()) {
      const NodeId u = stack.back();
      stack.pop_back();
      for (topology::ChannelId c : m.out_channels(u)) {
        const NodeId v = m.channel(c).to;
        if (component[v] != kNone || m.node(v).kind == topology::NodeKind::Nic) continue;
        component[v] = next;
        stack.push_back(v);
      }
    }
    ++next;
  }
  // Each NIC's links out of its box (to a node of no rank's component, or of another one).
  std::vector<double> egress(static_cast<std::size_t>(next), 0.0);
  for (NodeId x = 0; x < m.num_nodes(); ++x) {
    if (m.node(x).kind != topology::NodeKind::Nic) continue;
    int home = kNone;
    for (topology::ChannelId c : m.out_channels(x))
      if (const int k = component[m.channel(c).to]; k != kNone) home = k;
    if (home == kNone) continue;
    for (topology::ChannelId c : m.out_channels(x)) {
      const topology::ChannelInfo& ch = m.channel(c);
      if (component[ch.to] == home) continue;
      egress[static_cast<std::size_t>(home)] +=
          static_cast<double>(ch.link.bandwidth.bytes_per_s) * std::max(ch.link.connections, 1);
    }
  }
  Boxes b;
  std::unordered_map<int, int> index;  // component -> box, in order of first rank
  for (std::size_t r = 0; r < pes.size(); ++r) {
    const auto [it, fresh] = index.emplace(component[pes[r]], static_cast<int>(b.ranks.size()));
    if (fresh) {
      b.ranks.emplace_back();
      b.egress.push_back(egress[static_cast<std::size_t>(it->first)]);
    }
    std::vector<int>& members = b.ranks[static_cast<std::size_t>(it->second)];
    b.box.push_back(it->second);
    b.local.push_back(static_cast<int>(members.size()));
    members.push_back(static_cast<int>(r));
  }
  return b;
}

}  // namespace kernbench::ccl
