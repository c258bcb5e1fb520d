// energy.cpp -- the energy model over a finished run (see energy.hpp).
#include "runtime/energy.hpp"
#include "runtime/config_section.hpp"

#include <tuple>
#include <utility>

#include "sim/errors.hpp"

namespace kernbench::runtime {
namespace {

constexpr double kAttojoule = 1e-18;

using runtime::EnergyConfig;
using topology::NodeKind;

runtime::EnergyPerByte link_price(const EnergyConfig& e, const std::string& cls) {
  if (cls == "pe") return e.links.pe;
  if (cls == "noc") return e.links.noc;
  if (cls == "hbm") return e.links.hbm;
  if (cls == "ucie_port") return e.links.ucie_port;
  if (cls == "ucie") return e.links.ucie;
  if (cls == "pcie_port") return e.links.pcie_port;
  if (cls == "pcie") return e.links.pcie;
  return e.links.other;
}

runtime::EnergyPerFlop gemm_price(const EnergyConfig& e, Precision p) {
  switch (p) {
    case Precision::Fp32: return e.compute.gemm_fp32;
    case Precision::Fp16: return e.compute.gemm_fp16;
    case Precision::Bf16: return e.compute.gemm_bf16;
    case Precision::Int8: return e.compute.gemm_int8;
    case Precision::Tf32: return e.compute.gemm_tf32;
    case Precision::Fp8: return e.compute.gemm_fp8;
  }
  return 0;
}

runtime::Power static_price(const EnergyConfig& e, NodeKind k) {
  switch (k) {
    case NodeKind::Pe: return e.static_power.pe;
    case NodeKind::Router: return e.static_power.router;
    case NodeKind::HbmCtrl: return e.static_power.hbm_ctrl;
    case NodeKind::Ucie: return e.static_power.ucie;
    case NodeKind::PcieEp: return e.static_power.pcie_ep;
    default: return e.static_power.other;
  }
}

/// Integer tallies, priced once at the end (so energy is exactly linear).
struct Tally {
  std::map<std::string, Bytes> link;  ///< bytes per link class
  Bytes hbm = 0;
  Bytes sram = 0;
  std::map<Precision, double> flops;
  Bytes vector = 0;

  /// Adds `n` copies of the byte tallies of `o` (integers: exact).
  void add_bytes(const Tally& o, Bytes n) {
    for (const auto& [cls, b] : o.link) link[cls] += b * n;
    hbm += o.hbm * n;
    sram += o.sram * n;
    vector += o.vector * n;
  }

  double joules(const EnergyConfig& e) const {
    double aj = 0.0;
    for (const auto& [cls, b] : link) aj += static_cast<double>(b) * static_cast<double>(link_price(e, cls));
    aj += static_cast<double>(hbm) * static_cast<double>(e.memory.hbm);
    aj += static_cast<double>(sram) * static_cast<double>(e.memory.sram);
    for (const auto& [p, f] : flops) aj += f * static_cast<double>(gemm_price(e, p));
    aj += static_cast<double>(vector) * static_cast<double>(e.compute.vector);
    return aj * kAttojoule;
  }
};

class Attributor {
 public:
  explicit Attributor(topology::System& system) : system_(system) {}

  // One DMA-style move (dma ops, composite stages): the read request, then
  // the data, as the executor's move() issues them.
  void move(Tally& t, NodeId agent, const Move& m) {
    const MoveLegs legs = move_legs(agent, m, system_.fabric().config().request);
    for (int i = 0; i < legs.count; ++i) route(t, legs.leg[i].src, legs.leg[i].dst, legs.leg[i].bytes);
    endpoints(t, m);
  }
  // An IPCQ send: the payload from its source to the peer's queue.
  void send(Tally& t, const Move& m) {
    if (m.src != m.dst) route(t, m.src, m.dst, m.bytes);
    endpoints(t, m);
  }

 private:
  void route(Tally& t, NodeId src, NodeId dst, Bytes bytes) {
    const topology::Route& r = system_.fabric().router().route(src, dst);
    for (const topology::ChannelId c : r.channels) t.link[system_.machine().channel(c).link_class] += bytes;
  }
  void endpoints(Tally& t, const Move& m) {
    if (m.src == m.dst) return;
    for (const NodeId n : {m.src, m.dst}) {
      const NodeKind k = system_.machine().node(n).kind;
      if (k == NodeKind::HbmCtrl) t.hbm += m.bytes;
      if (k == NodeKind::Pe) t.sram += m.bytes;
    }
  }

