// collective.cpp -- run_collective: check the request, build, run, verify.
#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

#include "ccl/algorithms/algorithm.hpp"
#include "ccl/logical/ring.hpp"
#include "ccl/config_section.hpp"
#include "ccl/nccl.hpp"
#include "ccl/nccl_lowering.hpp"
#include "ccl/pipeline.hpp"
#include "topology/routing/routing.hpp"
#include "config/quantity.hpp"
#include "runtime/config_section.hpp"
#include "ccl/verify.hpp"
#include "sim/errors.hpp"

namespace kernbench::ccl {

const char* to_string(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::AllGather: return "all_gather";
    case Collective::Broadcast: return "broadcast";
    case Collective::AllToAll: return "alltoall";
  }
  return "?";
}

Collective collective_from_string(const std::string& name) {
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather, Collective::Broadcast,
                       Collective::AllToAll})
    if (name == to_string(c)) return c;
  throw UsageError("unknown collective '" + name +
                   "' (known: all_reduce, reduce_scatter, all_gather, broadcast, alltoall)");
}

const char* to_string(Buffer b) { return b == Buffer::Sram ? "sram" : "hbm"; }

Buffer buffer_from_string(const std::string& name) {
  if (name == "sram") return Buffer::Sram;
  if (name == "hbm") return Buffer::Hbm;
  throw UsageError("unknown buffer kind '" + name + "' (known: sram, hbm)");
}

Verify verify_from_string(const std::string& name) {
  if (name == "auto") return Verify::Auto;
  if (name == "on") return Verify::On;
  if (name == "off") return Verify::Off;
  throw UsageError("verify must be auto, on or off, got '" + name + "'");
}

double CollectiveResult::algorithm_bandwidth() const {
  return latency > 0 ? static_cast<double>(bytes_per_pe) / (static_cast<double>(latency) * 1e-12) : 0.0;
}

