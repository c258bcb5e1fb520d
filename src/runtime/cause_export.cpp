// cause_export.cpp -- the run's cause records (causes.hpp) for the critical
// path: per run-graph node its timeline (ready, dispatch, start, end), who
// it waited for (the last dependency, the PE_CPU and engine holders) and its
// work [start, end) cut into labelled parts ("engine:gemm", "link:<class>",
// "wait:resource:<class>", "wait:resource:ipcq_slots", "wait:dependency")
// in whole ps that sum exactly.
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

// A transfer's fabric time, apportioned to the link classes of its route in
// proportion to each hop's unloaded service time (wire latency +
// serialisation of the bytes + the next node's overhead); the share the
// fabric measured as queuing (Breakdown::queuing over the latency) goes to
// wait:resource:<class> by the same weights. Exact: the op's total; apportioned:
// the split between classes.
void Executor::Impl::split_fabric(const Node& nd, std::vector<std::pair<std::int32_t, double>>& w) {
  topology::Fabric& fabric = system.fabric();
  const topology::Machine& m = system.machine();
  if (link_label.empty()) {
    link_label.assign(m.num_channels(), -1);
    queued_label.assign(m.num_channels(), -1);
  }
  const double q =
      nd.fabric_latency > 0 ? static_cast<double>(nd.fabric_queued) / static_cast<double>(nd.fabric_latency) : 0.0;
  const auto add_route = [&](NodeId src, NodeId dst, Bytes bytes) {
    if (src == dst) return;
    const topology::Route& r = fabric.router().route(src, dst);
    for (const topology::Hop& h : r.hop) {
      if (link_label[h.channel] < 0) {
        link_label[h.channel] = label("link:" + m.channel(h.channel).link_class);
        queued_label[h.channel] = label("wait:resource:" + m.channel(h.channel).link_class);
      }
      const double service = static_cast<double>(h.latency + sim::transfer_time(bytes, h.bandwidth) + h.next_overhead);
      w.emplace_back(link_label[h.channel], service * (1.0 - q));
      w.emplace_back(queued_label[h.channel], service * q);
    }
  };
  if (nd.kind == OpKind::Send) {
    add_route(nd.move.src, nd.move.dst, std::min<Bytes>(nd.move.bytes, cfg.ipcq_slot));
  } else {
    const MoveLegs legs = move_legs(nd.agent, nd.move, fabric.config().request);
    for (int i = 0; i < legs.count; ++i) add_route(legs.leg[i].src, legs.leg[i].dst, legs.leg[i].bytes);
  }
}

void Executor::Impl::export_causes() {
  result.causes.resize(nodes.size());
  std::vector<std::pair<std::int32_t, double>> weights;
  std::vector<double> merged_weights;  // reused across nodes
  std::vector<Time> shares;
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
          put("wait:dependency", std::min(nd.data_wait, work));
          put(nd.recv_mode == RecvMode::Reduce    ? "engine:vector"
              : nd.recv_mode == RecvMode::Consume ? "engine:ipcq_rx"
                                                  : "wait:dependency",
              work - fixed);
          break;
        case OpKind::Send:
          put("wait:resource:ipcq_slots", std::min(nd.slot_wait, work));
          split_fabric(nd, weights);
          break;
        case OpKind::Dma: split_fabric(nd, weights); break;
        case OpKind::Launch: put("engine:launch", work); break;
        case OpKind::Kernel: put("engine:sm", work); break;
        default: put(std::string("engine:") + to_string(nd.kind), work); break;
      }
      // Merge the weights by label, then hand out the rest in proportion
      // (largest share takes the rounding remainder).
      std::vector<std::pair<std::int32_t, double>> merged;
      double total = 0.0;
      for (const auto& w : weights) {
        const std::int32_t label = w.first;
        const double v = w.second;
        if (v <= 0.0) continue;
        total += v;
        auto it = std::find_if(merged.begin(), merged.end(), [label](const auto& p) { return p.first == label; });
        if (it == merged.end())
          merged.emplace_back(label, v);
        else
          it->second += v;
      }
      const Time rest = work - fixed;
      if (rest > 0) {
        if (merged.empty() || total <= 0.0) {
          put(std::string("engine:") + (nd.kind == OpKind::Send ? "ipcq" : "dma"), rest);
        } else {
          merged_weights.clear();
          for (const auto& m : merged) merged_weights.push_back(m.second);
          apportion(rest, merged_weights, total, shares);
          for (std::size_t i = 0; i < merged.size(); ++i)
            result.cause_parts.push_back(CausePart{merged[i].first, shares[i]});
        }
      }
    }
    c.parts_end = static_cast<std::uint32_t>(result.cause_parts.size());
  }
}

}  // namespace kernbench::runtime
