// causes.hpp -- why each node of a run ran when it did: the cause records
// a model writes as it runs and the critical path (critical_path.hpp) is
// walked from. The executor writes one per program op, composite dispatch
// and pipeline stage; every other model writes them through a Recorder
// (recorder.hpp), one per op.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/program.hpp"

namespace kernbench::runtime {

/// Why one node of the run graph (a program op, a composite's dispatch or
/// one of its pipeline stages) ran when it did: what the critical path
/// (runtime/critical_path.hpp) is walked from. Its lifetime is tiled by
///   [ready, dispatch_start)         wait for PE_CPU, handed over by cpu_holder
///   [dispatch_start, dispatch_end)  the dispatch on PE_CPU (`protocol`: the
///                                   op's protocol latency instead, Op::latency)
///   [dispatch_end, start)           wait for the engine, handed over by
///                                   engine_holder (recv: for the send's data)
///   [start, end)                    the work, split into `parts`
/// Nodes without dispatch have dispatch_start == dispatch_end == ready.
struct NodeCause {
  std::int64_t program_op = -1;  ///< -1: a composite's dispatch or stage
  std::int64_t composite = -1;   ///< stages: the composite op they belong to
  OpKind kind = OpKind::Barrier;
  NodeId agent = 0;
  std::string name;  ///< "load A", or "gemm 3: compute tile 0" for stages
  Time ready = -1, dispatch_start = -1, dispatch_end = -1, start = -1, end = -1;
  std::int32_t after = -1;          ///< node whose end made it ready (its last dependency); -1: none
  std::int32_t cpu_holder = -1;     ///< node that handed it PE_CPU after a wait; -1: no wait
  std::int32_t engine_holder = -1;  ///< node that handed it its engine after a wait; -1: none
  std::int32_t resource = -1;       ///< RunResult::engines index of its engine; -1: none
  bool protocol = false;            ///< its dispatch window is a protocol latency (no PE_CPU)
  std::uint32_t parts_begin = 0;    ///< its work [start, end) split by label: RunResult::cause_parts
  std::uint32_t parts_end = 0;
  // Nodes of the other models (runtime/recorder.hpp; the executor leaves these as they are):
  std::string kind_name;            ///< the op's kind ("edma", "rpc"); "": a program node (see `kind`)
  std::int32_t tag = 0;             ///< the op's tag
  std::int64_t log_row = -1;        ///< its op-log row; -1: none (or a program node)
  std::int32_t wait_resource = -1;  ///< the resource it queued for, when not `resource` (-1: `resource`)
};

/// A piece of a node's work time with a label id (RunResult::cause_labels)
/// and, on a link, its channel.
struct CausePart {
  std::int32_t label = 0;
  Time time = 0;
  std::int32_t channel = -1;  ///< a part on a link: the channel (RunResult::cause_channels); -1: none
};

/// Splits `total` ps in proportion to `weights` (which sum to `weight_sum`
/// > 0): each share is floor(total x w / weight_sum) and the largest weight
/// (the first of equals) takes the rounding remainder, so the shares sum to
/// `total` exactly. `shares` is overwritten.
void apportion(Time total, const std::vector<double>& weights, double weight_sum, std::vector<Time>& shares);

}  // namespace kernbench::runtime