namespace {

// Upper bounds of the request, checked before anything is built.
constexpr int kMaxPieces = 1 << 16;
constexpr int kDefaultPieces = 4;  // CollectiveSpec's default: accepted on any buffer
constexpr std::uint64_t kMaxCells = std::uint64_t{1} << 26;

struct Prepared {
  const Algorithm* algorithm = nullptr;
  Plan plan;
  std::string what;  // "all_reduce ring on 8 PEs", for messages
  bool gpu = false;  // lowered as NCCL runs it (nccl.hpp)
  Protocol protocol = Protocol::Simple;
  int channels = 1;
  int base_slices = 1;  // what the algorithm's pattern needs per channel
  Wire wire;
  Time predicted = 0;
  Bytes footprint = 0;     // bytes of each rank's buffers (alltoall: send and receive)
  Bytes largest_pair = 0;  // alltoall: the most bytes one rank sends one peer
  bool pipeline = false;   // fidelity resolved to the channel pipeline model (pipeline.hpp)
  PipelineWire pipe;       // what that model reads
  TunerFacts facts;        // GPU: what the tuner read of the ranks (the pipeline model's latencies and rates)
};

Prepared prepare(const topology::Machine& m, const topology::Config& config, const CollectiveSpec& spec) {
  const runtime::PeConfig& pe = runtime::pe_config(config);
  Prepared out;
  out.gpu = pe.target == runtime::ExecTarget::Gpu;
  std::vector<NodeId> pes = spec.pes;
  if (pes.empty()) pes = m.pes();
  std::set<NodeId> seen;
  for (std::size_t r = 0; r < pes.size(); ++r) {
    if (pes[r] >= m.num_nodes())
      throw UsageError("collective: rank " + std::to_string(r) + ": node id " + std::to_string(pes[r]) +
                       " out of range");
    if (m.node(pes[r]).kind != topology::NodeKind::Pe)
      throw UsageError("collective: rank " + std::to_string(r) + ": " + m.node(pes[r]).name + " is not a PE");
    if (!seen.insert(pes[r]).second)
      throw UsageError("collective: " + m.node(pes[r]).name + " appears twice among the ranks");
  }
  const int n = static_cast<int>(pes.size());
  if (n < 2) throw UsageError("collective: needs at least 2 ranks, got " + std::to_string(n));
  // The ranks' boxes: only a GPU machine runs NCCL's multi-node forms, so only there is the graph searched.
  const std::shared_ptr<const Boxes> boxes = out.gpu ? std::make_shared<const Boxes>(boxes_of(m, pes)) : nullptr;
  if (spec.bytes_per_pe <= 0)
    throw UsageError("collective: bytes per PE must be positive, got " + std::to_string(spec.bytes_per_pe));
  topology::check_transfer_size(spec.bytes_per_pe, "collective buffer");
  const bool alltoall = spec.collective == Collective::AllToAll;
  // alltoall is out of place: a send and a receive buffer per rank.
  out.footprint = alltoall ? 2 * spec.bytes_per_pe : spec.bytes_per_pe;
  out.largest_pair = spec.bytes_per_pe / n;
  if (!spec.counts.empty()) {
    if (!alltoall)
      throw UsageError(std::string("collective: counts (bytes per pair of ranks) are for alltoall, not ") +
                       to_string(spec.collective));
    const PairCounts pc = check_counts(spec.counts, n);
    out.footprint = pc.footprint;
    out.largest_pair = pc.largest;
  }
  if (spec.buffer == Buffer::Sram && out.footprint > pe.scratch)
    throw CapacityError("collective: buffer=sram needs " +
                        config::format_bytes(out.footprint, config::ByteUnits::UpToMiB) +
                        " per PE but the scratch is " + config::format_bytes(pe.scratch, config::ByteUnits::UpToMiB) +
                        " (pe.scratch); use buffer=hbm for larger messages");
  if (spec.buffer == Buffer::Hbm && out.footprint > pe.hbm.capacity)
    throw CapacityError("collective: buffer=hbm needs " +
                        config::format_bytes(out.footprint, config::ByteUnits::UpToMiB) +
                        " per PE but each PE's HBM slice is " +
                        config::format_bytes(pe.hbm.capacity, config::ByteUnits::UpToMiB) + " (pe.hbm.capacity)");
  if (spec.pieces < 1) throw UsageError("collective: pieces must be >= 1, got " + std::to_string(spec.pieces));
  if (spec.pieces > kMaxPieces)
    throw UsageError("collective: pieces = " + std::to_string(spec.pieces) + " is too many (at most " +
                     std::to_string(kMaxPieces) + "; each piece is a slice of every rank's buffer)");
  // A piece is a part of every rank's buffer: at least a byte each. pieces=1000 on 16 B made 28,000 sends of
  // empty slices; refused, naming both figures (the default 4 always passes).
  if (spec.pieces > kDefaultPieces && spec.pieces > spec.bytes_per_pe)
    throw UsageError("collective: pieces = " + std::to_string(spec.pieces) + " cuts each rank's " +
                     std::to_string(spec.bytes_per_pe) +
                     " B into parts of less than a byte (at most one piece per "
                     "byte: pieces <= " +
                     std::to_string(std::max<Bytes>(spec.bytes_per_pe, kDefaultPieces)) + ")");
  if (spec.grid_w < 0 || spec.grid_h < 0)
    throw UsageError("collective: grid " + std::to_string(spec.grid_w) + "x" + std::to_string(spec.grid_h) +
                     " has a negative side (0x0: the most square grid)");
  if (spec.root < 0 || spec.root >= n)
    throw UsageError("collective: root rank " + std::to_string(spec.root) + " is not one of the " + std::to_string(n) +
                     " ranks");

  if (spec.calls < 1 || spec.calls > 1000)
    throw UsageError("collective: calls must be 1 .. 1000, got " + std::to_string(spec.calls));
  if (spec.channels < 0 || spec.channels > 64)
    throw UsageError("collective: channels must be 0 (NCCL's count) .. 64, got " + std::to_string(spec.channels));
  if (spec.host_threads < 0 || spec.host_threads > n)
    throw UsageError("collective: host_threads must be 0 (one per rank) .. " + std::to_string(n) +
                     " (the ranks), got " + std::to_string(spec.host_threads));
  const bool auto_protocol = spec.protocol == "auto";
  const Protocol asked = auto_protocol ? Protocol::Simple : protocol_from_string(spec.protocol);
  if (!out.gpu && !auto_protocol)
    throw UsageError("collective: protocol=" + spec.protocol +
                     " is for GPU machines (pe.target: gpu); this machine is " +
                     std::string(runtime::to_string(pe.target)) + " (use protocol=auto)");
  if (!out.gpu && (spec.channels > 0 || spec.calls > 1 || spec.host_threads > 0))
    throw UsageError("collective: channels, calls and host_threads are for GPU machines (pe.target: gpu)");
  std::string name = spec.algorithm;
  TuneRow row;
  P2pChoice p2p;
  if (alltoall) {
    // Grouped point-to-point sends, on any machine; on a GPU NCCL's p2p
    // channels and protocol (the tuner does not price them).
    if (name == "auto") name = "pairwise";
    if (out.gpu) {
      p2p = p2p_choice(out.largest_pair, n, pe.ipcq_channels, nccl_config(config), auto_protocol ? nullptr : &asked);
      out.protocol = p2p.protocol;
      out.channels = spec.channels > 0 ? spec.channels : p2p.channels;
    }
  } else if (out.gpu) {
    const NcclConfig& nc = nccl_config(config);
    out.facts = tuner_facts(m, pe, pes, *boxes, spec.router);
    const TunerFacts& facts = out.facts;
    // The tuner knows ring, tree and nvls; another registry algorithm runs
    // with the protocol the ring would get.
    const std::string tuned = name == "auto" ? "" : name == "double_binary_tree" ? "tree" : name;
    const bool in_net = tuned == "nvls" || tuned == "nvls_tree";
    const bool known =
        tuned.empty() || tuned == "ring" || in_net || (tuned == "tree" && spec.collective == Collective::AllReduce);
    if (in_net && (!facts.nvls || (tuned == "nvls" ? facts.nodes > 1 && !facts.sharp : facts.nodes < 2))) {
      // No reducing switch where it needs one: the algorithm's own check (below) says what is missing.
      row.algorithm = tuned;
      row.protocol = Protocol::Simple;
    } else {
      row = choose(nccl_kind(spec.collective), spec.bytes_per_pe, facts, nc, known ? tuned : "ring",
                   auto_protocol ? nullptr : &asked);
    }
    if (name == "auto") name = row.algorithm;
    out.protocol = row.protocol;
    // NVLS runs one pipeline of chunks over the switches.
    out.channels = row.algorithm.rfind("nvls", 0) == 0 ? 1 : spec.channels > 0 ? spec.channels : row.channels;
    out.predicted = known ? row.time : 0;  // the table prices only ring, tree and nvls
  } else if (name == "auto") {
    name = "ring";
  }
  const Algorithm& a = find_algorithm(registry_name(name));
  const auto has = [&](Collective c) {
    switch (c) {
      case Collective::AllReduce: return a.all_reduce != nullptr;
      case Collective::ReduceScatter: return a.reduce_scatter != nullptr;
      case Collective::AllGather: return a.all_gather != nullptr;
      case Collective::Broadcast: return a.broadcast != nullptr;
      case Collective::AllToAll: return a.all_to_all != nullptr;
    }
    return false;
  };
  if (!has(spec.collective)) {
    std::string who;
    for (const AlgorithmInfo& info : algorithms())
      if (std::find(info.collectives.begin(), info.collectives.end(), to_string(spec.collective)) !=
          info.collectives.end())
        who += (who.empty() ? "" : ", ") + info.name;
    throw UsageError("collective: " + a.name + " has no " + to_string(spec.collective) +
                     " (algorithms with one: " + who + ")");
  }

  Plan& p = out.plan;
  p.machine = &m;
  p.pes = pes;
  p.world.ranks = iota_ranks(n);
  if (spec.grid_w > 0 || spec.grid_h > 0) {
    // In 64 bits: 5128 x 6700417 is 34359738376, which an int product wraps to 8.
    const std::int64_t cells = static_cast<std::int64_t>(spec.grid_w) * spec.grid_h;
    if (spec.grid_w <= 0 || spec.grid_h <= 0 || cells != n)
      throw UsageError("collective: grid " + std::to_string(spec.grid_w) + "x" + std::to_string(spec.grid_h) +
                       " does not hold the " + std::to_string(n) + " ranks: grid=(" + std::to_string(spec.grid_w) +
                       ", " + std::to_string(spec.grid_h) + ") has " + std::to_string(cells) +
                       " cells (grid w x h must equal the ranks)");
    p.world.w = spec.grid_w;
    p.world.h = spec.grid_h;
  } else if (const auto& g = m.rank_grid(); g && g->count() == n && pes == m.pes()) {
    p.world.w = g->w;
    p.world.h = g->h;
  } else if (a.needs_grid && !m.generated()) {
    throw UsageError(
        "collective: " + a.name + " needs a rank grid and none is declared for these " + std::to_string(n) +
        " ranks: give a grid (grid=(w, h); CollectiveSpec grid_w, grid_h), or declare graph.layout.grid {w, h} "
        "(and graph.layout.ranks) in the config");
  } else {
    int h = static_cast<int>(std::sqrt(static_cast<double>(n)));
    while (n % h != 0) --h;
    p.world.h = h;
    p.world.w = n / h;
  }
  p.pieces = spec.pieces;
  p.root = spec.root;
  if (boxes && boxes->multi()) p.boxes = boxes;
  if (alltoall) p.peer_channels = out.channels;
  p.inter = spec.inter;
  if (p.inter.empty()) p.inter = topology::to_string(m.hierarchy().package_topology);
  if (out.gpu && a.in_network) {
    // nvls: pieces of nccl.nvls_chunk (what NVLS has in flight), at least 2
    // (NVLS pipelines its two halves, load-reduce and multicast store: one
    // piece's multicast overlaps the next one's issue) and at most
    // 16 x max_steps_per_transfer (the last piece's reduce and multicast
    // after the issue is then under 1 % of a huge message).
    const NcclConfig& nc = nccl_config(config);
    const Bytes want = (spec.bytes_per_pe + nc.nvls_chunk - 1) / std::max<Bytes>(nc.nvls_chunk, 1);
    p.pieces = static_cast<int>(std::clamp<Bytes>(want, 2, 16 * static_cast<Bytes>(nc.max_steps_per_transfer)));
  }
  a.check(p);
  out.base_slices = a.slices(p);
  p.slices = out.base_slices;
  if (out.gpu) {
    // Channels x the pattern's slices x steps per transfer: each slice one
    // NCCL step (a protocol step's payload, or larger for a huge message).
    // (alltoall: the pattern's slices already hold the channels, a block
    // per peer and channel in each of its two buffers.)
    const NcclConfig& nc = nccl_config(config);
    const ProtocolFormat f = protocol_format(out.protocol, nc.buffsize);
    const double step_payload =
        alltoall ? static_cast<double>(p2p.step_payload) : static_cast<double>(f.buffer) / nc.steps * f.efficiency;
    const std::int64_t per_channel = alltoall ? 1 : out.channels;
    std::int64_t k = 1;
    if (!a.in_network) {
      const double per = static_cast<double>(per_channel) * out.base_slices * step_payload;
      k = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(static_cast<double>(out.footprint) / per)), 1,
                                   nc.max_steps_per_transfer);
    }
    const std::int64_t total = per_channel * out.base_slices * k;
    if (total > (std::int64_t{1} << 30))
      throw CapacityError("collective: " + std::to_string(total) + " slices: too fine a cut (fewer channels)");
    p.slices = static_cast<int>(total);
    out.wire.step = (out.footprint + p.slices - 1) / p.slices;
    if (a.in_network) out.wire.step = std::max(out.wire.step, static_cast<Bytes>(step_payload));  // NVLS+tree's sends
    out.wire.efficiency = f.efficiency * nc.link_efficiency;
    out.wire.step_latency = out.protocol == Protocol::LL      ? nc.ll_step
                            : out.protocol == Protocol::LL128 ? nc.ll128_step
                                                              : nc.simple_step;
    if (a.name == "double_binary_tree") out.wire.step_latency += nc.tree_step_extra;
    out.wire.issue_bytes_per_s = static_cast<double>(nc.nvls_issue.bytes_per_s);
    out.wire.channels = alltoall ? 1 : out.channels;  // alltoall: the pattern picks each pair's channel
    // A step is one IPCQ segment and one slot credit, as an NCCL step is one
    // FIFO slot; a step standing for several NCCL steps (a huge message,
    // max_steps_per_transfer) moves as one larger segment.
    const Bytes wire_step = static_cast<Bytes>(std::ceil(static_cast<double>(out.wire.step) / out.wire.efficiency));
    if (wire_step > pe.ipcq_slot) out.wire.segment = wire_step;
  }
  // Steps or the channel pipeline (pipeline.hpp), once the step model's cut is known: the pipeline keeps one
  // slice per channel (no cells to track) and NCCL's protocol step as its piece.
  out.pipeline =
      choose_pipeline(spec, config, out.gpu, a, p, out.protocol, out.channels, out.wire, out.facts, out.pipe);
  if (out.pipeline) {
    p.slices = std::max(1, out.channels);
    out.wire.step = out.pipe.piece;
  }
  // The schedule keeps one cell per (rank, slice): refuse, up front, what
  // could only end in an allocation failure.
  if (static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(std::max(p.slices, 1)) > kMaxCells)
    throw CapacityError("collective: " + std::to_string(n) + " ranks x " + std::to_string(p.slices) +
                        " slices (pieces = " + std::to_string(spec.pieces) + ") is " +
                        std::to_string(static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(p.slices)) +
                        " buffer cells, more than a schedule holds (at most " + std::to_string(kMaxCells) +
                        "); use fewer pieces");
  out.algorithm = &a;
  out.what = std::string(to_string(spec.collective)) + " " + a.name + " on " + std::to_string(n) + " PEs";
  if (out.gpu)
    out.what += std::string(" (") + to_string(out.protocol) + ", " + std::to_string(out.channels) + " channels" +
                (out.pipeline ? ", pipeline" : "") + ")";
  return out;
}

