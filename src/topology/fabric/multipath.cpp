// multipath.cpp -- which equal-cost path(s) a transfer takes: the policy
// fabric.multipath names (routing/multipath.hpp) picks one path or cuts the
// transfer into stripes, and the stripes start here as transfers of their own.
//
// Model-independent: the packet and the flow model each move one transfer
// along one route (start_path); striping happens here, above them, so both
// models spread the same way and per-hop lane striping on multi-connection
// links stays as it was inside each stripe.
#include <algorithm>
#include <cstdint>
#include <numeric>

#include "sim/errors.hpp"
#include "topology/fabric/fabric.hpp"
#include "topology/routing/multipath.hpp"

namespace kernbench::topology {

TransferId Fabric::start(const TransferSpec& spec, sim::Target on_done) {
  if (spec.src >= machine_.num_nodes() || spec.dst >= machine_.num_nodes())
    throw UsageError("transfer: node id out of range");
  const std::vector<Route>& paths = router_.paths(spec.src, spec.dst);
  TransferSpec one = spec;
  if (spec.path >= 0) return start_path(one, on_done);  // named by the caller (open() checks the index)
  one.path = 0;
  if (paths.size() == 1) return start_path(one, on_done);
  std::vector<Bytes>& share = share_;  // reused: no allocation per transfer
  share.assign(paths.size(), 0);
  const MultipathRequest req{{spec.src, spec.dst, spec.address, spec.request, spec.tag},
                             spec.bytes,
                             config_.flit,
                             std::span<const Route>(paths)};
  const std::int32_t whole = policy_->split(req, share);
  if (whole >= 0) {
    if (static_cast<std::size_t>(whole) >= paths.size())
      throw UsageError("fabric.multipath: policy '" + policy_->name + "' picked path " + std::to_string(whole) +
                       " of " + std::to_string(paths.size()));
    one.path = whole;
    return start_path(one, on_done);
  }
  return start_stripes(spec, paths, share, on_done);
}

TransferId Fabric::start_stripes(const TransferSpec& spec, const std::vector<Route>& paths,
                                 const std::vector<Bytes>& bytes, sim::Target on_done) {
  const std::size_t k = paths.size();
  // What a policy wrote is checked: at least two stripes, none negative, summing to the transfer.
  __int128 sum = 0;
  bool negative = false;
  for (Bytes b : bytes) sum += b, negative |= b < 0;
  if (negative || sum != spec.bytes || std::count_if(bytes.begin(), bytes.end(), [](Bytes b) { return b > 0; }) < 2)
    throw UsageError("fabric.multipath: policy '" + policy_->name + "' cut a transfer of " +
                     std::to_string(spec.bytes) +
                     " B into stripes that are not at least two non-negative parts "
                     "summing to it");
  std::vector<std::size_t> used;
  for (std::size_t i = 0; i < k; ++i)
    if (bytes[i] > 0) used.push_back(i);
  // Every stripe checked before any is scheduled: a refused one leaves nothing behind.
  check_transfer_size(spec.bytes, "transfer " + machine_.node(spec.src).name + " -> " + machine_.node(spec.dst).name);
  std::vector<TransferSpec> stripes;
  std::uint64_t offset = 0;
  for (std::size_t i : used) {
    TransferSpec s = spec;
    s.bytes = bytes[i];
    s.address = spec.address + offset;  // the stripe's own bytes: its first lane follows its address
    s.path = static_cast<std::int32_t>(i);
    check_transfer_time(paths[i], s, sim_.now());
    offset += static_cast<std::uint64_t>(bytes[i]);
    stripes.push_back(s);
  }
  // The parent: the record the caller sees (no route of its own).
  const TransferId id = records_.size();
  TransferRecord r;
  r.id = id;
  r.src = spec.src;
  r.dst = spec.dst;
  r.bytes = spec.bytes;
  r.issue = sim_.now();
  r.tag = spec.tag;
  r.agent = spec.agent;
  r.request = spec.request;
  r.stripes = static_cast<std::uint32_t>(stripes.size());
  records_.push_back(r);
  ++in_flight_;
  splits_.emplace(id, Split{static_cast<std::uint32_t>(stripes.size()), -1, Breakdown{}, on_done});
  std::uint32_t hops = 0, chunks = 0;
  opening_stripe_of_ = id;
  try {
    for (const TransferSpec& s : stripes) {
      const TransferId sid = start_path(s, {});
      hops = std::max(hops, records_[sid].hops);
      chunks += records_[sid].chunks;
    }
  } catch (...) {
    opening_stripe_of_ = kNoTransfer;
    throw;
  }
  opening_stripe_of_ = kNoTransfer;
  records_[id].hops = hops;
  records_[id].chunks = chunks;
  return id;
}

}  // namespace kernbench::topology
