// nccl_lowering.cpp -- the machine as NCCL's lowering reads it (nccl_lowering.hpp).
#include "ccl/nccl_lowering.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "ccl/logical/sharp.hpp"
#include "sim/errors.hpp"
#include "topology/routing/routing.hpp"

namespace kernbench::ccl {

NcclCollective nccl_kind(Collective c) {
  switch (c) {
    case Collective::AllReduce: return NcclCollective::AllReduce;
    case Collective::ReduceScatter: return NcclCollective::ReduceScatter;
    case Collective::AllGather: return NcclCollective::AllGather;
    case Collective::Broadcast: return NcclCollective::Broadcast;
    case Collective::AllToAll: return NcclCollective::AllToAll;
  }
  return NcclCollective::AllReduce;
}

// What the tuner reads about these ranks on this machine: the ring's
// narrowest rank-to-next bandwidth over every equal-cost path (NCCL's
// channels cover every link) and its slowest route latency; the reducing
// switches linked to every rank.
TunerFacts tuner_facts(const topology::Machine& m, const runtime::PeConfig& pe, const std::vector<NodeId>& pes,
                       const Boxes& boxes, topology::Router* shared) {
  TunerFacts f;
  f.ranks = static_cast<int>(pes.size());
  f.channels = pe.ipcq_channels;
  std::optional<topology::Router> own;
  topology::Router& router = shared ? *shared : own.emplace(m);
  const auto rate_and_latency = [&](NodeId a, NodeId b, Time& latency) {
    double bw = 0;
    for (const topology::Route& r : router.paths(a, b)) {
      bw += static_cast<double>(topology::path_rate(r));
      latency = std::max(latency, r.wire_latency + r.node_overhead);
    }
    return bw;
  };
  double narrowest = -1;
  for (std::size_t i = 0; i < pes.size(); ++i) {
    const std::size_t j = (i + 1) % pes.size();
    // Across boxes the ring's hop is priced by the boxes' NIC rate (below).
    if (boxes.multi() && boxes.box[i] != boxes.box[j]) continue;
    const double bw = rate_and_latency(pes[i], pes[j], f.route_latency);
    narrowest = narrowest < 0 ? bw : std::min(narrowest, bw);
  }
  if (boxes.multi()) {
    f.nodes = boxes.count();
    f.ppn = boxes.smallest();
    f.inter_bandwidth = *std::min_element(boxes.egress.begin(), boxes.egress.end());
    for (int b = 0; b < f.nodes; ++b) {
      Time latency = 0;
      rate_and_latency(pes[static_cast<std::size_t>(boxes.at(b, 0))],
                       pes[static_cast<std::size_t>(boxes.at((b + 1) % f.nodes, 0))], latency);
      f.inter_latency = std::max(f.inter_latency, latency);
    }
  }
  // One rank per box: no intra-box hop, the boxes' NIC rate is the ring's.
  if (narrowest < 0 && boxes.multi()) narrowest = f.inter_bandwidth;
  f.ring_bandwidth = std::max(0.0, narrowest);
  // NVLS: the reducing switches linked to every rank (over several boxes: to every rank of each box, the
  // narrowest box's summed reduction bandwidth); IB SHARP: a reducing switch outside the boxes.
  std::vector<std::vector<NodeId>> groups;
  if (boxes.multi())
    for (const std::vector<int>& b : boxes.ranks) {
      groups.emplace_back();
      for (int r : b) groups.back().push_back(pes[static_cast<std::size_t>(r)]);
    }
  else
    groups.push_back(pes);
  f.nvls = true;
  for (const std::vector<NodeId>& g : groups) {
    double sum = 0;
    for (NodeId id = 0; id < m.num_nodes(); ++id) {
      const topology::NodeInfo& n = m.node(id);
      if (n.kind != topology::NodeKind::Switch || n.params.reduction.bytes_per_s <= 0) continue;
      bool all = true;
      for (NodeId pe_id : g) all = all && m.channel_between(pe_id, id).has_value();
      if (all) sum += static_cast<double>(n.params.reduction.bytes_per_s);
    }
    f.nvls = f.nvls && sum > 0 && g.size() > 1;  // NVLS reduces among a box's GPUs: two at least
    f.nvls_switch = &g == &groups.front() ? sum : std::min(f.nvls_switch, sum);
  }
  if (!f.nvls) f.nvls_switch = 0;
  f.sharp = boxes.multi() && !network_reducers(m, pes).empty();
  return f;
}

void chain_host_threads(runtime::Program& prog, const std::vector<NodeId>& pes, int threads) {
  const int n = static_cast<int>(pes.size());
  if (threads <= 0 || threads >= n) return;
  std::unordered_map<NodeId, int> thread_of;
  for (int r = 0; r < n; ++r) thread_of[pes[static_cast<std::size_t>(r)]] = r * threads / n;
  std::vector<std::optional<OpId>> last(static_cast<std::size_t>(threads));
  for (OpId op = 0; op < prog.size(); ++op) {
    if (prog.op(op).kind != runtime::OpKind::Launch) continue;
    const auto it = thread_of.find(prog.op(op).agent);
    if (it == thread_of.end()) continue;
    auto& prev = last[static_cast<std::size_t>(it->second)];
    if (prev && prog.op(*prev).agent != prog.op(op).agent) prog.depend(op, *prev);
    prev = op;
  }
}

PairCounts check_counts(const std::vector<Bytes>& counts, int n) {
  if (counts.size() != static_cast<std::size_t>(n) * static_cast<std::size_t>(n))
    throw UsageError("collective: counts has " + std::to_string(counts.size()) + " entries; " + std::to_string(n) +
                     " ranks need " + std::to_string(n) + " x " + std::to_string(n) +
                     " (row i: the bytes rank i sends each rank)");
  std::vector<Bytes> sent(static_cast<std::size_t>(n), 0), got(static_cast<std::size_t>(n), 0);
  PairCounts out;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const Bytes b = counts[static_cast<std::size_t>(i) * static_cast<std::size_t>(n) + j];
      if (b < 0)
        throw UsageError("collective: counts[" + std::to_string(i) + "][" + std::to_string(j) +
                         "] = " + std::to_string(b) + " is negative");
      topology::check_transfer_size(b, "alltoall count");
      sent[static_cast<std::size_t>(i)] += b;
      got[static_cast<std::size_t>(j)] += b;
      if (i != j) out.largest = std::max(out.largest, b);
    }
  for (int i = 0; i < n; ++i)
    out.footprint = std::max(out.footprint, sent[static_cast<std::size_t>(i)] + got[static_cast<std::size_t>(i)]);
  return out;
}

std::vector<Bytes> delivered(const std::vector<Schedule::Delivery>& deliveries, const runtime::RunResult& run,
                             const std::vector<Bytes>& counts, int n, int calls, const std::string& what) {
  std::vector<Bytes> got(static_cast<std::size_t>(n), 0);
  for (const Schedule::Delivery& d : deliveries)
    if (run.ops[d.recv].done()) got[static_cast<std::size_t>(d.rank)] += d.bytes * calls;
  for (int j = 0; j < n; ++j) {
    Bytes want = 0;
    for (int i = 0; i < n; ++i)
      if (i != j) want += counts[static_cast<std::size_t>(i) * static_cast<std::size_t>(n) + j];
    if (got[static_cast<std::size_t>(j)] != want * calls)
      throw VerificationError(what + ": rank " + std::to_string(j) + " received " +
                              std::to_string(got[static_cast<std::size_t>(j)]) + " B, the counts send it " +
                              std::to_string(want * calls) + " B");
  }
  return got;
}

}  // namespace kernbench::ccl
