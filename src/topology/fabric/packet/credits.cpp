// credits.cpp -- the packet model's finite buffers: credits per
// (channel, VC), head-of-line stalls, credit returns, deadlock detection.
// The model is described in packet_fabric.hpp; none of this runs on a
// machine whose links are all unbounded.
#include <algorithm>
#include <string>
#include <unordered_map>

#include "config/quantity.hpp"
#include "sim/errors.hpp"
#include "topology/fabric/packet/packet_fabric.hpp"

namespace kernbench::topology {

std::string packet_buffer_fault(const BufferSize& buffer, const FabricConfig& fabric) {
  if (!buffer.bounded() || fabric.flit <= 0) return "";
  const std::int64_t cap = buffer.flits(fabric.flit);
  const std::int64_t chunk_flits = std::max<std::int64_t>(1, (fabric.chunk + fabric.flit - 1) / fabric.flit);
  // Virtual cut-through: a chunk enters a buffer whole, so the buffer must
  // hold one, or nothing could ever cross the channel.
  if (cap >= chunk_flits && cap <= (std::int64_t{1} << 40)) return "";
  return "buffer " + to_string(buffer) + " holds " + std::to_string(cap) + " flits of " +
         config::format_bytes(fabric.flit) + ", " +
         (cap < chunk_flits ? "fewer than one chunk (fabric.chunk = " + config::format_bytes(fabric.chunk) + " = " +
                                  std::to_string(chunk_flits) +
                                  " flits): a chunk enters a buffer whole (virtual cut-through); "
                                  "raise the buffer, shrink fabric.chunk or set buffer: unbounded"
                            : std::string("more than 2^40"));
}

void PacketFabric::setup_buffers() {
  const std::size_t n = machine_.num_channels();
  for (ChannelId ch = 0; ch < n; ++ch)
    if (machine_.channel(ch).link.buffer.bounded()) buffered_ = true;
  if (!buffered_) return;
  vc_range_.assign(n, VcRange{});
  const std::int64_t chunk_flits = flits(config_.chunk);
  if (chunk_flits >= std::int64_t{1} << 31)
    throw ConfigError(machine_.config().source + ": fabric.chunk = " + config::format_bytes(config_.chunk) +
                      " is more than 2^31 flits, too large for finite buffers");
  for (ChannelId ch = 0; ch < n; ++ch) {
    const ChannelInfo& info = machine_.channel(ch);
    const LinkParams& link = info.link;
    if (!link.buffer.bounded()) continue;
    const std::int64_t cap = link.buffer.flits(config_.flit);
    // The loader applies the same rule (for `validate`); a Config built in code meets it here.
    if (const std::string fault = packet_buffer_fault(link.buffer, config_); !fault.empty())
      throw ConfigError(machine_.config().source + ": link class '" + info.link_class + "' (" +
                        machine_.node(info.from).name + " -> " + machine_.node(info.to).name + "): " + fault);
    vc_range_[ch] = VcRange{static_cast<std::uint32_t>(vcs_.size()), static_cast<std::uint32_t>(link.vcs)};
    for (int v = 0; v < link.vcs; ++v) {
      Vc vc;
      vc.capacity = vc.free = cap;
      vcs_.push_back(vc);
      vc_channel_.push_back(ch);
    }
  }
  sim_.set_idle_check([this] { check_deadlock(); });
}

PacketFabric::~PacketFabric() {
  if (buffered_) sim_.set_idle_check({});
}

bool PacketFabric::take_credits(std::uint32_t c, std::uint32_t slot) {
  Chunk& ch = chunks_[c];
  Vc& q = vcs_[slot];
  const std::int64_t need = flits(ch.size);
  // First come, first served: behind earlier waiters even if room is free.
  if (q.wait_head == kNone && q.free >= need) {
    book(q, ch, need);
    return true;
  }
  // Behind its own transfer only (an uncontended stream outrunning the
  // credit round trip): drain; behind others: queuing.
  ch.credit_own = q.owner == ch.transfer && q.owner_flits == q.capacity - q.free;
  ch.next = kNone;
  if (q.wait_tail == kNone)
    q.wait_head = c;
  else
    chunks_[q.wait_tail].next = c;
  q.wait_tail = c;
  ++q.waiting;
  ++q.stalls;
  ++credit_waiters_;
  return false;
}

bool PacketFabric::admit(std::uint32_t c) {
  Chunk& ch = chunks_[c];
  const std::uint32_t slot = slot_of(ch, ch.hop->channel);
  const std::uint32_t in = ch.held;
  if (in != kNone && vcs_[in].stall_head != kNone) {
    // Head-of-line blocking: an older chunk of this buffer waits for room;
    // this one queues behind it, whatever its output.
    ch.wait_start = sim_.now();
    ch.in_next = kNone;
    const Chunk& head = chunks_[vcs_[in].stall_head];
    ch.credit_own = head.transfer == ch.transfer && head.credit_own;
    chunks_[vcs_[in].stall_tail].in_next = c;
    vcs_[in].stall_tail = c;
    return false;
  }
  if (slot == kNone) return true;  // an unbounded channel: no credits to take
  if (take_credits(c, slot)) return true;
  ch.wait_start = sim_.now();
  if (in != kNone) {  // it is now the stalled head of its buffer
    ch.in_next = kNone;
    vcs_[in].stall_head = vcs_[in].stall_tail = c;
  }
  return false;
}

void PacketFabric::move_buffers(Chunk& ch, const Hop& hop, Time hold_end) {
  // Leave the buffer at this node once the tail has gone (hold_end); its
  // credits cross the reverse channel, whose latency is the link's own.
  if (ch.held != kNone) {
    const Hop& prev = *(&hop - 1);  // held is only set by the previous hop
    const std::int64_t f = flits(ch.size);
    Vc& q = vcs_[ch.held];
    q.held -= f;
    q.returning += f;
    const std::uint32_t own = q.owner == ch.transfer ? kOwnCredit : 0;
    sim_.schedule(hold_end - sim_.now() + prev.latency, on_credit_, pack(ch.held, static_cast<std::uint32_t>(f) | own));
  }
  const std::uint32_t slot = slot_of(ch, hop.channel);
  if (slot != kNone && &hop == ch.seg_last) {
    // The segment's end consumes the chunk when its tail arrives.
    const std::int64_t f = flits(ch.size);
    Vc& q = vcs_[slot];
    q.held -= f;
    q.returning += f;
    const std::uint32_t own = q.owner == ch.transfer ? kOwnCredit : 0;
    sim_.schedule(hold_end - sim_.now() + 2 * hop.latency, on_credit_, pack(slot, static_cast<std::uint32_t>(f) | own));
    ch.held = kNone;
    return;
  }
  ch.held = slot;
}

void PacketFabric::credit(std::uint64_t arg) {
  const std::uint32_t slot = low(arg);
  const auto hi = static_cast<std::uint32_t>(arg >> 32);
  const auto f = static_cast<std::int64_t>(hi & ~kOwnCredit);
  Vc& q = vcs_[slot];
  q.returning -= f;
  q.free += f;
  if (hi & kOwnCredit) q.owner_flits -= f;
  const Time now = sim_.now();
  // Hand the room to the waiters in order, as far as it goes.
  while (vcs_[slot].wait_head != kNone) {
    Vc& w = vcs_[slot];
    const std::uint32_t c = w.wait_head;
    Chunk& ch = chunks_[c];
    const std::int64_t need = flits(ch.size);
    if (w.free < need) break;
    book(w, ch, need);
    w.wait_head = ch.next;
    if (w.wait_head == kNone) w.wait_tail = kNone;
    --w.waiting;
    --credit_waiters_;
    // Waiting for room downstream: back-pressure from other traffic, or
    // its own stream outrunning the credit round trip.
    (ch.credit_own ? ch.parts.drain : ch.parts.queuing) += now - ch.wait_start;
    const std::uint32_t in = ch.held;
    request_lane(c);  // may grant at once, inject and move chunk records
    if (in != kNone) resume_stalled(in);
  }
}

void PacketFabric::resume_stalled(std::uint32_t in) {
  // The stalled head of buffer `in` got its room: the chunks behind it go
  // on, in order, until one has to wait for room in turn.
  const Time now = sim_.now();
  std::uint32_t c = chunks_[vcs_[in].stall_head].in_next;
  vcs_[in].stall_head = vcs_[in].stall_tail = kNone;
  while (c != kNone) {
    const std::uint32_t next = chunks_[c].in_next;
    const std::uint32_t slot = slot_of(chunks_[c], chunks_[c].hop->channel);
    if (slot != kNone && !take_credits(c, slot)) {
      // Stalled head again; the rest stay behind it. Its wait so far (behind
      // the previous head) is queuing too, counted when it is finally served.
      vcs_[in].stall_head = c;
      vcs_[in].stall_tail = c;
      for (std::uint32_t k = next; k != kNone; k = chunks_[k].in_next) vcs_[in].stall_tail = k;
      return;
    }
    Chunk& ch = chunks_[c];
    (ch.credit_own ? ch.parts.drain : ch.parts.queuing) += now - ch.wait_start;
    request_lane(c);
    c = next;
  }
}

PacketFabric::CreditState PacketFabric::credits(ChannelId channel, int vc) const {
  if (!buffered(channel) || vc < 0 || vc >= vcs(channel))
    throw UsageError("packet fabric: channel " + std::to_string(channel) + " has no buffered VC " + std::to_string(vc));
  const Vc& q = vcs_[vc_range_[channel].base + static_cast<std::uint32_t>(vc)];
  return CreditState{q.capacity, q.free, q.held, q.returning, q.waiting, q.stalls};
}

std::string PacketFabric::vc_name(std::uint32_t slot) const {
  const ChannelId ch = vc_channel_[slot];
  const ChannelInfo& info = machine_.channel(ch);
  return machine_.node(info.from).name + "->" + machine_.node(info.to).name + " vc" +
         std::to_string(slot - vc_range_[ch].base);
}

void PacketFabric::check_credits() const {
  for (std::uint32_t s = 0; s < vcs_.size(); ++s) {
    const Vc& q = vcs_[s];
    if (q.free < 0 || q.held < 0 || q.returning < 0 || q.free + q.held + q.returning != q.capacity)
      throw InternalError("packet fabric: credits of " + vc_name(s) + " do not add up: free " + std::to_string(q.free) +
                          " + held " + std::to_string(q.held) + " + returning " + std::to_string(q.returning) +
                          " != buffer " + std::to_string(q.capacity) + " flits");
  }
}

void PacketFabric::check_deadlock() const {
  if (credit_waiters_ == 0) return;
  // Wait-for graph over buffers: buffer p -> q when p's stalled head waits
  // for room in q. Each buffer has at most one stalled head, so following
  // the edges from any buffer ends in a cycle or at a buffer that drains.
  std::vector<std::uint32_t> waits_on(vcs_.size(), kNone);
  for (std::uint32_t q = 0; q < vcs_.size(); ++q)
    for (std::uint32_t c = vcs_[q].wait_head; c != kNone; c = chunks_[c].next)
      if (chunks_[c].held != kNone) waits_on[chunks_[c].held] = q;
  std::vector<std::uint8_t> state(vcs_.size(), 0);  // 0 new, 1 on the current walk, 2 done
  for (std::uint32_t start = 0; start < vcs_.size(); ++start) {
    std::vector<std::uint32_t> walk;
    std::uint32_t v = start;
    while (v != kNone && state[v] == 0) {
      state[v] = 1;
      walk.push_back(v);
      v = waits_on[v];
    }
    if (v != kNone && state[v] == 1) {  // closed a cycle: v ... back to v
      std::string names;
      std::size_t at = 0;
      while (walk[at] != v) ++at;
      for (std::size_t i = at; i < walk.size(); ++i) names += vc_name(walk[i]) + " -> ";
      names += vc_name(v);
      throw DeadlockError("packet fabric: deadlock at t=" + std::to_string(sim_.now()) +
                          " ps: " + std::to_string(credit_waiters_) +
                          " chunks wait for buffer credits that can never return; cycle of full buffers: " + names +
                          " (give these links more vcs with a deadlock-free routing, or buffer: unbounded)");
    }
    for (std::uint32_t w : walk) state[w] = 2;
  }
  throw InternalError("packet fabric: " + std::to_string(credit_waiters_) +
                      " chunks wait for credits with no event pending, and no cycle of full buffers");
}

}  // namespace kernbench::topology
