// flow_fabric.hpp -- the flow model: transfers as fluids sharing channels max-min fairly.
//
// Each channel (one direction of a link) is one resource of capacity
// bandwidth x connections: a flow stripes over all lanes, so the lane a
// TransferSpec's address would pick in the packet model does not matter
// here. A transfer's route is cut into segments at store-and-forward
// (non-flit-aware) intermediate nodes; each segment is one flow over its
// channels, and the next segment starts only when the whole payload has
// reached (and been processed by) the node that ends the previous one.
//
// Timeline of a transfer issued at t0, segment j over channels C_j ending at
// node e_j with flit-aware intermediate nodes I_j:
//   a_1     = t0 + overhead(src)
//   f_j     = fluid completion of segment j's flow started at a_j (its bytes
//             drained at the max-min rate, re-solved whenever any flow of
//             its component starts or ends)
//   a_{j+1} = f_j + sum latency(C_j) + sum overhead(I_j) + overhead(e_j)
//   end     = a_{J+1} (e_J is the destination)
// The rates come from solver::MaxMinSolver (solver/maxmin.hpp), re-solved incrementally:
// only flows that share channels (transitively) with the one that started
// or ended get new rates and new completion events.
//
// Breakdown (sums exactly to end - t0):
//   overhead     = every node's overhead on the route, once each
//   transmission = sum of channel latencies + sum_j ceil(bytes / r_max_j),
//                  r_max_j the segment's uncontended rate (its smallest
//                  channel capacity)
//   drain        = 0: a fluid has no chunks, so nothing waits behind the
//                  transfer's own earlier bytes
//   queuing      = sum_j (f_j - a_j) - ceil(bytes / r_max_j): the time lost
//                  to sharing. Since bytes = integral of r(t) dt over
//                  [a_j, f_j], this is the integral over the flow's active
//                  time of (1 - r(t) / r_max_j); it is >= 0 because r <=
//                  r_max and completion times are rounded up to the ps.
//
// A record completes (done(), in_flight()) at its end time, not earlier;
// its `chunks` stays 0, a fluid is not cut.
//
// Completion events are lazy (Simulation::reserve_seq): a re-solve gives
// each changed flow its completion's place in the event order, but only the
// earliest pending completion is in the event queue. A re-solve that moves
// n flows therefore adds at most one event, not n that later fire stale:
// the queue grows with the events run, not with events x flows in flight,
// and runs stay event-for-event the same as with one event per completion.
#pragma once

#include <cstdint>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "sim/event.hpp"
#include "sim/slot_pool.hpp"
#include "sim/simulation.hpp"
#include "topology/fabric/fabric.hpp"
#include "solver/maxmin.hpp"

namespace kernbench::topology {

class FlowFabric final : public Fabric {
 public:
  FlowFabric(sim::Simulation& sim, const Machine& machine, const FabricConfig& config);

  /// Starts a transfer at the current time (see the timeline above); its
  /// record completes, and `on_done` is woken with the transfer id, at its
  /// end time. A zero-byte transfer only pays latencies and overheads; a
  /// zero-hop one (src == dst) only the node's overhead.
  TransferId start_path(const TransferSpec& spec, sim::Target on_done) override;

  /// Bytes and busy lane-time per channel, counted when a segment's flow
  /// completes (a flow in progress is not counted yet). busy_time is
  /// bytes / per-lane bandwidth: the lane-time the bytes need to serialise,
  /// whatever the sharing, summed over the lanes they stripe over.
  ChannelStats channel_stats(ChannelId channel) const override;

  const char* model_name() const override { return "flow"; }
  bool moves_coflows() const override { return true; }

  /// Segment flows currently draining (each transfer has at most one).
  std::size_t active_flows() const { return solver_.num_flows(); }
  /// The solver behind the rates (read-only, for tests and diagnostics).
  const solver::MaxMinSolver& solver() const { return solver_; }

 protected:
  /// A coflow is one solver flow over its channels, weighted (one segment:
  /// no store-and-forward cut); it drains `bytes` at rate x, x <= r_max =
  /// min over its channels of capacity / weight, then completes `tail` later.
  void start_coflow_uses(TransferId id, const std::vector<CoflowUse>& uses, Bytes bytes, Time tail,
                         sim::Target on_done) override;

