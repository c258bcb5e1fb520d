// executor_impl.hpp (private to src/runtime) -- the state of one
// Executor::run and the pieces that work on it, each in its own file:
//   run_graph.cpp        check_program(), build(): program ops and composite stages -> nodes
//   executor.cpp         the run loop: run_node(), finish(), DMA moves
//   ipcq.cpp             send(), recv(), segment_arrived(), credits: the IPCQ
//   blame.cpp            what the waits inside sends and recvs waited for
//   switch_reduce.cpp    switch_reduce(): in-network reduction on a switch
//   deadlock_report.cpp  report_deadlock(): why the stuck ops are stuck
//   cause_export.cpp     export_causes(): NodeCause records for the critical path
// Engine costs come from engine_timing.hpp, the engines from pe_engines.hpp.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/config_section.hpp"
#include "runtime/executor.hpp"
#include "runtime/ipcq.hpp"
#include "runtime/pe_engines.hpp"
#include "runtime/run_graph.hpp"
#include "sim/process.hpp"
#include "sim/rng.hpp"
#include "sim/trigger.hpp"

namespace kernbench::runtime {

struct Executor::Impl {
  Impl(topology::System& s, const Program& p)
      : system(s), sim(s.sim()), cfg(pe_config(s.config())), program(p), pes(s.machine().num_nodes()) {}