// The largest transfer or local copy of a schedule (its bytes), to tell whether it stages
// more than the scratch holds.
Bytes largest_transfer(const Schedule& s) {
  Bytes most = 0;
  for (const auto& [op, mv] : s.moves())
    if (!mv.is_recv) most = std::max(most, s.bytes(mv.slices));
  for (const auto& [op, cp] : s.local_copies()) most = std::max(most, s.bytes(cp.from));
  return most;
}

// The plan of channel `c`: the algorithm on that channel's part of every buffer.
Plan channel_plan(const Prepared& pr, int c) {
  Plan p = pr.plan;
  if (pr.channels > 1) p.range = block(Slices{0, p.slices}, pr.channels, c);
  p.channel = c;
  p.channels = pr.channels;
  return p;
}

// alltoall with per-pair counts: pairwise, as NCCL's grouped sends, each
// pair's bytes split over the pair's channels; blocks outside the cells.
void emit_counts(Schedule& s, const Prepared& pr, const CollectiveSpec& spec) {
  const int n = pr.plan.world.size();
  const int channels = std::max(1, pr.plan.peer_channels);
  s.phase("alltoall");
  for (int r = 1; r < n; ++r)
    for (int i = 0; i < n; ++i) {
      const int j = (i + r) % n;
      const Bytes b = spec.counts[static_cast<std::size_t>(i) * static_cast<std::size_t>(n) + j];
      for (int c = 0; c < channels; ++c)
        s.transfer_bytes(i, j, b * (c + 1) / channels - b * c / channels, channels > 1 ? c : -1);
    }
}

