// fabric.hpp -- what moves bytes through a Machine, and what it cost.
//
// Two models share this interface: the packet model (packet/packet_fabric.hpp:
// chunks pipelining hop by hop through one sim::Server per lane) and the
// flow model (flow/flow_fabric.hpp: max-min fair sharing of channel bandwidth).
// Both report, per transfer, its latency split into four parts that are
// measured from events and sum exactly to the total:
//   overhead      node processing (every node on the path)
//   transmission  wire latency + serialisation of the last byte's chunk
//   drain         waiting behind the transfer's own earlier bytes
//   queuing       waiting behind other transfers (contention)
//
// Multipath (fabric.multipath, docs/architecture.md "Routing"): start()
// asks the policy fabric.multipath names (routing/multipath.hpp) for the
// transfer's equal-cost path (Router::paths) -- the first one (single), one
// by a hash of its flow key (ecmp) -- or for one stripe per path, sized in
// proportion to the paths' rates (spread). A stripe is a transfer of its own on its path (its own record, with
// `parent` set); the transfer the caller sees completes when its last
// stripe has arrived, with that stripe's breakdown. The models only ever
// move one transfer along one route (start_path).
#pragma once

#include <coroutine>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/busy_histogram.hpp"
#include "sim/event.hpp"
#include "sim/simulation.hpp"
#include "topology/config/config.hpp"
#include "topology/graph/machine.hpp"
#include "topology/routing/multipath.hpp"
#include "topology/routing/routing.hpp"

namespace kernbench::topology {

using TransferId = std::uint64_t;
/// No transfer (TransferRecord::parent of a transfer that is not a stripe).
inline constexpr TransferId kNoTransfer = ~TransferId{0};

/// The largest transfer a fabric accepts (1 TiB): chunk counts and times
/// stay far from overflow, and nothing real moves more in one go.
inline constexpr Bytes kMaxTransferBytes = Bytes{1} << 40;

/// Throws UsageError if `bytes` is negative or above kMaxTransferBytes;
/// `what` names the transfer in the message.
void check_transfer_size(Bytes bytes, const std::string& what);

struct Breakdown {
  Time overhead = 0;
  Time transmission = 0;
  Time drain = 0;
  Time queuing = 0;
  Time total() const { return overhead + transmission + drain + queuing; }
};

/// What to move.
struct TransferSpec {
  NodeId src = 0;
  NodeId dst = 0;
  Bytes bytes = 0;
  std::uint64_t address = 0;  ///< picks the first lane on multi-connection links
  std::int32_t tag = 0;       ///< free label, copied to the record
  std::int32_t agent = -1;    ///< who asked (a PE, a traffic source), copied to the record
  std::int64_t request = -1;  ///< the caller's own id for it, copied to the record
  /// False for the data leg of a DMA read: the memory node already paid its
  /// processing when the request arrived.
  bool charge_src_overhead = true;
  /// Which of the pair's equal-cost paths (an index into Router::paths);
  /// -1: the one fabric.multipath picks (or every one, striped, under spread).
  std::int32_t path = -1;
};

/// What a transfer did. Complete once its last byte has arrived.
struct TransferRecord {
  TransferId id = 0;
  NodeId src = 0;
  NodeId dst = 0;
  Bytes bytes = 0;
  Time issue = 0;
  Time end = -1;  ///< -1 while in flight
  Breakdown parts;
  std::uint32_t hops = 0;
  std::uint32_t chunks = 0;
  std::int32_t tag = 0;
  std::int32_t agent = -1;
  std::int64_t request = -1;
  std::uint32_t path = 0;           ///< the equal-cost path it took (Router::paths index; 0 when striped)
  std::uint32_t stripes = 0;        ///< spread: how many stripes moved it (0: it moved itself)
  TransferId parent = kNoTransfer;  ///< a stripe: the transfer it is part of
  bool coflow = false;              ///< a coflow (start_coflow): src and dst are its first and last hops' ends
  bool done() const { return end >= 0; }
  Time latency() const { return end - issue; }
};

/// One hop of a coflow: its share of the coflow moves from src to dst.
struct CoflowHop {
  NodeId src = 0;
  NodeId dst = 0;
  double weight = 1.0;  ///< bytes this hop moves per byte of the coflow's progress (> 0)
};

/// A coflow: a pipeline whose hops all move at one pace, taken as one fluid
/// (the channel pipeline model of a collective, docs/ccl.md "Fidelity").
/// Hop h moves weight_h x bytes; every link carries the summed weights of
/// the hops (and the equal-cost paths fabric.multipath spreads them over)
/// that cross it, and the coflow progresses at the weighted max-min rate
/// (solver/maxmin.hpp) its busiest link allows.
struct CoflowSpec {
  std::vector<CoflowHop> hops;
  Bytes bytes = 0;
  std::int32_t tag = 0;
  std::int32_t agent = -1;
  std::int64_t request = -1;
};

/// Per-channel totals (one direction of a link).
struct ChannelStats {
  Bytes bytes = 0;         ///< payload bytes that crossed it
  double busy_time = 0.0;  ///< lane-time spent serialising (ps, summed over lanes)
};

class Fabric {
 public:
  Fabric(sim::Simulation& sim, const Machine& machine, const FabricConfig& config);
  virtual ~Fabric() = default;
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  /// Starts moving `spec.bytes` from src to dst at the current time. When the
  /// last byte has arrived the record is complete and `on_done` (if any) is
  /// woken with arg = the transfer id. Never completes synchronously. The
  /// path (or paths) as fabric.multipath says, unless spec.path names one.
  TransferId start(const TransferSpec& spec, sim::Target on_done = {});

