// nvls.cpp -- in-network all-reduce (NVLink SHARP, "NVLS"-like) over the
// reducing switches every rank is linked to.
//
// Each switch that declares `reduction:` and has a direct link from every
// rank takes a part of the buffer, in proportion to the ranks' bandwidth to
// it (the narrowest rank's link x lanes: 5/4/4/5 NVLink4 links on HGX H100
// give parts of 5/18, 4/18, 4/18, 5/18). Each part is cut into `pieces`
// chunks; every chunk is one switch_reduce: each rank sends it to the
// switch once, the switch reduces the contributions and multicasts the sum
// back. The chunks of one switch pipeline through its gather, reduce and
// multicast stages, and the switches work in parallel, so each rank sends
// its whole buffer once and receives it once: on uncontended links
// T ~ (B / port bandwidth) + two chunk times, against ring's
// 2 (p-1)/p B / port bandwidth (docs/ccl.md derives the closed form).
#include <numeric>

#include "ccl/algorithms.hpp"
#include "sim/errors.hpp"

namespace kernbench::ccl {

namespace {

struct Part {
  NodeId sw = 0;
  int weight = 1;  // slices per chunk
};

// The reducing switches linked to every rank, with their weights; throws a
// UsageError naming what is missing when there is none.
std::vector<Part> parts(const Plan& p) {
  const topology::Machine& m = *p.machine;
  std::vector<std::pair<NodeId, std::int64_t>> found;  // switch, narrowest rank bandwidth (B/s)
  std::string reducing_not_linked, switches;
  for (NodeId id = 0; id < m.num_nodes(); ++id) {
    const topology::NodeInfo& n = m.node(id);
    if (n.kind != topology::NodeKind::Switch) continue;
    switches += (switches.empty() ? "" : ", ") + n.name;
    if (n.params.reduction.bytes_per_s <= 0) continue;
    std::int64_t narrowest = -1;
    std::string missing;
    for (NodeId pe : p.pes) {
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
    throw UsageError(
        "collective: nvls needs an in-network reducing switch (a graph node of kind switch with "
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

void all_reduce(Schedule& s, const Plan& p) {
  const std::vector<Part> ps = parts(p);
  s.phase("in-network");
  // Chunk c of switch j: slices [base_j + c w_j, base_j + (c + 1) w_j),
  // where switch j's part starts at base_j = pieces x (w_0 + ... + w_{j-1}).
  // Chunks are emitted in pipeline order: chunk 0 of every switch first.
  const double total = weight_sum(ps);
  for (int c = 0; c < p.pieces; ++c) {
    std::int32_t base = 0;
    for (const Part& q : ps) {
      const std::int32_t lo = base + c * q.weight;
      s.switch_reduce(q.sw, p.world.ranks, Slices{lo, lo + q.weight}, q.weight / total);
      base += p.pieces * q.weight;
    }
  }
}

}  // namespace

Algorithm nvls_algorithm() {
  Algorithm a;
  a.name = "nvls";
  a.description =
      "in-network all-reduce (NVLink SHARP-like): each rank sends every chunk once to a reducing switch, which "
      "reduces and multicasts it back; chunks pipelined over every reducing switch linked to all ranks";
  a.in_network = true;
  a.slices = [](const Plan& p) { return p.pieces * weight_sum(parts(p)); };
  a.check = [](const Plan& p) { parts(p); };
  a.all_reduce = all_reduce;
  return a;
}

}  // namespace kernbench::ccl
