// switch_reduce.cpp -- in-network reduction (NVLink SHARP-like) on a switch
// node that declares `reduction: {bandwidth: ...}` (topology/config/config.hpp),
// and the coflow op (a fabric coflow, awaited the way a switch leg is).
//
// One switch_reduce op is one chunk of an all-reduce done by the switch:
//   gather     every member buffer sends the chunk to the switch, all at
//              once (one fabric transfer each, into the switch's input ports)
//   reduce     the switch's reduction unit adds the N contributions:
//              N x bytes / reduction bandwidth (rounded up to the ps)
//   multicast  the switch sends the result to every member: one fabric
//              transfer per member, i.e. one per output port when each
//              member hangs on its own port (the NVSwitch box). Where
//              members share links behind the switch the unicast copies
//              overcount those links: a true multicast tree would send once.
// On a GPU machine the members' SMs issue the chunk's multimem loads and
// stores (ccl/nccl.hpp): the op's `duration`, a floor on the gather stage
// (the issue and the gather overlap; the slower one sets the stage).
// Each stage holds a one-unit Server of the switch for its whole span, so a
// switch works on one chunk per stage at a time and successive chunks
// pipeline (chunk k+1 gathers while chunk k reduces and chunk k-1 is
// multicast). The gather and multicast stages are per set of ports (the
// members'): NVLS's load-reduce into GPU i and its multicast store from GPU
// j use different ones and overlap, sharing links in the fabric; the sum
// waits for its output ports without holding the reduction unit.
// Store-and-forward per chunk: the reduction starts when the whole chunk has
// arrived (real SHARP reduces flits as they arrive; more, smaller chunks
// approach it). No PE engine is charged.
// The op's SwitchGroup may add some buffers' chunks and send the sum to
// others, and may reach members through a lower reducing switch: that
// switch gathers its members' chunks, adds them (holding its own reduction
// unit) and passes one partial sum up; on the way down it receives the sum
// once and sends it on to each of its members (IB SHARP's aggregation tree).
#include <algorithm>
#include <memory>
#include <string>

#include "runtime/executor_impl.hpp"
#include "sim/join.hpp"
#include "sim/park.hpp"

