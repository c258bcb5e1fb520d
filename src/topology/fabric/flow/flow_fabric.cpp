// flow_fabric.cpp -- segments, flow events and the deferred max-min re-solve.
//
// Remaining payload is kept in "full-rate picoseconds": the time the flow
// would still need at its uncontended rate r_max. A flow starts with
// W0 = ceil(bytes / r_max) (the simulator's one rounding rule, exact in
// integers) and drains at phi = r / r_max <= 1 full-rate ps per ps. This is
// the byte count scaled by 1 / r_max, with the rounding done once up front:
// an uncontended flow (phi == 1.0 exactly) then takes exactly W0 ps, so the
// closed forms match to the ps and queuing is exactly zero without
// contention; two equal flows on one channel (phi == 0.5 exactly) take
// exactly 2 W0.
#include "topology/fabric/flow/flow_fabric.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "sim/errors.hpp"

namespace kernbench::topology {
namespace {

// Solver capacities are bytes per picosecond.
constexpr double kPsPerSecond = 1e12;

}  // namespace

FlowFabric::FlowFabric(sim::Simulation& sim, const Machine& machine, const FabricConfig& config)
    : Fabric(sim, machine, config) {
  const std::size_t n = machine_.num_channels();
  lane_ps_per_byte_.reserve(n);
  stats_.assign(n, ChannelStats{});
  for (ChannelId c = 0; c < n; ++c) {
    const ChannelInfo& ch = machine_.channel(c);
    const std::int64_t bw = ch.link.bandwidth.bytes_per_s;
    const std::int64_t lanes = ch.link.connections;
    if (bw <= 0 || lanes < 1 || bw > std::numeric_limits<std::int64_t>::max() / lanes)
      throw ConfigError("flow fabric: channel " + machine_.node(ch.from).name + " -> " + machine_.node(ch.to).name +
                        ": bandwidth x connections must be positive and fit in 64 bits");
    // Resource ids are channel ids: resources are added in channel order.
    const auto id = solver_.add_resource(static_cast<double>(bw * lanes) / kPsPerSecond);
    if (id != c)
      throw InternalError("flow fabric: solver resource " + std::to_string(id) + " != channel " + std::to_string(c));
    lane_ps_per_byte_.push_back(kPsPerSecond / static_cast<double>(bw));
  }
}

ChannelStats FlowFabric::channel_stats(ChannelId channel) const {
  if (channel >= stats_.size())
    throw UsageError("flow fabric: channel " + std::to_string(channel) + " out of range (" +
                     std::to_string(stats_.size()) + " channels)");
  return stats_[channel];
}

std::uint32_t FlowFabric::plan_for(const Route& route) {
  if (auto it = plan_of_.find(&route); it != plan_of_.end()) return it->second;
  Plan plan;
  plan.route = &route;
  plan.first_segment = static_cast<std::uint32_t>(segments_.size());
  const std::size_t n = route.channels.size();
  std::size_t first = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const NodeInfo& to = machine_.node(route.nodes[i + 1]);
    // A segment ends at the destination or at a store-and-forward node,
    // which must hold the whole payload before re-streaming it.
    if (i + 1 < n && to.params.flit_aware) continue;
    Segment s;
    s.first = static_cast<std::uint32_t>(first);
    s.count = static_cast<std::uint32_t>(i + 1 - first);
    s.cap_bytes_per_s = std::numeric_limits<std::int64_t>::max();
    s.r_max = std::numeric_limits<double>::infinity();
    Time overheads = 0;
    for (std::size_t k = first; k <= i; ++k) {
      const ChannelId c = route.channels[k];
      const ChannelInfo& ch = machine_.channel(c);
      s.cap_bytes_per_s = std::min(s.cap_bytes_per_s, ch.link.bandwidth.bytes_per_s * ch.link.connections);
      // The very doubles the solver allocates from, so phi is exactly 1.0
      // when the flow gets its bottleneck's full capacity.
      s.r_max = std::min(s.r_max, solver_.capacity(c));
      s.latency += ch.link.latency;
      if (k < i) overheads += machine_.node(route.nodes[k + 1]).params.overhead;  // flit-aware, pipelined
    }
    overheads += to.params.overhead;
    s.tail = s.latency + overheads;
    segments_.push_back(s);
    ++plan.segments;
    first = i + 1;
  }
  const auto id = static_cast<std::uint32_t>(plans_.size());
  plans_.push_back(plan);
  plan_of_.emplace(&route, id);
  return id;
}

