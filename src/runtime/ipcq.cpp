// ipcq.cpp -- the IPCQ side of a run (ipcq.hpp): sends stream slot-sized
// segments into the receiver's queue from that sender, blocking on slot
// credits; recvs take the segments in order, pay the slot read (Consume:
// scratch read on the IPCQ receive port; Reduce: a bank hop + the vector
// engine) and give each credit back: by default as a small credit message
// over the fabric on the reverse route (pe.ipcq.credit: fabric), so a slot is
// usable again only a route latency after the recv freed it.
#include <algorithm>
#include <coroutine>
#include <string>
#include <utility>

#include "runtime/engine_timing.hpp"
#include "runtime/executor_impl.hpp"
#include "sim/errors.hpp"
#include "sim/park.hpp"

namespace kernbench::runtime {

Message& Executor::Impl::message(NodeId to, NodeId from, std::int64_t key) {
  auto [it, fresh] = message_index.try_emplace(MessageKey{to, from, key}, static_cast<std::uint32_t>(messages.size()));
  if (fresh) messages.emplace_back();
  return messages[it->second];
}

SlotQueue& Executor::Impl::queue(NodeId from, NodeId to, std::uint16_t channel) {
  auto& q = queues[{pair_key(from, to), channel}];
  if (!q) {
    q = std::make_unique<SlotQueue>(sim,
                                    system.machine().node(to).name + ".ipcq<" + system.machine().node(from).name +
                                        (channel ? ".ch" + std::to_string(channel) : std::string()),
                                    cfg.ipcq_slots);
    // NCCL's buffers (ipcq.hpp): one region per queue, where the allocator put it -- unrelated addresses, as the
    // links' lane interleave sees them: a 4 KiB-aligned offset drawn from the queue's index (deterministic).
    if (cfg.target == ExecTarget::Gpu)
      q->base = sim::mix64(static_cast<std::uint64_t>(queues.size())) & 0xFFFFFFF000ULL;
  }
  return *q;
}

namespace {

Bytes segment_bytes(Bytes total, Bytes slot, std::uint32_t k, std::uint32_t segments) {
  return k + 1 < segments ? slot : total - slot * static_cast<Bytes>(segments - 1);
}

}  // namespace

void Executor::Impl::segment_arrived(std::uint64_t transfer) {
  Message& m = messages[transfer_message[transfer]];
  lives[m.life0 + m.arrived].arrive = sim.now();  // segments of a message arrive in order
  ++m.arrived;
  const topology::TransferRecord& r = system.fabric().record(transfer);
  nodes[m.send].fabric_latency += r.latency();
  nodes[m.send].fabric_queued += r.parts.queuing;
  if (m.receiver && m.arrived > m.want) sim.schedule(0, sim::Target::resume(std::exchange(m.receiver, {})));
  if (m.sender && m.arrived == m.segments) sim.schedule(0, sim::Target::resume(std::exchange(m.sender, {})));
}

void Executor::Impl::credit_arrived(std::uint64_t transfer) {
  // The slot freed at the receiver is usable by the sender from now on.
  const std::uint32_t life = credit_life[transfer];
  lives[life].back = sim.now();
  std::exchange(credit_queue[transfer], nullptr)->credits.release(static_cast<std::int32_t>(life));
}

void Executor::Impl::return_credit(std::uint32_t recv_node, Message& m, std::uint32_t life) {
  lives[life].freed = sim.now();
  if (cfg.ipcq_credit == runtime::IpcqCredit::Instant) {
    lives[life].back = sim.now();
    m.queue->credits.release(static_cast<std::int32_t>(life));
    return;
  }
  // The credit goes back from the receiving PE to where the segments came
  // from (the send's move source), on that pair's own route: its latency is
  // the credit half of the slot round trip.
  const Node& snd = nodes[m.send];
  const topology::TransferSpec spec{snd.move.dst,
                                    snd.move.src,
                                    cfg.ipcq_credit_bytes,
                                    0,
                                    snd.tag,
                                    static_cast<std::int32_t>(nodes[recv_node].agent),
                                    static_cast<std::int64_t>(recv_node)};
  const topology::TransferId id = system.fabric().start(spec, sim::Target::call(on_credit));
  if (id >= credit_queue.size()) {
    credit_queue.resize(std::max<std::size_t>(id + 1, 2 * credit_queue.size()), nullptr);
    credit_life.resize(credit_queue.size());
  }
  credit_queue[id] = m.queue;
  credit_life[id] = life;
}

sim::Task<> Executor::Impl::send(std::uint32_t n, PeEngines& e) {
  if (!nodes[n].proxy) co_await e.acquire(Engine::Ipcq, nodes[n].engine_holder);
  Node& nd = nodes[n];
  nd.start = sim.now();
  if (observer) observer->on_start(static_cast<OpId>(nd.program_op));
  const NodeId dst = nd.move.dst;
  Message& first = message(dst, nd.agent, nd.key);
  const auto mi = static_cast<std::uint32_t>(&first - messages.data());
  if (first.send != Message::kNone)
    throw UsageError(program.name() + ": " + describe(n) + " reuses key " + std::to_string(nd.key) + " of " +
                     describe(first.send) + " for the same receiver " + system.machine().node(dst).name);
  SlotQueue& q = queue(nd.agent, dst, nd.channel);
  const Bytes slot = nd.segment > 0 ? nd.segment : cfg.ipcq_slot;
  const Bytes bytes = nd.move.bytes;
  const auto segments = static_cast<std::uint32_t>(bytes == 0 ? 1 : (bytes + slot - 1) / slot);
  first.send = n;
  first.segments = segments;
  first.bytes = bytes;
  first.slot = slot;
  first.queue = &q;
  first.life0 = static_cast<std::uint32_t>(lives.size());
  lives.resize(lives.size() + segments, SlotLife{.message = mi});
  topology::Fabric& fabric = system.fabric();
  for (std::uint32_t k = 0; k < segments; ++k) {
    const std::uint32_t life = messages[mi].life0 + k;
    if (!q.credits.try_acquire()) {  // back-pressure: every slot there is taken
      const Time t0 = sim.now();
      std::int32_t freed_by = -1;  // the slot life whose credit came back
      co_await q.credits.acquire_handed(freed_by);
      log_wait(nd, "slot_wait", t0, sim.now(), -1);
      nodes[n].slot_wait += sim.now() - t0;
      lives[life].wait_from = t0;
      lives[life].credit = freed_by;
      blame_slot(nodes[n], freed_by, t0, sim.now());
    }
    lives[life].inject = sim.now();
    // The segment's address: its offset in the message (a SIP's IPCQ), or on a GPU the slot of its queue's
    // buffer it fills (NCCL's ring of step slots).
    const std::uint64_t address =
        cfg.target == ExecTarget::Gpu
            ? q.base + static_cast<std::uint64_t>(q.next++ % static_cast<std::uint32_t>(cfg.ipcq_slots)) *
                           static_cast<std::uint64_t>(cfg.ipcq_slot)
            : static_cast<std::uint64_t>(k) * static_cast<std::uint64_t>(slot);
    topology::TransferSpec spec{nd.move.src,
                                dst,
                                segment_bytes(bytes, slot, k, segments),
                                address,
                                nd.tag,
                                static_cast<std::int32_t>(nd.agent),
                                static_cast<std::int64_t>(n)};
    const topology::TransferId id = fabric.start(spec, sim::Target::call(on_segment));
    if (id >= transfer_message.size())
      transfer_message.resize(std::max<std::size_t>(id + 1, 2 * transfer_message.size()));
    transfer_message[id] = mi;
  }
  if (messages[mi].arrived < segments) co_await sim::Park{messages[mi].sender};
  if (!nodes[n].proxy) e.release(Engine::Ipcq, n);
}

sim::Task<> Executor::Impl::recv(std::uint32_t n) {
  Message& first = message(nodes[n].agent, nodes[n].peer, nodes[n].key);
  const auto mi = static_cast<std::uint32_t>(&first - messages.data());
  first.recv = n;
  PeEngines& e = pe(nodes[n].agent);
  const RecvMode mode = nodes[n].recv_mode;
  for (std::uint32_t k = 0;; ++k) {
    if (messages[mi].arrived <= k) {
      const Time t0 = sim.now();
      messages[mi].want = k;
      co_await sim::Park{messages[mi].receiver};
      if (k == 0) {
        nodes[n].engine_holder = static_cast<std::int32_t>(messages[mi].send);  // waited for its data
      } else {
        nodes[n].data_wait += sim.now() - t0;
        blame_segment(nodes[n], messages[mi].life0 + k, t0, sim.now());
      }
    }
    if (k == 0) nodes[n].start = sim.now();  // the first segment is here
    const Bytes b = segment_bytes(messages[mi].bytes, messages[mi].slot, k, messages[mi].segments);
    const std::uint32_t life = messages[mi].life0 + k;
    if (mode == RecvMode::Consume) {
      std::int32_t unused = -1;
      co_await e.acquire(Engine::IpcqRx, unused);
      lives[life].take = sim.now();
      co_await sim.delay(scratch_read_time(cfg, b));
      e.release(Engine::IpcqRx, n);
    } else if (mode == RecvMode::Reduce) {
      std::int32_t unused = -1;
      co_await e.acquire(Engine::Vector, unused);
      lives[life].take = sim.now();
      co_await sim.delay(reduce_slot_time(cfg, b, nodes[n].name));
      e.release(Engine::Vector, n);
    } else {
      lives[life].take = sim.now();
    }
    Message& m = messages[mi];
    ++m.taken;
    return_credit(n, m, life);
    if (k + 1 == m.segments) break;
  }
}

}  // namespace kernbench::runtime
