// program.hpp -- a Program: a DAG of ops placed on agents.
//
// Kernels and collectives are not hand-written event code: they build a
// Program and the Executor runs it on a machine. An op runs on one agent (a
// PE), waits for its dependencies, costs one PE_CPU dispatch, then does its
// work on one of the agent's engines:
//   dma        move bytes src -> dst through the fabric (DMA channel)
//   gemm       FLOPs at a precision (GEMM engine)
//   vector     bytes through the vector engine (softmax, elementwise)
//   alloc/free claim and return per-PE scratch
//   send/recv  point-to-point between PEs over the IPCQ: the payload moves
//              in slot-sized segments into the receiver's queue from that
//              sender (the sender blocks while its slots there are full);
//              a recv takes the segments in order and pays each slot read
//              (or a reduction into its buffer) before freeing the slot
//   barrier    no work: joins dependencies
//   composite  a tile pipeline (loads -> compute -> stores, with N-buffering)
//              dispatched once, its stages running on the engines
//   launch     host time issuing one GPU kernel, on the agent's launch
//              queue (`Engine::Launch`): launches of one agent run in program
//              order, each after the one before, whatever the kernels wait
//              for -- the host runs ahead of the GPU, as CUDA streams let it
//   kernel     a GPU kernel: a duration its kernel model computed, on the
//              agent's SM array (`Engine::Sm`, one kernel at a time: one
//              stream), after its launch and its dependencies. Neither pays a
//              PE_CPU dispatch: the SIP PE_CPU is not part of a GPU. A
//              collective's kernel runs on a stream of its own, beside the
//              SM array's queue (KernelCost::side), and holds SMs until a
//              barrier releases them (KernelCost::hold, sm_release); a
//              compute-bound kernel started meanwhile runs more waves
//              (KernelCost::ctas, fewer_sms).
//   switch_reduce  in-network reduction on a switch that declares
//              `reduction:` (NVLink SHARP-like): every member buffer sends
//              the chunk to the switch (gather, lasting at least the op's
//              `duration`: the members' multimem issue), the switch reduces
//              the contributions (its reduction bandwidth), then sends the
//              result to every member (multicast: one transfer per output
//              port). The agent is the switch; no PE engine is charged.
//              Its SwitchGroup may reduce some buffers' chunks and send the
//              sum to others (NVLS's load-reduce into one GPU, its multicast
//              store from one), and may reach members through a lower
//              reducing switch that aggregates them first (IB SHARP's tree).
//   coflow     a collective channel's pipeline as one fluid (ccl/pipeline.hpp,
//              docs/ccl.md "Fidelity"): after its latency (the pipeline's
//              step latencies along its dependency chain) every hop moves
//              its weight x bytes at one pace, the fabric's weighted max-min
//              rate (Fabric::start_coflow; flow model only). The agent (a
//              rank's PE) only names it in logs; no PE engine is charged.
// Any op but a switch_reduce may trade its PE_CPU dispatch for a protocol
// latency (Op::latency, set_latency): a pure delay before its work.
// Dependencies are ops of the same program (by id). Every op carries a tag
// (an interned label: stage, kernel, case) that reaches the op log.
//
// What is refused (sim/errors.hpp), so a bad program fails up front with a
// message naming the op, the node and the limit instead of running wrong:
//  - here, as ops are added: negative sizes, transfers over 1 TiB, a program
//    of more than kMaxOps ops, a composite whose tiles x (loads + compute +
//    stores) would exceed kMaxRunNodes run-graph nodes (UsageError);
//  - by the executor before the run starts (run_graph.cpp, it knows the
//    machine and pe config): agents that own no engines (a router, an HBM
//    controller, ...; on generated machines anything but a PE) and dma /
//    composite endpoints that are not memories (a router, a switch, a UCIe
//    or PCIe adapter) (UsageError); a dma or a composite's resident tile
//    buffers (min(buffers, tiles) x the loads into scratch + the stores out
//    of it) larger than pe.scratch, an access past the end of an HBM slice
//    (pe.hbm.capacity), IPCQ slots (ipcq_slots x ipcq_slot) larger than the
//    receiver's scratch (CapacityError); a send of more than kMaxSegments
//    slot segments, or more run-graph nodes than kMaxRunNodes (UsageError);
//    two sends or two recvs of one message (same receiver, sender, key)
//    (UsageError); a switch_reduce on a node that declares no reduction,
//    with a member that is not a memory, a member twice, an aggregating
//    switch that declares no reduction, or fewer than 2 buffers (UsageError);
//  - at the end of the run: a send whose message no recv took (DeadlockError).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "topology/config/config.hpp"
#include "topology/fabric/fabric.hpp"
#include "topology/graph/machine.hpp"

