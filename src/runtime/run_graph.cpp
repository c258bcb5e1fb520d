// run_graph.cpp -- building the run graph of a Program (run_graph.hpp): one
// node per op; a composite becomes a dispatch node, its pipeline stages
// (per tile: loads, compute, stores; a tile's loads wait for the compute
// `buffers` tiles back) and its own node as the join of the last stages.
// check_program() refuses, before any node exists, what a program must not
// do on this machine (the list is in program.hpp): agents and dma endpoints
// of the wrong node kind, scratch / HBM-slice / IPCQ-slot overruns, two
// sends or two recvs of one message, more segments or nodes than the limits.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "config/quantity.hpp"
#include "runtime/executor_impl.hpp"
#include "sim/errors.hpp"

namespace kernbench::runtime {

namespace {

using topology::NodeKind;

std::string bytes_text(Bytes b) { return config::format_bytes(b, config::ByteUnits::UpToKiB); }

// Nodes that own no engines: they cannot dispatch ops.
bool owns_no_engines(NodeKind k) {
  return topology::forwards_only(k) || k == NodeKind::HbmCtrl || k == NodeKind::Memory;
}

}  // namespace

void Executor::Impl::check_program() const {
  const topology::Machine& m = system.machine();
  const auto& ops = program.ops();
  const std::string& pn = program.name();
  const auto what = [&](std::uint32_t i) {
    return pn + ": op " + std::to_string(i) + " '" + ops[i].name + "' (" + to_string(ops[i].kind) + ")";
  };
  const auto check_agent = [&](std::uint32_t i, NodeId a, const char* role) {
    if (a >= m.num_nodes()) throw UsageError(what(i) + ": " + role + " node id " + std::to_string(a) + " out of range");
    const topology::NodeInfo& n = m.node(a);
    // On a generated machine only PEs own engines (explicit graphs name
    // their own agents: a K200 die, a host thread).
    if ((m.generated() && n.kind != NodeKind::Pe) || owns_no_engines(n.kind))
      throw UsageError(what(i) + ": " + role + " " + n.name + " is a " + topology::to_string(n.kind) + ", not a PE");
  };
  // One end of a data movement: a memory (a PE's scratch, an HBM slice, a
  // memory or host node), never a node that only forwards; what lands in or
  // is read from a scratch or an HBM slice must fit there.
  const auto check_end = [&](std::uint32_t i, const Move& mv, NodeId end, const std::string& leg,
                             bool composite = false) {
    if (end >= m.num_nodes())
      throw UsageError(what(i) + ": " + leg + " node id " + std::to_string(end) + " out of range");
    const topology::NodeInfo& n = m.node(end);
    if (topology::forwards_only(n.kind))
      throw UsageError(what(i) + ": " + leg + " " + n.name + " is a " + topology::to_string(n.kind) +
                       ", not a memory (a PE's scratch, an HBM controller, a memory)");
    // (A composite's own scratch is checked for all its resident tiles at once.
    // A GPU's SMs stream what passes through them: no budget to stage in.)
    if (n.kind == NodeKind::Pe && cfg.target != runtime::ExecTarget::Gpu && mv.bytes > cfg.scratch &&
        !(composite && end == ops[i].agent))
      throw CapacityError(what(i) + " on " + m.node(ops[i].agent).name + ": " + leg + " " + bytes_text(mv.bytes) +
                          " in the scratch of " + n.name +
                          " exceed its budget pe.scratch = " + bytes_text(cfg.scratch));
    if (m.generated() && n.kind == NodeKind::HbmCtrl &&
        (mv.address > static_cast<std::uint64_t>(cfg.hbm.capacity) ||
         static_cast<std::uint64_t>(mv.bytes) > static_cast<std::uint64_t>(cfg.hbm.capacity) - mv.address))
      throw CapacityError(what(i) + " on " + m.node(ops[i].agent).name + ": " + leg + " " + bytes_text(mv.bytes) +
                          " at address " + std::to_string(mv.address) + " of the HBM slice " + n.name +
                          " run past its capacity pe.hbm.capacity = " + bytes_text(cfg.hbm.capacity));
  };
  const auto check_move = [&](std::uint32_t i, const Move& mv, const std::string& leg, bool composite = false) {
    check_end(i, mv, mv.src, leg + " source", composite);
    check_end(i, mv, mv.dst, leg + " destination", composite);
  };
  std::uint64_t nodes_total = ops.size(), segments_total = 0;
  const auto slot = static_cast<std::uint64_t>(std::max<Bytes>(cfg.ipcq_slot, 1));
  const Bytes slots_bytes = static_cast<Bytes>(cfg.ipcq_slots) * cfg.ipcq_slot;
  std::unordered_map<MessageKey, std::uint32_t, MessageHash> sends, recvs;
  for (std::uint32_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.kind == OpKind::SwitchReduce) {
      // The agent is the reducing switch; the members are buffers.
      if (op.agent >= m.num_nodes())
        throw UsageError(what(i) + ": switch node id " + std::to_string(op.agent) + " out of range");
      const topology::NodeInfo& sw = m.node(op.agent);
      if (sw.kind != NodeKind::Switch || sw.params.reduction.bytes_per_s <= 0)
        throw UsageError(what(i) + ": " + sw.name + " is a " + topology::to_string(sw.kind) +
                         " that declares no in-network reduction (graph.nodes[...].reduction: {bandwidth: ...})");
      const SwitchGroup& g = program.switch_groups()[op.pipeline];
      const auto members = [&](const std::vector<NodeId>& list, const std::vector<NodeId>& via, const char* which) {
        for (std::size_t j = 0; j < list.size(); ++j) {
          check_end(i, Move{list[j], list[j], op.move.bytes}, list[j], std::string(which) + " " + std::to_string(j));
          if (j < via.size() && via[j] != op.agent &&
              (via[j] >= m.num_nodes() || m.node(via[j]).kind != NodeKind::Switch ||
               m.node(via[j]).params.reduction.bytes_per_s <= 0))
            throw UsageError(what(i) + ": " + which + " " + std::to_string(j) + " is aggregated at node " +
                             (via[j] < m.num_nodes() ? m.node(via[j]).name : std::to_string(via[j])) +
                             ", which is not a switch that declares reduction: {bandwidth: ...}");
        }
        std::vector<NodeId> sorted = list;
        std::sort(sorted.begin(), sorted.end());
        if (const auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end())
          throw UsageError(what(i) + ": " + which + " " + m.node(*dup).name + " appears twice");
      };
      members(g.in, g.in_via, "member");
      members(g.out, g.out_via, "receiver");
      continue;
    }
    check_agent(i, op.agent, "agent");
    switch (op.kind) {
      case OpKind::Dma: check_move(i, op.move, "dma"); break;
      case OpKind::Coflow: {
        if (!system.fabric().moves_coflows())
          throw UsageError(what(i) +
                           ": a coflow (a collective at fidelity=pipeline) needs the flow fabric "
                           "(fabric.model: flow); this machine runs the " +
                           std::string(system.fabric().model_name()) + " model");
        for (const topology::CoflowHop& h : program.coflows()[op.pipeline])
          if (h.src >= m.num_nodes() || h.dst >= m.num_nodes() || h.src == h.dst)
            throw UsageError(what(i) + ": a hop joins node ids " + std::to_string(h.src) + " and " +
                             std::to_string(h.dst) + " (out of range or the same node)");
        break;
      }
      case OpKind::Composite: {
        const Pipeline& p = program.pipelines()[op.pipeline];
        nodes_total += 1 + static_cast<std::uint64_t>(p.tiles) * (p.loads.size() + 1 + p.stores.size());
        if (nodes_total > kMaxRunNodes)
          throw UsageError(what(i) + ": the run graph would have " + std::to_string(nodes_total) +
                           " nodes (ops + composite stages), more than the limit of " + std::to_string(kMaxRunNodes));
        // Its resident tile buffers: min(buffers, tiles) sets of the loads
        // into the agent's scratch, plus the stores read out of it.
        Bytes in = 0, out = 0;
        for (std::size_t j = 0; j < p.loads.size(); ++j) {
          check_move(i, p.loads[j], "load " + std::to_string(j), true);
          if (p.loads[j].dst == op.agent) in += p.loads[j].bytes;
        }
        for (std::size_t j = 0; j < p.stores.size(); ++j) {
          check_move(i, p.stores[j], "store " + std::to_string(j), true);
          if (p.stores[j].src == op.agent) out += p.stores[j].bytes;
        }
        const auto depth = static_cast<Bytes>(std::min(p.buffers, p.tiles));
        const Bytes resident = depth * in + out;  // each at most 1 TiB: no overflow
        if (resident > cfg.scratch)
          throw CapacityError(what(i) + " on " + m.node(op.agent).name + ": its tile buffers need " +
                              bytes_text(resident) + " of scratch (" + std::to_string(depth) + " buffers x " +
                              bytes_text(in) + " of loads + " + bytes_text(out) +
                              " of stores), budget pe.scratch = " + bytes_text(cfg.scratch));
        break;
      }
      case OpKind::Send: {
        check_agent(i, op.move.dst, "receiver");
        check_end(i, Move{op.move.src, op.move.dst, 0}, op.move.src, "send source");
        const std::uint64_t seg = op.segment > 0 ? static_cast<std::uint64_t>(op.segment) : slot;
        const std::uint64_t segs =
            std::max<std::uint64_t>(1, (static_cast<std::uint64_t>(op.move.bytes) + seg - 1) / seg);
        if (segs > kMaxSegments)
          throw UsageError(what(i) + " on " + m.node(op.agent).name + ": " + bytes_text(op.move.bytes) + " in " +
                           bytes_text(static_cast<Bytes>(seg)) + " IPCQ slots make " + std::to_string(segs) +
                           " segments, more than the limit of " + std::to_string(kMaxSegments) + " per send");
        segments_total += segs;
        if (segments_total > kMaxRunNodes)
          throw UsageError(what(i) + ": the program's sends make " + std::to_string(segments_total) +
                           " IPCQ segments in all, more than the limit of " + std::to_string(kMaxRunNodes));
        const auto [it, fresh] = sends.try_emplace(MessageKey{op.move.dst, op.agent, op.key}, i);
        if (!fresh)
          throw UsageError(what(i) + " on " + m.node(op.agent).name + " reuses key " + std::to_string(op.key) +
                           " of op " + std::to_string(it->second) + " '" + ops[it->second].name +
                           "' for the same receiver " + m.node(op.move.dst).name);
        break;
      }
      case OpKind::Recv: {
        check_agent(i, op.peer, "sender");
        // (A GPU's IPCQ slots are NCCL's buffers, in HBM.)
        if (cfg.target != runtime::ExecTarget::Gpu && slots_bytes > cfg.scratch)
          throw CapacityError(what(i) + " on " + m.node(op.agent).name + ": the IPCQ slots from " +
                              m.node(op.peer).name + " (ipcq_slots " + std::to_string(cfg.ipcq_slots) + " x " +
                              bytes_text(cfg.ipcq_slot) + " = " + bytes_text(slots_bytes) +
                              ") do not fit its scratch, budget pe.scratch = " + bytes_text(cfg.scratch));
        const auto [it, fresh] = recvs.try_emplace(MessageKey{op.agent, op.peer, op.key}, i);
        if (!fresh) {
          const auto s = sends.find(MessageKey{op.agent, op.peer, op.key});
          std::string send_text = "the send from " + m.node(op.peer).name + " with key " + std::to_string(op.key);
          if (s != sends.end())
            send_text = "op " + std::to_string(s->second) + " '" + ops[s->second].name + "' (" + send_text + ")";
          throw UsageError(what(i) + " on " + m.node(op.agent).name + " and op " + std::to_string(it->second) + " '" +
                           ops[it->second].name + "' both receive " + send_text + ": a message has exactly one recv");
        }
        break;
      }
      default: break;
    }
  }
}