void emit(Schedule& s, const Prepared& pr, const CollectiveSpec& spec) {
  const Algorithm& a = *pr.algorithm;
  if (!spec.counts.empty()) {
    emit_counts(s, pr, spec);
    return;
  }
  if (spec.collective == Collective::AllToAll) {  // one pattern over every pair's channels
    a.all_to_all(s, pr.plan);
    return;
  }
  for (int c = 0; c < pr.channels; ++c) {
    const Plan p = channel_plan(pr, c);
    switch (spec.collective) {
      case Collective::AllReduce: a.all_reduce(s, p); break;
      case Collective::ReduceScatter: a.reduce_scatter(s, p); break;
      case Collective::AllGather: a.all_gather(s, p); break;
      case Collective::Broadcast: a.broadcast(s, p); break;
      case Collective::AllToAll: break;
    }
  }
}

// On a GPU: each rank's collective kernel, launched from the host (one
// thread's ranks one after another), starting with the protocol's fixed cost
// and on the rank's NCCL stream (KernelCost::side: beside the compute
// kernels); every op of the rank's buffer waits for it. It holds one SM per
// channel from its start until the collective's release (release_sms).
std::vector<OpId> kernels(Schedule& s, const Prepared& pr, const CollectiveSpec& spec, const NcclConfig& nc) {
  const int n = pr.plan.world.size();
  const Time base = pr.algorithm->in_network         ? nc.nvls_base
                    : pr.protocol == Protocol::LL    ? nc.ll_base
                    : pr.protocol == Protocol::LL128 ? nc.ll128_base
                                                     : nc.simple_base;
  runtime::Program& prog = s.program();
  std::vector<OpId> entry;
  for (int r = 0; r < n; ++r) {
    runtime::KernelCost k;
    k.launch = nc.call_host;
    k.duration = base;
    k.hold = pr.channels;  // one CTA (SM) per channel
    k.side = true;         // on the rank's NCCL stream, beside its compute kernels
    entry.push_back(prog.kernel(s.pe(r), k, {}, std::string("nccl ") + to_string(spec.collective), 0));
  }
  return entry;
}

