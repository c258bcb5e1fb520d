// cause_export.cpp -- the run's cause records (causes.hpp) for the critical
// path: per run-graph node its timeline (ready, dispatch, start, end), who
// it waited for (the last dependency, the PE_CPU and engine holders) and its
// work [start, end) cut into labelled parts ("engine:gemm", "link:<class>",
// "wait:resource:<class>", "wait:dependency") in whole ps that sum exactly;
// a part on a link names its channel (RunResult::cause_channels). The waits
// inside a send (slot credits) and a recv (later segments) are cut by what
// they waited for (blame.cpp).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "runtime/executor_impl.hpp"

namespace kernbench::runtime {

std::int32_t Executor::Impl::label(const std::string& text) {
  auto [it, fresh] = label_ids.try_emplace(text, static_cast<std::int32_t>(result.cause_labels.size()));
  if (fresh) result.cause_labels.push_back(text);
  return it->second;
}

std::int32_t Executor::Impl::channel_id(topology::ChannelId ch) {
  const topology::Machine& m = system.machine();
  if (link_label.empty()) {
    link_label.assign(m.num_channels(), -1);
    queued_label.assign(m.num_channels(), -1);
    channel_name.assign(m.num_channels(), -1);
  }
  if (link_label[ch] < 0) {
    const topology::ChannelInfo& c = m.channel(ch);
    link_label[ch] = label("link:" + c.link_class);
    queued_label[ch] = label("wait:resource:" + c.link_class);
    channel_name[ch] = static_cast<std::int32_t>(result.cause_channels.size());
    result.cause_channels.push_back(m.node(c.from).name + "->" + m.node(c.to).name);
  }
  return channel_name[ch];
}

// The route from src to dst with `bytes` per hop, as weights per (label,
// channel): each hop's unloaded service time (wire latency + serialisation
// of the bytes + the next node's overhead), `q` of it to
// wait:resource:<class> (the queuing the fabric measured), the rest to
// link:<class>.
void Executor::Impl::route_weights(NodeId src, NodeId dst, Bytes bytes, double q, std::vector<Weight>& w) {
  if (src == dst) return;
  const topology::Route& r = system.fabric().router().route(src, dst);
  for (const topology::Hop& h : r.hop) {
    const std::int32_t ch = channel_id(h.channel);
    const double service = static_cast<double>(h.latency + sim::transfer_time(bytes, h.bandwidth) + h.next_overhead);
    w.push_back(Weight{link_label[h.channel], ch, service * (1.0 - q)});
    w.push_back(Weight{queued_label[h.channel], ch, service * q});
  }
}

// A transfer's fabric time, apportioned to the link classes of its route in
// proportion to each hop's unloaded service time; the share the fabric
// measured as queuing (Breakdown::queuing over the latency) goes to
// wait:resource:<class> by the same weights. Exact: the op's total;
// apportioned: the split between classes.
void Executor::Impl::split_fabric(const Node& nd, std::vector<Weight>& w) {
  const double q =
      nd.fabric_latency > 0 ? static_cast<double>(nd.fabric_queued) / static_cast<double>(nd.fabric_latency) : 0.0;
  if (nd.kind == OpKind::Send) {
    route_weights(nd.move.src, nd.move.dst, std::min<Bytes>(nd.move.bytes, cfg.ipcq_slot), q, w);
  } else {
    const MoveLegs legs = move_legs(nd.agent, nd.move, system.fabric().config().request);
    for (int i = 0; i < legs.count; ++i) route_weights(legs.leg[i].src, legs.leg[i].dst, legs.leg[i].bytes, q, w);
  }
}

// Hands `total` ps out over `w` (merged by label and channel first), in
// proportion; the largest share takes the rounding remainder.
void Executor::Impl::put_weighted(Time total, const std::vector<Weight>& w) {
  std::vector<Weight> merged;
  double sum = 0.0;
  for (const Weight& x : w) {
    if (x.weight <= 0.0) continue;
    sum += x.weight;
    auto it = std::find_if(merged.begin(), merged.end(),
                           [&](const Weight& m) { return m.label == x.label && m.channel == x.channel; });
    if (it == merged.end())
      merged.push_back(x);
    else
      it->weight += x.weight;
  }
  std::vector<double> weights;
  for (const Weight& m : merged) weights.push_back(m.weight);
  std::vector<Time> shares;
  apportion(total, weights, sum, shares);
  for (std::size_t i = 0; i < merged.size(); ++i)
    if (shares[i] > 0) result.cause_parts.push_back(CausePart{merged[i].label, shares[i], merged[i].channel});
}

// The pieces blame.cpp found for a node's waits, as parts: a route piece
// over its hops' links (the send's forward route with a segment's bytes, or
// the credit's way back), in proportion to their service times.
Time Executor::Impl::put_blame(const Node& nd, Time limit) {
  Time given = 0;
  std::vector<Weight> w;
  for (const Blame& b : nd.blame) {
    const Time t = std::min(b.time, limit - given);
    if (t <= 0) break;
    given += t;
    if (b.kind == Blame::Label) {
      result.cause_parts.push_back(CausePart{b.what, t});
      continue;
    }
    const Node& snd = nodes[static_cast<std::size_t>(b.what)];
    w.clear();
    if (b.kind == Blame::Route)
      route_weights(snd.move.src, snd.move.dst, std::min<Bytes>(snd.move.bytes, cfg.ipcq_slot), 0.0, w);
    else
      route_weights(snd.move.dst, snd.move.src, cfg.ipcq_credit_bytes, 0.0, w);
    if (w.empty())
      result.cause_parts.push_back(CausePart{label("engine:ipcq"), t});
    else
      put_weighted(t, w);
  }
  return given;
}

void Executor::Impl::export_causes() {
  result.causes.resize(nodes.size());
  std::vector<Weight> weights;
  for (std::uint32_t n = 0; n < nodes.size(); ++n) {
    const Node& nd = nodes[n];
    NodeCause& c = result.causes[n];
    c.program_op = nd.program_op;
    c.composite = nd.composite;
    c.kind = nd.kind;
    c.agent = nd.agent;
    c.name = full_name(nd);
    c.after = nd.after;
    c.cpu_holder = nd.cpu_holder;
    c.engine_holder = nd.engine_holder;
    if (nd.kind == OpKind::Composite) {
      // The join of its last stages: instantaneous at its end (the op's own
      // span lives in RunResult::ops).
      c.ready = c.dispatch_start = c.dispatch_end = c.start = c.end = nd.end;
      continue;
    }
    c.ready = nd.ready;
    c.dispatch_start = nd.dispatch_start;
    c.dispatch_end = nd.dispatch_end;
    c.protocol = !nd.dispatch && nd.latency > 0;
    c.start = nd.start;
    c.end = nd.end;
    c.resource = nd.resource;
    // The work [start, end) by label, rounded to whole ps that sum exactly.
    const Time work = c.end - c.start;
    c.parts_begin = static_cast<std::uint32_t>(result.cause_parts.size());
    if (work > 0) {
      weights.clear();
      Time fixed = 0;
      const auto put = [&](const std::string& text, Time t) {
        if (t <= 0) return;
        result.cause_parts.push_back(CausePart{label(text), t});
        fixed += t;
      };
      switch (nd.kind) {
        case OpKind::Gemm: put("engine:gemm", work); break;
        case OpKind::Vector: put("engine:vector", work); break;
        case OpKind::Recv:
          fixed += put_blame(nd, std::min(nd.data_wait, work));  // waits for later segments, by what they waited for
          put(nd.recv_mode == RecvMode::Reduce    ? "engine:vector"
              : nd.recv_mode == RecvMode::Consume ? "engine:ipcq_rx"
                                                  : "wait:dependency",
              work - fixed);
          break;
        case OpKind::Send:
          fixed += put_blame(nd, std::min(nd.slot_wait, work));  // slot waits, by what held the slot
          split_fabric(nd, weights);
          break;
        case OpKind::Dma: split_fabric(nd, weights); break;
        case OpKind::Launch: put("engine:launch", work); break;
        case OpKind::Kernel: put("engine:sm", work); break;
        case OpKind::Coflow: put("link:coflow", work); break;
        default: put(std::string("engine:") + to_string(nd.kind), work); break;
      }
      const Time rest = work - fixed;
      if (rest > 0) {
        double total = 0.0;
        for (const Weight& w : weights) total += std::max(w.weight, 0.0);
        if (total <= 0.0)
          put(std::string("engine:") + (nd.kind == OpKind::Send ? "ipcq" : "dma"), rest);
        else
          put_weighted(rest, weights);
      }
    }
    c.parts_end = static_cast<std::uint32_t>(result.cause_parts.size());
  }
}

}  // namespace kernbench::runtime
