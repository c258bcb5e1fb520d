// packet_fabric.hpp -- the packet model: chunks pipelining hop by hop.
//
// A transfer is cut into chunks (fabric.chunk, down to one flit). Chunks
// enter the first channel of their segment in order -- chunk k+1 asks for a
// lane once chunk k has one -- so two transfers sharing a channel interleave
// chunk by chunk. Each lane of each channel is a capacity-1 FIFO server
// (see Cost below: the same semantics as a sim::Server, in a compact record).
// Forwarding is cut-through at flit granularity: a chunk's head flit moves
// on one flit time after it got a lane (plus wire latency and the next
// node's pipeline overhead), while the lane stays held until the chunk's
// tail has passed (virtual cut-through). Buffering at a node is unbounded:
// a chunk waiting for its next lane holds nothing behind it, so there is no
// back-pressure (and every chunk of a transfer can be in flight at once).
// An uncontended transfer therefore takes exactly the wormhole time --
// first-flit arrival + (n_flits - 1) x flit / bottleneck -- whatever the
// chunk size; the chunk size only sets how finely contending
// transfers interleave (and how many events are simulated).
// A store-and-forward node (PCIe endpoint) waits for the whole transfer,
// pays its overhead once and re-streams it. On multi-connection links a
// chunk at address A takes lane (A / stripe) mod connections.
//
// Attribution: every chunk carries a Breakdown of its head flit's elapsed
// time. A wait for a lane is split, from the lanes' busy-time integrals,
// into time the lane served this transfer's own chunks (drain) and other
// transfers (queuing); a chunk entering a stream inherits the breakdown of
// the chunk ahead of it at the moment that chunk got its lane; at the end
// of a segment the chunk's body streaming behind its head is drain. The
// transfer's breakdown is that of its last chunk to arrive, so the four
// parts sum to its latency exactly.
//
// Cost: a lane is a compact 64-byte record, not a general sim::Server
// (the same semantics: capacity 1, FIFO, a released lane handed straight to
// the first waiter). Its hold is known when it is granted -- until the
// chunk's tail has passed -- so its release is lazy: the release event's
// place in the event order is reserved at the grant
// (Simulation::reserve_seq) but the event is only scheduled if a chunk
// comes to wait. Runs are event-for-event those of a Server per lane, with
// one event fewer per uncontended chunk-hop. Waiting chunks form an
// intrusive list through the chunk records; busy integrals and
// per-transfer service times are computed from (since, until) pairs when
// asked. At thousands of PEs the in-flight state far exceeds the caches,
// so the cache and TLB misses per event set the cost per event. Hence:
// a chunk record holds everything its hop's events need (pointers to its
// hop and to its transfer's use of its lane; the lane it asks for is picked
// when the event is scheduled), events carry (chunk, lane) or (lane, first
// waiter) in their arg so that the simulation's one-event-ahead prefetch
// can load both records in parallel, and the lanes, chunk records and event
// heap sit on huge pages (sim/huge_pages.hpp).
//
// Finite buffers (links.<class>.buffer, per virtual channel; credits.cpp):
// a buffered channel has, per VC, an input buffer of B flits at its
// downstream node and B credits at its upstream end. A chunk takes
// ceil(size / flit) credits before it asks for a lane of the channel (it
// needs room for all of itself: virtual cut-through), holds that room from
// its grant until its tail has left the downstream node on the next hop (or
// has arrived, at its segment's end: the node consumes it), and the credits
// then travel back over the reverse channel (its latency) before they can
// be used again. A chunk waiting for credits blocks the chunks behind it in
// its own input buffer (head-of-line blocking; they queue, oldest first,
// even those bound for another output), and its buffer stays full, so a
// blocked destination stalls its senders hop by hop (back-pressure). VC
// allocation: a transfer uses VC (id mod 64) mod vcs on every buffered
// channel (id mod vcs for a power-of-two vcs), so its chunks stay in
// order; credits are granted first come, first served per VC. Where credits never run short
// the events are those of the unbounded model plus one credit return per
// chunk-hop, at the same times: results are identical to the picosecond.
// A wait for credits is queuing (back-pressure from other traffic), or
// drain when the buffer held only the waiter's own transfer's chunks.
// Unbounded channels (the default) pay nothing: a fabric without a buffered
// channel never enters this code (one predictable branch per request and
// grant). A run whose queue empties with chunks still waiting for credits
// has a cycle of full buffers: the simulation's idle check throws a
// DeadlockError naming the channels of the cycle (check_deadlock).
#pragma once

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "sim/event.hpp"
#include "sim/huge_pages.hpp"
#include "sim/slot_pool.hpp"
#include "topology/fabric/fabric.hpp"

