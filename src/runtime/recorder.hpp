// recorder.hpp -- one op log and one cause record for every model.
//
// A model that is not a Program (the K200 and vGPU protocol models) records
// each op it runs through a Recorder: one OpLog row (kind, resource, tag,
// issue/start/end, bytes, work) and one NodeCause (causes.hpp), the same
// record the executor writes per run-graph node, so the critical-path walk
// (critical_path.hpp) is the same exact walk for every model:
//   after   the op of the same thread of control that ended last before it
//           became ready (a Chain's last op; a join's last child; the
//           completion that released a blocking wait);
//   holder  who handed it the resource it queued for: a sim::Server
//           acquired with acquire_handed and released with release(by)
//           remembers it, as for the executor's PE engines;
//   parts   its work by label ("engine:<kind>" unless the model splits it).
// The cause of a node is checked as it is recorded (its ready time is its
// dependency's end, its times are ordered): a model that loses time between
// two ops fails at once, not in the walk. No allocation per op beyond the
// log's and the cause vector's amortised growth.
#pragma once

#include <algorithm>
#include <coroutine>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/causes.hpp"
#include "sim/errors.hpp"
#include "sim/op_log.hpp"
#include "sim/process.hpp"
#include "sim/ring_queue.hpp"
#include "sim/server.hpp"
#include "sim/simulation.hpp"
#include "sim/join.hpp"
#include "sim/trigger.hpp"

namespace kernbench::runtime {

/// The causes of a run as the critical-path walk reads them: nodes
/// [first, last) of `causes` (their after/holder links stay inside).
struct CauseGraph {
  std::string name;         ///< the run's name (errors, the answer)
  Time start = 0, end = 0;  ///< the run's start and end
  const std::vector<NodeCause>* causes = nullptr;
  const std::vector<CausePart>* parts = nullptr;        ///< NodeCause::parts_* index this
  const std::vector<std::string>* labels = nullptr;     ///< CausePart::label indexes this
  const std::vector<std::string>* resources = nullptr;  ///< NodeCause::resource names this
  std::size_t first = 0, last = 0;
  const std::vector<std::string>* channels = nullptr;  ///< CausePart::channel names this (nullptr: none)
};

/// The thread of control an op runs in: the last op it recorded (the next
/// op's `after`). Forks copy it; a Join gives back the last child's.
struct Chain {
  std::int32_t last = -1;
};

class Recorder {
 public:
  explicit Recorder(sim::Simulation& sim) : sim_(sim) {}
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  sim::Simulation& sim() { return sim_; }
  sim::OpLog& log() { return sim_.op_log(); }

  /// Registers a resource name (the log's resource column and NodeCause::resource).
  std::int32_t add_resource(std::string name) {
    resources_.push_back(std::move(name));
    return static_cast<std::int32_t>(resources_.size() - 1);
  }
  const std::vector<std::string>& resource_names() const { return resources_; }

  /// A kind: its op-log code and the label of its work ("engine:<kind>").
  struct Kind {
    std::int32_t code = 0;
    std::int32_t label = 0;
    const char* name = "";
  };
  /// Cached by the name's address (models pass literals): no string work per op.
  Kind kind(const char* name) {
    for (const Kind& k : kinds_)
      if (k.name == name) return k;
    kinds_.push_back(Kind{log().kind_code(name), label(std::string("engine:") + name), name});
    return kinds_.back();
  }
  /// A kind of cause-only nodes (no op-log kind code).
  Kind cause_kind(const char* name) { return Kind{-1, label(std::string("engine:") + name), name}; }
  /// The id of a part label (registering it on first use).
  std::int32_t label(const std::string& text) {
    for (std::size_t i = 0; i < labels_.size(); ++i)
      if (labels_[i] == text) return static_cast<std::int32_t>(i);
    labels_.push_back(text);
    return static_cast<std::int32_t>(labels_.size() - 1);
  }

