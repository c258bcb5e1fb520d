// critical_path.cpp -- walking the recorded causes back from the last end.
#include "runtime/critical_path.hpp"

#include <algorithm>

#include "runtime/recorder.hpp"
#include "sim/errors.hpp"

namespace kernbench::runtime {

const char* to_string(StepKind kind) {
  switch (kind) {
    case StepKind::Op: return "op";
    case StepKind::WaitDependency: return "wait:dependency";
    case StepKind::WaitResource: return "wait:resource";
  }
  return "?";
}

std::string CriticalPath::busiest_channel(const std::string& label) const {
  auto it = channels.find(label);
  if (it == channels.end()) return "";
  std::string best;
  Time most = 0;
  for (const auto& [name, t] : it->second)
    if (t > most) best = name, most = t;
  return best;
}

Time CriticalPath::length() const {
  Time sum = 0;
  for (const CriticalStep& s : steps) sum += s.duration();
  return sum;
}

namespace {

// The parts of a node's work [start, end), cut at t (pro rata by label; the
// largest part takes the rounding remainder, so they still sum exactly),
// and the link parts by channel (each label's cut share split over its
// channels the same way).
struct Cut {
  std::map<std::string, Time> parts;
  std::map<std::string, std::map<std::string, Time>> channels;
};

Cut work_parts(const CauseGraph& r, const NodeCause& c, Time t, const std::string& engine) {
  Cut out;
  std::map<std::string, Time>& parts = out.parts;
  std::map<std::string, std::map<std::int32_t, Time>> by_channel;  // link labels only
  const Time whole = c.end - c.start, cut = t - c.start;
  for (std::uint32_t p = c.parts_begin; p < c.parts_end; ++p) {
    const CausePart& part = (*r.parts)[p];
    if (part.time <= 0) continue;
    const std::string& label = r.labels->at(static_cast<std::size_t>(part.label));
    parts[label] += part.time;
    if (part.channel >= 0 && r.channels && label.rfind("link:", 0) == 0) by_channel[label][part.channel] += part.time;
  }
  if (parts.empty()) {
    parts["engine:" + engine] = cut;
    return out;
  }
  std::vector<double> weights;
  std::vector<Time> shares;
  if (cut != whole) {
    for (const auto& [label, time] : parts) weights.push_back(static_cast<double>(time));
    apportion(cut, weights, static_cast<double>(whole), shares);  // the parts sum to whole
    std::size_t i = 0;
    for (auto& [label, time] : parts) time = shares[i++];
  }
  for (auto& [label, chans] : by_channel) {
    Time total = 0;
    weights.clear();
    for (const auto& [ch, time] : chans) total += time, weights.push_back(static_cast<double>(time));
    apportion(parts[label], weights, static_cast<double>(total), shares);
    std::size_t i = 0;
    for (const auto& [ch, time] : chans) {
      const Time share = shares[i++];
      if (share > 0) out.channels[label][r.channels->at(static_cast<std::size_t>(ch))] += share;
    }
  }
  for (auto it = parts.begin(); it != parts.end();) it = it->second > 0 ? std::next(it) : parts.erase(it);
  return out;
}

}  // namespace

CriticalPath critical_path(const RunResult& r) {
  std::vector<std::string> engines;
  engines.reserve(r.engines.size());
  for (const EngineUse& e : r.engines) engines.emplace_back(to_string(e.engine));
  return critical_path(CauseGraph{r.program, r.start, r.end, &r.causes, &r.cause_parts, &r.cause_labels, &engines, 0,
                                  r.causes.size(), &r.cause_channels});
}

CriticalPath critical_path(const CauseGraph& r) {
  CriticalPath path;
  path.name = r.name;
  path.start = r.start;
  path.end = r.end;
  const auto& causes = *r.causes;
  if (r.first >= r.last) {
    if (r.end != r.start) throw UsageError("critical path of '" + r.name + "': the run recorded no causes");
    return path;
  }
  // The node that ends last (the first of them on ties: lowest id, so
  // program ops before stages).
  auto cur = static_cast<std::int32_t>(r.first);
  for (std::size_t n = r.first + 1; n < r.last; ++n)
    if (causes[n].end > causes[static_cast<std::size_t>(cur)].end) cur = static_cast<std::int32_t>(n);
  const auto fail = [&](const std::string& what) { throw InternalError("critical path of '" + r.name + "': " + what); };
  if (causes[static_cast<std::size_t>(cur)].end != r.end)
    fail("the last node ends at " + std::to_string(causes[static_cast<std::size_t>(cur)].end) + " ps, the run at " +
         std::to_string(r.end) + " ps");

  const auto engine_of = [&](const NodeCause& c) -> std::string {
    if (c.resource >= 0) return r.resources->at(static_cast<std::size_t>(c.resource));
    return c.kind_name.empty() ? std::string(to_string(c.kind)) : c.kind_name;
  };
  std::vector<CriticalStep> back;  // latest first
  bool open = false;               // back.back()'s link to the step before it is not known yet
  const auto emit = [&](StepKind kind, std::int32_t node, std::string engine, Time a, Time b) {
    if (open) back.back().via = "op";
    CriticalStep s;
    s.kind = kind;
    s.node = node;
    s.engine = std::move(engine);
    s.start = a;
    s.end = b;
    back.push_back(std::move(s));
    open = true;
  };
  const auto link = [&](std::string via, std::int32_t holder, Time waited) {
    if (!open) return;  // a node with no time of its own: the later step keeps the first link
    back.back().via = std::move(via);
    back.back().holder = holder;
    back.back().waited = waited;
    open = false;
  };
  Time t = r.end;
  std::size_t guard = 0;
  while (true) {
    if (++guard > 4 * (r.last - r.first) + 4) fail("the causes form a cycle");
    if (cur < static_cast<std::int32_t>(r.first) || cur >= static_cast<std::int32_t>(r.last))
      fail("a link leaves the run's nodes (node " + std::to_string(cur) + ")");
    const NodeCause& c = causes[static_cast<std::size_t>(cur)];
    if (!(c.ready <= c.dispatch_start && c.dispatch_start <= c.dispatch_end && c.dispatch_end <= c.start &&
          c.start <= c.end))
      fail("node '" + c.name + "' has inconsistent times");
    if (t < c.ready || t > c.end)
      fail("the walk reaches node '" + c.name + "' at " + std::to_string(t) + " ps, outside its lifetime [" +
           std::to_string(c.ready) + ", " + std::to_string(c.end) + "] ps");
    const std::string engine = engine_of(c);
    if (t > c.start) {  // its work, cut at t
      emit(StepKind::Op, cur, engine, c.start, t);
      Cut cut = work_parts(r, c, t, engine);
      back.back().parts = std::move(cut.parts);
      back.back().channels = std::move(cut.channels);
      t = c.start;
    }
    if (t > c.dispatch_end) {  // it queued for its engine (recv: for its data)
      const bool recv = c.kind_name.empty() && c.kind == OpKind::Recv;
      const std::string queued =
          c.wait_resource >= 0 ? r.resources->at(static_cast<std::size_t>(c.wait_resource)) : engine;
      if (c.engine_holder >= 0) {
        link(recv ? "message" : "resource:" + queued, c.engine_holder, c.start - c.dispatch_end);
        cur = c.engine_holder;
        continue;
      }
      emit(recv ? StepKind::WaitDependency : StepKind::WaitResource, cur, recv ? "message" : queued, c.dispatch_end, t);
      back.back().parts[recv ? "wait:dependency" : "wait:resource:" + queued] = t - c.dispatch_end;
      t = c.dispatch_end;
    }
    if (t > c.dispatch_start) {
      emit(StepKind::Op, cur, c.protocol ? "protocol" : "pe_cpu", c.dispatch_start, t);
      back.back().parts[c.protocol ? "latency:protocol" : "engine:pe_cpu"] = t - c.dispatch_start;
      t = c.dispatch_start;
    }
    if (t > c.ready) {  // it queued for PE_CPU
      if (c.cpu_holder >= 0) {
        link("resource:pe_cpu", c.cpu_holder, c.dispatch_start - c.ready);
        cur = c.cpu_holder;
        continue;
      }
      emit(StepKind::WaitResource, cur, "pe_cpu", c.ready, t);
      back.back().parts["wait:resource:pe_cpu"] = t - c.ready;
      t = c.ready;
    }
    if (c.after < 0) break;
    if (causes.at(static_cast<std::size_t>(c.after)).end != t)
      fail("node '" + c.name + "' became ready at " + std::to_string(t) + " ps, not when its dependency ended");
    link("dependency", c.after, 0);
    cur = c.after;
  }
  if (t != r.start)
    fail("the walk stops at " + std::to_string(t) + " ps, not at the run's start " + std::to_string(r.start) + " ps");
  for (CriticalStep& s : back) {
    for (const auto& [label, time] : s.parts) path.share[label] += time;
    for (const auto& [label, chans] : s.channels)
      for (const auto& [name, time] : chans) path.channels[label][name] += time;
    const NodeCause& c = causes[static_cast<std::size_t>(s.node)];
    s.op = c.kind_name.empty() ? (c.program_op >= 0 ? c.program_op : c.composite) : c.log_row;
    s.name = c.name;
    s.op_kind = c.kind_name.empty() ? std::string(to_string(c.kind)) : c.kind_name;
    if (s.holder >= 0) s.holder_name = causes.at(static_cast<std::size_t>(s.holder)).name;
  }
  path.steps.assign(std::make_move_iterator(back.rbegin()), std::make_move_iterator(back.rend()));
  if (path.length() != r.end - r.start)
    fail("its steps sum to " + std::to_string(path.length()) + " ps, the makespan is " +
         std::to_string(r.end - r.start) + " ps");
  return path;
}

}  // namespace kernbench::runtime