// Each rank's SMs given back once the whole collective is done (NCCL's
// kernels end together, each rank's last step waiting on its peers').
void release_sms(runtime::Program& prog, const Schedule& s, const Prepared& pr) {
  const std::vector<OpId> last = prog.sinks(0);
  const OpId done = prog.barrier(s.pe(0), last, "nccl done");
  prog.set_latency(done, 0);
  for (int r = 0; r < static_cast<int>(pr.plan.world.size()); ++r)
    prog.sm_release(s.pe(r), pr.channels, {done}, "nccl sms");
}

Schedule build(const topology::Machine& m, const topology::Config& config, Prepared& pr, const CollectiveSpec& spec) {
  const runtime::PeConfig& pe = runtime::pe_config(config);
  Schedule s(m, pr.plan.pes, pr.footprint, pr.plan.slices, spec.buffer, pr.what);
  if (pr.gpu) {
    const NcclConfig& nc = nccl_config(config);
    s.set_wire(pr.wire);
    if (pr.plan.multi_node())
      s.set_boxes(pr.plan.boxes, nc.pxn,
                  pr.protocol == Protocol::LL      ? nc.net_ll_step
                  : pr.protocol == Protocol::LL128 ? nc.net_ll128_step
                                                   : nc.net_simple_step);
    const std::vector<OpId> entry = kernels(s, pr, spec, nc);
    if (pr.pipeline) {
      lower_pipeline(s.program(), *pr.algorithm, spec.collective, pr.plan, pr.channels, pr.pipe, entry);
    } else {
      s.set_entry(entry);
      emit(s, pr, spec);
    }
    release_sms(s.program(), s, pr);
    return s;
  }
  emit(s, pr, spec);
  // SIP: a transfer staged whole must fit the scratch; a larger one moves in
  // chunks of the IPCQ queue (slots x slot), the buffer cut finer to allow it.
  if (spec.buffer != Buffer::Hbm || largest_transfer(s) <= pe.scratch || pr.algorithm->in_network) return s;
  const Bytes chunk = std::max<Bytes>(1, static_cast<Bytes>(pe.ipcq_slots) * pe.ipcq_slot);
  const Bytes per_base = (pr.footprint + pr.base_slices - 1) / pr.base_slices;
  const Bytes k = (per_base + chunk - 1) / chunk;
  const std::uint64_t cells = static_cast<std::uint64_t>(pr.plan.world.size()) *
                              static_cast<std::uint64_t>(pr.base_slices) * static_cast<std::uint64_t>(k);
  if (cells > kMaxCells)
    throw CapacityError("collective: " + pr.what + ": its transfers exceed pe.scratch and chunks of " +
                        config::format_bytes(chunk, config::ByteUnits::UpToMiB) +
                        " (pe.ipcq slots x slot) would cut "
                        "the buffers into " +
                        std::to_string(cells) + " cells, more than a schedule holds");
  pr.plan.slices = static_cast<int>(static_cast<Bytes>(pr.base_slices) * k);
  Schedule chunked(m, pr.plan.pes, pr.footprint, pr.plan.slices, spec.buffer, pr.what);
  Wire w;
  w.step = chunk;
  chunked.set_wire(w);
  emit(chunked, pr, spec);
  return chunked;
}

