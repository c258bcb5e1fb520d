// switch_star.cpp -- the reducing switches every rank is linked to, and the
// part of the buffer each takes (switch_star.hpp).
#include "ccl/logical/switch_star.hpp"

#include <algorithm>
#include <numeric>

#include "sim/errors.hpp"

namespace kernbench::ccl {

std::vector<Part> star_parts(const topology::Machine* machine, const std::vector<NodeId>& pes, const std::string& who) {
  if (!machine) throw InternalError(who + ": no machine");
  const topology::Machine& m = *machine;
  std::vector<std::pair<NodeId, std::int64_t>> found;  // switch, narrowest rank bandwidth (B/s)
  std::string reducing_not_linked, switches;
  for (NodeId id = 0; id < m.num_nodes(); ++id) {
    const topology::NodeInfo& n = m.node(id);
    if (n.kind != topology::NodeKind::Switch) continue;
    switches += (switches.empty() ? "" : ", ") + n.name;
    if (n.params.reduction.bytes_per_s <= 0) continue;
    std::int64_t narrowest = -1;
    std::string missing;
    for (NodeId pe : pes) {
      const auto ch = m.channel_between(pe, id);
      if (!ch) {
        missing = m.node(pe).name;
        break;
      }
      const topology::LinkParams& l = m.channel(*ch).link;
      const std::int64_t bw = l.bandwidth.bytes_per_s * l.connections;
      narrowest = narrowest < 0 ? bw : std::min(narrowest, bw);
    }
    if (!missing.empty()) {
      reducing_not_linked += (reducing_not_linked.empty() ? "" : "; ") + n.name + " (no link to " + missing + ")";
      continue;
    }
    found.push_back({id, narrowest});
  }
  if (found.empty()) {
    std::string why = switches.empty() ? "the machine has no switch node"
                      : reducing_not_linked.empty()
                          ? "none of its switches (" + switches + ") declares reduction: {bandwidth: ...}"
                          : "its reducing switches are not linked to every rank: " + reducing_not_linked;
    throw UsageError("collective: " + who +
                     " needs an in-network reducing switch (a graph node of kind switch with "
                     "reduction: {bandwidth: ...}) directly linked to every rank; " +
                     why);
  }
  // Weights: the bandwidths over their greatest common divisor (5:4 on the
  // HGX H100), or, when that would cut the buffer too finely, rounded to
  // 1/64 of the widest.
  std::int64_t g = 0, widest = 0;
  for (const auto& f : found) g = std::gcd(g, f.second), widest = std::max(widest, f.second);
  std::int64_t total = 0;
  for (const auto& f : found) total += f.second / g;
  std::vector<Part> out;
  for (const auto& f : found) {
    const std::int64_t w =
        total <= 256 ? f.second / g : std::max<std::int64_t>(1, (64 * f.second + widest / 2) / widest);
    out.push_back(Part{f.first, static_cast<int>(w)});
  }
  return out;
}

int weight_sum(const std::vector<Part>& ps) {
  int w = 0;
  for (const Part& q : ps) w += q.weight;
  return w;
}

}  // namespace kernbench::ccl