  topology::System& system_;
};

}  // namespace

EnergyReport energy(topology::System& system, const Program& program, const RunResult& result) {
  if (result.ops.size() != program.size())
    throw UsageError("energy: the result (" + std::to_string(result.ops.size()) + " ops, program '" + result.program +
                     "') is not a run of program '" + program.name() + "' (" + std::to_string(program.size()) +
                     " ops)");
  const EnergyConfig& e = energy_config(system.config());
  const topology::Machine& m = system.machine();
  EnergyReport rep;
  rep.makespan = result.makespan();

  // Links: what the fabric actually carried during the run.
  Tally links;
  for (const topology::TransferRecord& r : system.fabric().records()) {
    if (r.issue < result.start || !r.done() || r.end > result.end) continue;
    if (r.stripes > 0) continue;  // spread over paths: its stripes (records of their own) carried the bytes
    if (r.coflow) continue;       // its hops' bytes are counted from the coflow op below
    const topology::Route& route = system.fabric().router().paths(r.src, r.dst).at(r.path);
    for (const topology::ChannelId c : route.channels) links.link[m.channel(c).link_class] += r.bytes;
  }

  // Memory and compute, per op kind, from the Program (which ran to the end).
  std::map<std::tuple<NodeId, NodeId, std::int64_t>, Bytes> sent;  // (sender, receiver, key) -> bytes
  for (const Op& op : program.ops())
    if (op.kind == OpKind::Send) sent[{op.agent, op.move.dst, op.key}] = op.move.bytes;
  Attributor at(system);
  std::map<std::string, Tally> kinds;
  for (const Op& op : program.ops()) {
    Tally& t = kinds[to_string(op.kind)];
    switch (op.kind) {
      case OpKind::Dma: at.move(t, op.agent, op.move); break;
      case OpKind::Send: at.send(t, op.move); break;
      case OpKind::Recv:
        if (op.recv_mode == RecvMode::Reduce)
          if (const auto it = sent.find({op.peer, op.agent, op.key}); it != sent.end()) t.vector += it->second;
        break;
      case OpKind::Gemm: t.flops[op.precision] += op.flops; break;
      case OpKind::Vector: t.vector += op.bytes; break;
      case OpKind::Coflow:  // every hop's weight x bytes over its route (the first equal-cost path)
        for (const topology::CoflowHop& h : program.coflows().at(op.pipeline))
          for (const topology::ChannelId c : system.fabric().router().route(h.src, h.dst).channels)
            links.link[m.channel(c).link_class] +=
                static_cast<Bytes>(std::llround(h.weight * static_cast<double>(op.move.bytes)));
        break;
      case OpKind::Kernel:  // a GPU kernel: its FLOPs and the HBM bytes its model says it moves
        t.flops[op.precision] += op.flops;
        t.hbm += op.bytes;
        break;
      case OpKind::Composite: {
        const Pipeline& p = program.pipelines().at(op.pipeline);
        Tally tile;  // every tile moves the same bytes over the same routes
        for (const Move& mv : p.loads) at.move(tile, op.agent, mv);
        for (const Move& mv : p.stores) at.move(tile, op.agent, mv);
        t.add_bytes(tile, static_cast<Bytes>(p.tiles));
        if (p.compute == OpKind::Gemm)
          t.flops[p.precision] += p.flops * p.tiles;
        else
          t.vector += p.vector_bytes * static_cast<Bytes>(p.tiles);
        break;
      }
      default: break;
    }
  }
  Tally all;  // memory and compute of every op; links from the fabric
  all.link = links.link;
  for (const auto& [kind, t] : kinds) {
    all.hbm += t.hbm;
    all.sram += t.sram;
    for (const auto& [p, f] : t.flops) all.flops[p] += f;
    all.vector += t.vector;
    const double j = t.joules(e);
    if (j > 0.0) rep.by_op_kind[kind] = j;
  }
  // Link energy no op accounts for (another traffic source during the run).
  Tally attributed;
  for (const auto& [kind, t] : kinds)
    for (const auto& [cls, b] : t.link) attributed.link[cls] += b;
  Tally rest;
  for (const auto& [cls, b] : links.link)
    if (const Bytes d = b - attributed.link[cls]; d != 0) rest.link[cls] = d;
  if (!rest.link.empty()) rep.by_op_kind["unattributed"] = rest.joules(e);

  // The shared labels.
  for (const auto& [cls, b] : all.link) {
    rep.by["dynamic:link:" + cls] = static_cast<double>(b) * static_cast<double>(link_price(e, cls)) * kAttojoule;
    rep.counts["link:" + cls] = static_cast<double>(b);
  }
  if (all.hbm > 0) {
    rep.by["dynamic:memory:hbm"] = static_cast<double>(all.hbm) * static_cast<double>(e.memory.hbm) * kAttojoule;
    rep.counts["memory:hbm"] = static_cast<double>(all.hbm);
  }
  if (all.sram > 0) {
    rep.by["dynamic:memory:sram"] = static_cast<double>(all.sram) * static_cast<double>(e.memory.sram) * kAttojoule;
    rep.counts["memory:sram"] = static_cast<double>(all.sram);
  }
  for (const auto& [p, f] : all.flops) {
    if (f <= 0.0) continue;
    rep.by[std::string("dynamic:compute:gemm:") + topology::to_string(p)] =
        f * static_cast<double>(gemm_price(e, p)) * kAttojoule;
    rep.counts[std::string("compute:gemm:") + topology::to_string(p)] = f;
  }
  if (all.vector > 0) {
    rep.by["dynamic:compute:vector:any"] =
        static_cast<double>(all.vector) * static_cast<double>(e.compute.vector) * kAttojoule;
    rep.counts["compute:vector"] = static_cast<double>(all.vector);
  }
  rep.dynamic_j = all.joules(e);

  std::map<NodeKind, std::int64_t> nodes;
  for (const topology::NodeInfo& n : m.nodes()) ++nodes[n.kind];
  const double seconds = sim::to_seconds(rep.makespan);
  for (const auto& [kind, count] : nodes) {
    const double j = static_cast<double>(count) * static_cast<double>(static_price(e, kind)) * 1e-6 * seconds;
    rep.counts[std::string("nodes:") + topology::to_string(kind)] = static_cast<double>(count);
    if (j > 0.0) rep.by[std::string("static:") + topology::to_string(kind)] = j;
    rep.static_j += j;
  }
  rep.total_j = rep.dynamic_j + rep.static_j;
  return rep;
}

}  // namespace kernbench::runtime
