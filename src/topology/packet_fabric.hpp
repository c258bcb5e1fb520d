// packet_fabric.hpp -- the packet model: chunks pipelining hop by hop.
//
// A transfer is cut into chunks (fabric.chunk, down to one flit). Chunks
// enter the first channel of their segment in order -- chunk k+1 asks for a
// lane once chunk k has one -- so two transfers sharing a channel interleave
// chunk by chunk. Each lane of each channel is a capacity-1 sim::Server.
// Forwarding is cut-through at flit granularity: a chunk's head flit moves
// on one flit time after it got a lane (plus wire latency and the next
// node's pipeline overhead), while the lane stays held until the chunk's
// tail has passed, with chunk-sized buffering at each node (virtual
// cut-through). An uncontended transfer therefore takes exactly the
// wormhole time -- first-flit arrival + (n_flits - 1) x flit / bottleneck --
// whatever the chunk size; the chunk size only sets how finely contending
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
#pragma once

#include <deque>
#include <vector>

#include "sim/server.hpp"
#include "sim/slot_pool.hpp"
#include "topology/fabric.hpp"

namespace kernbench::topology {

class PacketFabric final : public Fabric {
 public:
  PacketFabric(sim::Simulation& sim, const Machine& machine, const FabricConfig& config);

  TransferId start(const TransferSpec& spec, sim::Target on_done = {}) override;
  ChannelStats channel_stats(ChannelId channel) const override;
  const char* model_name() const override { return "packet"; }

  /// The Server of one lane (for utilisation and queue statistics).
  const sim::Server& lane(LaneId id) const { return lanes_[id]; }
  /// Chunk-hops simulated so far (the packet model's unit of work).
  std::uint64_t chunk_hops() const { return chunk_hops_; }

 private:
  struct LaneUse {           // this transfer's use of one lane of one hop
    Time completed = 0;      // service time finished so far
    Time since = -1;         // start of the current service, or -1
  };
  struct Transfer {
    TransferId id = 0;
    const Route* route = nullptr;
    sim::Target on_done;
    Bytes bytes = 0;
    std::uint64_t address = 0;
    std::uint32_t chunks = 0;
    std::uint32_t seg_begin = 0;   // first hop of the current segment
    std::uint32_t seg_end = 0;     // one past its last hop
    std::uint32_t injected = 0;    // chunks injected into the current segment
    std::uint32_t arrived = 0;     // chunks arrived at the segment's end node
    Bytes delivered = 0;           // bytes arrived at the segment's end node (invariant: == bytes)
    Breakdown stream_base;         // breakdown of chunk 0 when the segment starts
    Breakdown last;                // breakdown of the latest arrival
    std::vector<std::uint32_t> lane_offset;  // hop -> first index into `use`
    std::vector<LaneId> slot_lane;           // index into `use` -> lane
    std::vector<LaneUse> use;
  };
  struct Chunk {
    std::uint32_t transfer = 0;
    std::uint32_t index = 0;
    std::uint32_t hop = 0;
    LaneId lane = 0;
    std::uint32_t use_slot = 0;
    Bytes size = 0;
    Time wait_start = 0;
    double lane_busy_at_wait = 0.0;
    Time own_at_wait = 0;
    Time tail_ready = 0;     // when its last byte is at the current node
    Breakdown parts;         // of its head flit's journey so far
  };

  // Event entry points; the arg is a chunk or transfer slot.
  void start_segment(std::uint64_t t);
  void inject(std::uint32_t t, const Breakdown& parts);
  void request(std::uint64_t c);
  void granted(std::uint64_t c);
  void serialised(std::uint64_t slot_and_chunk);
  void arrived(std::uint64_t c);
  void finish(std::uint64_t t);
  std::uint32_t segment_end(const Route& r, std::uint32_t begin) const;
  Time own_busy(const Transfer& t, std::uint32_t slot) const;

  std::deque<sim::Server> lanes_;
  std::vector<ChannelStats> channel_stats_;
  sim::SlotPool<Chunk> chunks_;
  sim::SlotPool<Transfer> transfers_;
  std::uint64_t chunk_hops_ = 0;
  sim::MemberHandler<PacketFabric, &PacketFabric::granted> on_grant_{*this};
  sim::MemberHandler<PacketFabric, &PacketFabric::serialised> on_serialised_{*this};
  sim::MemberHandler<PacketFabric, &PacketFabric::request> on_ready_{*this};
  sim::MemberHandler<PacketFabric, &PacketFabric::arrived> on_arrive_{*this};
  sim::MemberHandler<PacketFabric, &PacketFabric::start_segment> on_stream_{*this};
  sim::MemberHandler<PacketFabric, &PacketFabric::finish> on_finish_{*this};
};

}  // namespace kernbench::topology
