// schedule.cpp -- transfers to send/recv pairs, dependencies from the data.
#include "ccl/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "sim/errors.hpp"

namespace kernbench::ccl {

Slices block(Slices r, int n, int b) {
  const std::int64_t len = r.hi - r.lo;
  return Slices{static_cast<std::int32_t>(r.lo + len * b / n), static_cast<std::int32_t>(r.lo + len * (b + 1) / n)};
}

Schedule::Schedule(const topology::Machine& machine, std::vector<NodeId> pes, Bytes bytes_per_rank, int slices,
                   Buffer buffer, std::string name)
    : machine_(machine),
      pes_(std::move(pes)),
      bytes_per_rank_(bytes_per_rank),
      slices_(slices),
      buffer_(buffer),
      program_(std::move(name)),
      cells_(pes_.size() * static_cast<std::size_t>(slices)) {
  if (buffer_ == Buffer::Hbm) {
    for (NodeId p : pes_) hbm_.push_back(machine_.memory(p, "collective buffer=hbm"));
  }
}

Bytes Schedule::bytes(Slices s) const {
  // Slice i covers bytes [B*i/S, B*(i+1)/S): the cut is exact, no byte lost.
  const auto edge = [&](std::int32_t i) {
    return static_cast<Bytes>(static_cast<__int128>(bytes_per_rank_) * i / slices_);
  };
  return edge(s.hi) - edge(s.lo);
}

void Schedule::collect(int rank, Slices s, bool with_readers, std::vector<OpId>& deps) {
  if (!entry_.empty()) deps.push_back(entry_[static_cast<std::size_t>(rank)]);
  for (std::int32_t i = s.lo; i < s.hi; ++i) {
    const Cell& c = cell(rank, i);
    if (c.writer != kNone) deps.push_back(c.writer);
    if (!with_readers) continue;
    for (OpId r : c.readers)
      if (r != kNone) deps.push_back(r);
    const auto it = extra_readers_.find(static_cast<std::size_t>(rank) * slices_ + i);
    if (it != extra_readers_.end()) deps.insert(deps.end(), it->second.begin(), it->second.end());
  }
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
}

void Schedule::add_reader(int rank, Slices s, OpId op) {
  for (std::int32_t i = s.lo; i < s.hi; ++i) {
    Cell& c = cell(rank, i);
    OpId* free = std::find(std::begin(c.readers), std::end(c.readers), kNone);
    if (free != std::end(c.readers))
      *free = op;
    else
      extra_readers_[static_cast<std::size_t>(rank) * slices_ + i].push_back(op);
  }
}

void Schedule::set_writer(int rank, Slices s, OpId op) {
  for (std::int32_t i = s.lo; i < s.hi; ++i) {
    Cell& c = cell(rank, i);
    c.writer = op;
    std::fill(std::begin(c.readers), std::end(c.readers), kNone);
    if (!extra_readers_.empty()) extra_readers_.erase(static_cast<std::size_t>(rank) * slices_ + i);
  }
}

void Schedule::check_slices(Slices s) const {
  if (s.lo < 0 || s.hi > slices_)
    throw InternalError(program_.name() + ": slices [" + std::to_string(s.lo) + ", " + std::to_string(s.hi) +
                        ") outside the " + std::to_string(slices_) + " of a buffer");
}

void Schedule::transfer(int src, int dst, Slices s, Combine combine) { transfer(src, s, dst, s, combine); }

void Schedule::transfer(int src, Slices from, int dst, Slices to, Combine combine) {
  if (from.empty()) return;
  if (src == dst) throw InternalError(program_.name() + ": a transfer from rank " + std::to_string(src) + " to itself");
  check_slices(from);
  check_slices(to);
  if (to.hi - to.lo != from.hi - from.lo)
    throw InternalError(program_.name() + ": a transfer of " + std::to_string(from.hi - from.lo) + " slices into " +
                        std::to_string(to.hi - to.lo));
  for_each_step(from, to, [&](Slices a, Slices b) { step(src, a, dst, b, combine); });
}

void Schedule::step(int src, Slices s, int dst, Slices to, Combine combine) {
  std::string label = "r";
  label += std::to_string(src);
  label += ">r";
  label += std::to_string(dst);
  label += " [";
  label += std::to_string(s.lo);
  label += ',';
  label += std::to_string(s.hi);
  label += ')';
  if (to.lo != s.lo) {
    label += ">[";
    label += std::to_string(to.lo);
    label += ',';
    label += std::to_string(to.hi);
    label += ')';
  }
  std::vector<OpId> deps;
  collect(src, s, false, deps);
  std::vector<OpId> dst_deps;
  collect(dst, to, true, dst_deps);
  // The channel whose part of the buffer these slices are (collective.cpp: block()).
  const int channel = channel_ >= 0 ? channel_
                      : wire_.channels > 1
                          ? static_cast<int>(static_cast<std::int64_t>(s.lo) * wire_.channels / slices_)
                          : -1;
  const auto [snd, rcv, last] = pair(src, dst, bytes(s), combine, deps, dst_deps, label, channel);
  program_.set_slices(snd, s);
  program_.set_slices(rcv, to);
  add_reader(src, s, snd);
  set_writer(dst, to, last);
  moves_[snd] = Move{src, s, combine, snd, false};
  moves_[rcv] = Move{dst, to, combine, snd, true};
}

void Schedule::transfer_bytes(int src, int dst, Bytes n, int channel) {
  if (n <= 0) return;
  if (src == dst) throw InternalError(program_.name() + ": a transfer from rank " + std::to_string(src) + " to itself");
  const Bytes step = wire_.step > 0 ? wire_.step : n;
  std::vector<OpId> deps;
  if (!entry_.empty()) deps.push_back(entry_[static_cast<std::size_t>(src)]);
  std::vector<OpId> dst_deps;
  if (!entry_.empty()) dst_deps.push_back(entry_[static_cast<std::size_t>(dst)]);
  for (Bytes at = 0; at < n; at += step) {
    const Bytes part = std::min(step, n - at);
    std::string label = "r";  // appended piece by piece (GCC 12's -Wrestrict misfires on "lit" + string&&)
    label += std::to_string(src);
    label += ">r";
    label += std::to_string(dst);
    label += ' ';
    label += std::to_string(part);
    label += " B";
    delivered_.push_back({std::get<1>(pair(src, dst, part, Combine::Copy, deps, dst_deps, label, channel)), dst, part});
  }
}

std::tuple<OpId, OpId, OpId> Schedule::pair(int src, int dst, Bytes n, Combine combine, const std::vector<OpId>& deps,
                                            std::vector<OpId> dst_deps, const std::string& label, int channel) {
  const NodeId from = pe(src), to_pe = pe(dst);
  const std::int64_t key = next_key_++;
  const bool hbm = buffer_ == Buffer::Hbm;
  const bool gpu = wire_.step_latency >= 0;
  const bool across =
      boxes_ && boxes_->box[static_cast<std::size_t>(src)] != boxes_->box[static_cast<std::size_t>(dst)];
  const int via = across ? relay_of(src, dst) : -1;
  // On the wire: the payload over the protocol's and the link's efficiency.
  const Bytes wire =
      wire_.efficiency >= 1.0 ? n : static_cast<Bytes>(std::ceil(static_cast<double>(n) / wire_.efficiency));
  const auto on_channel = [&](OpId op, Time latency) {
    if (gpu) program_.set_latency(op, latency);
    if (wire_.segment > 0) program_.set_segment(op, wire_.segment);
    if (channel >= 0) program_.set_channel(op, channel);
  };
  const std::optional<NodeId> src_hbm = hbm ? std::optional<NodeId>(hbm_[static_cast<std::size_t>(src)]) : std::nullopt;
  OpId snd = 0;
  NodeId sender = from;  // the node the receiver takes the data from
  if (via >= 0) {
    // PXN: over the box's fabric into the peer's proxy buffer, then on
    // through the peer's NIC; the peer's own buffer is not touched.
    const NodeId relay = pe(via);
    const std::int64_t hop = next_key_++;
    const std::string through = " via r" + std::to_string(via);
    snd = program_.send(from, relay, wire, hop, deps, "send " + label + through, tag_, src_hbm);
    on_channel(snd, wire_.step_latency);
    const OpId land = program_.recv(relay, from, hop, {}, "relay " + label, tag_, runtime::RecvMode::Consume);
    if (gpu) program_.set_latency(land, 0);
    const OpId on = program_.send(relay, to_pe, wire, key, {land}, "send " + label + " from r" + std::to_string(via),
                                  tag_, std::nullopt);
    on_channel(on, net_step_latency_);
    if (gpu) program_.set_proxy(on);
    sender = relay;
    ++relayed_;
  } else {
    snd = program_.send(from, to_pe, wire, key, deps, "send " + label, tag_, src_hbm);
    on_channel(snd, across ? net_step_latency_ : wire_.step_latency);
    if (gpu && across) program_.set_proxy(snd);
  }
  if (hbm && combine == Combine::Reduce) {  // the local slices come up from HBM to be added to
    const OpId load = program_.dma(to_pe, runtime::Move{hbm_[static_cast<std::size_t>(dst)], to_pe, n}, dst_deps,
                                   "load " + label, tag_);
    if (gpu) program_.set_latency(load, 0);
    dst_deps.assign(1, load);
  }
  const OpId rcv = program_.recv(to_pe, sender, key, dst_deps, "recv " + label, tag_,
                                 combine == Combine::Reduce ? runtime::RecvMode::Reduce : runtime::RecvMode::Consume);
  if (gpu) program_.set_latency(rcv, 0);
  OpId last = rcv;
  if (hbm) {
    last = program_.dma(to_pe, runtime::Move{to_pe, hbm_[static_cast<std::size_t>(dst)], n}, {rcv}, "store " + label,
                        tag_);
    if (gpu) program_.set_latency(last, 0);
  }
  return {snd, rcv, last};
}

int Schedule::relay_of(int src, int dst) const { return pxn_ ? boxes_->pxn_relay(src, dst) : -1; }

void Schedule::local_copy(int rank, Slices from, Slices to) {
  if (from.empty()) return;
  check_slices(from);
  check_slices(to);
  // In steps, as a transfer: only a step is staged on chip.
  for_each_step(from, to, [&](Slices a, Slices b) { copy_step(rank, a, b); });
}

void Schedule::copy_step(int rank, Slices from, Slices to) {
  const Bytes n = bytes(from);
  const NodeId at = pe(rank);
  std::string label = "r";  // appended piece by piece (GCC 12's -Wrestrict misfires on "lit" + string&&)
  label += std::to_string(rank);
  label += " [";
  label += std::to_string(from.lo);
  label += ',';
  label += std::to_string(from.hi);
  label += ")>[";
  label += std::to_string(to.lo);
  label += ',';
  label += std::to_string(to.hi);
  label += ')';
  const bool gpu = wire_.step_latency >= 0;
  std::vector<OpId> deps;
  collect(rank, from, false, deps);
  std::vector<OpId> more;
  collect(rank, to, true, more);
  deps.insert(deps.end(), more.begin(), more.end());
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  OpId last = 0;
  if (buffer_ == Buffer::Hbm) {
    const NodeId mem = hbm_[static_cast<std::size_t>(rank)];
    const OpId load = program_.dma(at, runtime::Move{mem, at, n}, deps, "copy load " + label, tag_);
    if (gpu) program_.set_latency(load, 0);
    add_reader(rank, from, load);
    last = program_.dma(at, runtime::Move{at, mem, n}, {load}, "copy store " + label, tag_);
  } else {
    last = program_.vector(at, n, deps, "copy " + label, tag_);
    add_reader(rank, from, last);
  }
  if (gpu) program_.set_latency(last, 0);
  set_writer(rank, to, last);
  copies_[last] = LocalCopy{rank, from, to};
}

}  // namespace kernbench::ccl