namespace kernbench::runtime {

using sim::Bytes;
using sim::Time;
using topology::NodeId;
using topology::Precision;

using OpId = std::uint32_t;

/// Bounds on what a program may make the executor allocate (see above): ops
/// of a program, nodes of the run graph (ops + composite stages; one op-log
/// row each), and IPCQ segments (one fabric transfer each) of one send.
inline constexpr std::uint64_t kMaxOps = std::uint64_t{1} << 24;
inline constexpr std::uint64_t kMaxRunNodes = std::uint64_t{1} << 24;
inline constexpr std::uint64_t kMaxSegments = std::uint64_t{1} << 22;

enum class OpKind {
  Dma,
  Gemm,
  Vector,
  Alloc,
  Free,
  Send,
  Recv,
  Barrier,
  Composite,
  SwitchReduce,
  Launch,
  Kernel,
  Coflow
};
const char* to_string(OpKind kind);

/// What a recv does with each slot it takes.
enum class RecvMode {
  Consume,    ///< read the slot out of scratch (a bank hop + the bytes at scratch width) on the IPCQ engine
  Reduce,     ///< add the slot into the receiver's buffer on the vector engine (collectives)
  NoConsume,  ///< diagnostic: free the slot on arrival without reading it (compare IPCQ with raw DMA)
};
const char* to_string(RecvMode mode);

/// A range [lo, hi) of the slices of a collective's buffer that an op
/// sends or receives; lets an observer follow the data symbolically.
struct Slices {
  std::int32_t lo = -1;
  std::int32_t hi = -1;
  bool empty() const { return hi <= lo; }
};

/// One data movement: `bytes` from `src` to `dst` (an HBM slice, a PE's
/// scratch = the PE node itself, any node of the machine).
struct Move {
  NodeId src = 0;
  NodeId dst = 0;
  Bytes bytes = 0;
  /// Byte address inside the HBM slice at either end (from an HbmAllocator);
  /// only the per-pseudo-channel traffic accounting reads it, never timing.
  std::uint64_t address = 0;
};

/// A tile pipeline run by one composite command. Tile i loads `loads`,
/// computes, then stores `stores`; with `buffers` scratch buffers, tile i's
/// loads wait until tile i - buffers has finished computing (its buffer is
/// free again). The composite completes when every tile is stored.
struct Pipeline {
  std::uint32_t tiles = 1;
  std::vector<Move> loads;        ///< per tile
  OpKind compute = OpKind::Gemm;  ///< Gemm or Vector
  double flops = 0.0;             ///< per tile (Gemm)
  Precision precision = Precision::Fp16;
  Bytes vector_bytes = 0;    ///< per tile (Vector)
  std::vector<Move> stores;  ///< per tile
  std::uint32_t buffers = 2;
  std::int32_t load_tag = -1;  ///< tags of the stages (-1: the composite's)
  std::int32_t compute_tag = -1;
  std::int32_t store_tag = -1;
};

/// What a kernel model says one GPU kernel costs (program.hpp: launch, kernel).
struct KernelCost {
  Time launch = 0;     ///< host time to issue it (0: no launch op)
  Time duration = 0;   ///< on the SM array, from its first CTA to its last
  double flops = 0.0;  ///< for the op log and energy
  Precision precision = Precision::Bf16;
  Bytes bytes = 0;  ///< HBM traffic it moves (op log, energy)
  /// A compute-bound kernel's CTAs and the SMs its duration was priced on (0: its time does not depend on how
  /// many SMs it gets, e.g. a memory-bound kernel). Started while collectives hold `held` of its GPU's SMs it
  /// runs ceil(ctas / (sms - held)) waves instead of ceil(ctas / sms), its duration scaled by their ratio.
  std::int32_t ctas = 0, sms = 0;
  /// SMs the kernel holds from its start until a release (Program::sm_release) on its agent gives them back: a
  /// collective's kernel, one CTA per channel, holding its SMs for as long as its rank's part runs.
  std::int32_t hold = 0;
  /// On a stream of its own beside the agent's compute stream (a collective's kernel on its NCCL stream): it
  /// neither waits for the SM array nor occupies it; what it takes from the compute kernels is its `hold`.
  bool side = false;
};

/// The buffers of one switch_reduce. The switch adds the chunks of `in` and sends the sum to each of `out` (an
/// all-reduce of the chunk: both are every member; NVLS's load-reduce into one GPU: `out` that GPU; its
/// multicast store from one: `in` that GPU). `in_via[k]` is the reducing switch through which in[k]'s chunk
/// reaches the op's switch, `out_via[k]` the one through which out[k] receives the sum: the op's switch itself
/// for a direct leg; another switch adds the chunks of the members it serves into one before passing it on,
/// and sends the sum it receives once to each of them (IB SHARP's aggregation tree, two levels). Empty vias:
/// every leg direct.
struct SwitchGroup {
  std::vector<NodeId> in, out;
  std::vector<NodeId> in_via, out_via;
};

struct Op {
  OpKind kind = OpKind::Barrier;
  NodeId agent = 0;  ///< the PE that dispatches it
  std::vector<OpId> deps;
  std::string name;  ///< for errors and traces
  std::int32_t tag = 0;
  Move move;           ///< Dma, Send (dst = peer)
  double flops = 0.0;  ///< Gemm
  Precision precision = Precision::Fp16;
  Bytes bytes = 0;                         ///< Vector (bytes processed), Alloc (scratch)
  OpId target = 0;                         ///< Free: the Alloc it returns
  NodeId peer = 0;                         ///< Recv: who sends
  std::int64_t key = 0;                    ///< Send/Recv: which message
  RecvMode recv_mode = RecvMode::Consume;  ///< Recv
  Slices slices;                           ///< Send/Recv: the buffer slices carried (symbolic checks)
  std::uint32_t pipeline = 0;              ///< Composite: index into pipelines(); SwitchReduce: into switch_groups();
                                           ///< Coflow: into coflows()
  Time duration = 0;                       ///< Launch, Kernel: the time it holds its engine; SwitchReduce: the
                                           ///< members' issue time (its gather stage lasts at least this long)
  /// -1: the op pays one PE_CPU dispatch (the SIP way). >= 0: no dispatch;
  /// the op waits this long, holding no engine, before its work -- a GPU
  /// collective step's protocol latency (ccl/nccl.hpp: the flag write and
  /// poll of one step), which steps of different channels overlap.
  Time latency = -1;
  /// Send: the bytes of one IPCQ segment (0: pe.ipcq.slot). A GPU
  /// collective's coarse step (one standing for several NCCL steps) moves in
  /// larger segments, each still one slot credit.
  Bytes segment = 0;
  /// Send: which of the pair's queues it uses (a GPU collective's channel:
  /// each channel has its own pe.ipcq.slots slots, NCCL's per-channel FIFO).
  std::uint16_t channel = 0;
  /// Kernel: CTAs and priced SMs (KernelCost::ctas, sms); Kernel: SMs held from its start (> 0); Barrier: SMs
  /// released on its agent when it completes (< 0; Program::sm_release).
  std::int32_t ctas = 0, sms = 0, sm_hold = 0;
  /// Send: driven by the host's proxy thread (NCCL's network transport: the
  /// proxy posts each step to the NIC and polls its completion), so it holds
  /// no unit of the GPU's IPCQ engine while its bytes cross the network;
  /// only its queue's slot credits bound what it has in flight.
  bool proxy = false;
  /// Kernel: on a stream of its own (KernelCost::side): no SM-array engine held, its duration a plain delay.
  bool side = false;
};

class Program {
 public:
  explicit Program(std::string name = "program") : name_(std::move(name)) { tags_.push_back(""); }

