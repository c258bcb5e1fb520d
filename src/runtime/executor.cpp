// executor.cpp -- dependency counting, engines as Servers, ops as processes.
#include "runtime/executor.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <unordered_map>

#include "config/quantity.hpp"
#include "runtime/config_section.hpp"
#include "sim/errors.hpp"
#include "sim/process.hpp"
#include "sim/rng.hpp"
#include "sim/ring_queue.hpp"
#include "sim/server.hpp"
#include "sim/trigger.hpp"

namespace kernbench::runtime {

const char* to_string(Engine engine) {
  switch (engine) {
    case Engine::PeCpu: return "pe_cpu";
    case Engine::Dma: return "dma";
    case Engine::Gemm: return "gemm";
    case Engine::Vector: return "vector";
    case Engine::Ipcq: return "ipcq";
    case Engine::IpcqRx: return "ipcq_rx";
  }
  return "?";
}

// One PE's engines for the duration of a run.
struct PeEngines {
  PeEngines(sim::Simulation& sim, const std::string& pe, const topology::PeConfig& c)
      : cpu(sim, pe + ".pe_cpu", 1), dma(sim, pe + ".dma", c.dma_channels), gemm(sim, pe + ".gemm", 1),
        vector(sim, pe + ".vector", 1), ipcq(sim, pe + ".ipcq", c.ipcq_channels), ipcq_rx(sim, pe + ".ipcq_rx", 1) {}
  sim::Server cpu, dma, gemm, vector, ipcq, ipcq_rx;
  Bytes scratch = 0;
  Bytes peak = 0;
  int resource[kEngines] = {-1, -1, -1, -1, -1, -1};  // index into RunResult::engines, per Engine
  // Who handed each waiter its unit (for the critical path): a release that
  // finds waiters queues the releasing node; the waiter, once granted, takes
  // it. The engines are FIFO, so hand-overs and grants pair up in order.
  sim::RingQueue<std::int32_t> handoff[kEngines];
  const sim::Server& server(int e) const {
    const sim::Server* s[kEngines] = {&cpu, &dma, &gemm, &vector, &ipcq, &ipcq_rx};
    return *s[e];
  }
  sim::Server& server(Engine e) { return const_cast<sim::Server&>(std::as_const(*this).server(static_cast<int>(e))); }
  void release(Engine e, std::uint32_t node) {
    sim::Server& s = server(e);
    if (s.queue_length() > 0) handoff[static_cast<int>(e)].push_back(static_cast<std::int32_t>(node));
    s.release();
  }
  std::int32_t handed_over(Engine e) {
    auto& q = handoff[static_cast<int>(e)];
    const std::int32_t who = q.front();
    q.pop_front();
    return who;
  }
  // `co_await acquire(e, holder)`: holds a unit of `e`; after a wait,
  // `holder` names the node that handed it over.
  template <class Inner>
  struct Tracked {
    Inner inner;
    PeEngines& pe;
    Engine engine;
    std::int32_t& holder;
    bool waited = false;
    bool await_ready() { return inner.await_ready(); }
    void await_suspend(std::coroutine_handle<> h) {
      waited = true;
      inner.await_suspend(h);
    }
    void await_resume() {
      if (waited) holder = pe.handed_over(engine);
    }
  };
  auto acquire(Engine e, std::int32_t& holder) {
    auto inner = server(e).acquire();
    return Tracked<decltype(inner)>{inner, *this, e, holder};
  }
};

// The IPCQ slots at PE `dst` for sender `src`: a counting credit, taken by
// the sender per segment and given back by the receiver's recv.
struct SlotQueue {
  SlotQueue(sim::Simulation& sim, const std::string& name, int slots) : credits(sim, name, slots) {}
  sim::Server credits;
};

// One send/recv pair in flight, matched by (dst, src, key).
struct Message {
  std::uint32_t send = kNone;     // run-graph node of the send (kNone: not started)
  std::uint32_t recv = kNone;     // ... of the recv, once it waits
  std::uint32_t segments = 0;     // known when the send starts
  std::uint32_t arrived = 0;
  std::uint32_t taken = 0;        // slots the recv has freed
  Bytes bytes = 0;
  SlotQueue* queue = nullptr;
  std::coroutine_handle<> receiver;  // the recv, waiting for segment `want`
  std::uint32_t want = 0;
  std::coroutine_handle<> sender;    // the send, waiting for the last arrival
  static constexpr std::uint32_t kNone = 0xffffffffU;
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
  bool dispatch = true;        // pays a PE_CPU dispatch
  bool logged = true;          // gets an op-log row of its own
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
};

struct Executor::Impl {
  Impl(topology::System& s, const Program& p)
      : system(s), sim(s.sim()), cfg(pe_config(s.config())), program(p), pes(s.machine().num_nodes()) {}

