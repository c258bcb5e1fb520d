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
// multicast). Store-and-forward per chunk: the reduction starts when the
// whole chunk has arrived (real SHARP reduces flits as they arrive; more,
// smaller chunks approach it). No PE engine is charged.
#include <algorithm>
#include <memory>
#include <string>

#include "runtime/executor_impl.hpp"
#include "sim/park.hpp"

namespace kernbench::runtime {

void Executor::Impl::switch_leg_done(std::uint64_t transfer) {
  Node& nd = nodes[transfer_node[transfer]];
  const topology::TransferRecord& r = system.fabric().record(transfer);
  nd.fabric_latency += r.latency();
  nd.fabric_queued += r.parts.queuing;
  if (--nd.legs_pending == 0 && nd.parked) sim.schedule(0, sim::Target::resume(std::exchange(nd.parked, {})));
}

sim::Task<> Executor::Impl::switch_legs(std::uint32_t n, bool gather) {
  topology::Fabric& fabric = system.fabric();
  const std::vector<NodeId>& members = program.switch_groups()[nodes[n].group];
  const NodeId sw = nodes[n].agent;
  nodes[n].legs_pending = static_cast<std::uint32_t>(members.size());
  for (NodeId m : members) {
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
  // Transfers never complete synchronously, so every leg is still pending here.
  co_await sim::Park{nodes[n].parked};
}

sim::Task<> Executor::Impl::switch_reduce(std::uint32_t n) {
  const NodeId sw = nodes[n].agent;
  auto& slot = switches[sw];
  if (!slot) slot = std::make_unique<SwitchStages>(sim, system.machine().node(sw).name);
  SwitchStages& st = *slot;
  const std::vector<NodeId>& members = program.switch_groups()[nodes[n].group];

  co_await st.gather.acquire();
  nodes[n].start = sim.now();
  if (observer) observer->on_start(static_cast<OpId>(nodes[n].program_op));  // the members' data is read now
  const Time issued = sim.now() + nodes[n].duration;
  co_await switch_legs(n, true);
  if (sim.now() < issued) co_await sim.delay(issued - sim.now());
  co_await st.reduce.acquire();
  st.gather.release();
  const Bytes in = nodes[n].move.bytes * static_cast<Bytes>(members.size());
  co_await sim.delay(sim::transfer_time(in, system.machine().node(sw).params.reduction));
  co_await st.multicast.acquire();
  st.reduce.release();
  co_await switch_legs(n, false);
  st.multicast.release();
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