// `calls` copies of one call's program on one stream: call k + 1's kernels
// start after call k's last op at that rank; launches run ahead in host order.
runtime::Program repeat(const Schedule& s, const Prepared& pr, const CollectiveSpec& spec) {
  const runtime::Program& one = s.program();
  const int calls = spec.calls;
  if (calls <= 1) {
    if (!pr.gpu || spec.host_threads <= 0) return one;
    runtime::Program prog = one;
    chain_host_threads(prog, pr.plan.pes, spec.host_threads);
    return prog;
  }
  runtime::Program prog(one.name());
  std::vector<OpId> prev_sinks;
  for (int c = 0; c < calls; ++c) {
    const OpId offset = prog.append(one);
    if (c > 0)
      for (OpId op = 0; op < one.size(); ++op)
        if (one.op(op).kind == runtime::OpKind::Kernel)
          for (OpId sink : prev_sinks) prog.depend(offset + op, sink);
    prev_sinks = prog.sinks(offset);
  }
  if (pr.gpu) chain_host_threads(prog, pr.plan.pes, spec.host_threads);
  return prog;
}

}  // namespace

std::vector<TuneRow> tuning_table(const topology::Machine& m, const topology::Config& config,
                                  const CollectiveSpec& spec) {
  std::vector<NodeId> pes = spec.pes.empty() ? m.pes() : spec.pes;
  return tune(nccl_kind(spec.collective), spec.bytes_per_pe,
              tuner_facts(m, runtime::pe_config(config), pes, boxes_of(m, pes)), nccl_config(config));
}