namespace kernbench::topology {

class PacketFabric final : public Fabric {
 public:
  PacketFabric(sim::Simulation& sim, const Machine& machine, const FabricConfig& config);
  ~PacketFabric() override;

  TransferId start_path(const TransferSpec& spec, sim::Target on_done) override;
  ChannelStats channel_stats(ChannelId channel) const override;
  void record_busy(Time origin) override;
  const std::vector<sim::BusyHistogram>* busy() const override { return recording_ ? &busy_ : nullptr; }
  const char* model_name() const override { return "packet"; }

  /// What one lane has done so far (busy time up to now, queue statistics).
  struct LaneStats {
    double busy_unit_time = 0.0;  ///< ps the lane was held, up to now
    Bytes bytes = 0;              ///< payload bytes granted across it
    std::uint64_t grants = 0;
  };
  LaneStats lane_stats(LaneId id) const;
  /// Chunk-hops simulated so far (the packet model's unit of work).
  std::uint64_t chunk_hops() const { return chunk_hops_; }
  /// Most chunks / transfers ever in flight at once (their pools' sizes).
  std::size_t chunk_slots() const { return chunks_.capacity(); }
  std::size_t transfer_slots() const { return transfers_.capacity(); }

  /// The credit state of one VC of a buffered channel, in flits. Invariant:
  /// free + held + returning == capacity at every instant.
  struct CreditState {
    std::int64_t capacity = 0;   ///< the buffer size
    std::int64_t free = 0;       ///< credits at the upstream end
    std::int64_t held = 0;       ///< taken by chunks granted (or about to be) into the buffer
    std::int64_t returning = 0;  ///< on their way back over the reverse channel
    std::uint64_t waiting = 0;   ///< chunks waiting for credits now
    std::uint64_t stalls = 0;    ///< chunks that ever had to wait for credits
  };
  /// Whether `channel` has finite buffers; its VCs (0 when unbounded).
  bool buffered(ChannelId channel) const { return vc_range_.empty() ? false : vc_range_[channel].count > 0; }
  int vcs(ChannelId channel) const { return buffered(channel) ? static_cast<int>(vc_range_[channel].count) : 0; }
  CreditState credits(ChannelId channel, int vc) const;
  /// Throws InternalError naming the channel if a VC's credits do not add up
  /// to its buffer (free + held + returning != capacity, or one negative).
  void check_credits() const;
  /// Throws DeadlockError naming the channels of a cycle of full buffers if
  /// chunks wait for credits that can never come (called when the event
  /// queue empties).
  void check_deadlock() const;