void Executor::Impl::check_unreceived() const {
  for (const Message& msg : messages) {
    if (msg.send == Message::kNone || msg.recv != Message::kNone) continue;
    const Node& nd = nodes[msg.send];
    throw DeadlockError(program.name() + ": deadlock: " + describe(msg.send) + " sent " + bytes_text(nd.move.bytes) +
                        " from " + system.machine().node(nd.agent).name + " to " +
                        system.machine().node(nd.move.dst).name + " with key " + std::to_string(nd.key) +
                        ", but no recv on " + system.machine().node(nd.move.dst).name + " from " +
                        system.machine().node(nd.agent).name + " with key " + std::to_string(nd.key) + " took it");
  }
}

void Executor::Impl::build() {
  check_program();
  const auto& ops = program.ops();
  const auto n_ops = static_cast<std::uint32_t>(ops.size());
  nodes.resize(n_ops);
  auto link = [&](std::uint32_t node, std::uint32_t on) {
    nodes[on].dependents.push_back(node);
    ++nodes[node].waiting;
  };
  for (std::uint32_t i = 0; i < n_ops; ++i) {
    const Op& op = ops[i];
    Node& nd = nodes[i];
    nd.kind = op.kind;
    nd.agent = op.agent;
    nd.move = op.move;
    nd.flops = op.flops;
    nd.precision = op.precision;
    nd.bytes = op.bytes;
    nd.tag = op.tag;
    nd.peer = op.peer;
    nd.key = op.key;
    nd.recv_mode = op.recv_mode;
    nd.duration = op.duration;
    nd.program_op = i;
    if (op.kind == OpKind::Launch || op.kind == OpKind::Kernel) nd.dispatch = false;
    if (op.latency >= 0) nd.dispatch = false, nd.latency = op.latency;
    nd.segment = op.segment;
    nd.channel = op.channel;
    nd.proxy = op.proxy;
    nd.ctas = op.ctas, nd.sms = op.sms, nd.sm_hold = op.sm_hold, nd.side = op.side;
    nd.name = op.name;
    if (op.kind == OpKind::SwitchReduce || op.kind == OpKind::Coflow) {
      nd.group = op.pipeline;
      nd.dispatch = false;
    }
  }
  for (std::uint32_t i = 0; i < n_ops; ++i) {
    const Op& op = ops[i];
    if (op.kind != OpKind::Composite) {
      for (OpId d : op.deps) link(i, d);
      continue;
    }
    // A composite: a dispatch node (the op's own deps), the stages, and the
    // op's node itself as the join of the last stages (what others wait on).
    const Pipeline& p = program.pipelines()[op.pipeline];
    nodes[i].dispatch = false;
    nodes[i].logged = true;
    const auto stage = [&](OpKind kind, std::string name, std::int32_t tag) {
      Node s;
      s.kind = kind;
      s.agent = op.agent;
      s.dispatch = false;
      s.composite = i;
      s.name = std::move(name);
      s.tag = tag >= 0 ? tag : op.tag;
      nodes.push_back(std::move(s));
      return static_cast<std::uint32_t>(nodes.size() - 1);
    };
    const std::uint32_t d = stage(OpKind::Barrier, "dispatch", op.tag);
    nodes[d].dispatch = true;
    nodes[d].logged = false;
    for (OpId dep : op.deps) link(d, dep);
    std::vector<std::uint32_t> computes;
    for (std::uint32_t t = 0; t < p.tiles; ++t) {
      const std::string tile = " tile " + std::to_string(t);
      std::vector<std::uint32_t> loads;
      for (std::size_t j = 0; j < p.loads.size(); ++j) {
        const std::uint32_t l = stage(OpKind::Dma, "load " + std::to_string(j) + tile, p.load_tag);
        nodes[l].move = p.loads[j];
        nodes[l].bytes = p.loads[j].bytes;
        link(l, d);
        if (t >= p.buffers) link(l, computes[t - p.buffers]);  // its buffer is free again
        loads.push_back(l);
      }
      const std::uint32_t c = stage(p.compute, "compute" + tile, p.compute_tag);
      nodes[c].flops = p.flops;
      nodes[c].precision = p.precision;
      nodes[c].bytes = p.vector_bytes;
      link(c, d);
      for (std::uint32_t l : loads) link(c, l);
      computes.push_back(c);
      if (p.stores.empty()) link(i, c);
      for (std::size_t j = 0; j < p.stores.size(); ++j) {
        const std::uint32_t s = stage(OpKind::Dma, "store " + std::to_string(j) + tile, p.store_tag);
        nodes[s].move = p.stores[j];
        nodes[s].bytes = p.stores[j].bytes;
        link(s, c);
        link(i, s);
      }
    }
  }
  remaining = nodes.size();
}

}  // namespace kernbench::runtime