namespace kernbench::ccl {

void Schedule::switch_reduce(NodeId sw, const std::vector<int>& ranks, Slices s, double share) {
  switch_reduce(sw, SwitchRanks{ranks, ranks, {}, {}}, s, share);
}

void Schedule::switch_reduce(NodeId sw, const SwitchRanks& g, Slices s, double share) {
  if (s.empty()) return;
  check_slices(s);
  // It reads the slices of `in` (after their last writers) and then overwrites those of `out` (after their last
  // writers and every op still reading them).
  std::vector<OpId> deps, one;
  runtime::SwitchGroup members;
  for (int r : g.in) {
    one.clear();
    collect(r, s, std::find(g.out.begin(), g.out.end(), r) != g.out.end(), one);
    deps.insert(deps.end(), one.begin(), one.end());
    members.in.push_back(buffer_ == Buffer::Hbm ? hbm_[static_cast<std::size_t>(r)] : pe(r));
  }
  for (int r : g.out) {
    one.clear();
    collect(r, s, true, one);
    deps.insert(deps.end(), one.begin(), one.end());
    members.out.push_back(buffer_ == Buffer::Hbm ? hbm_[static_cast<std::size_t>(r)] : pe(r));
  }
  members.in_via = g.in_via;
  members.out_via = g.out_via;
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  const std::string label = machine_.node(sw).name + " [" + std::to_string(s.lo) + "," + std::to_string(s.hi) + ")";
  // Each GPU issues its share of the chunk's multimem operations: of an all-reduce 2/ranks of it (a
  // load-reduce and a multicast store of its share), of a load-reduce into one GPU or a multicast store from
  // one, 1/ranks; at its issue rate split over the switches.
  Time issue = 0;
  const auto halves = static_cast<double>((g.in.size() > 1 ? 1 : 0) + (g.out.size() > 1 ? 1 : 0));
  const auto n = static_cast<double>(std::max(g.in.size(), g.out.size()));
  if (wire_.issue_bytes_per_s > 0 && share > 0)
    issue = static_cast<Time>(
        std::ceil(halves * static_cast<double>(bytes(s)) / n / (wire_.issue_bytes_per_s * share) * 1e12));
  const OpId op = program_.switch_reduce(sw, std::move(members), bytes(s), deps, "switch_reduce " + label, tag_, issue);
  program_.set_slices(op, s);
  for (int r : g.in)
    if (std::find(g.out.begin(), g.out.end(), r) == g.out.end()) add_reader(r, s, op);
  for (int r : g.out) set_writer(r, s, op);
  reductions_[op] = Reduction{g.in, g.out, s};
}

}  // namespace kernbench::ccl
