// packet_fabric.cpp -- chunk events: request a lane, serialise, fly, arrive.
#include "topology/fabric/packet/packet_fabric.hpp"

#include <cmath>

#include "sim/errors.hpp"

namespace kernbench::topology {

PacketFabric::PacketFabric(sim::Simulation& sim, const Machine& machine, const FabricConfig& config)
    : Fabric(sim, machine, config), lanes_(machine.num_lanes()) {
  setup_buffers();
}

std::uint32_t PacketFabric::segment_end(const Route& r, std::uint32_t begin) const {
  const auto hops = static_cast<std::uint32_t>(r.hops());
  for (std::uint32_t h = begin; h < hops; ++h) {
    if (h + 1 == hops) return hops;
    if (!r.hop[h].next_flit_aware) return h + 1;  // store-and-forward stop
  }
  return hops;
}

TransferId PacketFabric::start_path(const TransferSpec& spec, sim::Target on_done) {
  TransferId id = 0;
  const Route& route = open(spec, id);
  const std::uint32_t t = transfers_.acquire();
  Transfer& tr = transfers_[t];
  tr.id = id;
  tr.route = &route;
  tr.on_done = on_done;
  tr.bytes = spec.bytes;
  tr.address = spec.address;
  tr.chunks = spec.bytes == 0 ? 1 : static_cast<std::uint32_t>((spec.bytes + config_.chunk - 1) / config_.chunk);
  records_[id].chunks = tr.chunks;
  tr.seg_begin = 0;
  tr.seg_end = segment_end(route, 0);
  tr.seg_slot = 0;
  std::uint32_t slots = 0;
  for (const Hop& hop : route.hop) slots += static_cast<std::uint32_t>(hop.connections);
  const Time now = sim_.now();
  tr.use.assign(slots, LaneUse{0, now, now});
  const Time o = spec.charge_src_overhead ? machine_.node(spec.src).params.overhead : 0;
  tr.stream_base = Breakdown{o, 0, 0, 0};
  sim_.schedule(o, on_stream_, t);
  return id;
}

void PacketFabric::start_segment(std::uint64_t t) {
  Transfer& tr = transfers_[t];
  tr.injected = 0;
  tr.arrived = 0;
  tr.delivered = 0;
  if (tr.seg_begin == tr.route->hops()) {  // src == dst: nothing to cross
    const TransferId id = tr.id;
    const Breakdown parts = tr.stream_base;
    const sim::Target done = tr.on_done;
    transfers_.release(t);
    close(id, sim_.now(), parts, done);
    return;
  }
  inject(static_cast<std::uint32_t>(t), tr.stream_base);
}

void PacketFabric::inject(std::uint32_t t, const Breakdown& parts) {
  const std::uint32_t c = chunks_.acquire();
  Transfer& tr = transfers_[t];
  Chunk& ch = chunks_[c];
  ch.transfer = t;
  const Bytes offset = static_cast<Bytes>(tr.injected++) * config_.chunk;
  ch.address = tr.address + static_cast<std::uint64_t>(offset);
  ch.size = std::min(config_.chunk, tr.bytes - offset);
  ch.seg_last = &tr.route->hop[tr.seg_end - 1];
  ch.stream_head = true;
  ch.next = kNone;
  ch.held = kNone;  // at the source or a store-and-forward node: in no channel's buffer
  ch.in_next = kNone;
  ch.vc = static_cast<std::uint8_t>(tr.id % kMaxVcs);  // VC index, mod each channel's vcs
  ch.parts = parts;
  ch.tail_ready = sim_.now();  // the whole chunk is here: at the source or a store-and-forward node
  enter_hop(ch, &tr.route->hop[tr.seg_begin], &tr.use[tr.seg_slot]);
  request(c);
}

void PacketFabric::enter_hop(Chunk& ch, const Hop* hop, LaneUse* use) const {
  // Address striping: on a multi-connection link the lane is picked by the
  // chunk's address (two 64-bit divisions, so only where there is a choice).
  std::uint32_t k = 0;
  if (hop->connections > 1) {
    k = static_cast<std::uint32_t>((ch.address / static_cast<std::uint64_t>(config_.stripe)) %
                                   static_cast<std::uint64_t>(hop->connections));
  }
  ch.hop = hop;
  ch.lane = hop->first_lane + k;
  ch.use = use + k;
}

void PacketFabric::request(std::uint64_t arg) {
  const std::uint32_t c = low(arg);
  // Finite buffers: first room downstream (credits), then the lane.
  if (buffered_ && !admit(c)) return;
  request_lane(c);
}

void PacketFabric::request_lane(std::uint32_t c) {
  Chunk& ch = chunks_[c];
  Lane& lane = lanes_[ch.lane];
  ch.wait_start = sim_.now();
  if (lane.head == kNone && lane_free(lane)) {
    ch.lane_busy_at_wait = ch.own_at_wait = 0;  // no wait to split
    granted(c);
    return;
  }
  ch.lane_busy_at_wait = lane_busy(lane);
  ch.own_at_wait = own_busy(*ch.use);
  // Queue behind the lane's waiters. The first one makes the lane's release
  // an event, in the place reserved for it (unless a hand-over is under
  // way: the next holder's grant books the next release).
  ch.next = kNone;
  if (lane.tail == kNone) {
    lane.head = c;
    if (!lane.handover) sim_.schedule_reserved(lane.busy_until, lane.release_seq, on_release_, pack(ch.lane, c));
  } else {
    chunks_[lane.tail].next = c;
  }
  lane.tail = c;
}

void PacketFabric::release(std::uint64_t arg) {
  const std::uint32_t l = low(arg);
  // The end of a hold with chunks waiting: hand the lane to the first, who
  // is granted by an event due now (as a Server's release does).
  Lane& lane = lanes_[l];
  const std::uint32_t c = lane.head;
  lane.head = chunks_[c].next;
  if (lane.head == kNone) lane.tail = kNone;
  lane.handover = true;
  sim_.schedule(0, on_grant_, pack(c, l));
}

void PacketFabric::granted(std::uint64_t arg) {
  const std::uint32_t c = low(arg);
  const Time now = sim_.now();
  Chunk& ch = chunks_[c];
  Lane& lane = lanes_[ch.lane];
  LaneUse& use = *ch.use;
  if (const Time wait = now - ch.wait_start; wait > 0) {
    // The lane was held the whole wait (it goes straight from one holder
    // to the next waiter); split that time by whose chunks held it.
    const Time busy = lane_busy(lane) - ch.lane_busy_at_wait;
    const Time own = own_busy(use) - ch.own_at_wait;
    if (busy != wait || own < 0 || own > busy)
      throw InternalError("packet fabric: lane " + machine_.lane_name(ch.lane) + " wait of " + std::to_string(wait) +
                          " ps has busy " + std::to_string(busy) + " ps, own " + std::to_string(own) + " ps");
    ch.parts.drain += own;
    ch.parts.queuing += busy - own;
  }
  const Breakdown at_grant = ch.parts;
  const bool stream_head = ch.stream_head;
  const Hop& hop = *ch.hop;
  // Cut-through: the head flit leaves after one flit time; the lane is held
  // until the whole chunk has gone, which may wait for its tail to arrive.
  const Time head = sim::transfer_time(std::min(config_.flit, ch.size), hop.bandwidth);
  const Time hold_end = std::max(now + sim::transfer_time(ch.size, hop.bandwidth), ch.tail_ready + head);
  // Book the hold (the previous one has ended: the lane is capacity 1) and
  // reserve its release's place; chunks already waiting make it an event.
  lane.busy += lane.busy_until - lane.hold_since;
  lane.hold_since = now;
  lane.busy_until = hold_end;
  if (recording_) [[unlikely]]
    busy_[hop.channel].add(now, hold_end);
  lane.release_seq = sim_.reserve_seq();
  lane.handover = false;
  if (lane.head != kNone) sim_.schedule_reserved(hold_end, lane.release_seq, on_release_, pack(ch.lane, lane.head));
  lane.bytes += ch.size;
  ++lane.grants;
  use.completed += use.until - use.since;
  use.since = now;
  use.until = hold_end;
  ++chunk_hops_;
  if (buffered_) move_buffers(ch, hop, hold_end);
  const Time lat = hop.latency;
  ch.parts.transmission += head + lat;
  if (ch.hop == ch.seg_last) {
    // The chunk is complete at the segment's end when its tail arrives:
    // the rest of its body streams behind its own head (drain).
    ch.parts.drain += hold_end - now - head;
    sim_.schedule(hold_end - now + lat, on_arrive_, pack(c, ch.transfer));
  } else {
    const Time o = hop.next_overhead;
    ch.parts.overhead += o;
    ch.tail_ready = hold_end + lat + o;
    ch.stream_head = false;
    // The next hop's lane uses follow this hop's in the transfer's `use`.
    LaneUse* next_uses = ch.use - (ch.lane - hop.first_lane) + hop.connections;
    enter_hop(ch, &hop + 1, next_uses);
    sim_.schedule(head + lat + o, on_ready_, pack(c, ch.lane));
  }
  // The next chunk of the stream may ask for a lane now; it inherits the
  // breakdown of this one at the moment it got its lane.
  if (stream_head) {
    const std::uint32_t t = ch.transfer;  // inject() may move the chunk records
    if (transfers_[t].injected < transfers_[t].chunks) inject(t, at_grant);
  }
}

void PacketFabric::arrived(std::uint64_t arg) {
  const std::uint32_t c = low(arg);
  const Chunk ch = chunks_[c];
  chunks_.release(c);
  Transfer& tr = transfers_[ch.transfer];
  tr.last = ch.parts;  // events run in time order: this is the latest arrival
  tr.delivered += ch.size;
  if (++tr.arrived < tr.chunks) return;
  // Invariant, always on: every byte sent arrived, once.
  if (tr.delivered != tr.bytes)
    throw InternalError("packet fabric: transfer " + std::to_string(tr.id) + " delivered " +
                        std::to_string(tr.delivered) + " B of " + std::to_string(tr.bytes) +
                        " B at t=" + std::to_string(sim_.now()) + " ps");
  // The whole transfer is at the segment's end node: pay its overhead once.
  Breakdown parts = tr.last;
  const Time o = tr.route->hop[tr.seg_end - 1].next_overhead;
  parts.overhead += o;
  if (tr.seg_end == tr.route->hops()) {
    // Close at the real end, after the destination's processing, so that
    // in_flight() and the record are exact at every instant.
    tr.last = parts;
    sim_.schedule(o, on_finish_, ch.transfer);
    return;
  }
  // Store-and-forward: re-stream from this node after its processing.
  for (std::uint32_t h = tr.seg_begin; h < tr.seg_end; ++h)
    tr.seg_slot += static_cast<std::uint32_t>(tr.route->hop[h].connections);
  tr.seg_begin = tr.seg_end;
  tr.seg_end = segment_end(*tr.route, tr.seg_begin);
  tr.stream_base = parts;
  sim_.schedule(o, on_stream_, ch.transfer);
}

void PacketFabric::finish(std::uint64_t t) {
  const Transfer& tr = transfers_[t];
  const TransferId id = tr.id;
  const Breakdown parts = tr.last;
  const sim::Target done = tr.on_done;
  transfers_.release(t);
  close(id, sim_.now(), parts, done);
}

ChannelStats PacketFabric::channel_stats(ChannelId channel) const {
  const ChannelInfo& info = machine_.channel(channel);
  ChannelStats s;
  for (int k = 0; k < info.link.connections; ++k) {
    const Lane& l = lanes_[info.first_lane + static_cast<LaneId>(k)];
    s.bytes += l.bytes;
    s.busy_time += static_cast<double>(l.busy + l.busy_until - l.hold_since);  // holds are booked when granted
  }
  return s;
}

void PacketFabric::record_busy(Time origin) {
  recording_ = origin >= 0;
  busy_.clear();
  if (recording_) busy_.assign(machine_.num_channels(), sim::BusyHistogram(origin));
}

PacketFabric::LaneStats PacketFabric::lane_stats(LaneId id) const {
  const Lane& l = lanes_.at(id);
  return LaneStats{static_cast<double>(lane_busy(l)), l.bytes, l.grants};
}

}  // namespace kernbench::topology