  /// Starts a coflow at the current time: its record (src: the first hop's,
  /// dst: the last hop's, bytes: spec.bytes, hops: the hop count) completes
  /// when every hop has drained, plus the slowest hop's wire latency and node
  /// overheads. Only the flow model moves coflows (UsageError otherwise,
  /// naming fabric.model); a hop's store-and-forward nodes do not cut it
  /// (a pipeline streams through them).
  TransferId start_coflow(const CoflowSpec& spec, sim::Target on_done = {});
  /// Whether the model moves coflows (start_coflow refuses up front otherwise).
  virtual bool moves_coflows() const { return false; }

  /// Awaitable form: `const TransferRecord& r = co_await fabric.transfer(spec);`
  auto transfer(const TransferSpec& spec) {
    struct Awaiter {
      Fabric& fabric;
      TransferSpec spec;
      TransferId id = 0;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<> h) { id = fabric.start(spec, sim::Target::resume(h)); }
      const TransferRecord& await_resume() const { return fabric.record(id); }
    };
    return Awaiter{*this, spec};
  }

  const TransferRecord& record(TransferId id) const { return records_.at(id); }
  /// Every record, the stripes of spread transfers included (parent set).
  const std::vector<TransferRecord>& records() const { return records_; }
  /// Transfers started and not complete (stripes are not counted apart).
  std::size_t in_flight() const { return in_flight_; }

  /// Totals per channel so far.
  virtual ChannelStats channel_stats(ChannelId channel) const = 0;

  /// Link tracks: from `origin` on, keep per channel how long its lanes were
  /// busy, per time bin (sim::BusyHistogram); a negative origin stops and
  /// drops them. Only a model with lanes records (the packet model; the
  /// flow model has none: busy() stays nullptr).
  virtual void record_busy(Time origin) { (void)origin; }
  /// The histograms by channel while recording, else nullptr.
  virtual const std::vector<sim::BusyHistogram>* busy() const { return nullptr; }

  /// Throws UsageError if the whole transfer -- its payload through every
  /// hop plus every latency and overhead, from `start` -- would pass the
  /// simulator's time range (sim::kMaxTime). start() checks every transfer
  /// before scheduling anything; System checks its own up front, when they
  /// are scheduled, so a refused one leaves the System untouched.
  void check_transfer_time(const Route& route, const TransferSpec& spec, Time start) const;
  /// check_transfer_time() along the route from spec.src to spec.dst.
  void check_transfer_time(const TransferSpec& spec, Time start) {
    check_transfer_time(router_.route(spec.src, spec.dst), spec, start);
  }

  sim::Simulation& sim() { return sim_; }
  const Machine& machine() const { return machine_; }
  Router& router() { return router_; }
  const FabricConfig& config() const { return config_; }
  virtual const char* model_name() const = 0;

 protected:
  /// The model's part: move one transfer along the route spec.path (>= 0,
  /// checked) of its pair; it calls open() first and close() at the end.
  virtual TransferId start_path(const TransferSpec& spec, sim::Target on_done) = 0;

  /// A coflow's use of one channel: the summed weight of what crosses it.
  struct CoflowUse {
    ChannelId channel = 0;
    double weight = 0.0;
  };
  /// The model's part of start_coflow: `uses` in channel order (each channel
  /// once), `tail` the slowest hop's latencies and overheads, the record `id`
  /// already opened.
  virtual void start_coflow_uses(TransferId id, const std::vector<CoflowUse>& uses, Bytes bytes, Time tail,
                                 sim::Target on_done);

  /// Validates the spec, creates its record and returns its route (spec.path's).
  const Route& open(const TransferSpec& spec, TransferId& id);
  /// Fills the record's end and parts and wakes `on_done` at `end`.
  void close(TransferId id, Time end, const Breakdown& parts, sim::Target on_done);

  sim::Simulation& sim_;
  const Machine& machine_;
  FabricConfig config_;
  Router router_;
  std::vector<TransferRecord> records_;
  std::size_t in_flight_ = 0;

 private:
  /// The stripes of a transfer over `paths`, `bytes[i]` on path i, as the policy cut them (multipath.cpp).
  TransferId start_stripes(const TransferSpec& spec, const std::vector<Route>& paths, const std::vector<Bytes>& bytes,
                           sim::Target on_done);
  const MultipathPolicy* policy_ = nullptr;  ///< fabric.multipath's policy (routing/multipath.hpp)
  std::vector<Bytes> share_;                 ///< the policy's stripes of the transfer being started
  /// A transfer in stripes: how many are still moving, the latest arrival so far.
  struct Split {
    std::uint32_t remaining = 0;
    Time end = -1;
    Breakdown parts;
    sim::Target on_done;
  };
  std::unordered_map<TransferId, Split> splits_;
  TransferId opening_stripe_of_ = kNoTransfer;  // set while start_stripes opens a stripe
};

/// The fabric the config asks for.
std::unique_ptr<Fabric> make_fabric(sim::Simulation& sim, const Machine& machine, const FabricConfig& config);

/// Payload bytes per channel so far: a snapshot to measure a run against.
std::vector<Bytes> channel_bytes(const Fabric& fabric);
/// Payload bytes moved per link class since `before` (a channel_bytes
/// snapshot), summed over both directions; classes that moved none are left out.
std::map<std::string, Bytes> link_class_bytes_since(const Fabric& fabric, const std::vector<Bytes>& before);

}  // namespace kernbench::topology