  /// One op: its log row and its cause. ready: when it could start (its
  /// dependency `after` ended then; -1: `issue`); it queued for its resource
  /// from ready to start, handed over by `holder` (-1: no hand-over).
  struct Op {
    Kind kind;
    std::int32_t resource = -1;
    std::int32_t agent = -1;  ///< -1: the resource
    std::int32_t tag = 0;
    Time issue = 0, start = 0, end = 0;
    Bytes bytes = 0;
    double work = 0.0;
    std::int32_t after = -1;
    std::int32_t holder = -1;
    std::int32_t wait_resource = -1;  ///< the resource it queued for, when not `resource`
    Time ready = -1;      ///< the cause's ready time, when it differs from the row's issue (a blocking wait)
    bool log_row = true;  ///< false: a cause only (a step the log folds into another row)
  };
  /// Records `op`; returns its node id.
  std::int32_t record(const Op& op) {
    NodeCause c;
    c.kind_name = op.kind.name;
    c.name = op.kind.name;
    c.agent = static_cast<NodeId>(op.agent >= 0 ? op.agent : op.resource);
    c.ready = c.dispatch_start = c.dispatch_end = op.ready >= 0 ? op.ready : op.issue;
    c.start = std::max(op.start, c.ready);  // a blocking wait's cause starts when it was released
    c.end = op.end;
    c.after = op.after;
    c.engine_holder = op.holder;
    c.resource = op.resource;
    c.wait_resource = op.wait_resource;
    c.tag = op.tag;
    if (!(c.ready <= c.start && c.start <= c.end))
      throw InternalError(std::string("recorder: op '") + op.kind.name + "' has unordered times (ready " +
                          std::to_string(c.ready) + ", start " + std::to_string(c.start) + ", end " +
                          std::to_string(c.end) + " ps)");
    if (op.after >= 0 && causes_.at(static_cast<std::size_t>(op.after)).end != c.ready)
      throw InternalError(std::string("recorder: op '") + op.kind.name + "' became ready at " +
                          std::to_string(c.ready) + " ps, its dependency '" +
                          causes_[static_cast<std::size_t>(op.after)].name + "' ended at " +
                          std::to_string(causes_[static_cast<std::size_t>(op.after)].end) + " ps");
    if (c.start == c.ready) c.engine_holder = -1;  // no wait, no hand-over
    c.parts_begin = static_cast<std::uint32_t>(parts_.size());
    if (c.end > c.start) parts_.push_back(CausePart{op.kind.label, c.end - c.start});
    c.parts_end = static_cast<std::uint32_t>(parts_.size());
    if (op.log_row) {
      sim::OpLog& l = log();
      c.log_row = static_cast<std::int64_t>(l.size());
      c.program_op = static_cast<std::int64_t>(causes_.size());
      l.record(sim::OpRecord{static_cast<std::int64_t>(l.size()), op.agent >= 0 ? op.agent : op.resource, op.resource,
                             op.kind.code, op.tag, op.issue, op.start, op.end, op.bytes, op.work});
    }
    causes_.push_back(std::move(c));
    return static_cast<std::int32_t>(causes_.size() - 1);
  }
  /// A log row only (an envelope spanning ops already recorded: a whole launch).
  void record_row(const Kind& kind, std::int32_t resource, std::int32_t agent, std::int32_t tag, Time issue, Time start,
                  Time end, Bytes bytes = 0, double work = 0.0) {
    sim::OpLog& l = log();
    l.record(sim::OpRecord{static_cast<std::int64_t>(l.size()), agent >= 0 ? agent : resource, resource, kind.code, tag,
                           issue, start, end, bytes, work});
  }
  /// Records `op` as the next op of `chain` (after = the chain's last; the
  /// op is ready at that op's end unless op.ready says later); returns its node.
  std::int32_t step(Chain& chain, Op op) {
    if (op.after < 0) op.after = chain.last;
    chain.last = record(op);
    return chain.last;
  }
  /// The later-ending of two nodes (-1 for none): the dependency that ended last.
  std::int32_t later(std::int32_t a, std::int32_t b) const {
    if (a < 0) return b;
    if (b < 0) return a;
    return end_of(b) > end_of(a) ? b : a;
  }
  Time end_of(std::int32_t node) const { return causes_.at(static_cast<std::size_t>(node)).end; }

  std::size_t size() const { return causes_.size(); }
  const std::vector<NodeCause>& causes() const { return causes_; }
  const std::vector<CausePart>& parts() const { return parts_; }
  const std::vector<std::string>& labels() const { return labels_; }
  /// The cause graph of nodes [first, last) over [start, end].
  CauseGraph graph(std::string name, Time start, Time end, std::size_t first, std::size_t last) const {
    return CauseGraph{std::move(name), start, end, &causes_, &parts_, &labels_, &resources_, first, last};
  }

 private:
  sim::Simulation& sim_;
  std::vector<std::string> resources_;
  std::vector<std::string> labels_;
  std::vector<Kind> kinds_;
  std::vector<NodeCause> causes_;
  std::vector<CausePart> parts_;
};

// Fork/join of children on copies of the parent's chain: sim::Join
// (sim/join.hpp), with each child's `&chain.last` as its tag, so last() is
// the node the last-ending child ended with (the join's `after`).

}  // namespace kernbench::runtime
