// coflow.cpp -- Fabric::start_coflow: a pipeline's hops as one weighted flow.
//
// Each hop is routed as a transfer of its pair would be: over the pair's
// equal-cost paths as fabric.multipath cuts them (the policy is asked once,
// for a nominal size, and its stripes become fractions of the hop's
// weight). The weights of everything crossing one channel are summed, so a
// link two hops share (a relay's NVLink port, a rail's NIC) counts twice.
// The model (the flow fabric) then drains the coflow at its weighted
// max-min rate; the tail after the drain is the slowest hop's: its wire
// latencies and the overheads of every node on it.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "sim/errors.hpp"
#include "topology/fabric/fabric.hpp"

namespace kernbench::topology {

namespace {

// A nominal hop size the policy cuts into stripes: large enough that
// whole-flit rounding moves a fraction by at most 2^-20 per path.
constexpr Bytes kNominalHop = Bytes{1} << 30;

}  // namespace

TransferId Fabric::start_coflow(const CoflowSpec& spec, sim::Target on_done) {
  if (!moves_coflows())
    throw UsageError(std::string("coflow: the ") + model_name() +
                     " fabric moves transfers one by one; a coflow (a collective at fidelity=pipeline) needs the "
                     "flow model (fabric.model: flow)");
  if (spec.hops.empty()) throw UsageError("coflow: needs at least one hop");
  check_transfer_size(spec.bytes, "coflow");
  std::map<ChannelId, double> weight;  // ordered: the solver sees the channels in id order
  Time tail = 0;
  Time head = 0;
  for (std::size_t h = 0; h < spec.hops.size(); ++h) {
    const CoflowHop& hop = spec.hops[h];
    if (hop.src >= machine_.num_nodes() || hop.dst >= machine_.num_nodes())
      throw UsageError("coflow: hop " + std::to_string(h) + ": node id out of range");
    const std::string what = "coflow hop " + machine_.node(hop.src).name + " -> " + machine_.node(hop.dst).name;
    if (hop.src == hop.dst) throw UsageError(what + ": a hop must join two different nodes");
    if (!(hop.weight > 0.0) || !std::isfinite(hop.weight))
      throw UsageError(what + ": weight must be positive and finite, got " + std::to_string(hop.weight));
    const std::vector<Route>& paths = router_.paths(hop.src, hop.dst);
    std::vector<double> part(paths.size(), 0.0);
    if (paths.size() == 1) {
      part[0] = 1.0;
    } else {
      share_.assign(paths.size(), 0);
      const MultipathRequest req{
          {hop.src, hop.dst, 0, spec.request, spec.tag}, kNominalHop, config_.flit, std::span<const Route>(paths)};
      const std::int32_t whole = policy_->split(req, share_);
      if (whole >= 0) {
        if (static_cast<std::size_t>(whole) >= paths.size())
          throw UsageError("fabric.multipath: policy '" + policy_->name + "' picked path " + std::to_string(whole) +
                           " of " + std::to_string(paths.size()));
        part[static_cast<std::size_t>(whole)] = 1.0;
      } else {
        for (std::size_t i = 0; i < paths.size(); ++i)
          part[i] = static_cast<double>(share_[i]) / static_cast<double>(kNominalHop);
      }
    }
    head = std::max(head, machine_.node(hop.src).params.overhead);
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (part[i] <= 0.0) continue;
      const Route& r = paths[i];
      Time t = 0;
      for (std::size_t k = 0; k < r.channels.size(); ++k) {
        weight[r.channels[k]] += hop.weight * part[i];
        t += machine_.channel(r.channels[k]).link.latency + machine_.node(r.nodes[k + 1]).params.overhead;
      }
      tail = std::max(tail, t);
    }
  }
  std::vector<CoflowUse> uses;
  uses.reserve(weight.size());
  for (const auto& [c, w] : weight) uses.push_back(CoflowUse{c, w});
  const TransferId id = records_.size();
  TransferRecord r;
  r.id = id;
  r.src = spec.hops.front().src;
  r.dst = spec.hops.back().dst;
  r.bytes = spec.bytes;
  r.issue = sim_.now();
  r.hops = static_cast<std::uint32_t>(spec.hops.size());
  r.tag = spec.tag;
  r.agent = spec.agent;
  r.request = spec.request;
  r.coflow = true;
  records_.push_back(r);
  ++in_flight_;
  start_coflow_uses(id, uses, spec.bytes, head + tail, on_done);
  return id;
}

void Fabric::start_coflow_uses(TransferId, const std::vector<CoflowUse>&, Bytes, Time, sim::Target) {
  throw InternalError(std::string("coflow: the ") + model_name() + " fabric has no coflows");
}

}  // namespace kernbench::topology