namespace kernbench::runtime {

void Executor::Impl::switch_leg_done(std::uint64_t transfer) {
  Node& nd = nodes[transfer_node[transfer]];
  const topology::TransferRecord& r = system.fabric().record(transfer);
  nd.fabric_latency += r.latency();
  nd.fabric_queued += r.parts.queuing;
  if (--nd.legs_pending == 0 && nd.parked) sim.schedule(0, sim::Target::resume(std::exchange(nd.parked, {})));
}

namespace {

// The lower reducing switches of `vias` (those that are not the op's switch `sw`), each once, in the order the
// members name them.
std::vector<NodeId> lower_switches(const std::vector<NodeId>& vias, NodeId sw) {
  std::vector<NodeId> out;
  for (NodeId v : vias)
    if (v != sw && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  return out;
}

}  // namespace

sim::Task<> Executor::Impl::switch_leg(std::uint32_t n, NodeId src, NodeId dst) {
  const Node& nd = nodes[n];
  const topology::TransferSpec spec{
      src, dst, nd.move.bytes, 0, nd.tag, static_cast<std::int32_t>(nd.agent), static_cast<std::int64_t>(n)};
  const topology::TransferRecord& r = co_await system.fabric().transfer(spec);
  nodes[n].fabric_latency += r.latency();
  nodes[n].fabric_queued += r.parts.queuing;
}

Executor::Impl::SwitchStages& Executor::Impl::stages(NodeId sw) {
  auto& slot = switches[sw];
  if (!slot) slot = std::make_unique<SwitchStages>(sim, system.machine().node(sw).name);
  return *slot;
}

sim::Server& Executor::Impl::port_stage(NodeId sw, bool gather, const std::vector<NodeId>& members) {
  std::vector<NodeId> set = members;
  std::sort(set.begin(), set.end());
  auto& slot = stages(sw).ports[{gather, std::move(set)}];
  if (!slot)
    slot = std::make_unique<sim::Server>(sim, system.machine().node(sw).name + (gather ? ".gather" : ".multicast"), 1);
  return *slot;
}

// The members that switch `via` serves: their chunks added there into one, passed on to the op's switch
// (gather); or the sum received there once and sent on to each of them (multicast).
sim::Task<> Executor::Impl::aggregate(std::uint32_t n, NodeId via, bool gather) {
  const SwitchGroup& g = program.switch_groups()[nodes[n].group];
  const NodeId sw = nodes[n].agent;
  const std::vector<NodeId>& members = gather ? g.in : g.out;
  const std::vector<NodeId>& vias = gather ? g.in_via : g.out_via;
  if (!gather) co_await switch_leg(n, sw, via);
  sim::Join legs(sim);
  Bytes count = 0;
  for (std::size_t k = 0; k < members.size(); ++k) {
    if (vias[k] != via) continue;
    ++count;
    legs.spawn(nodes[n].name, gather ? switch_leg(n, members[k], via) : switch_leg(n, via, members[k]));
  }
  co_await legs.wait();
  if (!gather) co_return;
  SwitchStages& st = stages(via);
  co_await st.reduce.acquire();
  co_await sim.delay(sim::transfer_time(nodes[n].move.bytes * count, system.machine().node(via).params.reduction));
  st.reduce.release();
  co_await switch_leg(n, via, sw);
}

sim::Task<> Executor::Impl::switch_legs(std::uint32_t n, bool gather) {
  topology::Fabric& fabric = system.fabric();
  const SwitchGroup& g = program.switch_groups()[nodes[n].group];
  const std::vector<NodeId>& members = gather ? g.in : g.out;
  const std::vector<NodeId>& vias = gather ? g.in_via : g.out_via;
  const NodeId sw = nodes[n].agent;
  std::uint32_t direct = 0;
  for (NodeId v : vias) direct += v == sw ? 1 : 0;
  nodes[n].legs_pending = direct;
  for (std::size_t k = 0; k < members.size(); ++k) {
    if (vias[k] != sw) continue;
    const NodeId m = members[k];
    const Node& nd = nodes[n];
    topology::TransferSpec spec{gather ? m : sw,
                                gather ? sw : m,
                                nd.move.bytes,
                                0,
                                nd.tag,
                                static_cast<std::int32_t>(sw),
                                static_cast<std::int64_t>(n)};
    const topology::TransferId id = fabric.start(spec, sim::Target::call(on_switch_leg));
    if (id >= transfer_node.size()) transfer_node.resize(std::max<std::size_t>(id + 1, 2 * transfer_node.size()));
    transfer_node[id] = n;
  }
  sim::Join below(sim);
  for (NodeId v : lower_switches(vias, sw)) below.spawn(nodes[n].name, aggregate(n, v, gather));
  // Transfers never complete synchronously, so every direct leg is still pending here.
  if (direct > 0) co_await sim::Park{nodes[n].parked};
  co_await below.wait();
}

sim::Task<> Executor::Impl::switch_reduce(std::uint32_t n) {
  const NodeId sw = nodes[n].agent;
  SwitchStages& st = stages(sw);
  const SwitchGroup& g = program.switch_groups()[nodes[n].group];
  sim::Server& gather = port_stage(sw, true, g.in);
  sim::Server& multicast = port_stage(sw, false, g.out);

  co_await gather.acquire();
  nodes[n].start = sim.now();
  if (observer) observer->on_start(static_cast<OpId>(nodes[n].program_op));  // the members' data is read now
  const Time issued = sim.now() + nodes[n].duration;
  co_await switch_legs(n, true);
  if (sim.now() < issued) co_await sim.delay(issued - sim.now());
  co_await st.reduce.acquire();
  gather.release();
  // One input per direct member, one per aggregating switch below (its partial sum).
  const auto inputs = static_cast<Bytes>(std::count(g.in_via.begin(), g.in_via.end(), sw)) +
                      static_cast<Bytes>(lower_switches(g.in_via, sw).size());
  co_await sim.delay(sim::transfer_time(nodes[n].move.bytes * inputs, system.machine().node(sw).params.reduction));
  // The sum waits in the switch for its output ports, freeing the reduction unit for other ports' chunks.
  st.reduce.release();
  co_await multicast.acquire();
  co_await switch_legs(n, false);
  multicast.release();
}

// A coflow (program.hpp): one fabric coflow, its completion the op's end.
sim::Task<> Executor::Impl::coflow(std::uint32_t n) {
  Node& nd = nodes[n];
  nd.start = sim.now();
  if (observer) observer->on_start(static_cast<OpId>(nd.program_op));
  topology::CoflowSpec spec;
  spec.hops = program.coflows()[nd.group];
  spec.bytes = nd.move.bytes;
  spec.tag = nd.tag;
  spec.agent = static_cast<std::int32_t>(nd.agent);
  spec.request = static_cast<std::int64_t>(n);
  nd.legs_pending = 1;
  const topology::TransferId id = system.fabric().start_coflow(spec, sim::Target::call(on_switch_leg));
  if (id >= transfer_node.size()) transfer_node.resize(std::max<std::size_t>(id + 1, 2 * transfer_node.size()));
  transfer_node[id] = n;
  co_await sim::Park{nodes[n].parked};
}

}  // namespace kernbench::runtime
