// run_graph.hpp (private to src/runtime) -- the run graph the executor
// schedules: one node per program op, plus per composite a dispatch node
// and one node per pipeline stage (loads, compute, stores of every tile;
// the composite's own node joins its last stages). run_graph.cpp builds it
// (Executor::Impl::build); a node becomes a process once its dependency
// count reaches zero.
#pragma once

#include <coroutine>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/program.hpp"

namespace kernbench::runtime {

// A piece of a wait inside a send or a recv, by what it waited for
// (blame.cpp): a label, or the route of a send (`what`: its node) that a
// segment (Route) or a slot's credit (Credit) was crossing.
struct Blame {
  enum Kind : std::uint8_t { Label, Route, Credit };
  Kind kind = Label;
  std::int32_t what = -1;  // Label: a RunResult::cause_labels id; Route, Credit: the send's node
  Time time = 0;
};

// A node of the run graph: a program op, a composite's dispatch, or a stage.
struct Node {
  OpKind kind = OpKind::Barrier;
  NodeId agent = 0;
  Move move;
  double flops = 0.0;
  Precision precision = Precision::Fp16;
  Bytes bytes = 0;
  std::int32_t tag = 0;
  NodeId peer = 0;
  std::int64_t key = 0;
  RecvMode recv_mode = RecvMode::Consume;
  Time duration = 0;                            // launch, kernel
  bool dispatch = true;                         // pays a PE_CPU dispatch
  Time latency = 0;                             // no dispatch: a protocol latency before the work (Op::latency)
  Bytes segment = 0;                            // send: IPCQ segment bytes (0: pe.ipcq.slot)
  std::uint16_t channel = 0;                    // send: which of the pair's queues
  bool proxy = false;                           // send: driven by the host proxy, holds no IPCQ unit (Op::proxy)
  std::int32_t ctas = 0, sms = 0, sm_hold = 0;  // kernel, barrier: SMs (Op::ctas, sms, sm_hold)
  bool side = false;                            // kernel: on a stream of its own, no engine held (Op::side)
  bool logged = true;                           // gets an op-log row of its own
  std::int64_t program_op = -1;
  std::int64_t composite = -1;  // stages: the composite op they belong to
  std::uint32_t waiting = 0;
  std::vector<std::uint32_t> dependents;
  std::string name;
  Time ready = -1, start = -1, end = -1;
  // Causes (see NodeCause), filled as it runs.
  Time dispatch_start = -1, dispatch_end = -1;
  std::int32_t after = -1, cpu_holder = -1, engine_holder = -1;
  std::int32_t resource = -1;  // RunResult::engines index of the engine it ran on (-1: none), set when it ends
  Time fabric_latency = 0, fabric_queued = 0;  // summed over its transfers
  Time slot_wait = 0;                          // sends: blocked on full IPCQ slots
  Time data_wait = 0;                          // recvs: parked for later segments
  std::vector<Blame> blame;                    // slot_wait / data_wait by what they waited for (blame.cpp)
  // switch_reduce: its member group, the fabric legs still in flight, and
  // the process parked until they have all arrived.
  std::uint32_t group = 0;
  std::uint32_t legs_pending = 0;
  std::coroutine_handle<> parked;
};

}  // namespace kernbench::runtime
