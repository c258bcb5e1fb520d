// pipeline.cpp -- one coflow per channel (pipeline.hpp).
#include "ccl/pipeline.hpp"

#include <algorithm>
#include <cmath>

#include "ccl/config_section.hpp"
#include "ccl/logical/sharp.hpp"
#include "ccl/logical/tree.hpp"
#include "sim/errors.hpp"

namespace kernbench::ccl {
namespace {

// One channel's pipeline: its logical hops (rank pairs), the payload each
// carries, its depth in pieces (fill) and its chain of steps.
struct Channel {
  std::vector<std::pair<int, int>> hops;
  double payload = 0.0;  // bytes each hop carries
  int fill = 0;          // pieces the last one trails the first by (depth - 1)
  int steps = 0;         // steps on the dependency chain
  int net_steps = 0;     // of which cross boxes
  double run = 0.0;      // payload a hop moves per step of the chain (a ring's slice, a tree's whole part)
};

bool across(const Plan& p, int a, int b) {
  return p.multi_node() && p.boxes->box[static_cast<std::size_t>(a)] != p.boxes->box[static_cast<std::size_t>(b)];
}

// The most cross-box hops in `len` consecutive hops of the cycle `order`.
int worst_run(const Plan& p, const std::vector<int>& order, int len) {
  const int n = static_cast<int>(order.size());
  std::vector<int> cross(static_cast<std::size_t>(n));
  int total = 0;
  for (int i = 0; i < n; ++i) {
    cross[static_cast<std::size_t>(i)] =
        across(p, order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>((i + 1) % n)]) ? 1 : 0;
    total += cross[static_cast<std::size_t>(i)];
  }
  const int rest = len % n;
  int best = 0, run = 0;
  for (int i = 0; i < rest; ++i) run += cross[static_cast<std::size_t>(i)];
  best = run;
  for (int i = 1; i < n && rest > 0; ++i) {
    run += cross[static_cast<std::size_t>((i + rest - 1) % n)] - cross[static_cast<std::size_t>(i - 1)];
    best = std::max(best, run);
  }
  return (len / n) * total + best;
}

Channel ring_channel(const Plan& p, Collective c, double part) {
  Channel ch;
  const int n = p.world.size();
  if (c == Collective::Broadcast) {  // a pipelined chain from the root, in rank order (ring.cpp)
    std::vector<int> chain;
    for (int k = 0; k < n; ++k) chain.push_back(p.world.ranks[static_cast<std::size_t>((p.root + k) % n)]);
    for (int k = 0; k + 1 < n; ++k) {
      ch.hops.emplace_back(chain[static_cast<std::size_t>(k)], chain[static_cast<std::size_t>(k + 1)]);
      ch.net_steps += across(p, chain[static_cast<std::size_t>(k)], chain[static_cast<std::size_t>(k + 1)]) ? 1 : 0;
    }
    ch.payload = part;
    ch.fill = n - 2;
    ch.steps = n - 1;
    ch.run = part;
    return ch;
  }
  const std::vector<int> ring = ring_order(p);
  for (int i = 0; i < n; ++i)
    ch.hops.emplace_back(ring[static_cast<std::size_t>(i)], ring[static_cast<std::size_t>((i + 1) % n)]);
  ch.steps = c == Collective::AllReduce ? 2 * (n - 1) : n - 1;
  ch.payload = part * static_cast<double>(ch.steps) / n;
  ch.net_steps = worst_run(p, ring, ch.steps);
  ch.run = part / n;
  return ch;
}

int depth_of(const Tree& t, int v) {
  int d = 0;
  for (int c : t.children[static_cast<std::size_t>(v)]) d = std::max(d, 1 + depth_of(t, c));
  return d;
}

// NCCL's tree across boxes (double_binary_tree.cpp): each box's chain into
// its head at local rank channel / 2, tree channel % 2 over the heads; every
// byte goes up every edge and back down it.
Channel tree_channel(const Plan& p, double part) {
  Channel ch;
  const BoxTree bt = box_tree(p);
  const Tree& t = bt.tree;
  int chain = 0;
  for (const std::vector<int>& c : bt.chains) {
    for (std::size_t j = 0; j + 1 < c.size(); ++j) {
      ch.hops.emplace_back(c[j], c[j + 1]);
      ch.hops.emplace_back(c[j + 1], c[j]);
    }
    chain = std::max(chain, static_cast<int>(c.size()) - 1);
  }
  for (std::size_t v = 0; v < t.children.size(); ++v)
    for (int k : t.children[v]) {
      const int parent = bt.heads[static_cast<std::size_t>(t.rank[v])],
                child = bt.heads[static_cast<std::size_t>(t.rank[static_cast<std::size_t>(k)])];
      ch.hops.emplace_back(child, parent);
      ch.hops.emplace_back(parent, child);
    }
  const int depth = depth_of(t, t.root);
  ch.payload = part;
  ch.steps = 2 * (chain + depth);
  ch.net_steps = 2 * depth;
  ch.fill = std::max(0, ch.steps - 1);
  ch.run = part;
  return ch;
}

// NVLS across boxes (nvls.cpp): one coflow per local index i, carrying part i of the buffer: every rank of a box
// to its switches (switch j a share w_j / w of it), the switches to the box's rank i (the load-reduce), across the
// boxes (IB SHARP: each head to its leaf, one partial per leaf to the root and back; or each edge of a binary
// tree of the heads, up and down), then rank i to the switches and the switches to every rank (the multicast).
// `stages`: the stages a piece passes (fill), `net`: the network steps on the dependency chain.
struct NvlsFlow {
  std::vector<topology::CoflowHop> hops;
  double share = 0.0;  // of the buffer
  int stages = 0;
  int net = 0;
};

std::vector<NvlsFlow> nvls_flows(const Algorithm& a, const Plan& p) {
  const Boxes& b = *p.boxes;
  const std::vector<std::vector<Part>> parts = nvls_box_parts(p, a.name);
  const int ppn = b.smallest(), boxes = b.count(), w = weight_sum(parts.front());
  const bool sharp = a.name == "nvls";
  const auto pe = [&](int r) { return p.pes[static_cast<std::size_t>(r)]; };
  SharpNet net;
  if (sharp) net = require_sharp_net(*p.machine, p.pes, a.name);
  const std::pair<Tree, Tree> ab = nccl_double_trees(boxes);
  std::vector<NvlsFlow> out;
  for (int i = 0; i < ppn; ++i) {
    NvlsFlow f;
    f.share = 1.0 / ppn;
    std::vector<int> heads;
    for (int k = 0; k < boxes; ++k) {
      heads.push_back(b.at(k, i));
      for (std::size_t j = 0; j < parts.front().size(); ++j) {
        const NodeId sw = parts[static_cast<std::size_t>(k)][j].sw;
        const double wj = static_cast<double>(parts.front()[j].weight) / w;
        for (int r : b.ranks[static_cast<std::size_t>(k)]) {
          f.hops.push_back({pe(r), sw, wj});
          f.hops.push_back({sw, pe(r), wj});
        }
        f.hops.push_back({sw, pe(heads.back()), wj});
        f.hops.push_back({pe(heads.back()), sw, wj});
      }
    }
    if (sharp) {
      const SharpTree t = sharp_tree(net, heads, a.name);
      std::vector<NodeId> leaves;
      for (std::size_t k = 0; k < heads.size(); ++k) {
        f.hops.push_back({pe(heads[k]), t.via[k], 1.0});
        f.hops.push_back({t.via[k], pe(heads[k]), 1.0});
        if (t.via[k] != t.root && std::find(leaves.begin(), leaves.end(), t.via[k]) == leaves.end())
          leaves.push_back(t.via[k]);
      }
      for (NodeId l : leaves) {
        f.hops.push_back({l, t.root, 1.0});
        f.hops.push_back({t.root, l, 1.0});
      }
      f.stages = 2 + (leaves.empty() ? 2 : 4);
      f.net = 1;
    } else {
      // Half of the part on each of the two complementary trees (the step model alternates them over the chunks),
      // so a head that is an inner node of one (three parts through its NIC each way) is a leaf of the other.
      for (const Tree* t : {&ab.first, &ab.second}) {
        for (std::size_t v = 0; v < t->children.size(); ++v)
          for (int c : t->children[v]) {
            const NodeId parent = pe(heads[static_cast<std::size_t>(t->rank[v])]),
                         child = pe(heads[static_cast<std::size_t>(t->rank[static_cast<std::size_t>(c)])]);
            f.hops.push_back({child, parent, 0.5});
            f.hops.push_back({parent, child, 0.5});
          }
        f.net = std::max(f.net, 2 * depth_of(*t, t->root));
      }
      f.stages = 4 + f.net;
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<runtime::OpId> lower_nvls(runtime::Program& prog, const Algorithm& a, const Plan& plan,
                                      const PipelineWire& w, const std::vector<runtime::OpId>& entry,
                                      std::int32_t tag) {
  std::vector<runtime::OpId> out;
  const std::vector<NvlsFlow> flows = nvls_flows(a, plan);
  // The chain: a network step whole (SHARP: its route; the tree: NCCL's network step and its route), the tree's
  // later ones what the pieces in flight do not hide; then the last piece's trail through the stages at the
  // uncontended rate, every part's coflow moving its share of a piece meanwhile.
  const double piece_s = w.channel_rate > 0 ? static_cast<double>(w.piece) / w.efficiency / w.channel_rate : 0.0;
  const double in_flight =
      std::min<double>(std::ceil(static_cast<double>(w.footprint) / std::max<Bytes>(w.piece, 1)), std::max(1, w.slots));
  const Time step = a.name == "nvls" ? w.net_route : w.net_step + w.net_route;
  const Time exposed = std::max<Time>(0, step - static_cast<Time>(std::llround((in_flight - 1.0) * piece_s * 1e12)));
  for (std::size_t k = 0; k < flows.size(); ++k) {
    const NvlsFlow& f = flows[k];
    Time latency = step + static_cast<Time>(std::max(0, f.net - 1)) * exposed +
                   static_cast<Time>(std::llround((f.stages - 1) * piece_s * 1e12));
    latency = std::max<Time>(0, latency - w.net_route);
    const double wire = static_cast<double>(w.footprint) * f.share / w.efficiency;
    out.push_back(prog.coflow(f.hops.front().src, f.hops, static_cast<Bytes>(std::ceil(wire)), latency, entry,
                              "nvls rail " + std::to_string(k) + " pipeline", tag));
  }
  return out;
}

}  // namespace

bool pipeline_supports(const Algorithm& a, Collective c, const Plan& plan, std::string* why) {
  const auto no = [&](const std::string& text) {
    if (why) *why = text;
    return false;
  };
  if (a.name == "ring") {
    if (c == Collective::AllToAll) return no("ring has no alltoall");
    return true;
  }
  if (a.name == "double_binary_tree") {
    if (c != Collective::AllReduce) return no("the tree's pipeline form is all_reduce only");
    if (!plan.multi_node()) return no("the tree's pipeline form is NCCL's across boxes; these ranks are one box");
    return true;
  }
  if (a.name == "nvls" || a.name == "nvls_tree") {
    if (c != Collective::AllReduce) return no(a.name + " is all_reduce only");
    if (!plan.multi_node()) return no(a.name + "'s pipeline form is NCCL's across boxes; these ranks are one box");
    return true;
  }
  return no(a.name + " has no pipeline form (ring, and tree, nvls and nvls_tree across boxes, have one)");
}

bool choose_pipeline(const CollectiveSpec& spec, const topology::Config& config, bool gpu, const Algorithm& a,
                     const Plan& p, Protocol protocol, int channels, const Wire& wire, const TunerFacts& facts,
                     PipelineWire& pipe) {
  const std::string& f = spec.fidelity;
  if (f != "auto" && f != "steps" && f != "pipeline")
    throw UsageError("collective: fidelity must be auto, steps or pipeline, got '" + f + "'");
  if (f == "steps") return false;
  std::string why;
  const bool flow = config.fabric.model == topology::FabricModel::Flow;
  const bool can = gpu && flow && spec.counts.empty() && pipeline_supports(a, spec.collective, p, &why);
  if (f == "pipeline" && !can) {
    if (!gpu)
      why = "the pipeline model is NCCL's channels, for GPU machines (pe.target: gpu)";
    else if (!flow)
      why = "the pipeline model moves each channel as one coflow, which needs the flow fabric (fabric.model: flow)";
    else if (!spec.counts.empty())
      why = "alltoall with per-pair counts runs at fidelity=steps";
    throw UsageError("collective: fidelity=pipeline: " + why);
  }
  // The step model's work: its sends (about 2 per slice per rank) x the ranks (each send's re-solve spans them).
  const std::int64_t ranks = p.world.size();
  const std::int64_t work = 2 * ranks * p.slices * ranks;
  if (f == "auto" && !(can && p.multi_node() && work > kAutoPipelineWork)) return false;
  if (spec.verify == Verify::On)
    throw UsageError("collective: verify=on follows every step; the pipeline model has none (fidelity=steps)");
  const NcclConfig& nc = nccl_config(config);
  const ProtocolFormat fmt = protocol_format(protocol, nc.buffsize);
  pipe.footprint = spec.collective == Collective::AllToAll ? 2 * spec.bytes_per_pe : spec.bytes_per_pe;
  pipe.efficiency = wire.efficiency;
  pipe.piece = std::max<Bytes>(1, static_cast<Bytes>(static_cast<double>(fmt.buffer) / nc.steps * fmt.efficiency));
  if (a.in_network) pipe.piece = std::max<Bytes>(1, nc.nvls_chunk);  // NVLS moves chunks of nccl.nvls_chunk
  pipe.step = wire.step_latency;
  pipe.net_step = protocol == Protocol::LL      ? nc.net_ll_step
                  : protocol == Protocol::LL128 ? nc.net_ll128_step
                                                : nc.net_simple_step;
  pipe.pxn = nc.pxn;
  pipe.slots = nc.steps;
  pipe.simple = protocol == Protocol::Simple;
  pipe.route = facts.route_latency;
  pipe.net_route = facts.inter_latency;
  const double bus = facts.nodes > 1 ? std::min(facts.ring_bandwidth, facts.inter_bandwidth) : facts.ring_bandwidth;
  pipe.channel_rate = bus * nc.link_efficiency / std::max(1, channels);
  return true;
}

std::vector<runtime::OpId> lower_pipeline(runtime::Program& prog, const Algorithm& a, Collective c, const Plan& plan,
                                          int channels_in, const PipelineWire& w,
                                          const std::vector<runtime::OpId>& entry) {
  std::string why;
  if (!pipeline_supports(a, c, plan, &why)) throw UsageError("collective: fidelity=pipeline: " + why);
  std::vector<runtime::OpId> out;
  const int channels = std::max(1, channels_in);
  const std::int32_t tag = prog.tag(c == Collective::AllReduce ? "all-reduce" : to_string(c));
  if (a.in_network) return lower_nvls(prog, a, plan, w, entry, tag);
  for (int k = 0; k < channels; ++k) {
    Plan p = plan;
    p.channel = k;
    p.channels = channels;
    // Channel k's part of every buffer, as the step model splits the slices (equal runs).
    const double part = static_cast<double>(w.footprint * (k + 1) / channels - w.footprint * k / channels);
    const Channel ch = a.name == "ring" ? ring_channel(p, c, part) : tree_channel(p, part);
    std::vector<topology::CoflowHop> hops;
    bool any_net = false;
    for (const auto& [src, dst] : ch.hops) {
      const NodeId from = plan.pes[static_cast<std::size_t>(src)], to = plan.pes[static_cast<std::size_t>(dst)];
      const bool net = across(p, src, dst);
      any_net |= net;
      const int via = net && w.pxn ? p.boxes->pxn_relay(src, dst) : -1;
      if (via >= 0) {
        hops.push_back(topology::CoflowHop{from, plan.pes[static_cast<std::size_t>(via)], 1.0});
        hops.push_back(topology::CoflowHop{plan.pes[static_cast<std::size_t>(via)], to, 1.0});
      } else {
        hops.push_back(topology::CoflowHop{from, to, 1.0});
      }
    }
    // A step's piece, and how many a hop has in flight while one waits out its latency.
    double piece = std::min(static_cast<double>(w.piece), ch.run);
    if (a.name != "ring" && w.simple) {
      // NCCL's tree (Simple) halves its chunk while a channel would have fewer than depth x 8 of them (then x 4,
      // x 1), so that the pipeline fills in a small share of the time (src/enqueue.cc, computeColl).
      const double per_channel = static_cast<double>(w.footprint) / channels;
      const double depth = ch.steps / 2.0;
      const std::pair<double, double> rules[] = {{8, 131072}, {4, 65536}, {1, 32768}};
      for (const auto& [times, floor] : rules)
        while (per_channel / piece < depth * times && piece > floor) piece /= 2;
    }
    const double in_flight = std::min<double>(std::ceil(ch.run / std::max(piece, 1.0)), std::max(1, w.slots));
    const double piece_s = w.channel_rate > 0 ? piece / w.efficiency / w.channel_rate : 0.0;
    const auto exposed = [&](Time lat) {
      return std::max<Time>(0, lat - static_cast<Time>(std::llround((in_flight - 1.0) * piece_s * 1e12)));
    };
    const Time intra = w.step + w.route, inter = w.net_step + w.net_route;
    const int intra_steps = ch.steps - ch.net_steps;
    // The chain's first step pays its latency whole; the others what the pieces in flight do not hide. The
    // coflow's tail then pays the slowest hop's route once more: taken off here.
    const Time first = ch.net_steps > 0 ? inter : intra;
    Time latency = first + static_cast<Time>(std::max(0, intra_steps - (ch.net_steps > 0 ? 0 : 1))) * exposed(intra) +
                   static_cast<Time>(std::max(0, ch.net_steps - 1)) * exposed(inter);
    // The fill: while one channel's pipeline fills, the channels beside it (whose chains start elsewhere on the
    // same links) keep the links busy, so only the last piece's trail through the depth after the busiest hop
    // is added, at the uncontended rate (every other channel done by then).
    if (w.channel_rate > 0)
      latency += static_cast<Time>(
          std::llround(static_cast<double>(ch.fill) * piece / w.efficiency / (w.channel_rate * channels) * 1e12));
    latency = std::max<Time>(0, latency - (any_net ? w.net_route : w.route));
    const double wire = ch.payload / w.efficiency;
    out.push_back(prog.coflow(plan.pes[static_cast<std::size_t>(ch.hops.front().first)], std::move(hops),
                              static_cast<Bytes>(std::ceil(wire)), latency, entry,
                              "channel " + std::to_string(k) + " pipeline", tag));
  }
  return out;
}

}  // namespace kernbench::ccl
