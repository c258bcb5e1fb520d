// fabric_multipath.cpp -- which equal-cost path(s) a transfer takes
// (fabric.multipath): the first, one by flow hash, or stripes over all.
//
// Model-independent: the packet and the flow model each move one transfer
// along one route (start_path); striping happens here, above them, so both
// models spread the same way and per-hop lane striping on multi-connection
// links stays as it was inside each stripe.
#include <algorithm>
#include <cstdint>
#include <numeric>

#include "sim/errors.hpp"
#include "sim/rng.hpp"
#include "topology/fabric.hpp"

namespace kernbench::topology {

TransferId Fabric::start(const TransferSpec& spec, sim::Target on_done) {
  if (spec.src >= machine_.num_nodes() || spec.dst >= machine_.num_nodes())
    throw UsageError("transfer: node id out of range");
  const std::vector<Route>& paths = router_.paths(spec.src, spec.dst);
  TransferSpec one = spec;
  if (spec.path >= 0) return start_path(one, on_done);  // named by the caller (open() checks the index)
  one.path = 0;
  if (paths.size() == 1 || config_.multipath == Multipath::Single) return start_path(one, on_done);
  if (config_.multipath == Multipath::Ecmp) {
    one.path = ecmp_path(spec, paths.size());
    return start_path(one, on_done);
  }
  return start_spread(spec, paths, on_done);
}

std::int32_t Fabric::ecmp_path(const TransferSpec& spec, std::size_t paths) const {
  // The flow key is (src, dst, address, request, tag): what a switch's hash
  // sees of a flow (its ends and the fields that tell its flows apart).
  // splitmix64's finaliser at each step, so nearby keys land far apart; the
  // same transfer always takes the same path (same run, same seed or not).
  std::uint64_t h = sim::mix64((static_cast<std::uint64_t>(spec.src) << 32) | spec.dst);
  h = sim::mix64(h ^ spec.address);
  h = sim::mix64(h ^ static_cast<std::uint64_t>(spec.request));
  h = sim::mix64(h ^ static_cast<std::uint32_t>(spec.tag));
  return static_cast<std::int32_t>(h % paths);
}

TransferId Fabric::start_spread(const TransferSpec& spec, const std::vector<Route>& paths, sim::Target on_done) {
  // Stripes in whole flits, in proportion to the paths' rates (path_rate: the
  // slowest hop's bandwidth x connections), so that uncontended stripes end
  // together: equal rates give sizes within one flit of each other. Largest
  // remainder rounding; ties go to the lower path index. The flits left over
  // by a partial last flit come off the largest stripe.
  const std::size_t k = paths.size();
  const Bytes unit = config_.flit;
  const Bytes units = (spec.bytes + unit - 1) / unit;
  std::vector<__int128> weight(k);
  __int128 total = 0;
  for (std::size_t i = 0; i < k; ++i) total += weight[i] = std::max<std::int64_t>(path_rate(paths[i]), 1);
  std::vector<Bytes> n(k);
  std::vector<__int128> rem(k);
  Bytes given = 0;
  for (std::size_t i = 0; i < k; ++i) {
    n[i] = static_cast<Bytes>(units * weight[i] / total);
    rem[i] = units * weight[i] % total;
    given += n[i];
  }
  std::vector<std::size_t> order(k);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rem[a] > rem[b]; });
  for (std::size_t j = 0; given < units; ++j, ++given) ++n[order[j]];
  std::vector<Bytes> bytes(k);
  for (std::size_t i = 0; i < k; ++i) bytes[i] = n[i] * unit;
  const std::size_t biggest = static_cast<std::size_t>(std::max_element(n.begin(), n.end()) - n.begin());
  bytes[biggest] -= units * unit - spec.bytes;

  std::vector<std::size_t> used;
  for (std::size_t i = 0; i < k; ++i)
    if (bytes[i] > 0) used.push_back(i);
  TransferSpec one = spec;
  if (used.size() <= 1) {  // too small to split: all of it on one path
    one.path = used.empty() ? 0 : static_cast<std::int32_t>(used.front());
    return start_path(one, on_done);
  }
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