  OpId dma(NodeId agent, Move move, std::vector<OpId> deps = {}, std::string name = {}, std::int32_t tag = 0);
  OpId gemm(NodeId agent, double flops, Precision precision, std::vector<OpId> deps = {}, std::string name = {},
            std::int32_t tag = 0);
  OpId vector(NodeId agent, Bytes bytes, std::vector<OpId> deps = {}, std::string name = {}, std::int32_t tag = 0);
  OpId alloc(NodeId agent, Bytes bytes, std::vector<OpId> deps = {}, std::string name = {});
  OpId free(OpId alloc, std::vector<OpId> deps = {}, std::string name = {});
  /// IPCQ send of `bytes` from `agent` to PE `peer`; the payload is read
  /// from `source` (default: the agent's scratch; e.g. its HBM slice).
  OpId send(NodeId agent, NodeId peer, Bytes bytes, std::int64_t key, std::vector<OpId> deps = {},
            std::string name = {}, std::int32_t tag = 0, std::optional<NodeId> source = std::nullopt);
  OpId recv(NodeId agent, NodeId peer, std::int64_t key, std::vector<OpId> deps = {}, std::string name = {},
            std::int32_t tag = 0, RecvMode mode = RecvMode::Consume);
  /// Replaces op `op`'s PE_CPU dispatch by a pure delay of `latency` (Op::latency).
  void set_latency(OpId op, Time latency);
  /// A send's IPCQ segment size (Op::segment; > 0).
  void set_segment(OpId op, Bytes segment);
  /// A send's queue among its pair's (Op::channel).
  void set_channel(OpId op, int channel);
  /// Marks a send as driven by the host's proxy thread (Op::proxy).
  void set_proxy(OpId op);
  /// Marks a send, recv or switch_reduce as carrying `slices` of a collective's buffer.
  void set_slices(OpId op, Slices slices);
  OpId barrier(NodeId agent, std::vector<OpId> deps, std::string name = {});
  /// A barrier on GPU `agent` that, once `deps` are done, gives back `sms` SMs a collective's kernel held
  /// (KernelCost::hold); no PE_CPU dispatch.
  OpId sm_release(NodeId agent, std::int32_t sms, std::vector<OpId> deps, std::string name = {});
  OpId composite(NodeId agent, Pipeline pipeline, std::vector<OpId> deps = {}, std::string name = {},
                 std::int32_t tag = 0);
  /// In-network reduction of `bytes` on switch `sw`, `group` saying whose chunks it adds and who receives the
  /// sum (SwitchGroup). `issue` as below.
  OpId switch_reduce(NodeId sw, SwitchGroup group, Bytes bytes, std::vector<OpId> deps = {}, std::string name = {},
                     std::int32_t tag = 0, Time issue = 0);
  /// In-network all-reduce of `bytes` on switch `sw`: each of `members`
  /// (the buffers: a PE's scratch or an HBM slice) sends `bytes` to the
  /// switch, which reduces them and multicasts the sum back to each.
  /// `issue`: the members' GPU-side time to issue the chunk's multimem
  /// loads and stores (0: none); the gather stage lasts at least this long.
  OpId switch_reduce(NodeId sw, std::vector<NodeId> members, Bytes bytes, std::vector<OpId> deps = {},
                     std::string name = {}, std::int32_t tag = 0, Time issue = 0);