TransferId FlowFabric::start_path(const TransferSpec& spec, sim::Target on_done) {
  TransferId id = 0;
  const Route& route = open(spec, id);
  const std::uint32_t plan = plan_for(route);
  const std::uint32_t slot = transfers_.acquire();
  Transfer& t = transfers_[slot];
  t.id = id;
  t.plan = plan;
  t.next = 0;
  t.bytes = spec.bytes;
  t.parts = Breakdown{};
  t.on_done = on_done;
  // A DMA read's data leg already paid the memory node's processing on the request.
  const Time src_overhead = spec.charge_src_overhead ? machine_.node(spec.src).params.overhead : 0;
  t.parts.overhead = src_overhead;
  // The first "arrival" is at a_1: it starts segment 1 (or, for a zero-hop
  // route, ends the transfer). Never synchronous, even at zero overhead.
  sim_.schedule(src_overhead, arrival_, slot);
  return id;
}

// The transfer's payload has reached the start node of its next segment (and
// been processed there): start that segment's flow, or finish the transfer.
void FlowFabric::on_arrival(std::uint64_t slot64) {
  const auto slot = static_cast<std::uint32_t>(slot64);
  Transfer& t = transfers_[slot];
  const Plan& plan = plans_[t.plan];
  if (t.next == plan.segments) {
    close(t.id, sim_.now(), t.parts, t.on_done);
    t.on_done = sim::Target{};
    transfers_.release(slot);
    return;
  }
  const std::uint32_t si = plan.first_segment + t.next++;
  const Segment& s = segments_[si];
  const Time full = t.bytes == 0 ? 0 : sim::transfer_time(t.bytes, Bandwidth{s.cap_bytes_per_s});
  t.parts.transmission += s.latency + full;
  t.parts.overhead += s.tail - s.latency;
  if (full == 0) {  // nothing to drain: only the latencies and overheads
    sim_.schedule(s.tail, arrival_, slot);
    return;
  }
  const std::span<const ChannelId> channels(plan.route->channels.data() + s.first, s.count);
  const solver::MaxMinSolver::FlowId f = solver_.add_flow(channels);
  if (f >= flows_.size()) flows_.resize(static_cast<std::size_t>(f) + 1);
  Flow& fl = flows_[f];
  fl.transfer = slot;
  fl.coflow = false;
  fl.r_max = s.r_max;
  fl.segment = si;
  fl.work = static_cast<double>(full);
  fl.phi = 0.0;
  fl.last = sim_.now();
  fl.start = sim_.now();
  fl.full = full;
  ++fl.version;  // no event is pending for this slot yet; keeps versions unique anyway
  request_solve();
}

// A segment's flow has drained (if the event is still current).
void FlowFabric::on_completion(std::uint64_t arg) {
  const auto f = static_cast<solver::MaxMinSolver::FlowId>(arg >> 32);
  const auto version = static_cast<std::uint32_t>(arg);
  if (f >= flows_.size() || !solver_.active(f) || flows_[f].version != version) {  // superseded
    arm();
    return;
  }
  Flow& fl = flows_[f];
  fl.materialised = false;
  due_.erase(Due{fl.due, fl.due_seq, f});
  fl.queued = false;
  if (fl.coflow) {
    Coflow& c = coflows_[fl.transfer];
    c.parts.transmission += fl.full;
    c.parts.queuing += (sim_.now() - fl.start) - fl.full;
    for (std::size_t k = 0; k < c.channels.size(); ++k) {
      ChannelStats& st = stats_[c.channels[k]];
      const double moved = c.weights[k] * static_cast<double>(c.bytes);
      st.bytes += static_cast<Bytes>(std::llround(moved));
      st.busy_time += moved * lane_ps_per_byte_[c.channels[k]];
    }
    ++fl.version;
    solver_.remove_flow(f);
    sim_.schedule(c.tail, coflow_end_, fl.transfer);
    request_solve();
    arm();
    return;
  }
  Transfer& t = transfers_[fl.transfer];
  const Segment& s = segments_[fl.segment];
  const Time now = sim_.now();
  // (f_j - a_j) - W0 = integral of (1 - phi(t)) dt: the time lost to sharing.
  t.parts.queuing += (now - fl.start) - fl.full;
  const ChannelId* channels = plans_[t.plan].route->channels.data() + s.first;
  for (std::uint32_t k = 0; k < s.count; ++k) {
    ChannelStats& st = stats_[channels[k]];
    st.bytes += t.bytes;
    st.busy_time += static_cast<double>(t.bytes) * lane_ps_per_byte_[channels[k]];
  }
  ++fl.version;
  solver_.remove_flow(f);
  sim_.schedule(s.tail, arrival_, fl.transfer);
  request_solve();
  arm();
}

void FlowFabric::arm() {
  if (due_.empty()) return;
  const auto& [when, seq, f] = *due_.begin();
  Flow& fl = flows_[f];
  if (fl.materialised) return;
  sim_.schedule_reserved(when, seq, sim::Target::call(completion_), (static_cast<std::uint64_t>(f) << 32) | fl.version);
  fl.materialised = true;
}

