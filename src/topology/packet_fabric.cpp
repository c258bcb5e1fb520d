// packet_fabric.cpp -- chunk events: request a lane, serialise, fly, arrive.
#include "topology/packet_fabric.hpp"

#include <cmath>

#include "sim/errors.hpp"

namespace kernbench::topology {

PacketFabric::PacketFabric(sim::Simulation& sim, const Machine& machine, const FabricConfig& config)
    : Fabric(sim, machine, config), channel_stats_(machine.num_channels()) {
  for (LaneId l = 0; l < machine.num_lanes(); ++l) lanes_.emplace_back(sim, machine.lane_name(l), 1);
}

std::uint32_t PacketFabric::segment_end(const Route& r, std::uint32_t begin) const {
  const auto hops = static_cast<std::uint32_t>(r.hops());
  for (std::uint32_t h = begin; h < hops; ++h) {
    if (h + 1 == hops) return hops;
    if (!r.hop[h].next_flit_aware) return h + 1;  // store-and-forward stop
  }
  return hops;
}

TransferId PacketFabric::start(const TransferSpec& spec, sim::Target on_done) {
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
  tr.lane_offset.clear();
  tr.slot_lane.clear();
  std::uint32_t offset = 0;
  for (const Hop& hop : route.hop) {
    tr.lane_offset.push_back(offset);
    offset += static_cast<std::uint32_t>(hop.connections);
    for (int k = 0; k < hop.connections; ++k) tr.slot_lane.push_back(hop.first_lane + static_cast<LaneId>(k));
  }
  tr.use.assign(offset, LaneUse{});
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
  ch.index = tr.injected++;
  ch.hop = tr.seg_begin;
  const Bytes offset = static_cast<Bytes>(ch.index) * config_.chunk;
  ch.size = std::min(config_.chunk, tr.bytes - offset);
  ch.parts = parts;
  ch.tail_ready = sim_.now();  // the whole chunk is here: at the source or a store-and-forward node
  request(c);
}

Time PacketFabric::own_busy(const Transfer& t, std::uint32_t slot) const {
  const LaneUse& u = t.use[slot];
  return u.completed + (u.since >= 0 ? sim_.now() - u.since : 0);
}

void PacketFabric::request(std::uint64_t c) {
  Chunk& ch = chunks_[c];
  const Transfer& tr = transfers_[ch.transfer];
  const Hop& hop = tr.route->hop[ch.hop];
  // Address striping: on a multi-connection link the lane is picked by the
  // chunk's address (two 64-bit divisions, so only where there is a choice).
  std::uint32_t k = 0;
  if (hop.connections > 1) {
    const std::uint64_t addr = tr.address + static_cast<std::uint64_t>(ch.index) * static_cast<std::uint64_t>(config_.chunk);
    k = static_cast<std::uint32_t>((addr / static_cast<std::uint64_t>(config_.stripe)) %
                                   static_cast<std::uint64_t>(hop.connections));
  }
  ch.lane = hop.first_lane + k;
  ch.use_slot = tr.lane_offset[ch.hop] + k;
  ch.wait_start = sim_.now();
  sim::Server& lane = lanes_[ch.lane];
  ch.lane_busy_at_wait = lane.busy_unit_time();
  ch.own_at_wait = own_busy(tr, ch.use_slot);
  if (lane.request(on_grant_, c)) granted(c);
}

void PacketFabric::granted(std::uint64_t c) {
  const Time now = sim_.now();
  Chunk& ch = chunks_[c];
  Transfer& tr = transfers_[ch.transfer];
  const sim::Server& lane = lanes_[ch.lane];
  if (const Time wait = now - ch.wait_start; wait > 0) {
    // The lane was held the whole wait (a released lane goes straight to
    // the next waiter); split that time by whose chunks held it.
    const auto busy = static_cast<Time>(std::llround(lane.busy_unit_time() - ch.lane_busy_at_wait));
    const Time own = own_busy(tr, ch.use_slot) - ch.own_at_wait;
    if (busy != wait || own < 0 || own > busy)
      throw InternalError("packet fabric: lane " + lane.name() + " wait of " + std::to_string(wait) +
                          " ps has busy " + std::to_string(busy) + " ps, own " + std::to_string(own) + " ps");
    ch.parts.drain += own;
    ch.parts.queuing += busy - own;
  }
  const Breakdown at_grant = ch.parts;
  const bool stream_head_hop = ch.hop == tr.seg_begin;
  const Hop& hop = tr.route->hop[ch.hop];
  // Cut-through: the head flit leaves after one flit time; the lane is held
  // until the whole chunk has gone, which may wait for its tail to arrive.
  const Time head = sim::transfer_time(std::min(config_.flit, ch.size), hop.bandwidth);
  const Time hold_end = std::max(now + sim::transfer_time(ch.size, hop.bandwidth), ch.tail_ready + head);
  tr.use[ch.use_slot].since = now;
  ChannelStats& stats = channel_stats_[hop.channel];
  stats.bytes += ch.size;
  stats.busy_time += static_cast<double>(hold_end - now);
  ++chunk_hops_;
  sim_.schedule(hold_end - now, on_serialised_, (static_cast<std::uint64_t>(ch.use_slot) << 32) | c);
  const Time lat = hop.latency;
  ch.parts.transmission += head + lat;
  if (ch.hop + 1 == tr.seg_end) {
    // The chunk is complete at the segment's end when its tail arrives:
    // the rest of its body streams behind its own head (drain).
    ch.parts.drain += hold_end - now - head;
    sim_.schedule(hold_end - now + lat, on_arrive_, c);
  } else {
    const Time o = hop.next_overhead;
    ch.parts.overhead += o;
    ch.tail_ready = hold_end + lat + o;
    ++ch.hop;
    sim_.schedule(head + lat + o, on_ready_, c);
  }
  // The next chunk of the stream may ask for a lane now; it inherits the
  // breakdown of this one at the moment it got its lane.
  if (stream_head_hop && tr.injected < tr.chunks) inject(ch.transfer, at_grant);
}

void PacketFabric::serialised(std::uint64_t arg) {
  const auto slot = static_cast<std::uint32_t>(arg >> 32);
  const auto c = static_cast<std::uint32_t>(arg & 0xffffffffU);
  Transfer& tr = transfers_[chunks_[c].transfer];
  LaneUse& use = tr.use[slot];
  use.completed += sim_.now() - use.since;
  use.since = -1;
  lanes_[tr.slot_lane[slot]].release();
}

void PacketFabric::arrived(std::uint64_t c) {
  const Chunk ch = chunks_[c];
  chunks_.release(c);
  Transfer& tr = transfers_[ch.transfer];
  tr.last = ch.parts;  // events run in time order: this is the latest arrival
  tr.delivered += ch.size;
  if (++tr.arrived < tr.chunks) return;
  // Invariant, always on: every byte sent arrived, once.
  if (tr.delivered != tr.bytes)
    throw InternalError("packet fabric: transfer " + std::to_string(tr.id) + " delivered " +
                        std::to_string(tr.delivered) + " B of " + std::to_string(tr.bytes) + " B at t=" +
                        std::to_string(sim_.now()) + " ps");
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

ChannelStats PacketFabric::channel_stats(ChannelId channel) const { return channel_stats_.at(channel); }

}  // namespace kernbench::topology