  /// A coflow of `bytes` over `hops` (program.hpp: coflow), after `latency`
  /// (>= 0: a pure delay, no engine held) and `deps`; `agent` names it.
  OpId coflow(NodeId agent, std::vector<topology::CoflowHop> hops, Bytes bytes, Time latency,
              std::vector<OpId> deps = {}, std::string name = {}, std::int32_t tag = 0);

  /// A GPU kernel on `agent` (program.hpp: launch, kernel): a launch op of
  /// `cost.launch` after the agent's previous launch (none when 0), then the
  /// kernel op of `cost.duration` after it and `deps`. Returns the kernel op.
  OpId kernel(NodeId agent, const KernelCost& cost, std::vector<OpId> deps = {}, std::string name = {},
              std::int32_t tag = 0);
  /// The last launch op issued on `agent`, if any (what its next launch follows).
  std::optional<OpId> last_launch(NodeId agent) const;

  /// Adds a dependency after the fact (may form a cycle: the executor then
  /// reports a deadlock naming the ops).
  void depend(OpId op, OpId on);

  /// Splices `sub` into this program and returns the id offset of its ops
  /// (sub op i becomes op offset + i). Dependencies, Free targets and
  /// pipelines are remapped, tags re-interned by label, and send/recv keys
  /// shifted past this program's own so the messages stay distinct. Sub ops
  /// without dependencies, and kernels that wait only for their launches,
  /// wait for `after` (ops of this program); launches keep host order.
  /// Those on an agent of `per_agent` wait for that agent's ops too, those
  /// on any other agent for every list's (a collective's ranks, each after
  /// its own inputs).
  OpId append(const Program& sub, const std::vector<OpId>& after = {},
              const std::map<NodeId, std::vector<OpId>>& per_agent = {});
  /// Ops with id >= `from` that no op depends on (what a later stage waits for).
  std::vector<OpId> sinks(OpId from = 0) const;