// Flows start and end in bursts at one instant (a collective's first step,
// a barrier's release); one solve after all of them, still at this instant,
// gives the same rates as one per change, since no time passes in between.
void FlowFabric::request_solve() {
  if (solve_pending_) return;
  solve_pending_ = true;
  sim_.schedule(0, solve_, 0);
}

void FlowFabric::on_solve(std::uint64_t) {
  solve_pending_ = false;
  solver_.solve();
  const Time now = sim_.now();
  for (const solver::MaxMinSolver::FlowId f : solver_.changed()) {
    Flow& fl = flows_[f];
    if (fl.phi > 0.0) fl.work -= fl.phi * static_cast<double>(now - fl.last);
    fl.last = now;
    // Rounding can leave a sliver of work either side of zero; a sliver
    // this small is drained (it would otherwise cost a spurious ps).
    if (fl.work <= 1e-9 * static_cast<double>(fl.full)) fl.work = 0.0;
    fl.phi = std::min(1.0, solver_.rate(f) / fl.r_max);
    if (!(fl.phi > 0.0))
      throw InternalError("flow fabric: flow " + std::to_string(f) + " of transfer " + std::to_string(owner(fl)) +
                          " got rate " + std::to_string(solver_.rate(f)));
    ++fl.version;
    fl.materialised = false;  // an event already queued for it is now stale
    if (fl.queued) due_.erase(Due{fl.due, fl.due_seq, f});
    fl.queued = false;
    // Checked as a double: a sliver of rate can put the end past any Time.
    const double left_ps = fl.work == 0.0 ? 0.0 : std::ceil(fl.work / fl.phi);
    if (!(left_ps <= static_cast<double>(sim::kMaxTime - now)) || fl.full > sim::kMaxTime - fl.start)
      throw UsageError("flow fabric: transfer " + std::to_string(owner(fl)) +
                       " would end past the time range (2^62 ps) at its share of the bandwidth (" +
                       std::to_string(solver_.rate(f) * kPsPerSecond) + " B/s)");
    const Time left = static_cast<Time>(left_ps);
    // A flow can never beat its uncontended time; the floor only guards
    // against rounding in `work` (and keeps queuing >= 0 by construction).
    fl.due = std::max(now + left, fl.start + fl.full);
    fl.due_seq = sim_.reserve_seq();  // the place schedule() would have given it
    due_.insert(Due{fl.due, fl.due_seq, f});
    fl.queued = true;
  }
  arm();
}

TransferId FlowFabric::owner(const Flow& fl) const {
  return fl.coflow ? coflows_[fl.transfer].id : transfers_[fl.transfer].id;
}

void FlowFabric::start_coflow_uses(TransferId id, const std::vector<CoflowUse>& uses, Bytes bytes, Time tail,
                                   sim::Target on_done) {
  const std::uint32_t slot = coflows_.acquire();
  Coflow& c = coflows_[slot];
  c.id = id;
  c.channels.clear();
  c.weights.clear();
  double r_max = std::numeric_limits<double>::infinity();
  for (const CoflowUse& u : uses) {
    c.channels.push_back(u.channel);
    c.weights.push_back(u.weight);
    r_max = std::min(r_max, solver_.capacity(u.channel) / u.weight);
  }
  c.bytes = bytes;
  c.tail = tail;
  c.parts = Breakdown{};
  c.parts.overhead = tail;  // the slowest hop's wire latency and node overheads, after the drain
  c.on_done = on_done;
  // Whole picoseconds at the uncontended rate, rounded up, as a transfer's W0.
  const double full_ps = std::ceil(static_cast<double>(bytes) / r_max);
  if (!(full_ps <= static_cast<double>(sim::kMaxTime - sim_.now())))
    throw UsageError("coflow: " + std::to_string(bytes) + " B at " + std::to_string(r_max * kPsPerSecond) +
                     " B/s would end past the time range (2^62 ps)");
  const Time full = static_cast<Time>(full_ps);
  if (full == 0) {
    sim_.schedule(tail, coflow_end_, slot);
    return;
  }
  const solver::MaxMinSolver::FlowId f = solver_.add_flow(c.channels, c.weights);
  if (f >= flows_.size()) flows_.resize(static_cast<std::size_t>(f) + 1);
  Flow& fl = flows_[f];
  fl.transfer = slot;
  fl.coflow = true;
  fl.r_max = r_max;
  fl.segment = 0;
  fl.work = static_cast<double>(full);
  fl.phi = 0.0;
  fl.last = sim_.now();
  fl.start = sim_.now();
  fl.full = full;
  ++fl.version;
  request_solve();
}

void FlowFabric::on_coflow_end(std::uint64_t slot) {
  Coflow& c = coflows_[slot];
  close(c.id, sim_.now(), c.parts, c.on_done);
  c.on_done = sim::Target{};
  coflows_.release(slot);
}

}  // namespace kernbench::topology