 private:
  // A run of the route between two store-and-forward points: one flow.
  struct Segment {
    std::uint32_t first = 0;           // index of its first channel in Route::channels
    std::uint32_t count = 0;           // number of channels
    std::int64_t cap_bytes_per_s = 0;  // smallest channel capacity (bw x connections)
    double r_max = 0.0;                // the same, in bytes/ps as the solver sees it
    Time tail = 0;                     // f_j -> a_{j+1}: latencies + intermediate and end overheads
    Time latency = 0;                  // its part of tail that is wire latency
  };
  // A route cut into segments (cached per route).
  struct Plan {
    const Route* route = nullptr;
    std::uint32_t first_segment = 0;  // into segments_
    std::uint32_t segments = 0;
  };
  // A transfer in flight (pooled slot).
  struct Transfer {
    TransferId id = 0;
    std::uint32_t plan = 0;
    std::uint32_t next = 0;  // the segment to start at the next arrival
    Bytes bytes = 0;
    Breakdown parts;
    sim::Target on_done;
  };
  // A segment's flow while it drains; indexed by the solver's FlowId, whose
  // slots are reused, so these are too. `version` outlives reuse: a
  // completion event carries it and is ignored once it no longer matches.
  // A coflow in flight (pooled slot): its channels and weights, as the solver has them.
  struct Coflow {
    TransferId id = 0;
    std::vector<ChannelId> channels;
    std::vector<double> weights;
    Bytes bytes = 0;
    Time tail = 0;
    Breakdown parts;
    sim::Target on_done;
  };
  struct Flow {
    std::uint32_t transfer = 0;  // Transfer slot (a coflow: its Coflow slot)
    bool coflow = false;
    double r_max = 0.0;         // its uncontended rate (bytes/ps): the segment's, or the coflow's
    std::uint32_t segment = 0;  // into segments_
    double work = 0.0;          // full-rate ps of payload still to drain
    double phi = 0.0;           // rate / r_max (0 until first solved)
    Time last = 0;              // when work was last brought up to date
    Time start = 0;             // a_j
    Time full = 0;              // ceil(bytes / r_max_j): W0
    std::uint32_t version = 0;
    Time due = 0;               // its completion's place in the event order:
    std::uint64_t due_seq = 0;  //   (due, due_seq), once solved
    bool queued = false;        // (due, due_seq, id) is in due_
    bool materialised = false;  // an event for (due, due_seq, version) is in the sim's queue
  };
  using Due = std::tuple<Time, std::uint64_t, solver::MaxMinSolver::FlowId>;

  std::uint32_t plan_for(const Route& route);
  // Event entry points (held as sim::MemberHandlers: no allocation per event).
  void on_arrival(std::uint64_t slot);
  void on_completion(std::uint64_t flow_and_version);
  void on_solve(std::uint64_t unused);
  void on_coflow_end(std::uint64_t slot);
  TransferId owner(const Flow& fl) const;
  void request_solve();
  // Puts the earliest pending completion into the sim's queue (if it is not there yet).
  void arm();

  solver::MaxMinSolver solver_;
  std::vector<double> lane_ps_per_byte_;  // per channel: 1e12 / per-lane B/s
  std::vector<ChannelStats> stats_;
  std::vector<Segment> segments_;
  std::vector<Plan> plans_;
  std::unordered_map<const Route*, std::uint32_t> plan_of_;  // lookup only, never iterated
  sim::SlotPool<Transfer> transfers_;
  sim::SlotPool<Coflow> coflows_;
  std::vector<Flow> flows_;
  std::set<Due> due_;  // every solved flow's completion, in event order
  bool solve_pending_ = false;
  sim::MemberHandler<FlowFabric, &FlowFabric::on_arrival> arrival_{*this};
  sim::MemberHandler<FlowFabric, &FlowFabric::on_completion> completion_{*this};
  sim::MemberHandler<FlowFabric, &FlowFabric::on_solve> solve_{*this};
  sim::MemberHandler<FlowFabric, &FlowFabric::on_coflow_end> coflow_end_{*this};
};

}  // namespace kernbench::topology