  topology::System& system;
  sim::Simulation& sim;
  const runtime::PeConfig& cfg;
  const Program& program;
  std::vector<Node> nodes;
  // Looked up once or more per op: by node id, and hashed -- at thousands of
  // PEs a std::map's pointer chase per op was a cost that grew with the machine.
  std::vector<std::unique_ptr<PeEngines>> pes;  // by node id; created on first use
  struct PairHash {
    std::size_t operator()(std::uint64_t k) const { return static_cast<std::size_t>(sim::mix64(k)); }
  };
  struct MessageHash {
    std::size_t operator()(const MessageKey& k) const {
      return static_cast<std::size_t>(
          sim::mix64(pair_key(k.to, k.from) ^ sim::mix64(static_cast<std::uint64_t>(k.key))));
    }
  };
  static std::uint64_t pair_key(NodeId a, NodeId b) {
    return (static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint32_t>(b);
  }
  struct QueueHash {
    std::size_t operator()(const std::pair<std::uint64_t, std::uint16_t>& k) const {
      return static_cast<std::size_t>(sim::mix64(k.first ^ sim::mix64(k.second)));
    }
  };
  // (src, dst), channel
  std::unordered_map<std::pair<std::uint64_t, std::uint16_t>, std::unique_ptr<SlotQueue>, QueueHash> queues;
  std::unordered_map<MessageKey, std::uint32_t, MessageHash> message_index;  // (dst, src, key)
  std::vector<Message> messages;
  std::vector<std::uint32_t> transfer_message;  // fabric transfer id -> message (segments in flight)
  Executor::Observer* observer = nullptr;
  RunResult result;
  std::size_t remaining = 0;

  // ---- ipcq.cpp ----
  Message& message(NodeId to, NodeId from, std::int64_t key);
  SlotQueue& queue(NodeId from, NodeId to, std::uint16_t channel);
  void segment_arrived(std::uint64_t transfer);
  sim::MemberHandler<Impl, &Impl::segment_arrived> on_segment{*this};
  /// A recv freed a slot of `m`: release it at once (pe.ipcq.credit:
  /// instant) or send the credit back over the fabric (fabric).
  void return_credit(std::uint32_t recv_node, Message& m, std::uint32_t life);
  void credit_arrived(std::uint64_t transfer);
  sim::MemberHandler<Impl, &Impl::credit_arrived> on_credit{*this};
  std::vector<SlotQueue*> credit_queue;    // fabric transfer id -> the queue its credit returns to
  std::vector<std::uint32_t> credit_life;  // ... and the slot life it ends
  std::vector<SlotLife> lives;             // every segment's slot life (Message::life0 + k)

  // ---- blame.cpp ----
  void blame(Node& nd, Blame::Kind kind, std::int32_t what, Time t);
  /// `w` waited over [a, b) for the slot of `life` (-1: unknown) to come back; returns b - a.
  Time blame_slot(Node& w, std::int32_t life, Time a, Time b);
  /// `w` (a recv) waited over [a, b) for the segment of `life`, which arrived at b.
  void blame_segment(Node& w, std::uint32_t life, Time a, Time b);
  sim::Task<> send(std::uint32_t n, PeEngines& e);
  sim::Task<> recv(std::uint32_t n);

  // ---- switch_reduce.cpp ----
  /// The three stages of a reducing switch, each a Server of one unit: the
  /// gather (a set of its input ports takes one chunk's contributions at a
  /// time), the reduction unit, the multicast (a set of its output ports
  /// sends one result at a time). Chunks on one switch pipeline through them.
  /// The port stages are per set of members: an op that gathers from every
  /// GPU of a box and one that gathers from one of them hold different
  /// stages, sharing that GPU's link through the fabric.
  struct SwitchStages {
    SwitchStages(sim::Simulation& sim, const std::string& name) : reduce(sim, name + ".reduce", 1) {}
    sim::Server reduce;
    std::map<std::pair<bool, std::vector<NodeId>>, std::unique_ptr<sim::Server>> ports;  // (gather, members)
  };
  std::unordered_map<NodeId, std::unique_ptr<SwitchStages>> switches;
  /// Switch `sw`'s gather (or multicast) stage for the ports of `members`.
  sim::Server& port_stage(NodeId sw, bool gather, const std::vector<NodeId>& members);
  std::vector<std::uint32_t> transfer_node;  // fabric transfer id -> switch_reduce node (legs in flight)
  void switch_leg_done(std::uint64_t transfer);
  sim::MemberHandler<Impl, &Impl::switch_leg_done> on_switch_leg{*this};
  sim::Task<> switch_legs(std::uint32_t n, bool gather);
  sim::Task<> switch_leg(std::uint32_t n, NodeId src, NodeId dst);  // one transfer, its latency on the op
  sim::Task<> aggregate(std::uint32_t n, NodeId via, bool gather);  // a lower switch's members (SwitchGroup)
  SwitchStages& stages(NodeId sw);
  sim::Task<> switch_reduce(std::uint32_t n);
  sim::Task<> coflow(std::uint32_t n);

  // ---- executor.cpp ----
  PeEngines& pe(NodeId agent);
  /// The RunResult::engines row of a GPU engine (launch, sm) of `agent`, added on first use.
  int gpu_resource(NodeId agent, Engine e);
  std::string describe(std::uint32_t n) const;
  void spawn(std::uint32_t n) { sim.spawn(describe(n), run_node(n)); }
  sim::Process run_node(std::uint32_t n);
  sim::Task<> move(Node& nd);
  void log_wait(const Node& nd, const char* kind, Time from, Time to, int resource);
  void finish(std::uint32_t n, int resource);
  /// After the run: the fabric's busy histograms as RunResult::links.
  void collect_links(const std::vector<Bytes>& before);
  /// "gemm 3: compute tile 0" for a composite's stage, the op's name otherwise.
  std::string full_name(const Node& nd) const {
    return nd.composite >= 0 ? nodes[static_cast<std::size_t>(nd.composite)].name + ": " + nd.name : nd.name;
  }

  // ---- run_graph.cpp ----
  /// Before anything runs: node kinds, scratch / HBM / IPCQ capacities,
  /// message pairing and the size of the run graph (program.hpp lists them).
  void check_program() const;
  void build();
  /// After the run: every send's message was taken by a recv.
  void check_unreceived() const;

  // ---- deadlock_report.cpp ----
  [[noreturn]] void report_deadlock() const;

  // ---- cause_export.cpp ----
  void export_causes();
  std::int32_t label(const std::string& text);
  struct Weight {
    std::int32_t label = 0, channel = -1;  // channel: a RunResult::cause_channels id
    double weight = 0.0;
  };
  std::int32_t channel_id(topology::ChannelId ch);
  void route_weights(NodeId src, NodeId dst, Bytes bytes, double q, std::vector<Weight>& w);
  void split_fabric(const Node& nd, std::vector<Weight>& w);
  void put_weighted(Time total, const std::vector<Weight>& w);
  Time put_blame(const Node& nd, Time limit);
  std::map<std::string, std::int32_t> label_ids;
  std::vector<std::int32_t> link_label, queued_label, channel_name;  // per channel
};

}  // namespace kernbench::runtime
