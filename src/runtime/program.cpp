// program.cpp -- building Programs, with their inputs checked as they come.
#include "runtime/program.hpp"

#include <algorithm>
#include <cmath>

#include "sim/errors.hpp"
#include "topology/fabric/fabric.hpp"

namespace kernbench::runtime {

const char* to_string(OpKind kind) {
  switch (kind) {
    case OpKind::Dma: return "dma";
    case OpKind::Gemm: return "gemm";
    case OpKind::Vector: return "vector";
    case OpKind::Alloc: return "alloc";
    case OpKind::Free: return "free";
    case OpKind::Send: return "send";
    case OpKind::Recv: return "recv";
    case OpKind::Barrier: return "barrier";
    case OpKind::Composite: return "composite";
    case OpKind::SwitchReduce: return "switch_reduce";
    case OpKind::Launch: return "launch";
    case OpKind::Kernel: return "kernel";
    case OpKind::Coflow: return "coflow";
  }
  return "?";
}

const char* to_string(RecvMode mode) {
  switch (mode) {
    case RecvMode::Consume: return "consume";
    case RecvMode::Reduce: return "reduce";
    case RecvMode::NoConsume: return "no_consume";
  }
  return "?";
}

namespace {

Op make_op(OpKind kind, NodeId agent, std::string name, std::int32_t tag = 0) {
  Op op;
  op.kind = kind;
  op.agent = agent;
  op.name = std::move(name);
  op.tag = tag;
  return op;
}

}  // namespace

OpId Program::add(Op op, std::vector<OpId> deps) {
  const auto id = static_cast<OpId>(ops_.size());
  if (ops_.size() >= kMaxOps)
    throw UsageError(name_ + ": " + to_string(op.kind) + " '" + op.name + "': the program already has " +
                     std::to_string(ops_.size()) + " ops, the limit of ops in a program");
  for (OpId d : deps)
    if (d >= id)
      throw UsageError(name_ + ": op " + std::to_string(id) + " '" + op.name + "' depends on op " + std::to_string(d) +
                       ", which does not exist yet (use depend() for later ops)");
  op.deps = std::move(deps);
  if (op.name.empty()) op.name = to_string(op.kind) + std::string("#") + std::to_string(id);
  if (op.kind == OpKind::Send || op.kind == OpKind::Recv) note_key(op.key);
  ops_.push_back(std::move(op));
  return id;
}

void Program::note_key(std::int64_t key) {
  key_min_ = have_keys_ ? std::min(key_min_, key) : key;
  key_max_ = have_keys_ ? std::max(key_max_, key) : key;
  have_keys_ = true;
}

OpId Program::dma(NodeId agent, Move move, std::vector<OpId> deps, std::string name, std::int32_t tag) {
  topology::check_transfer_size(move.bytes, name_ + ": dma '" + name + "'");
  Op op = make_op(OpKind::Dma, agent, std::move(name), tag);
  op.move = move;
  return add(std::move(op), std::move(deps));
}

OpId Program::gemm(NodeId agent, double flops, Precision precision, std::vector<OpId> deps, std::string name,
                   std::int32_t tag) {
  if (!(flops >= 0) || !std::isfinite(flops))
    throw UsageError(name_ + ": gemm '" + name + "': FLOPs must be >= 0 and finite, got " + std::to_string(flops));
  Op op = make_op(OpKind::Gemm, agent, std::move(name), tag);
  op.flops = flops;
  op.precision = precision;
  return add(std::move(op), std::move(deps));
}

OpId Program::vector(NodeId agent, Bytes bytes, std::vector<OpId> deps, std::string name, std::int32_t tag) {
  if (bytes < 0) throw UsageError(name_ + ": vector '" + name + "': negative size");
  Op op = make_op(OpKind::Vector, agent, std::move(name), tag);
  op.bytes = bytes;
  return add(std::move(op), std::move(deps));
}

OpId Program::alloc(NodeId agent, Bytes bytes, std::vector<OpId> deps, std::string name) {
  if (bytes < 0) throw UsageError(name_ + ": alloc '" + name + "': negative size");
  Op op = make_op(OpKind::Alloc, agent, std::move(name));
  op.bytes = bytes;
  return add(std::move(op), std::move(deps));
}

OpId Program::free(OpId alloc, std::vector<OpId> deps, std::string name) {
  if (alloc >= ops_.size() || ops_[alloc].kind != OpKind::Alloc)
    throw UsageError(name_ + ": free '" + name + "': op " + std::to_string(alloc) + " is not an alloc");
  for (const Op& o : ops_)
    if (o.kind == OpKind::Free && o.target == alloc)
      throw UsageError(name_ + ": free '" + name + "': alloc op " + std::to_string(alloc) + " '" + ops_[alloc].name +
                       "' is already freed by '" + o.name + "'");
  Op op = make_op(OpKind::Free, ops_[alloc].agent, std::move(name));
  op.bytes = ops_[alloc].bytes;
  op.target = alloc;
  deps.push_back(alloc);  // nothing is freed before it is allocated
  return add(std::move(op), std::move(deps));
}

OpId Program::send(NodeId agent, NodeId peer, Bytes bytes, std::int64_t key, std::vector<OpId> deps, std::string name,
                   std::int32_t tag, std::optional<NodeId> source) {
  topology::check_transfer_size(bytes, name_ + ": send '" + name + "'");
  if (peer == agent) throw UsageError(name_ + ": send '" + name + "': a PE cannot send to itself");
  Op op = make_op(OpKind::Send, agent, std::move(name), tag);
  op.move = Move{source.value_or(agent), peer, bytes};
  op.key = key;
  return add(std::move(op), std::move(deps));
}

OpId Program::recv(NodeId agent, NodeId peer, std::int64_t key, std::vector<OpId> deps, std::string name,
                   std::int32_t tag, RecvMode mode) {
  if (peer == agent) throw UsageError(name_ + ": recv '" + name + "': a PE cannot receive from itself");
  Op op = make_op(OpKind::Recv, agent, std::move(name), tag);
  op.peer = peer;
  op.key = key;
  op.recv_mode = mode;
  return add(std::move(op), std::move(deps));
}

void Program::set_latency(OpId op, Time latency) {
  if (op >= ops_.size() || ops_[op].kind == OpKind::SwitchReduce || ops_[op].kind == OpKind::Composite)
    throw UsageError(name_ + ": set_latency: op " + std::to_string(op) + " is not an op with a dispatch");
  if (latency < 0) throw UsageError(name_ + ": set_latency: negative latency " + std::to_string(latency) + " ps");
  ops_[op].latency = latency;
}

void Program::set_segment(OpId op, Bytes segment) {
  if (op >= ops_.size() || ops_[op].kind != OpKind::Send)
    throw UsageError(name_ + ": set_segment: op " + std::to_string(op) + " is not a send");
  if (segment <= 0) throw UsageError(name_ + ": set_segment: segment must be > 0, got " + std::to_string(segment));
  ops_[op].segment = segment;
}

void Program::set_channel(OpId op, int channel) {
  if (op >= ops_.size() || ops_[op].kind != OpKind::Send)
    throw UsageError(name_ + ": set_channel: op " + std::to_string(op) + " is not a send");
  if (channel < 0 || channel > 0xffff)
    throw UsageError(name_ + ": set_channel: channel must be 0 .. 65535, got " + std::to_string(channel));
  ops_[op].channel = static_cast<std::uint16_t>(channel);
}

void Program::set_proxy(OpId op) {
  if (op >= ops_.size() || ops_[op].kind != OpKind::Send)
    throw UsageError(name_ + ": set_proxy: op " + std::to_string(op) + " is not a send");
  ops_[op].proxy = true;
}

void Program::set_slices(OpId op, Slices slices) {
  if (op >= ops_.size() ||
      (ops_[op].kind != OpKind::Send && ops_[op].kind != OpKind::Recv && ops_[op].kind != OpKind::SwitchReduce))
    throw UsageError(name_ + ": set_slices: op " + std::to_string(op) + " is not a send, recv or switch_reduce");
  if (slices.lo < 0 || slices.hi < slices.lo)
    throw UsageError(name_ + ": set_slices: bad range [" + std::to_string(slices.lo) + ", " +
                     std::to_string(slices.hi) + ")");
  ops_[op].slices = slices;
}

OpId Program::barrier(NodeId agent, std::vector<OpId> deps, std::string name) {
  Op op = make_op(OpKind::Barrier, agent, std::move(name));
  return add(std::move(op), std::move(deps));
}

OpId Program::composite(NodeId agent, Pipeline pipeline, std::vector<OpId> deps, std::string name, std::int32_t tag) {
  if (pipeline.tiles == 0) throw UsageError(name_ + ": composite '" + name + "': needs at least one tile");
  if (pipeline.buffers == 0) throw UsageError(name_ + ": composite '" + name + "': needs at least one buffer");
  if (pipeline.compute != OpKind::Gemm && pipeline.compute != OpKind::Vector)
    throw UsageError(name_ + ": composite '" + name + "': the compute stage runs on gemm or vector");
  for (std::size_t j = 0; j < pipeline.loads.size(); ++j)
    topology::check_transfer_size(pipeline.loads[j].bytes,
                                  name_ + ": composite '" + name + "': load " + std::to_string(j));
  for (std::size_t j = 0; j < pipeline.stores.size(); ++j)
    topology::check_transfer_size(pipeline.stores[j].bytes,
                                  name_ + ": composite '" + name + "': store " + std::to_string(j));
  if (!(pipeline.flops >= 0) || !std::isfinite(pipeline.flops))
    throw UsageError(name_ + ": composite '" + name + "': FLOPs per tile must be >= 0 and finite, got " +
                     std::to_string(pipeline.flops));
  if (pipeline.vector_bytes < 0)
    throw UsageError(name_ + ": composite '" + name + "': negative vector_bytes " +
                     std::to_string(pipeline.vector_bytes));
  // Its run-graph nodes (one op-log row each), counted before anything is allocated.
  const std::uint64_t per_tile = pipeline.loads.size() + 1 + pipeline.stores.size();
  if (static_cast<std::uint64_t>(pipeline.tiles) * per_tile + 2 > kMaxRunNodes)
    throw UsageError(name_ + ": composite '" + name + "': tiles = " + std::to_string(pipeline.tiles) + " x " +
                     std::to_string(per_tile) + " stages (loads + compute + stores) would make " +
                     std::to_string(static_cast<std::uint64_t>(pipeline.tiles) * per_tile + 2) +
                     " run-graph nodes, more than the limit of " + std::to_string(kMaxRunNodes));
  Op op = make_op(OpKind::Composite, agent, std::move(name), tag);
  op.pipeline = static_cast<std::uint32_t>(pipelines_.size());
  pipelines_.push_back(std::move(pipeline));
  return add(std::move(op), std::move(deps));
}

OpId Program::switch_reduce(NodeId sw, std::vector<NodeId> members, Bytes bytes, std::vector<OpId> deps,
                            std::string name, std::int32_t tag, Time issue) {
  if (members.size() < 2)
    throw UsageError(name_ + ": switch_reduce '" + name + "': needs at least 2 members, got " +
                     std::to_string(members.size()));
  SwitchGroup g;
  g.in = members;
  g.out = std::move(members);
  return switch_reduce(sw, std::move(g), bytes, std::move(deps), std::move(name), tag, issue);
}

OpId Program::switch_reduce(NodeId sw, SwitchGroup group, Bytes bytes, std::vector<OpId> deps, std::string name,
                            std::int32_t tag, Time issue) {
  topology::check_transfer_size(bytes, name_ + ": switch_reduce '" + name + "'");
  if (issue < 0) throw UsageError(name_ + ": switch_reduce '" + name + "': negative issue time");
  if (group.in.empty() || group.out.empty() || (group.in.size() < 2 && group.out.size() < 2))
    throw UsageError(name_ + ": switch_reduce '" + name +
                     "': needs buffers to reduce and to receive, 2 or more of "
                     "one of them (a plain send moves one to one); got " +
                     std::to_string(group.in.size()) + " in, " + std::to_string(group.out.size()) + " out");
  const auto fill = [&](std::vector<NodeId>& via, std::size_t n, const char* which) {
    if (via.empty()) via.assign(n, sw);
    if (via.size() != n)
      throw UsageError(name_ + ": switch_reduce '" + name + "': " + which + " lists " + std::to_string(via.size()) +
                       " switches for " + std::to_string(n) + " buffers");
  };
  fill(group.in_via, group.in.size(), "in_via");
  fill(group.out_via, group.out.size(), "out_via");
  Op op = make_op(OpKind::SwitchReduce, sw, std::move(name), tag);
  op.move = Move{sw, sw, bytes};
  op.duration = issue;
  op.pipeline = static_cast<std::uint32_t>(switch_groups_.size());
  switch_groups_.push_back(std::move(group));
  return add(std::move(op), std::move(deps));
}

OpId Program::coflow(NodeId agent, std::vector<topology::CoflowHop> hops, Bytes bytes, Time latency,
                     std::vector<OpId> deps, std::string name, std::int32_t tag) {
  topology::check_transfer_size(bytes, name_ + ": coflow '" + name + "'");
  if (latency < 0) throw UsageError(name_ + ": coflow '" + name + "': negative latency");
  if (hops.empty()) throw UsageError(name_ + ": coflow '" + name + "': needs at least one hop");
  for (const topology::CoflowHop& h : hops)
    if (!(h.weight > 0.0) || !std::isfinite(h.weight))
      throw UsageError(name_ + ": coflow '" + name + "': a hop's weight must be positive and finite, got " +
                       std::to_string(h.weight));
  Op op = make_op(OpKind::Coflow, agent, std::move(name), tag);
  op.move = Move{hops.front().src, hops.back().dst, bytes};
  op.latency = latency;
  op.pipeline = static_cast<std::uint32_t>(coflows_.size());
  coflows_.push_back(std::move(hops));
  return add(std::move(op), std::move(deps));
}

OpId Program::kernel(NodeId agent, const KernelCost& cost, std::vector<OpId> deps, std::string name, std::int32_t tag) {
  if (cost.launch < 0 || cost.duration < 0)
    throw UsageError(name_ + ": kernel '" + name + "': negative launch or duration");
  if (!(cost.flops >= 0) || !std::isfinite(cost.flops) || cost.bytes < 0)
    throw UsageError(name_ + ": kernel '" + name + "': FLOPs and bytes must be >= 0 and finite");
  if (cost.ctas < 0 || cost.sms < 0 || cost.hold < 0 || (cost.ctas > 0) != (cost.sms > 0))
    throw UsageError(name_ + ": kernel '" + name + "': ctas " + std::to_string(cost.ctas) + " and sms " +
                     std::to_string(cost.sms) + " must be both 0 or both > 0, hold " + std::to_string(cost.hold) +
                     " >= 0");
  if (cost.launch > 0) {
    Op l = make_op(OpKind::Launch, agent, "launch " + name, tag);
    l.duration = cost.launch;
    std::vector<OpId> after;
    if (auto prev = last_launch(agent)) after.push_back(*prev);
    const OpId id = add(std::move(l), std::move(after));
    note_launch(agent, id);
    deps.push_back(id);
  }
  Op op = make_op(OpKind::Kernel, agent, std::move(name), tag);
  op.duration = cost.duration;
  op.flops = cost.flops;
  op.precision = cost.precision;
  op.bytes = cost.bytes;
  op.ctas = cost.ctas;
  op.sms = cost.sms;
  op.sm_hold = cost.hold;
  op.side = cost.side;
  return add(std::move(op), std::move(deps));
}

OpId Program::sm_release(NodeId agent, std::int32_t sms, std::vector<OpId> deps, std::string name) {
  if (sms <= 0) throw UsageError(name_ + ": sm_release '" + name + "': sms must be > 0");
  Op op = make_op(OpKind::Barrier, agent, std::move(name));
  op.sm_hold = -sms;
  op.latency = 0;  // no PE_CPU dispatch: a GPU has none
  return add(std::move(op), std::move(deps));
}

std::optional<OpId> Program::last_launch(NodeId agent) const {
  for (const auto& [a, op] : last_launch_)
    if (a == agent) return op;
  return std::nullopt;
}

void Program::note_launch(NodeId agent, OpId op) {
  for (auto& [a, last] : last_launch_)
    if (a == agent) {
      last = op;
      return;
    }
  last_launch_.emplace_back(agent, op);
}

void Program::depend(OpId op, OpId on) {
  if (op >= ops_.size() || on >= ops_.size())
    throw UsageError(name_ + ": depend(" + std::to_string(op) + ", " + std::to_string(on) + "): no such op");
  ops_[op].deps.push_back(on);
}

OpId Program::append(const Program& sub, const std::vector<OpId>& after,
                     const std::map<NodeId, std::vector<OpId>>& per_agent) {
  const auto offset = static_cast<OpId>(ops_.size());
  if (ops_.size() + sub.size() > kMaxOps)
    throw UsageError(name_ + ": append '" + sub.name() + "': " + std::to_string(ops_.size()) + " + " +
                     std::to_string(sub.size()) + " ops would exceed the limit of " + std::to_string(kMaxOps) + " ops");
  for (OpId a : after)
    if (a >= offset)
      throw UsageError(name_ + ": append '" + sub.name() + "': after op " + std::to_string(a) +
                       ", which does not exist");
  std::vector<OpId> every;  // per_agent's lists together: for a waiting op on an agent not listed
  for (const auto& [agent, ops] : per_agent)
    for (OpId a : ops) {
      if (a >= offset)
        throw UsageError(name_ + ": append '" + sub.name() + "': per_agent op " + std::to_string(a) +
                         " does not exist before it");
      every.push_back(a);
    }
  const auto own = [&](NodeId agent) -> const std::vector<OpId>& {
    const auto it = per_agent.find(agent);
    return it == per_agent.end() ? every : it->second;
  };
  // Keys: shift the sub-program's above every key used here.
  const std::int64_t key_shift = (have_keys_ && sub.have_keys_) ? key_max_ - sub.key_min_ + 1 : 0;
  std::vector<std::int32_t> tag_map(sub.tags().size());
  for (std::size_t i = 0; i < tag_map.size(); ++i) tag_map[i] = tag(sub.tags()[i]);
  auto map_tag = [&](std::int32_t t) { return t < 0 ? t : tag_map.at(static_cast<std::size_t>(t)); };
  const auto pipe_offset = static_cast<std::uint32_t>(pipelines_.size());
  for (Pipeline p : sub.pipelines()) {
    p.load_tag = map_tag(p.load_tag);
    p.compute_tag = map_tag(p.compute_tag);
    p.store_tag = map_tag(p.store_tag);
    pipelines_.push_back(std::move(p));
  }
  const auto group_offset = static_cast<std::uint32_t>(switch_groups_.size());
  switch_groups_.insert(switch_groups_.end(), sub.switch_groups().begin(), sub.switch_groups().end());
  const auto coflow_offset = static_cast<std::uint32_t>(coflows_.size());
  coflows_.insert(coflows_.end(), sub.coflows().begin(), sub.coflows().end());
  // Grow geometrically: an exact reserve per append would copy the whole
  // program every time (quadratic in the number of appends).
  if (const std::size_t need = ops_.size() + sub.size(); need > ops_.capacity())
    ops_.reserve(std::max(need, 2 * ops_.capacity()));
  for (Op o : sub.ops()) {
    // A kernel that waits only for its own launch waits for `after` too:
    // its launch runs ahead, the kernel starts after what came before.
    const bool only_launches = o.kind == OpKind::Kernel && std::all_of(o.deps.begin(), o.deps.end(), [&](OpId d) {
                                 return sub.op(d).kind == OpKind::Launch;
                               });
    for (OpId& d : o.deps) d += offset;
    if (only_launches) {
      o.deps.insert(o.deps.end(), after.begin(), after.end());
      if (!per_agent.empty()) o.deps.insert(o.deps.end(), own(o.agent).begin(), own(o.agent).end());
    } else if (o.kind == OpKind::Launch) {
      // Launches stay in host order: the sub-program's first launch on an
      // agent follows this program's last one there, not `after`.
      if (o.deps.empty())
        if (auto prev = last_launch(o.agent)) o.deps.push_back(*prev);
      note_launch(o.agent, static_cast<OpId>(ops_.size()));
    } else if (o.deps.empty()) {
      o.deps = after;
      if (!per_agent.empty()) o.deps.insert(o.deps.end(), own(o.agent).begin(), own(o.agent).end());
    }
    o.tag = map_tag(o.tag);
    if (o.kind == OpKind::Free) o.target += offset;
    if (o.kind == OpKind::Composite) o.pipeline += pipe_offset;
    if (o.kind == OpKind::SwitchReduce) o.pipeline += group_offset;
    if (o.kind == OpKind::Coflow) o.pipeline += coflow_offset;
    if (o.kind == OpKind::Send || o.kind == OpKind::Recv) {
      o.key += key_shift;
      note_key(o.key);
    }
    ops_.push_back(std::move(o));
  }
  return offset;
}

std::vector<OpId> Program::sinks(OpId from) const {
  std::vector<char> needed(ops_.size(), 0);
  for (std::size_t i = from; i < ops_.size(); ++i)
    for (OpId d : ops_[i].deps) needed[d] = 1;
  std::vector<OpId> out;
  for (std::size_t i = from; i < ops_.size(); ++i)
    if (!needed[i]) out.push_back(static_cast<OpId>(i));
  return out;
}

std::int32_t Program::tag(const std::string& label) {
  for (std::size_t i = 0; i < tags_.size(); ++i)
    if (tags_[i] == label) return static_cast<std::int32_t>(i);
  tags_.push_back(label);
  return static_cast<std::int32_t>(tags_.size() - 1);
}

std::string Program::describe(OpId id, const topology::Machine& m) const {
  const Op& o = ops_.at(id);
  return "op " + std::to_string(id) + " '" + o.name + "' (" + to_string(o.kind) + " on " + m.node(o.agent).name + ")";
}

}  // namespace kernbench::runtime
