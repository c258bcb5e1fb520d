// nccl.cpp -- the protocols' formats and the tuning table (nccl.hpp).
#include "ccl/nccl.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/errors.hpp"

namespace kernbench::ccl {

const char* to_string(Protocol p) {
  switch (p) {
    case Protocol::LL: return "ll";
    case Protocol::LL128: return "ll128";
    case Protocol::Simple: return "simple";
  }
  return "?";
}

Protocol protocol_from_string(const std::string& name) {
  for (Protocol p : {Protocol::LL, Protocol::LL128, Protocol::Simple})
    if (name == to_string(p)) return p;
  throw UsageError("unknown protocol '" + name + "' (known: auto, ll, ll128, simple)");
}

ProtocolFormat protocol_format(Protocol p, Bytes simple_buffer) {
  // NCCL src/include/device.h: LL lines of 16 B carry 8 B of data and a flag
  // (NCCL_LL_LINES_PER_THREAD 8 x NCCL_LL_MAX_NTHREADS 512 x NCCL_STEPS 8 x 16 B);
  // LL128 lines of 128 B carry 120 (NCCL_LL128_ELEMS_PER_THREAD 120 x 640
  // threads x 8 steps x 8 B); Simple moves the payload in NCCL_BUFFSIZE.
  // Thread thresholds: src/include/comm.h (NCCL_*_THREAD_THRESHOLD).
  switch (p) {
    case Protocol::LL: return ProtocolFormat{0.5, 8 * 512 * 8 * 16, 512, 8};
    case Protocol::LL128: return ProtocolFormat{120.0 / 128.0, 120 * 640 * 8 * 8, 640, 8};
    case Protocol::Simple: return ProtocolFormat{1.0, simple_buffer, 512, 64};
  }
  return {};
}

int channels_for(Bytes bytes, Protocol p, int most, const NcclConfig& cfg) {
  const ProtocolFormat f = protocol_format(p, cfg.buffsize);
  int nc = std::max(1, most);
  while (nc >= 2 && bytes < static_cast<Bytes>(nc) * f.threads * f.threshold) --nc;
  return nc;
}

std::string registry_name(const std::string& nccl_name) {
  return nccl_name == "tree" ? "double_binary_tree" : nccl_name;
}

namespace {

Time base_of(Protocol p, const NcclTunerConstants& c) {
  return p == Protocol::LL ? c.ll_base : p == Protocol::LL128 ? c.ll128_base : c.simple_base;
}

Time step_of(Protocol p, const NcclTunerConstants& c) {
  return p == Protocol::LL ? c.ll_step : p == Protocol::LL128 ? c.ll128_step : c.simple_step;
}

Time net_step_of(Protocol p, const NcclTunerConstants& c, bool tree) {
  if (tree)
    return p == Protocol::LL      ? c.net_tree_ll_step
           : p == Protocol::LL128 ? c.net_tree_ll128_step
                                  : c.net_tree_simple_step;
  return p == Protocol::LL ? c.net_ll_step : p == Protocol::LL128 ? c.net_ll128_step : c.net_simple_step;
}

}  // namespace

std::vector<TuneRow> tune(NcclCollective c, Bytes bytes, const TunerFacts& f, const NcclConfig& cfg) {
  std::vector<TuneRow> rows;
  const int n = f.ranks;
  // NCCL's tuner prices collectives, not p2p (alltoall is grouped sends).
  if (n < 2 || f.ring_bandwidth <= 0 || c == NcclCollective::AllToAll) return rows;
  const double link = f.ring_bandwidth * cfg.link_efficiency;
  const int ring_steps = c == NcclCollective::AllReduce ? 2 * (n - 1) : n - 1;
  // Per rank, a ring moves ring_steps / n of the buffer (all-reduce: 2(n-1)/n);
  // a broadcast chain moves all of it once.
  const double ring_share = c == NcclCollective::Broadcast ? 1.0 : static_cast<double>(ring_steps) / n;
  const auto add = [&](const std::string& alg, Protocol p, Time latency, double bandwidth) {
    TuneRow r;
    r.algorithm = alg;
    r.protocol = p;
    r.channels = alg == "nvls" || alg == "nvls_tree" ? 1 : channels_for(bytes, p, f.channels, cfg);
    r.latency = latency;
    r.bandwidth = bandwidth;
    r.time = latency + static_cast<Time>(std::ceil(static_cast<double>(bytes) / bandwidth * 1e12));
    rows.push_back(r);
  };
  const bool multi = f.nodes > 1;
  // Over several boxes the buffer's bottleneck is the narrower of a rank's
  // intra-box ring link and its box's NIC rate (every channel crosses each
  // box once, through its own rail), as NCCL's bwIntra / bwInter.
  const double bus = multi ? std::min(link, f.inter_bandwidth * cfg.link_efficiency) : link;
  const int ppn = multi ? std::max(1, f.ppn) : n;
  int log_nodes = 0;
  while ((1 << (log_nodes + 1)) <= f.nodes) ++log_nodes;
  for (Protocol p : {Protocol::LL, Protocol::LL128, Protocol::Simple}) {
    const double fmt = protocol_format(p, cfg.buffsize).efficiency;
    const Time step = step_of(p, cfg.tuner) + f.route_latency;
    const Time net = net_step_of(p, cfg.tuner, false) + f.inter_latency;
    // NCCL: (nsteps - nInterSteps) intra-box steps and nInterSteps network steps.
    const int inter_steps = multi ? (c == NcclCollective::AllReduce ? 2 : 1) * (f.nodes - 1) : 0;
    add("ring", p,
        base_of(p, cfg.tuner) + static_cast<Time>(ring_steps - inter_steps) * step +
            static_cast<Time>(inter_steps) * net,
        bus * fmt / ring_share);
    if (c == NcclCollective::AllReduce) {
      if (!multi) {
        // Tree, as NCCL prices it inside one box: its intra-node tree is a
        // chain, 2 (n - 1) steps up and down, at half the bus bandwidth (each
        // rank sends about the buffer twice over the two trees). So inside a
        // box it never beats the ring, as in NCCL (src/graph/tuning.cc).
        add("tree", p, base_of(p, cfg.tuner) + static_cast<Time>(2 * (n - 1)) * step, link * fmt / 2.0);
      } else {
        // Across boxes: 2 ((ppn - 1) chain steps + log2(boxes) tree steps),
        // at 0.92 of the bus bandwidth, halved (NCCL's tree refinements).
        const Time tree_net = net_step_of(p, cfg.tuner, true) + f.inter_latency;
        add("tree", p,
            base_of(p, cfg.tuner) + 2 * (static_cast<Time>(ppn - 1) * step + static_cast<Time>(log_nodes) * tree_net),
            bus * fmt * 0.92 / 2.0);
      }
    }
  }
  if (c == NcclCollective::AllReduce && f.nvls) {
    // Inside a box each rank sends its buffer to the switches once and
    // receives the sum once (link), issues 2/ppn of it as multimem
    // operations (issue), and the switches reduce ppn contributions of every
    // byte (switch).
    double bw = link;
    if (cfg.nvls_issue.bytes_per_s > 0) bw = std::min(bw, static_cast<double>(cfg.nvls_issue.bytes_per_s) * ppn / 2.0);
    if (f.nvls_switch > 0) bw = std::min(bw, f.nvls_switch / ppn);
    if (!multi) {
      add("nvls", Protocol::Simple, cfg.tuner.nvls + 2 * f.route_latency, bw);
    } else {
      // Across boxes local rank i carries part i of the buffer through its NIC. With IB SHARP each byte leaves
      // and enters a box once (the box's NIC rate); NCCL's tree over the boxes moves every byte up and down each
      // edge (half that rate; over two boxes one edge, every byte once). NCCL's latencies: NVLS's in the box,
      // then the network's once (SHARP) or per tree step up and down (src/graph/tuning.cc).
      const double nic = f.inter_bandwidth * cfg.link_efficiency;
      if (f.sharp)
        add("nvls", Protocol::Simple, cfg.tuner.nvls + cfg.tuner.net_nvls + 2 * f.inter_latency, std::min(bw, nic));
      add("nvls_tree", Protocol::Simple,
          cfg.tuner.nvls + 2 * static_cast<Time>(log_nodes) * (cfg.tuner.net_nvls_tree + f.inter_latency),
          std::min(bw, f.nodes <= 2 ? nic : nic / 2.0));
    }
  }
  return rows;
}

P2pChoice p2p_choice(Bytes per_peer, int ranks, int most, const NcclConfig& cfg, const Protocol* protocol) {
  int p2p = 1;
  while (p2p < std::max(1, most)) p2p *= 2;
  const int max_per_peer = p2p;
  int min_per_peer = max_per_peer;
  while (min_per_peer > 1 && static_cast<std::int64_t>(min_per_peer) * ranks > p2p) min_per_peer /= 2;
  const Bytes min_part = std::max<Bytes>(1, cfg.p2p_chunk / 8), max_part = cfg.p2p_chunk * 32;
  P2pChoice out;
  out.channels = static_cast<int>(std::clamp<Bytes>((per_peer + min_part - 1) / min_part, 1, min_per_peer));
  Bytes part = std::max(min_part, (per_peer + out.channels - 1) / out.channels);
  while (part > max_part && out.channels <= max_per_peer / 2) {
    out.channels *= 2;
    part = (per_peer + out.channels - 1) / out.channels;
  }
  out.protocol = protocol                                                              ? *protocol
                 : per_peer <= static_cast<Bytes>(out.channels) * cfg.p2p_ll_threshold ? Protocol::LL
                                                                                       : Protocol::Simple;
  if (out.protocol == Protocol::LL128)
    throw UsageError("collective: alltoall runs NCCL's p2p path, which has protocols ll and simple (not ll128)");
  const ProtocolFormat f = protocol_format(out.protocol, cfg.buffsize);
  out.step_payload = out.protocol == Protocol::Simple
                         ? cfg.p2p_chunk
                         : static_cast<Bytes>(static_cast<double>(f.buffer) / cfg.steps * f.efficiency);
  return out;
}

TuneRow choose(NcclCollective c, Bytes bytes, const TunerFacts& facts, const NcclConfig& cfg,
               const std::string& algorithm, const Protocol* protocol) {
  const std::vector<TuneRow> rows = tune(c, bytes, facts, cfg);
  const TuneRow* best = nullptr;
  std::string offered;
  for (const TuneRow& r : rows) {
    if (offered.find(r.algorithm) == std::string::npos) offered += (offered.empty() ? "" : ", ") + r.algorithm;
    if (!algorithm.empty() && r.algorithm != algorithm) continue;
    if (protocol && r.protocol != *protocol) continue;
    if (!best || r.time < best->time) best = &r;
  }
  if (!best) {
    std::string want = algorithm.empty() ? "any algorithm" : algorithm;
    if (protocol) want += std::string(" with protocol ") + to_string(*protocol);
    throw UsageError("collective: the NCCL model has no " + want + " for this collective on " +
                     std::to_string(facts.ranks) + " ranks (it offers: " + (offered.empty() ? "none" : offered) +
                     (algorithm == "nvls" ? "; nvls needs an in-network reducing switch (a switch node with "
                                            "reduction: {bandwidth: ...}) linked to every rank, and is all_reduce "
                                            "only, protocol simple"
                                          : "") +
                     ")");
  }
  return *best;
}

}  // namespace kernbench::ccl