 private:
  static constexpr std::uint32_t kNone = 0xffffffffU;
  struct alignas(64) Lane {         // one lane of one channel: capacity 1, FIFO
    Time hold_since = -1;           // start of the current (or last) hold; -1: never held
    Time busy_until = -1;           // its end
    std::uint64_t release_seq = 0;  // the end's reserved place in the event order
    Time busy = 0;                  // ps held before hold_since
    Bytes bytes = 0;
    std::uint64_t grants = 0;
    std::uint32_t head = kNone;  // waiting chunks, oldest first (Chunk::next)
    std::uint32_t tail = kNone;
    bool handover = false;  // handed to the first waiter, whose grant event is due now
  };
  static_assert(sizeof(Lane) == 64, "a lane is one cache line");
  struct LaneUse {       // this transfer's holds of one lane of one hop
    Time completed = 0;  // service finished before `since`
    Time since = 0;      // the current (or last) hold
    Time until = 0;
  };
  struct Transfer {
    TransferId id = 0;
    const Route* route = nullptr;
    sim::Target on_done;
    Bytes bytes = 0;
    std::uint64_t address = 0;
    std::uint32_t chunks = 0;
    std::uint32_t seg_begin = 0;  // first hop of the current segment
    std::uint32_t seg_end = 0;    // one past its last hop
    std::uint32_t seg_slot = 0;   // index into `use` of seg_begin's first lane
    std::uint32_t injected = 0;   // chunks injected into the current segment
    std::uint32_t arrived = 0;    // chunks arrived at the segment's end node
    Bytes delivered = 0;          // bytes arrived at the segment's end node (invariant: == bytes)
    Breakdown stream_base;        // breakdown of chunk 0 when the segment starts
    Breakdown last;               // breakdown of the latest arrival
    std::vector<LaneUse> use;     // per lane of every hop, hop by hop (chunks point into it)
  };
  // Chunks hold pointers into `use`: the pool may move a Transfer, but a
  // moved vector keeps its buffer.
  static_assert(std::is_nothrow_move_constructible_v<Transfer>);
  struct alignas(64) Chunk {        // two cache lines: all its hop's events need
    const Hop* hop = nullptr;       // the hop it is crossing (or asking a lane of)
    const Hop* seg_last = nullptr;  // the last hop of its segment
    LaneUse* use = nullptr;         // its transfer's use of `lane`
    std::uint64_t address = 0;      // of its first byte (picks the lane on striped links)
    std::uint32_t transfer = 0;
    LaneId lane = 0;             // the lane it asks for, then holds
    std::uint32_t next = kNone;  // next waiter on the same lane
    bool stream_head = false;    // on its segment's first hop: the next chunk enters behind it
    std::uint8_t vc = 0;         // buffered channels: its VC index, (transfer id mod 64) mod vcs
    bool credit_own = false;     // its wait for credits is behind its own transfer's chunks (drain)
    Bytes size = 0;
    Time wait_start = 0;
    Time lane_busy_at_wait = 0;
    Time own_at_wait = 0;
    Time tail_ready = 0;            // when its last byte is at the current node
    Breakdown parts;                // of its head flit's journey so far
    std::uint32_t held = kNone;     // buffered: the VC buffer it occupies at its current node
    std::uint32_t in_next = kNone;  // buffered: next chunk stalled behind it in that buffer
  };
  static_assert(sizeof(Chunk) == 128, "a chunk is two cache lines");

  // Event entry points; their args are listed with the handlers below.
  void start_segment(std::uint64_t t);
  void inject(std::uint32_t t, const Breakdown& parts);
  void request(std::uint64_t c);
  void granted(std::uint64_t c);
  void request_lane(std::uint32_t c);
  void release(std::uint64_t lane);
  bool lane_free(const Lane& l) const { return !l.handover && sim_.passed(l.busy_until, l.release_seq); }
  void arrived(std::uint64_t c);
  /// Points `ch` at hop `hop` (whose lanes' uses start at `use`) and picks
  /// its lane there.
  void enter_hop(Chunk& ch, const Hop* hop, LaneUse* use) const;
  // Event args: two 32-bit indices.
  static std::uint64_t pack(std::uint32_t lo, std::uint32_t hi) { return lo | (std::uint64_t{hi} << 32); }
  static std::uint32_t low(std::uint64_t arg) { return static_cast<std::uint32_t>(arg); }
  // One event ahead (sim/event.hpp): load the records the event will touch.
  void warm_record(std::uint32_t c) const {  // both lines of a chunk record
    const char* p = reinterpret_cast<const char*>(&chunks_[c]);
    __builtin_prefetch(p);
    __builtin_prefetch(p + 64);
  }
  void warm_chunk(std::uint64_t chunk_lane) const {
    warm_record(low(chunk_lane));
    __builtin_prefetch(&lanes_[chunk_lane >> 32]);
  }
  void warm_lane(std::uint64_t lane_waiter) const {
    __builtin_prefetch(&lanes_[low(lane_waiter)]);
    __builtin_prefetch(&chunks_[lane_waiter >> 32]);
  }
  void warm_arrival(std::uint64_t chunk_transfer) const {
    warm_record(low(chunk_transfer));
    __builtin_prefetch(&transfers_[chunk_transfer >> 32]);
  }
  void warm_transfer(std::uint64_t t) const { __builtin_prefetch(&transfers_[t]); }
  void finish(std::uint64_t t);
  std::uint32_t segment_end(const Route& r, std::uint32_t begin) const;
  Time lane_busy(const Lane& l) const { return l.busy + std::min(sim_.now(), l.busy_until) - l.hold_since; }
  Time own_busy(const LaneUse& u) const { return u.completed + std::min(sim_.now(), u.until) - u.since; }

