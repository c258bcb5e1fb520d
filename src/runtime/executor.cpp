// executor.cpp -- the run loop: dependency counting, each node a process
// that pays its dispatch, queues for its engine and does its work; the
// result (timings, engine use, op log). The pieces it calls live in their
// own files (see executor_impl.hpp).
#include "runtime/executor.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "config/quantity.hpp"
#include "runtime/engine_timing.hpp"
#include "runtime/executor_impl.hpp"
#include "sim/errors.hpp"

namespace kernbench::runtime {

const char* to_string(Engine engine) {
  switch (engine) {
    case Engine::PeCpu: return "pe_cpu";
    case Engine::Dma: return "dma";
    case Engine::Gemm: return "gemm";
    case Engine::Vector: return "vector";
    case Engine::Ipcq: return "ipcq";
    case Engine::IpcqRx: return "ipcq_rx";
    case Engine::Launch: return "launch";
    case Engine::Sm: return "sm";
    case Engine::Nccl: return "nccl";
  }
  return "?";
}

PeEngines& Executor::Impl::pe(NodeId agent) {
  auto& slot = pes[agent];
  if (!slot) {
    const std::string& name = system.machine().node(agent).name;
    slot = std::make_unique<PeEngines>(sim, name, cfg);
    for (int e = 0; e < kPeEngines; ++e) {
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

int Executor::Impl::gpu_resource(NodeId agent, Engine e) {
  PeEngines& p = pe(agent);
  int& r = p.resource[static_cast<int>(e)];
  if (r < 0) {
    r = static_cast<int>(result.engines.size());
    const std::string& name = system.machine().node(agent).name;
    result.engines.push_back(EngineUse{agent, e, name + "." + to_string(e), 1});
  }
  return r;
}

std::string Executor::Impl::describe(std::uint32_t n) const {
  const Node& nd = nodes[n];
  if (nd.program_op >= 0) return program.describe(static_cast<OpId>(nd.program_op), system.machine());
  return "stage '" + nd.name + "' of " + program.describe(static_cast<OpId>(nd.composite), system.machine());
}

sim::Task<> Executor::Impl::move(Node& nd) {
  // The one DMA path (topology/fabric/dma.hpp), the one System::dma takes: the same
  // legs, the same address for multipath hashing, the same timing.
  const topology::DmaResult r = co_await topology::dma_move(system.fabric(), nd.agent, nd.move.src, nd.move.dst,
                                                            nd.move.bytes, nd.move.address, nd.tag);
  nd.fabric_latency += r.latency();
  nd.fabric_queued += r.parts.queuing;
}

void Executor::Impl::log_wait(const Node& nd, const char* kind, Time from, Time to, int resource) {
  result.op_counts[kind] += 1;
  result.log.record(sim::OpRecord{nd.program_op, static_cast<std::int32_t>(nd.agent), resource,
                                  result.log.kind_code(kind), nd.tag, from, from, to, 0, 0.0});
  result.log_names.push_back(nd.name + ": " + kind);
}

sim::Process Executor::Impl::run_node(std::uint32_t n) {
  // A composite's join node keeps the ready time of its dispatch.
  if (nodes[n].kind != OpKind::Composite || nodes[n].ready < 0) nodes[n].ready = sim.now();
  if (nodes[n].kind == OpKind::SwitchReduce) {  // runs on a switch: no PE engines, no dispatch
    nodes[n].dispatch_start = nodes[n].dispatch_end = nodes[n].ready;
    co_await switch_reduce(n);
    finish(n, -1);
    co_return;
  }
  if (nodes[n].kind == OpKind::Coflow) {  // a channel's pipeline on the fabric: no PE engine, no dispatch
    nodes[n].dispatch_start = nodes[n].ready;
    if (nodes[n].latency > 0) co_await sim.delay(nodes[n].latency);
    nodes[n].dispatch_end = sim.now();
    co_await coflow(n);
    finish(n, -1);
    co_return;
  }
  const Node& nd = nodes[n];
  PeEngines& e = pe(nd.agent);
  nodes[n].dispatch_start = nodes[n].dispatch_end = nodes[n].ready;
  if (nd.dispatch) {
    co_await e.acquire(Engine::PeCpu, nodes[n].cpu_holder);
    nodes[n].dispatch_start = sim.now();
    co_await sim.delay(dispatch_time(cfg));
    e.release(Engine::PeCpu, n);
    nodes[n].dispatch_end = sim.now();
  } else if (nd.latency > 0) {  // a protocol latency in its place: no engine held (critical path: "protocol")
    co_await sim.delay(nd.latency);
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
      resource = nodes[n].proxy ? -1 : e.resource[static_cast<int>(Engine::Ipcq)];
      break;
    case OpKind::Gemm:
    case OpKind::Vector:
    case OpKind::Launch:    // a GPU's host launch and its kernel: a priced duration on the agent's
    case OpKind::Kernel: {  // launch / sm engine (run_graph gives them no PE_CPU dispatch)
      Engine engine = Engine::Gemm;
      Time t = 0;
      switch (nd.kind) {
        case OpKind::Gemm: t = gemm_time(cfg, nd.flops, nd.precision, nd.name); break;
        case OpKind::Vector: engine = Engine::Vector, t = vector_time(cfg, nd.bytes, nd.name); break;
        case OpKind::Launch: engine = Engine::Launch, t = nd.duration; break;
        default: engine = Engine::Sm, t = nd.duration; break;
      }
      if (nd.side) engine = Engine::Nccl;  // a stream of its own: it holds its SMs, not the SM array
      resource = engine == Engine::Launch || engine == Engine::Sm || engine == Engine::Nccl
                     ? gpu_resource(nd.agent, engine)
                     : e.resource[static_cast<int>(engine)];
      co_await e.acquire(engine, nodes[n].engine_holder);
      nodes[n].start = sim.now();
      if (nd.kind == OpKind::Kernel) {
        if (nd.ctas > 0 && e.sm_held > 0) t = fewer_sms(t, nd.ctas, nd.sms, e.sm_held);
        e.sm_held += nd.sm_hold;
      }
      co_await sim.delay(t);
      e.release(engine, n);
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
      resource = nd.recv_mode == RecvMode::Reduce    ? e.resource[static_cast<int>(Engine::Vector)]
                 : nd.recv_mode == RecvMode::Consume ? e.resource[static_cast<int>(Engine::IpcqRx)]
                                                     : -1;
      break;
    case OpKind::Barrier: e.sm_held += nd.sm_hold; break;  // a release gives back a collective's SMs (< 0)
    case OpKind::Composite:
    case OpKind::SwitchReduce:
    case OpKind::Coflow: break;
  }
  finish(n, resource);
}

void Executor::Impl::collect_links(const std::vector<Bytes>& before) {
  const std::vector<sim::BusyHistogram>* busy = system.fabric().busy();
  if (!busy) return;
  const topology::Machine& m = system.machine();
  Time width = 0;
  for (const sim::BusyHistogram& h : *busy)
    if (!h.bins().empty()) width = std::max(width, h.width());
  result.link_bin = width;
  const std::vector<Bytes> after = topology::channel_bytes(system.fabric());
  for (topology::ChannelId ch = 0; ch < busy->size(); ++ch) {
    sim::BusyHistogram h = (*busy)[ch];
    if (h.bins().empty()) continue;
    h.coarsen_to(width);  // one bin width for every channel
    const topology::ChannelInfo& c = m.channel(ch);
    result.links.push_back(LinkUse{m.node(c.from).name + "->" + m.node(c.to).name, c.link_class, c.link.connections,
                                   c.link.bandwidth.bytes_per_s, after[ch] - before[ch], h.bins()});
  }
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
    if (nd.kind == OpKind::Dma || nd.kind == OpKind::Send || nd.kind == OpKind::SwitchReduce ||
        nd.kind == OpKind::Coflow)
      result.op_bytes[kind] += nd.move.bytes;
    result.log.record(sim::OpRecord{static_cast<std::int64_t>(n), static_cast<std::int32_t>(nd.agent), resource,
                                    result.log.kind_code(kind), nd.tag, nd.ready, nd.start, nd.end,
                                    nd.kind == OpKind::Vector || nd.kind == OpKind::Kernel ? nd.bytes : nd.move.bytes,
                                    nd.flops});
    result.log_names.push_back(full_name(nd));
  }
  --remaining;
  for (std::uint32_t d : nd.dependents)
    if (--nodes[d].waiting == 0) {
      nodes[d].after = static_cast<std::int32_t>(n);  // the dependency that ended last
      spawn(d);
    }
}

Executor::Executor(topology::System& system) : system_(system) {}
Executor::~Executor() = default;

RunResult Executor::run(const Program& program, Observer* observer) {
  Impl x(system_, program);
  x.observer = observer;
  x.result.program = program.name();
  x.result.tags = program.tags();
  x.result.start = system_.sim().now();
  // Link tracks: the fabric's busy time per channel over this run, stopped
  // however the run ends.
  topology::Fabric& fabric = system_.fabric();
  struct Recording {
    topology::Fabric& f;
    ~Recording() { f.record_busy(-1); }
  } recording{fabric};
  fabric.record_busy(x.result.start);
  const std::vector<Bytes> bytes_before = topology::channel_bytes(fabric);
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
  x.check_unreceived();  // a send nobody received finished, but the program is wrong
  x.export_causes();
  x.collect_links(bytes_before);
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
      if (e->resource[k] < 0) continue;  // a GPU engine this agent never used
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