  /// The id of tag `label`, interned (0 is the empty tag).
  std::int32_t tag(const std::string& label);
  const std::vector<std::string>& tags() const { return tags_; }

  const std::vector<Op>& ops() const { return ops_; }
  const Op& op(OpId id) const { return ops_.at(id); }
  const std::vector<Pipeline>& pipelines() const { return pipelines_; }
  /// The buffers of each switch_reduce (Op::pipeline indexes this).
  const std::vector<SwitchGroup>& switch_groups() const { return switch_groups_; }
  /// The hops of each coflow (Op::pipeline indexes this).
  const std::vector<std::vector<topology::CoflowHop>>& coflows() const { return coflows_; }
  const std::string& name() const { return name_; }
  std::size_t size() const { return ops_.size(); }
  /// "op 12 'load A' (dma on sip0.cube0.pe3)"-style label, for messages.
  std::string describe(OpId id, const topology::Machine& m) const;

 private:
  OpId add(Op op, std::vector<OpId> deps);
  void note_key(std::int64_t key);

  std::string name_;
  std::vector<Op> ops_;
  bool have_keys_ = false;                  // the range of send/recv keys in ops_ (kept as ops
  std::int64_t key_min_ = 0, key_max_ = 0;  // are added: append() is linear in the sub-program)
  std::vector<Pipeline> pipelines_;
  std::vector<SwitchGroup> switch_groups_;
  std::vector<std::vector<topology::CoflowHop>> coflows_;
  std::vector<std::string> tags_;
  std::vector<std::pair<NodeId, OpId>> last_launch_;  // per agent that launched (few: the GPUs)
  void note_launch(NodeId agent, OpId op);
};

}  // namespace kernbench::runtime