  // ---- finite buffers (credits.cpp) ----
  struct Vc {  // one VC of one buffered channel (counts in flits)
    std::int64_t capacity = 0;
    std::int64_t free = 0;
    std::int64_t held = 0;
    std::int64_t returning = 0;
    std::uint32_t wait_head = kNone;  // chunks waiting for credits, oldest first (Chunk::next)
    std::uint32_t wait_tail = kNone;
    std::uint32_t stall_head = kNone;  // chunks in this buffer stalled, oldest first (Chunk::in_next);
    std::uint32_t stall_tail = kNone;  // the head waits for credits, the rest behind it
    std::uint64_t waiting = 0;
    std::uint64_t stalls = 0;
    // Whose chunks fill it: a wait behind the waiter's own transfer only is
    // drain, as it is on a lane (owner: a transfer slot, set when it was empty).
    std::uint32_t owner = kNone;
    std::int64_t owner_flits = 0;  // the owner's credits held or returning
  };
  struct VcRange {
    std::uint32_t base = 0;   // index of VC 0 in vcs_
    std::uint32_t count = 0;  // 0: unbounded
  };
  void setup_buffers();
  /// Buffered request: false if `c` must wait (for credits, or behind a
  /// stalled chunk of its buffer); it is then queued and resumed later.
  bool admit(std::uint32_t c);
  bool take_credits(std::uint32_t c, std::uint32_t slot);
  /// The grant's buffer bookkeeping: leave the previous buffer (its credits
  /// go back), enter this hop's.
  void move_buffers(Chunk& ch, const Hop& hop, Time hold_end);
  void credit(std::uint64_t slot_flits);
  /// Takes `need` credits of `q` for chunk `ch` (the caller checked they are free).
  static void book(Vc& q, const Chunk& ch, std::int64_t need) {
    if (q.free == q.capacity) q.owner = ch.transfer, q.owner_flits = 0;
    if (q.owner == ch.transfer) q.owner_flits += need;
    q.free -= need;
    q.held += need;
  }
  static constexpr std::uint32_t kOwnCredit = 0x80000000U;  // credit event: the flits were the owner's
  void resume_stalled(std::uint32_t slot);
  std::uint32_t slot_of(const Chunk& ch, ChannelId channel) const {
    const VcRange& r = vc_range_[channel];
    return r.count == 0 ? kNone : r.base + ch.vc % r.count;
  }
  std::int64_t flits(Bytes size) const { return std::max<std::int64_t>(1, (size + config_.flit - 1) / config_.flit); }
  void warm_vc(std::uint64_t slot_flits) const { __builtin_prefetch(&vcs_[low(slot_flits)]); }
  std::string vc_name(std::uint32_t slot) const;
  bool buffered_ = false;          // any channel buffered
  std::vector<VcRange> vc_range_;  // per channel (empty when none is buffered)
  std::vector<Vc> vcs_;
  std::vector<ChannelId> vc_channel_;  // per slot
  std::uint64_t credit_waiters_ = 0;   // chunks waiting for credits, all VCs

  sim::HugeVector<Lane> lanes_;
  bool recording_ = false;                // record_busy(): every hold goes into its channel's histogram
  std::vector<sim::BusyHistogram> busy_;  // by channel
  sim::SlotPool<Chunk> chunks_;
  sim::SlotPool<Transfer> transfers_;
  std::uint64_t chunk_hops_ = 0;
  // Args: release (lane, first waiter); grant and ready (chunk, lane);
  // arrive (chunk, transfer); stream and finish: the transfer.
  sim::MemberHandler<PacketFabric, &PacketFabric::release, &PacketFabric::warm_lane> on_release_{*this};
  sim::MemberHandler<PacketFabric, &PacketFabric::granted, &PacketFabric::warm_chunk> on_grant_{*this};
  sim::MemberHandler<PacketFabric, &PacketFabric::request, &PacketFabric::warm_chunk> on_ready_{*this};
  sim::MemberHandler<PacketFabric, &PacketFabric::arrived, &PacketFabric::warm_arrival> on_arrive_{*this};
  sim::MemberHandler<PacketFabric, &PacketFabric::start_segment, &PacketFabric::warm_transfer> on_stream_{*this};
  sim::MemberHandler<PacketFabric, &PacketFabric::finish, &PacketFabric::warm_transfer> on_finish_{*this};
  // Args: credit (VC slot, flits).
  sim::MemberHandler<PacketFabric, &PacketFabric::credit, &PacketFabric::warm_vc> on_credit_{*this};
};

}  // namespace kernbench::topology
