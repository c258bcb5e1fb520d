// run_graph.cpp -- building the run graph of a Program (run_graph.hpp): one
// node per op; a composite becomes a dispatch node, its pipeline stages
// (per tile: loads, compute, stores; a tile's loads wait for the compute
// `buffers` tiles back) and its own node as the join of the last stages.
#include <string>
#include <utility>
#include <vector>

#include "runtime/executor_impl.hpp"
#include "sim/errors.hpp"

namespace kernbench::runtime {

void Executor::Impl::build() {
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
    nd.program_op = i;
    nd.name = op.name;
    if (op.agent >= system.machine().num_nodes())
      throw UsageError(program.name() + ": op " + std::to_string(i) + " '" + op.name + "': agent node id " +
                       std::to_string(op.agent) + " out of range");
    // On a generated machine only PEs own engines (explicit graphs name
    // their own agents: a K200 die, a host thread).
    const topology::NodeInfo& agent = system.machine().node(op.agent);
    if (system.machine().generated() && agent.kind != topology::NodeKind::Pe)
      throw UsageError(program.name() + ": op " + std::to_string(i) + " '" + op.name + "': agent " + agent.name +
                       " is a " + topology::to_string(agent.kind) + ", not a PE");
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