runtime::Program build_collective(const topology::Machine& machine, const topology::Config& config,
                                  const CollectiveSpec& spec, int* slices) {
  Prepared pr = prepare(machine, config, spec);
  const Schedule s = build(machine, config, pr, spec);
  if (slices) *slices = pr.plan.slices;
  return repeat(s, pr, spec);
}

CollectiveResult run_collective(topology::System& system, const CollectiveSpec& spec) {
  const topology::Machine& m = system.machine();
  Prepared pr = prepare(m, system.config(), spec);
  const Schedule s = build(m, system.config(), pr, spec);
  const Plan& p = pr.plan;
  const int n = p.world.size();

  // Back-to-back calls are checked as one (each copy is the same schedule).
  const bool check =
      spec.calls == 1 && spec.counts.empty() && !pr.pipeline &&
      (spec.verify == Verify::On ||
       (spec.verify == Verify::Auto && SymbolicCheck::state_bits(n, p.slices) <= (std::uint64_t{1} << 28)));
  if (spec.verify == Verify::On && spec.calls > 1)
    throw UsageError("collective: verify=on checks one call; give calls=1 (or verify=auto)");
  const auto owned = [&] {
    std::vector<std::pair<int, Slices>> out;
    for (int c = 0; c < pr.channels; ++c)
      for (const auto& o : pr.algorithm->owned(channel_plan(pr, c))) out.push_back(o);
    return out;
  };
  std::unique_ptr<SymbolicCheck> sym;
  if (check) {
    sym = std::make_unique<SymbolicCheck>(s, pr.what);
    const Slices all = p.all();
    for (int r = 0; r < n; ++r) {
      switch (spec.collective) {
        case Collective::AllReduce:
        case Collective::ReduceScatter: sym->set_start(r, all, SymbolicCheck::Start::Own); break;
        case Collective::AllGather: sym->set_start(r, all, SymbolicCheck::Start::Nothing); break;
        case Collective::Broadcast:
          sym->set_start(r, all, r == spec.root ? SymbolicCheck::Start::All : SymbolicCheck::Start::Nothing);
          break;
        case Collective::AllToAll:
          sym->set_start(r, Slices{0, p.slices / 2}, SymbolicCheck::Start::Own);
          sym->set_start(r, Slices{p.slices / 2, p.slices}, SymbolicCheck::Start::Nothing);
          break;
      }
    }
    if (spec.collective == Collective::AllGather)
      for (const auto& [rank, sl] : owned()) sym->set_start(rank, sl, SymbolicCheck::Start::All);
  }

  const std::vector<Bytes> before = topology::channel_bytes(system.fabric());

  CollectiveResult res;
  const runtime::Program prog = repeat(s, pr, spec);
  res.run = runtime::Executor(system).run(prog, sym.get());
  if (sym) {
    if (spec.collective == Collective::ReduceScatter) {
      for (const auto& [rank, sl] : owned()) sym->expect_complete(rank, sl);
    } else if (spec.collective == Collective::AllToAll) {
      // Rank j's receive block i is rank i's send block j, slice for slice.
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) sym->expect_copy(j, alltoall_recv_block(p, i), i, alltoall_send_block(p, j));
    } else {
      for (int r = 0; r < n; ++r) sym->expect_complete(r, p.all());
    }
  }
  if (!spec.counts.empty()) res.received = delivered(s.deliveries(), res.run, spec.counts, n, spec.calls, pr.what);
  res.algorithm = pr.algorithm->name;
  res.collective = spec.collective;
  res.ranks = n;
  res.slices = p.slices;
  res.bytes_per_pe = spec.bytes_per_pe;
  res.latency = res.run.makespan();
  if (spec.calls > 1) {  // steady state: from the first call's end to the last one's, per call
    const std::size_t per = s.program().size();
    const auto end_of = [&](std::size_t c) {
      Time e = 0;
      for (std::size_t i = c * per; i < (c + 1) * per; ++i) e = std::max(e, res.run.ops[i].end);
      return e;
    };
    res.latency = (end_of(static_cast<std::size_t>(spec.calls) - 1) - end_of(0)) / (spec.calls - 1);
  }
  res.model = pr.gpu ? "nccl" : "sip";
  res.fidelity = pr.pipeline ? "pipeline" : "steps";
  res.protocol = pr.gpu ? to_string(pr.protocol) : "";
  res.channels = pr.channels;
  res.step_bytes = s.wire().step;
  res.calls = spec.calls;
  res.predicted = pr.predicted;
  res.verified = check;
  res.op_counts = res.run.op_counts;
  for (std::size_t t = 1; t < res.run.tags.size(); ++t) {
    const auto w = res.run.window(static_cast<std::int32_t>(t));
    if (w.first < 0) continue;
    res.phase_windows[res.run.tags[t]] = w;
    res.phases.push_back(res.run.tags[t]);
  }
  std::stable_sort(res.phases.begin(), res.phases.end(), [&](const std::string& a, const std::string& b) {
    return res.phase_windows[a].first < res.phase_windows[b].first;
  });
  res.link_bytes = topology::link_class_bytes_since(system.fabric(), before);
  return res;
}

}  // namespace kernbench::ccl