  topology::System& system;
  sim::Simulation& sim;
  const topology::PeConfig& cfg;
  const Program& program;
  std::vector<Node> nodes;
  // Looked up once or more per op: by node id, and hashed -- at thousands of
  // PEs a std::map's pointer chase per op was a cost that grew with the machine.
  std::vector<std::unique_ptr<PeEngines>> pes;  // by node id; created on first use
  struct PairHash {
    std::size_t operator()(std::uint64_t k) const { return static_cast<std::size_t>(sim::mix64(k)); }
  };
  struct MessageKey {
    NodeId to, from;
    std::int64_t key;
    bool operator==(const MessageKey&) const = default;
  };
  struct MessageHash {
    std::size_t operator()(const MessageKey& k) const {
      return static_cast<std::size_t>(sim::mix64(pair_key(k.to, k.from) ^ sim::mix64(static_cast<std::uint64_t>(k.key))));
    }
  };
  static std::uint64_t pair_key(NodeId a, NodeId b) {
    return (static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint32_t>(b);
  }
  std::unordered_map<std::uint64_t, std::unique_ptr<SlotQueue>, PairHash> queues;  // (src, dst)
  std::unordered_map<MessageKey, std::uint32_t, MessageHash> message_index;        // (dst, src, key)
  std::vector<Message> messages;
  std::vector<std::uint32_t> transfer_message;  // fabric transfer id -> message (segments in flight)
  Executor::Observer* observer = nullptr;
  RunResult result;
  std::size_t remaining = 0;

  Message& message(NodeId to, NodeId from, std::int64_t key) {
    auto [it, fresh] = message_index.try_emplace(MessageKey{to, from, key}, static_cast<std::uint32_t>(messages.size()));
    if (fresh) messages.emplace_back();
    return messages[it->second];
  }
  SlotQueue& queue(NodeId from, NodeId to) {
    auto& q = queues[pair_key(from, to)];
    if (!q)
      q = std::make_unique<SlotQueue>(sim, system.machine().node(to).name + ".ipcq<" + system.machine().node(from).name,
                                      cfg.ipcq_slots);
    return *q;
  }
  void segment_arrived(std::uint64_t transfer);
  sim::MemberHandler<Impl, &Impl::segment_arrived> on_segment{*this};

  PeEngines& pe(NodeId agent) {
    auto& slot = pes[agent];
    if (!slot) {
      const std::string& name = system.machine().node(agent).name;
      slot = std::make_unique<PeEngines>(sim, name, cfg);
      for (int e = 0; e < kEngines; ++e) {
        slot->resource[e] = static_cast<int>(result.engines.size());
        const auto eng = static_cast<Engine>(e);
        result.engines.push_back(EngineUse{agent, eng, name + "." + to_string(eng),
                                           eng == Engine::Dma    ? cfg.dma_channels
                                           : eng == Engine::Ipcq ? cfg.ipcq_channels
                                                                 : 1});
      }
    }
    return *slot;
  }

  std::string describe(std::uint32_t n) const {
    const Node& nd = nodes[n];
    const std::string where = system.machine().node(nd.agent).name;
    if (nd.program_op >= 0) return program.describe(static_cast<OpId>(nd.program_op), system.machine());
    return "stage '" + nd.name + "' of " + program.describe(static_cast<OpId>(nd.composite), system.machine());
  }

  void build();
  void spawn(std::uint32_t n) { sim.spawn(describe(n), run_node(n)); }
  sim::Process run_node(std::uint32_t n);
  sim::Task<> move(Node& nd);
  sim::Task<> send(std::uint32_t n, PeEngines& e);
  sim::Task<> recv(std::uint32_t n);
  Time scratch_read(Bytes bytes) const;
  void log_wait(const Node& nd, const char* kind, Time from, Time to, int resource);
  Time gemm_time(const Node& nd) const;
  Time vector_time(Bytes bytes, const Node& nd) const;
  Time cycles_to_time(double cycles, const Node& nd) const;
  void finish(std::uint32_t n, int resource);
  void export_causes();
  /// "gemm 3: compute tile 0" for a composite's stage, the op's name otherwise.
  std::string full_name(const Node& nd) const {
    return nd.composite >= 0 ? nodes[static_cast<std::size_t>(nd.composite)].name + ": " + nd.name : nd.name;
  }
  std::int32_t label(const std::string& text);
  void split_fabric(const Node& nd, std::vector<std::pair<std::int32_t, double>>& w);
  std::map<std::string, std::int32_t> label_ids;
  std::vector<std::int32_t> link_label, queued_label;  // per channel
  [[noreturn]] void report_deadlock() const;
};

void Executor::Impl::build() {
  const auto& ops = program.ops();
  const auto n_ops = static_cast<std::uint32_t>(ops.size());
  nodes.resize(n_ops);
  auto link = [&](std::uint32_t node, std::uint32_t on) {
    nodes[on].dependents.push_back(node);
    ++nodes[node].waiting;
  };
  for (std::uint32_t i = 0; i < n_ops; ++i) {
    const Op& op = ops[i];
    Node& nd = nodes[i];
    nd.kind = op.kind;
    nd.agent = op.agent;
    nd.move = op.move;
    nd.flops = op.flops;
    nd.precision = op.precision;
    nd.bytes = op.bytes;
    nd.tag = op.tag;
    nd.peer = op.peer;
    nd.key = op.key;
    nd.recv_mode = op.recv_mode;
    nd.program_op = i;
    nd.name = op.name;
    if (op.agent >= system.machine().num_nodes())
      throw UsageError(program.name() + ": op " + std::to_string(i) + " '" + op.name + "': agent node id " +
                       std::to_string(op.agent) + " out of range");
    // On a generated machine only PEs own engines (explicit graphs name
    // their own agents: a K200 die, a host thread).
    const topology::NodeInfo& agent = system.machine().node(op.agent);
    if (system.machine().generated() && agent.kind != topology::NodeKind::Pe)
      throw UsageError(program.name() + ": op " + std::to_string(i) + " '" + op.name + "': agent " + agent.name +
                       " is a " + topology::to_string(agent.kind) + ", not a PE");
  }
  for (std::uint32_t i = 0; i < n_ops; ++i) {
    const Op& op = ops[i];
    if (op.kind != OpKind::Composite) {
      for (OpId d : op.deps) link(i, d);
      continue;
    }
    // A composite: a dispatch node (the op's own deps), the stages, and the
    // op's node itself as the join of the last stages (what others wait on).
    const Pipeline& p = program.pipelines()[op.pipeline];
    nodes[i].dispatch = false;
    nodes[i].logged = true;
    const auto stage = [&](OpKind kind, std::string name, std::int32_t tag) {
      Node s;
      s.kind = kind;
      s.agent = op.agent;
      s.dispatch = false;
      s.composite = i;
      s.name = std::move(name);
      s.tag = tag >= 0 ? tag : op.tag;
      nodes.push_back(std::move(s));
      return static_cast<std::uint32_t>(nodes.size() - 1);
    };
    const std::uint32_t d = stage(OpKind::Barrier, "dispatch", op.tag);
    nodes[d].dispatch = true;
    nodes[d].logged = false;
    for (OpId dep : op.deps) link(d, dep);
    std::vector<std::uint32_t> computes;
    for (std::uint32_t t = 0; t < p.tiles; ++t) {
      const std::string tile = " tile " + std::to_string(t);
      std::vector<std::uint32_t> loads;
      for (std::size_t j = 0; j < p.loads.size(); ++j) {
        const std::uint32_t l = stage(OpKind::Dma, "load " + std::to_string(j) + tile, p.load_tag);
        nodes[l].move = p.loads[j];
        nodes[l].bytes = p.loads[j].bytes;
        link(l, d);
        if (t >= p.buffers) link(l, computes[t - p.buffers]);  // its buffer is free again
        loads.push_back(l);
      }
      const std::uint32_t c = stage(p.compute, "compute" + tile, p.compute_tag);
      nodes[c].flops = p.flops;
      nodes[c].precision = p.precision;
      nodes[c].bytes = p.vector_bytes;
      link(c, d);
      for (std::uint32_t l : loads) link(c, l);
      computes.push_back(c);
      if (p.stores.empty()) link(i, c);
      for (std::size_t j = 0; j < p.stores.size(); ++j) {
        const std::uint32_t s = stage(OpKind::Dma, "store " + std::to_string(j) + tile, p.store_tag);
        nodes[s].move = p.stores[j];
        nodes[s].bytes = p.stores[j].bytes;
        link(s, c);
        link(i, s);
      }
    }
  }
  remaining = nodes.size();
}

Time Executor::Impl::gemm_time(const Node& nd) const {
  int macs = 0;
  switch (nd.precision) {
    case Precision::Fp32: macs = cfg.gemm_macs_fp32; break;
    case Precision::Fp16: macs = cfg.gemm_macs_fp16; break;
    case Precision::Bf16: macs = cfg.gemm_macs_bf16; break;
    case Precision::Int8: macs = cfg.gemm_macs_int8; break;
  }
  if (macs <= 0)
    throw ConfigError("the GEMM engine has no " + std::string(topology::to_string(nd.precision)) +
                      " mode (pe.gemm." + topology::to_string(nd.precision) + " = 0)");
  // FLOPs = 2 x MACs; cycles rounded up, then to ps (rounded up).
  return cycles_to_time(std::ceil(nd.flops / (2.0 * macs)), nd);
}

Time Executor::Impl::cycles_to_time(double cycles, const Node& nd) const {
  const double ps = std::ceil(cycles * 1e12 / static_cast<double>(cfg.clock_hz));
  if (!(ps < 0x1p62))  // far from int64 overflow (~53 days)
    throw UsageError("'" + nd.name + "' is too large: it would take " + std::to_string(ps) +
                     " ps, longer than the simulator's time range (2^62 ps)");
  return static_cast<Time>(ps);
}

Time Executor::Impl::vector_time(Bytes bytes, const Node& nd) const {
  return cycles_to_time(std::ceil(static_cast<double>(bytes) / cfg.vector_bytes_per_cycle), nd);
}

sim::Task<> Executor::Impl::move(Node& nd) {
  topology::Fabric& fabric = system.fabric();
  const auto agent = static_cast<std::int32_t>(nd.agent);
  const MoveLegs legs = move_legs(nd.agent, nd.move, fabric.config().request);
  bool paid = true;  // after a read's request, the source's processing is paid (on the request's arrival)
  for (int i = 0; i < legs.count; ++i) {
    const MoveLegs::Leg& l = legs.leg[i];
    topology::TransferSpec spec{l.src, l.dst, l.bytes, 0, nd.tag, agent};
    if (!l.request) spec.charge_src_overhead = paid;
    const topology::TransferRecord& r = co_await fabric.transfer(spec);
    nd.fabric_latency += r.latency();
    nd.fabric_queued += r.parts.queuing;
    if (l.request) paid = false;
  }
}

namespace {

// Parks a coroutine in `slot` until someone schedules it.
struct Park {
  std::coroutine_handle<>& slot;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) noexcept { slot = h; }
  void await_resume() const noexcept {}
};

Bytes segment_bytes(Bytes total, Bytes slot, std::uint32_t k, std::uint32_t segments) {
  return k + 1 < segments ? slot : total - slot * static_cast<Bytes>(segments - 1);
}

}  // namespace

Time Executor::Impl::scratch_read(Bytes bytes) const {
  // A bank hop, then the bytes at the scratch port's width (the vector
  // engine's bytes per cycle), rounded up to whole cycles.
  const auto cycles = (bytes + cfg.vector_bytes_per_cycle - 1) / cfg.vector_bytes_per_cycle;
  return cfg.ipcq_bank_hop + static_cast<Time>(std::ceil(static_cast<double>(cycles) * 1e12 /
                                                          static_cast<double>(cfg.clock_hz)));
}

void Executor::Impl::log_wait(const Node& nd, const char* kind, Time from, Time to, int resource) {
  result.op_counts[kind] += 1;
  result.log.record(sim::OpRecord{nd.program_op, static_cast<std::int32_t>(nd.agent), resource,
                                  result.log.kind_code(kind), nd.tag, from, from, to, 0, 0.0});
  result.log_names.push_back(nd.name + ": " + kind);
}

void Executor::Impl::segment_arrived(std::uint64_t transfer) {
  Message& m = messages[transfer_message[transfer]];
  ++m.arrived;
  const topology::TransferRecord& r = system.fabric().record(transfer);
  nodes[m.send].fabric_latency += r.latency();
  nodes[m.send].fabric_queued += r.parts.queuing;
  if (m.receiver && m.arrived > m.want) sim.schedule(0, sim::Target::resume(std::exchange(m.receiver, {})));
  if (m.sender && m.arrived == m.segments) sim.schedule(0, sim::Target::resume(std::exchange(m.sender, {})));
}

sim::Task<> Executor::Impl::send(std::uint32_t n, PeEngines& e) {
  co_await e.acquire(Engine::Ipcq, nodes[n].engine_holder);
  Node& nd = nodes[n];
  nd.start = sim.now();
  if (observer) observer->on_start(static_cast<OpId>(nd.program_op));
  const NodeId dst = nd.move.dst;
  Message& first = message(dst, nd.agent, nd.key);
  const auto mi = static_cast<std::uint32_t>(&first - messages.data());
  if (first.send != Message::kNone)
    throw UsageError(program.name() + ": " + describe(n) + " reuses key " + std::to_string(nd.key) + " of " +
                     describe(first.send) + " for the same receiver " + system.machine().node(dst).name);
  SlotQueue& q = queue(nd.agent, dst);
  const Bytes slot = cfg.ipcq_slot;
  const Bytes bytes = nd.move.bytes;
  const auto segments = static_cast<std::uint32_t>(bytes == 0 ? 1 : (bytes + slot - 1) / slot);
  first.send = n;
  first.segments = segments;
  first.bytes = bytes;
  first.queue = &q;
  topology::Fabric& fabric = system.fabric();
  for (std::uint32_t k = 0; k < segments; ++k) {
    if (!q.credits.try_acquire()) {  // back-pressure: every slot there is taken
      const Time t0 = sim.now();
      co_await q.credits.acquire();
      log_wait(nd, "slot_wait", t0, sim.now(), -1);
      nodes[n].slot_wait += sim.now() - t0;
    }
    topology::TransferSpec spec{nd.move.src, dst, segment_bytes(bytes, slot, k, segments),
                                static_cast<std::uint64_t>(k) * static_cast<std::uint64_t>(slot), nd.tag,
                                static_cast<std::int32_t>(nd.agent), static_cast<std::int64_t>(n)};
    const topology::TransferId id = fabric.start(spec, sim::Target::call(on_segment));
    if (id >= transfer_message.size()) transfer_message.resize(std::max<std::size_t>(id + 1, 2 * transfer_message.size()));
    transfer_message[id] = mi;
  }
  if (messages[mi].arrived < segments) co_await Park{messages[mi].sender};
  e.release(Engine::Ipcq, n);
}

sim::Task<> Executor::Impl::recv(std::uint32_t n) {
  Message& first = message(nodes[n].agent, nodes[n].peer, nodes[n].key);
  const auto mi = static_cast<std::uint32_t>(&first - messages.data());
  first.recv = n;
  PeEngines& e = pe(nodes[n].agent);
  const RecvMode mode = nodes[n].recv_mode;
  for (std::uint32_t k = 0;; ++k) {
    if (messages[mi].arrived <= k) {
      const Time t0 = sim.now();
      messages[mi].want = k;
      co_await Park{messages[mi].receiver};
      if (k == 0) nodes[n].engine_holder = static_cast<std::int32_t>(messages[mi].send);  // waited for its data
      else nodes[n].data_wait += sim.now() - t0;
    }
    if (k == 0) nodes[n].start = sim.now();  // the first segment is here
    const Bytes b = segment_bytes(messages[mi].bytes, cfg.ipcq_slot, k, messages[mi].segments);
    if (mode == RecvMode::Consume) {
      std::int32_t unused = -1;
      co_await e.acquire(Engine::IpcqRx, unused);
      co_await sim.delay(scratch_read(b));
      e.release(Engine::IpcqRx, n);
    } else if (mode == RecvMode::Reduce) {
      std::int32_t unused = -1;
      co_await e.acquire(Engine::Vector, unused);
      co_await sim.delay(cfg.ipcq_bank_hop + vector_time(b, nodes[n]));
      e.release(Engine::Vector, n);
    }
    Message& m = messages[mi];
    ++m.taken;
    m.queue->credits.release();
    if (k + 1 == m.segments) break;
  }
}

sim::Process Executor::Impl::run_node(std::uint32_t n) {
  // A composite's join node keeps the ready time of its dispatch.
  if (nodes[n].kind != OpKind::Composite || nodes[n].ready < 0) nodes[n].ready = sim.now();
  const Node& nd = nodes[n];
  PeEngines& e = pe(nd.agent);
  nodes[n].dispatch_start = nodes[n].dispatch_end = nodes[n].ready;
  if (nd.dispatch) {
    co_await e.acquire(Engine::PeCpu, nodes[n].cpu_holder);
    nodes[n].dispatch_start = sim.now();
    co_await sim.delay(cfg.dispatch);
    e.release(Engine::PeCpu, n);
    nodes[n].dispatch_end = sim.now();
  }
  int resource = -1;
  switch (nd.kind) {
    case OpKind::Dma: {
      co_await e.acquire(Engine::Dma, nodes[n].engine_holder);
      nodes[n].start = sim.now();
      co_await move(nodes[n]);
      e.release(Engine::Dma, n);
      resource = e.resource[static_cast<int>(Engine::Dma)];
      break;
    }
    case OpKind::Send:
      co_await send(n, e);
      resource = e.resource[static_cast<int>(Engine::Ipcq)];
      break;
    case OpKind::Gemm:
    case OpKind::Vector: {
      const bool gemm = nd.kind == OpKind::Gemm;
      const Time t = gemm ? gemm_time(nd) : vector_time(nd.bytes, nd);
      const Engine engine = gemm ? Engine::Gemm : Engine::Vector;
      co_await e.acquire(engine, nodes[n].engine_holder);
      nodes[n].start = sim.now();
      co_await sim.delay(t);
      e.release(engine, n);
      resource = e.resource[static_cast<int>(gemm ? Engine::Gemm : Engine::Vector)];
      break;
    }
    case OpKind::Alloc:
      if (e.scratch + nd.bytes > cfg.scratch)
        throw CapacityError("scratch of " + system.machine().node(nd.agent).name + " overflows: " + nd.name +
                            " asks for " + config::format_bytes(nd.bytes, config::ByteUnits::UpToKiB) + " with " +
                            config::format_bytes(e.scratch, config::ByteUnits::UpToKiB) + " of " +
                            config::format_bytes(cfg.scratch, config::ByteUnits::UpToKiB) + " in use");
      e.scratch += nd.bytes;
      e.peak = std::max(e.peak, e.scratch);
      break;
    case OpKind::Free: e.scratch -= nd.bytes; break;
    case OpKind::Recv:
      co_await recv(n);
      resource = nd.recv_mode == RecvMode::Reduce      ? e.resource[static_cast<int>(Engine::Vector)]
                 : nd.recv_mode == RecvMode::Consume ? e.resource[static_cast<int>(Engine::IpcqRx)]
                                                     : -1;
      break;
    case OpKind::Barrier:
    case OpKind::Composite: break;
  }
  finish(n, resource);
}

void Executor::Impl::finish(std::uint32_t n, int resource) {
  Node& nd = nodes[n];
  const Time now = sim.now();
  nd.end = now;
  nd.resource = resource;
  if (nd.kind == OpKind::Composite) {
    if (nd.start < 0) nd.start = now;  // a pipeline whose stages did no timed work
  } else if (nd.start < 0) {
    nd.start = now;  // no engine: alloc, free, barrier, recv (when the message came)
  }
  if (nd.composite >= 0) {
    // A composite spans its stages: ready when dispatched, started with its
    // first stage.
    Node& c = nodes[static_cast<std::size_t>(nd.composite)];
    if (!nd.logged) {
      c.ready = nd.ready;
    } else {
      c.start = c.start < 0 ? nd.start : std::min(c.start, nd.start);
    }
  }
  if (observer && nd.program_op >= 0) observer->on_end(static_cast<OpId>(nd.program_op));
  if (nd.logged) {
    const char* kind = to_string(nd.kind);
    result.op_counts[kind] += 1;
    if (nd.kind == OpKind::Dma || nd.kind == OpKind::Send) result.op_bytes[kind] += nd.move.bytes;
    result.log.record(sim::OpRecord{static_cast<std::int64_t>(n), static_cast<std::int32_t>(nd.agent), resource,
                                    result.log.kind_code(kind), nd.tag, nd.ready, nd.start, nd.end,
                                    nd.kind == OpKind::Vector ? nd.bytes : nd.move.bytes, nd.flops});
    result.log_names.push_back(full_name(nd));
  }
  --remaining;
  for (std::uint32_t d : nd.dependents)
    if (--nodes[d].waiting == 0) {
      nodes[d].after = static_cast<std::int32_t>(n);  // the dependency that ended last
      spawn(d);
    }
}

void Executor::Impl::report_deadlock() const {
  std::string msg = program.name() + ": deadlock: " + std::to_string(remaining) + " of " +
                    std::to_string(nodes.size()) + " ops and stages can never finish";
  int shown = 0;
  for (std::uint32_t n = 0; n < nodes.size() && shown < 8; ++n) {
    const Node& nd = nodes[n];
    if (nd.end >= 0 || (nd.program_op < 0 && nd.waiting > 0)) continue;
    msg += shown++ ? "; " : ": ";
    msg += describe(n);
    if (nd.kind == OpKind::Recv && nd.ready >= 0 && nd.waiting == 0) {
      const auto it = message_index.find(MessageKey{nd.agent, nd.peer, nd.key});
      const Message* m = it == message_index.end() ? nullptr : &messages[it->second];
      if (m == nullptr || m->send == Message::kNone) {
        msg += " waits for a send from " + system.machine().node(nd.peer).name + " with key " +
               std::to_string(nd.key) + " that never came";
      } else {
        msg += " has taken " + std::to_string(m->taken) + " of " + std::to_string(m->segments) + " segments from " +
               system.machine().node(nd.peer).name;
      }
      continue;
    }
    if (nd.kind == OpKind::Send && nd.start >= 0) {
      const auto it = message_index.find(MessageKey{nd.move.dst, nd.agent, nd.key});
      const Message& m = messages[it->second];
      msg += " is blocked: " + std::to_string(m.arrived) + " of " + std::to_string(m.segments) +
             " segments delivered, and all " + std::to_string(cfg.ipcq_slots) + " slots of " +
             system.machine().node(nd.move.dst).name + "'s queue from " + system.machine().node(nd.agent).name +
             (m.recv == Message::kNone ? " are full and no recv for key " + std::to_string(nd.key) + " was posted"
                                       : " are full");
      continue;
    }
    std::string on;
    for (std::uint32_t m = 0; m < nodes.size(); ++m) {
      const Node& other = nodes[m];
      if (other.end >= 0) continue;
      if (std::find(other.dependents.begin(), other.dependents.end(), n) == other.dependents.end()) continue;
      on += (on.empty() ? "" : ", ") + (other.program_op >= 0 ? "op " + std::to_string(other.program_op)
                                                              : "stage '" + other.name + "'");
    }
    msg += on.empty() ? " never started" : " waits for " + on;
  }
  throw DeadlockError(msg);
}

Executor::Executor(topology::System& system) : system_(system) {}
Executor::~Executor() = default;

RunResult Executor::run(const Program& program, Observer* observer) {
  Impl x(system_, program);
  x.observer = observer;
  x.result.program = program.name();
  x.result.tags = program.tags();
  x.result.start = system_.sim().now();
  x.build();
  for (std::uint32_t n = 0; n < x.nodes.size(); ++n)
    if (x.nodes[n].waiting == 0) x.spawn(n);
  system_.sim().run();
  // Invariant, always on: an op that got its engine also finished; one that
  // did not is the engine's or the fabric's fault, not the program's.
  // (Sends and recvs may be stuck by the program itself: a deadlock.)
  for (std::uint32_t n = 0; n < x.nodes.size(); ++n)
    if (x.nodes[n].start >= 0 && x.nodes[n].end < 0 && x.nodes[n].kind != OpKind::Send &&
        x.nodes[n].kind != OpKind::Recv)
      throw InternalError("executor: " + x.describe(n) + " started at t=" + std::to_string(x.nodes[n].start) +
                          " ps and never ended");
  if (x.remaining > 0) x.report_deadlock();
  x.export_causes();
  x.result.end = x.result.start;
  x.result.ops.resize(program.size());
  for (std::uint32_t i = 0; i < program.size(); ++i) {
    const Node& nd = x.nodes[i];
    x.result.ops[i] = OpTiming{nd.ready, nd.start, nd.end};
    x.result.end = std::max(x.result.end, nd.end);
  }
  for (NodeId agent = 0; agent < static_cast<NodeId>(x.pes.size()); ++agent) {
    const auto& e = x.pes[static_cast<std::size_t>(agent)];
    if (!e) continue;
    for (int k = 0; k < kEngines; ++k) {
      EngineUse& u = x.result.engines[static_cast<std::size_t>(e->resource[k])];
      const sim::ServerStats st = e->server(k).stats();
      u.busy = st.busy_unit_time;
      u.grants = st.grants;
      u.total_wait = st.total_wait;
    }
    if (e->peak > 0) x.result.peak_scratch[agent] = e->peak;
  }
  return std::move(x.result);
}

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
  const double q = nd.fabric_latency > 0 ? static_cast<double>(nd.fabric_queued) / static_cast<double>(nd.fabric_latency)
                                         : 0.0;
  const auto add_route = [&](NodeId src, NodeId dst, Bytes bytes) {
    if (src == dst) return;
    const topology::Route& r = fabric.router().route(src, dst);
    for (const topology::Hop& h : r.hop) {
      if (link_label[h.channel] < 0) {
        link_label[h.channel] = label("link:" + m.channel(h.channel).link_class);
        queued_label[h.channel] = label("wait:resource:" + m.channel(h.channel).link_class);
      }
      const double service =
          static_cast<double>(h.latency + sim::transfer_time(bytes, h.bandwidth) + h.next_overhead);
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
        if (it == merged.end()) merged.emplace_back(label, v);
        else it->second += v;
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

std::pair<Time, Time> RunResult::window(std::int32_t tag) const {
  Time first = -1, last = -1;
  for (std::size_t i = 0; i < log.size(); ++i) {
    if (log.tag()[i] != tag) continue;
    first = first < 0 ? log.start()[i] : std::min(first, log.start()[i]);
    last = std::max(last, log.end()[i]);
  }
  return {first, last};
}

double RunResult::busy_within(NodeId pe, Engine engine, Time t0, Time t1) const {
  double busy = 0.0;
  for (std::size_t i = 0; i < log.size(); ++i) {
    const int r = log.resource()[i];
    if (r < 0 || engines[static_cast<std::size_t>(r)].pe != pe || engines[static_cast<std::size_t>(r)].engine != engine)
      continue;
    const Time a = std::max(t0, log.start()[i]), b = std::min(t1, log.end()[i]);
    if (b > a) busy += static_cast<double>(b - a);
  }
  return busy;
}

}  // namespace kernbench::runtime
