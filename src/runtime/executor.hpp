// executor.hpp -- runs a Program on a System.
//
// Each op becomes a coroutine process once its dependencies are done. It
// pays one PE_CPU dispatch (a Server per PE, held for pe.dispatch), then
// queues for its engine -- DMA channels, GEMM, vector: Servers with the
// config's rates, costs from engine_timing.hpp -- and does its work: DMA moves go through the machine's
// fabric (a read sends a request packet to the source first; the channel is
// held for the whole round trip, so queue wait shows as wait, not as longer
// service). A composite pays one dispatch and runs its tile pipeline on the
// engines. Every op and pipeline stage is one op-log row (issue = ready,
// start = engine granted, end). Before anything runs, the program is checked
// against the machine (node kinds, scratch / HBM-slice / IPCQ capacity, one
// send and one recv per message, run-graph and segment limits: the list is in
// program.hpp). A program that cannot finish -- a cycle, a recv with no send
// -- ends in a DeadlockError naming the stuck ops, and so does one that
// finishes with a send no recv took; scratch overflow is a CapacityError
// naming the PE, the op and the bytes.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/causes.hpp"
#include "runtime/engine_timing.hpp"
#include "runtime/program.hpp"
#include "sim/op_log.hpp"
#include "topology/system.hpp"

namespace kernbench::runtime {

/// The engines of a PE. IPCQ sends hold an `ipcq` channel while their
/// segments are in flight; consuming recvs read slots on `ipcq_rx`
/// (reducing recvs use the vector engine). A GPU agent's kernels use two
/// more: `launch` (the host thread issuing its kernels) and `sm` (its SM
/// array, running one kernel at a time), and `nccl` (the streams of its
/// collectives' kernels, KernelCost::side: never waited for, so it only
/// records them); they are listed in RunResult::engines only for agents that
/// ran a launch or a kernel.
enum class Engine { PeCpu = 0, Dma = 1, Gemm = 2, Vector = 3, Ipcq = 4, IpcqRx = 5, Launch = 6, Sm = 7, Nccl = 8 };
inline constexpr int kEngines = 9;
inline constexpr int kPeEngines = 6;  ///< the engines every PE that runs an op lists (PeCpu .. IpcqRx)
const char* to_string(Engine engine);

/// When a program op happened (composites: the span of their stages).
struct OpTiming {
  Time ready = -1;  ///< dependencies done
  Time start = -1;  ///< engine granted (composite: first stage started)
  Time end = -1;
  bool done() const { return end >= 0; }
};

/// Busy time of one engine of one PE over the run.
struct EngineUse {
  NodeId pe = 0;
  Engine engine = Engine::PeCpu;
  std::string name;   ///< "sip0.cube0.pe3.gemm"
  int capacity = 1;   ///< units (DMA channels)
  double busy = 0.0;  ///< unit-ps
  std::uint64_t grants = 0;
  Time total_wait = 0;  ///< queueing for the engine, summed over grants
};

/// One channel (one direction of a link) during a run, for the trace's link
/// tracks: its lanes' busy time per bin of RunResult::link_bin ps from the
/// run's start (the packet fabric's holds, exact ps; sim::BusyHistogram).
struct LinkUse {
  std::string name;            ///< "gpu0->gpu1"
  std::string link_class;      ///< "ring"
  int lanes = 1;               ///< parallel connections (each a lane of `bandwidth`)
  std::int64_t bandwidth = 0;  ///< bytes/s of one lane
  Bytes bytes = 0;             ///< payload bytes that crossed it during the run
  std::vector<Time> busy;      ///< lane-ps busy per bin
};

struct RunResult {
  std::string program;
  Time start = 0;  ///< when run() began
  Time end = 0;    ///< when the last op ended
  Time makespan() const { return end - start; }
  std::vector<OpTiming> ops;                       ///< per program op
  std::vector<EngineUse> engines;                  ///< per PE and engine used (op log `resource` indexes this)
  std::map<std::string, std::uint64_t> op_counts;  ///< by kind, pipeline stages included
  std::map<std::string, Bytes> op_bytes;           ///< bytes moved by kind (dma, send)
  std::map<NodeId, Bytes> peak_scratch;            ///< per PE that allocated
  std::vector<std::string> tags;                   ///< the program's tag names (op log `tag` indexes this)
  sim::OpLog log;                                  ///< one row per op and pipeline stage
  std::vector<std::string> log_names;              ///< per log row: the op's or stage's name
  std::vector<NodeCause> causes;                   ///< per run-graph node (program ops first, by id)
  std::vector<CausePart> cause_parts;              ///< NodeCause::parts_* index this
  std::vector<std::string> cause_labels;           ///< "engine:gemm", "link:noc", "wait:resource:noc", ...
  std::vector<std::string> cause_channels;         ///< CausePart::channel names this ("gpu0->gpu1")
  Time link_bin = 0;                               ///< width of the LinkUse bins (ps); 0: no link tracks
  std::vector<LinkUse> links;                      ///< channels that were busy (packet fabric only)

  /// [first start, last end] of the ops and stages tagged `tag`.
  std::pair<Time, Time> window(std::int32_t tag) const;
  /// Busy unit-time of `engine` on `pe` inside [t0, t1), from the op log.
  double busy_within(NodeId pe, Engine engine, Time t0, Time t1) const;
};

class Executor {
 public:
  explicit Executor(topology::System& system);
  ~Executor();
  /// Told when program ops start (sends: when their data is read) and end
  /// (after their effect); used by symbolic checks of collectives.
  class Observer {
   public:
    virtual ~Observer() = default;
    virtual void on_start(OpId op) = 0;
    virtual void on_end(OpId op) = 0;
  };

  /// Runs `program` to completion from the system's current time.
  RunResult run(const Program& program, Observer* observer = nullptr);

 private:
  struct Impl;
  topology::System& system_;
};

}  // namespace kernbench::runtime
