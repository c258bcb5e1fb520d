// critical_path.hpp -- the chain of ops and waits that sets a run's makespan.
//
// Walked back from the node that ends last, over the causes the executor
// recorded (RunResult::causes) or any model recorded through a Recorder
// (recorder.hpp: the K200 and vGPU models), always following what set the current
// time -- the classic critical-path walk. At node X with the cursor at t:
//   work      [start, t) on its engine is an op step (split by label:
//             engine:<kind>, link:<class>, wait:resource:<class>, ...)
//   engine    if X queued for its engine, the unit was handed over at
//             X.start by its holder H: the path continues in H at t = X.start
//             (the link is labelled resource:<engine>, holder H, and how long
//             X waited); a recv that waited for its first segment continues
//             in the send (link "message")
//   dispatch  [dispatch_start, dispatch_end) on PE_CPU is an op step; a wait
//             for PE_CPU continues in its holder (resource:pe_cpu). An op with
//             a protocol latency instead (Op::latency: a GPU collective's
//             step) has an op step "protocol" there (part latency:protocol)
//   ready     X became ready when its last dependency ended: the path
//             continues there (link "dependency")
// The cursor only moves back and each node's pieces lie inside its own
// lifetime, so the steps tile [run start, run end] exactly: the path's
// length equals the makespan, checked on every call (InternalError
// otherwise). A wait that no holder explains (none is expected) would be a
// wait step of its own.
//
// What is exact: every step's interval, node, engine and link (measured
// from the run). What is apportioned: the split of a DMA's or send's fabric
// time between link classes (per hop unloaded service time) and between
// link time and queuing (the fabric's measured queuing fraction), and the
// split of a step cut at the cursor (pro rata).
//
// Inside a send and a recv the waits are cut by what they waited for
// (blame.cpp): a slot wait by what held the slot (its segment in flight:
// link:<class>; the receiver not posted yet: wait:dependency; the receiver
// busy: its engine; the credit on its way back: link:<class>), a wait for a
// later segment by the segment in flight (link:<class>) or the send's slot
// wait for it. Link time names its channel: CriticalStep::channels and
// CriticalPath::channels ("gpu0->gpu1"), so the busiest one can be read off.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/executor.hpp"

namespace kernbench::runtime {

enum class StepKind { Op, WaitDependency, WaitResource };
const char* to_string(StepKind kind);

struct CriticalStep {
  StepKind kind = StepKind::Op;
  std::int32_t node = -1;  ///< RunResult::causes index of the op that ran (or waited)
  std::string engine;      ///< op: its engine ("gemm", "dma", "pe_cpu"); wait: what it waited for
  Time start = 0;
  Time end = 0;
  std::map<std::string, Time> parts;  ///< time by share label; sums to end - start
  /// Its link:<class> parts by channel ("gpu0->gpu1"): label -> channel -> ps.
  std::map<std::string, std::map<std::string, Time>> channels;
  /// How the path reached this step from the previous one: "start" (the
  /// first step), "op" (the same node's earlier piece), "dependency" (the
  /// previous node was its last dependency), "resource:<engine>" (the
  /// previous node held <engine> and handed it over), "message" (a recv
  /// whose data the previous node, the send, was delivering).
  std::string via = "start";
  std::int32_t holder = -1;  ///< dependency / holder / sender: the previous step's node (-1: none)
  Time waited = 0;           ///< resource / message: how long this node waited for it
  // Copied from the cause records (so a path outlives the model that ran):
  std::int64_t op = -1;     ///< program op (composite for stages); other models: the node's op-log row
  std::string name;         ///< the node's name
  std::string op_kind;      ///< its kind ("gemm", "edma", "rpc")
  std::string holder_name;  ///< the name of `holder` ("" for none)
  Time duration() const { return end - start; }
};

struct CriticalPath {
  std::string name;                   ///< the run's (program's) name
  Time start = 0;                     ///< the run's start
  Time end = 0;                       ///< the run's end (makespan = end - start)
  std::vector<CriticalStep> steps;    ///< in time order, tiling [start, end]
  std::map<std::string, Time> share;  ///< time on the path by label (engine:*, link:*, wait:*)
  /// The link:<class> time on the path by channel: label -> channel -> ps.
  std::map<std::string, std::map<std::string, Time>> channels;
  /// The channel of link label `label` with the most time on the path ("" if none; ties: the first name).
  std::string busiest_channel(const std::string& label) const;
  Time length() const;  ///< sum of the step durations (== end - start)
};

struct CauseGraph;

/// The critical path of `result` (a run of the executor).
CriticalPath critical_path(const RunResult& result);
/// The critical path of any model's recorded causes (runtime/recorder.hpp:
/// the K200 and vGPU models); the same walk.
CriticalPath critical_path(const CauseGraph& graph);

}  // namespace kernbench::runtime
