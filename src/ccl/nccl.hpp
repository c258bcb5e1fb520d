// nccl.hpp -- collectives as NCCL runs them, on a GPU machine (pe.target: gpu).
//
// The schedule of a collective (which rank sends which slices to whom) is
// the same registry algorithm as everywhere (algorithms/algorithm.hpp); on a GPU
// machine it is lowered the way NCCL executes it (docs/ccl.md, "On a GPU
// machine"):
//   call       each rank's collective kernel is launched from the host
//              (`nccl.call_host` on its launch queue; ranks driven by one
//              host thread launch one after another) and starts with the
//              protocol's fixed GPU-side cost (`nccl.<proto>_base`: the
//              kernel's prologue and first round trip), before any step;
//   channels   the buffer is split over C channels (one CTA each, at most
//              pe.ipcq.channels, fewer for small messages as NCCL does:
//              while bytes < C x threads x threshold), each running the
//              algorithm on its part; a channel's steps are sends in flight
//              on the GPU's IPCQ engine (pe.ipcq.channels units);
//   steps      every transfer is cut into steps of the protocol's step size
//              (NCCL_BUFFSIZE / NCCL_STEPS of payload); each step pays the
//              protocol's latency (`nccl.<proto>_step`: the flag write and
//              poll, Op::latency, no engine held) and moves its wire bytes
//              = payload / (format efficiency x nccl.link_efficiency);
//   network    a step sent to another box is the proxy's (NCCL's net
//              transport: a host thread posts it to the NIC and polls its
//              completion): it holds no IPCQ unit of the GPU while it
//              crosses the network (Op::proxy), only its slot credits; the
//              GPU's channels go on with their NVLink steps meanwhile;
//   buffers    data lives in HBM: a reducing step loads the local part,
//              adds the arriving one, stores the sum; only a step's worth is
//              ever on chip, so no collective needs pe.scratch for a slice;
//   alltoall   NCCL's p2p path (pairwise.cpp): every pair of ranks moves its
//              block directly, on the pair's own channels (p2p_choice: as
//              many as NCCL gives a peer), in steps of `nccl.p2p_chunk`
//              (Simple) or LL's step, LL while a channel carries at most
//              `nccl.p2p_ll_threshold`; the tuner does not price it;
//   nvls       the in-network all-reduce (nvls.cpp) in pieces of
//              `nccl.nvls_chunk` (what NVLS has in flight): each piece's gather
//              lasts at least the members' multimem issue time,
//              2 x chunk / ranks / nccl.nvls_issue (a load-reduce and a
//              multicast store of each rank's share), and the switch reduces
//              at its declared reduction bandwidth; the kernel's fixed cost
//              is `nccl.nvls_base`.
// The algorithm and protocol an `auto` request gets come from one table of
// per-(algorithm, protocol) latency and bandwidth, read by one function
// (choose), as NCCL's tuning model does (NCCL src/graph/tuning.cc): time =
// latency + bytes / bandwidth, the smallest wins. Its latencies are NCCL's
// own constants (`nccl.tuner`), not the machine's (the fitted `nccl.*`): NCCL
// chooses with what it believes; the simulation then pays what the machine does.
#pragma once

#include <string>
#include <vector>

#include "sim/units.hpp"
#include "topology/graph/machine.hpp"

namespace kernbench::ccl {

using sim::Bytes;
using sim::Time;

enum class Protocol { LL, LL128, Simple };
const char* to_string(Protocol p);
/// ll | ll128 | simple (UsageError listing them otherwise).
Protocol protocol_from_string(const std::string& name);

/// A protocol's format (NCCL src/include/device.h; not parameters).
struct ProtocolFormat {
  double efficiency = 1.0;  ///< payload / bytes on the wire: LL 8 of 16 (a flag per 8 B), LL128 120 of 128
  Bytes buffer = 0;         ///< wire bytes of one channel's buffer (NCCL_STEPS steps)
  int threads = 512;        ///< threads per channel (NCCL_*_MAX_NTHREADS)
  int threshold = 8;        ///< bytes per thread below which a channel is dropped (NCCL_*_THREAD_THRESHOLD)
};
ProtocolFormat protocol_format(Protocol p, Bytes simple_buffer);

/// What NCCL's tuner assumes about the latencies (its tuning constants,
/// src/graph/tuning.cc: Ring baseLat and hwLat, NVLS hwLat, for NVLink by
/// default): the choice of algorithm and protocol is NCCL's, made with its
/// own constants, whatever the machine then does.
struct NcclTunerConstants {
  Time ll_base = 6600 * sim::kNanosecond;
  Time ll128_base = 14 * sim::kMicrosecond;
  Time simple_base = 8400 * sim::kNanosecond;
  Time ll_step = 600 * sim::kNanosecond;
  Time ll128_step = 1900 * sim::kNanosecond;
  Time simple_step = 3400 * sim::kNanosecond;
  Time nvls = 25 * sim::kMicrosecond;
  /// Over the network (hwLat NET): a ring step, and a tree step, per protocol.
  Time net_ll_step = 2700 * sim::kNanosecond;
  Time net_ll128_step = 4 * sim::kMicrosecond;
  Time net_simple_step = 14 * sim::kMicrosecond;
  Time net_tree_ll_step = 5 * sim::kMicrosecond;
  Time net_tree_ll128_step = 8500 * sim::kNanosecond;
  Time net_tree_simple_step = 14 * sim::kMicrosecond;
  /// Across boxes (hwLat NET): NVLS with IB SHARP (CollNet) once per call, NVLS+tree per tree step.
  Time net_nvls = 18 * sim::kMicrosecond;
  Time net_nvls_tree = 20900 * sim::kNanosecond;
};

/// The `nccl:` section: the mechanism parameters of NCCL on a GPU machine.
/// Defaults are NCCL's own tuning constants for NVLink (src/graph/tuning.cc:
/// baseLat and hwLat of Ring); the GPU presets fit some of them
/// (configs/machines/nvidia-gpu.yaml says which, on what).
struct NcclConfig {
  Time call_host = 5 * sim::kMicrosecond;  ///< host time to enqueue and launch one rank's collective kernel
  Time ll_base = 6600 * sim::kNanosecond;  ///< GPU-side fixed cost per call, LL
  Time ll128_base = 14 * sim::kMicrosecond;
  Time simple_base = 8400 * sim::kNanosecond;
  Time ll_step = 600 * sim::kNanosecond;  ///< latency of one step (flag write + poll), LL
  Time ll128_step = 1900 * sim::kNanosecond;
  Time simple_step = 3400 * sim::kNanosecond;
  Time tree_step_extra = 0;  ///< tree: extra latency per step over the ring's (0: the same)
  /// Fraction of a link's rate SM-driven stores to a peer achieve (all
  /// protocols; LL and LL128 lose their format's share on top).
  double link_efficiency = 1.0;
  Bytes buffsize = 4 * sim::kMiB;           ///< NCCL_BUFFSIZE: one channel's Simple buffer
  int steps = 8;                            ///< NCCL_STEPS: steps in flight per channel
  Time nvls_base = 25 * sim::kMicrosecond;  ///< NVLS kernel's fixed cost per call (NCCL hwLat NVLS, NVLink)
  /// Rate at which one GPU's SMs issue multimem load-reduce and multicast
  /// store bytes (0: no GPU-side limit).
  sim::Bandwidth nvls_issue{0};
  /// Bytes of the buffer in one NVLS pipeline piece: what NVLS has in flight,
  /// NCCL's 16 NVLS channels (H100) x NCCL_NVLS_CHUNKSIZE 128 KiB x the two
  /// halves (load-reduce, multicast store) it pipelines = 4 MiB.
  Bytes nvls_chunk = 4 * sim::kMiB;
  /// The latencies NCCL's tuner chooses with (`nccl.tuner`).
  NcclTunerConstants tuner;
  /// Most steps one transfer is simulated as: a longer transfer is moved in
  /// this many larger steps, each one IPCQ segment and one slot credit (a
  /// fidelity knob: the pipeline and contention stay; the per-step latency
  /// count and the flow control of huge messages are coarsened).
  int max_steps_per_transfer = 8;
  /// p2p (alltoall): a Simple step's payload (NCCL_P2P_NVL_CHUNKSIZE).
  Bytes p2p_chunk = 512 * sim::kKiB;
  /// p2p: LL while a peer's bytes are at most channels x this (NCCL_P2P_LL_THRESHOLD).
  Bytes p2p_ll_threshold = 16 * sim::kKiB;
  /// A step sent from one box to another (through the NICs): its latency
  /// (the proxy thread posts it to the NIC and polls the completion) instead
  /// of the intra-box step's. Defaults: NCCL's tuner constants for the
  /// network (hwLat NET, Ring).
  Time net_ll_step = 2700 * sim::kNanosecond;
  Time net_ll128_step = 4 * sim::kMicrosecond;
  Time net_simple_step = 14 * sim::kMicrosecond;
  /// PXN (NCCL_PXN_DISABLE=0, NCCL's default since 2.12): a send to another
  /// box goes first to the sender's peer on the receiver's rail, which sends
  /// it through its own NIC.
  bool pxn = true;
};

/// What kind of collective is asked (the busbw-style step count differs).
enum class NcclCollective { AllReduce, ReduceScatter, AllGather, Broadcast, AllToAll };

/// The machine facts the tuner reads, for these ranks.
struct TunerFacts {
  int ranks = 0;
  double ring_bandwidth = 0;  ///< B/s rank to next rank (every equal-cost path, narrowest pair)
  Time route_latency = 0;     ///< wire + node latency rank to next rank (the slowest pair)
  bool nvls = false;          ///< a reducing switch is linked to every rank (several boxes: of each box)
  double nvls_switch = 0;     ///< the reducing switches' summed reduction bandwidth, B/s (the narrowest box's)
  bool sharp = false;         ///< several boxes, and a switch outside them reduces (IB SHARP, logical/sharp.hpp)
  int channels = 1;           ///< most channels (pe.ipcq.channels)
  /// Boxes (logical/boxes.hpp) the ranks span, and the ranks of the smallest.
  int nodes = 1;
  int ppn = 0;
  double inter_bandwidth = 0;  ///< B/s out of the narrowest box through its NICs
  Time inter_latency = 0;      ///< wire + node latency from a box to the next on one rail (the slowest)
};

/// One row of the tuning table.
struct TuneRow {
  std::string algorithm;  ///< ring | tree | nvls | nvls_tree (a registry name: double_binary_tree for tree)
  Protocol protocol = Protocol::Simple;
  int channels = 1;
  Time latency = 0;      ///< fixed part: base + steps x step latency
  double bandwidth = 0;  ///< B/s of the buffer (algorithm bandwidth)
  Time time = 0;         ///< latency + bytes / bandwidth
};

/// Every (algorithm, protocol) NCCL would consider for `bytes` per rank,
/// with its predicted time.
std::vector<TuneRow> tune(NcclCollective c, Bytes bytes, const TunerFacts& facts, const NcclConfig& cfg);
/// The row an auto request gets: the smallest time, restricted to
/// `algorithm` / `protocol` when given (empty / nullptr: any).
TuneRow choose(NcclCollective c, Bytes bytes, const TunerFacts& facts, const NcclConfig& cfg,
               const std::string& algorithm = {}, const Protocol* protocol = nullptr);
/// NCCL's channel count for `bytes`: at most `most`, dropped while
/// bytes < channels x threads x threshold (src/enqueue.cc).
int channels_for(Bytes bytes, Protocol p, int most, const NcclConfig& cfg);

/// How NCCL moves one peer's bytes point to point (src/graph/paths.cc
/// ncclTopoComputeP2pChannels, src/enqueue.cc scheduleP2pTasksToPlan and
/// addP2pToPlan): p2p channels = pow2Up(`most`); a peer gets as many as
/// there are, halved while peers x channels exceed them (the floor the
/// scheduler starts from), fewer for a small part (one per p2p_chunk / 8),
/// doubled while a part exceeds 32 chunks; LL while bytes <= channels x
/// p2p_ll_threshold. A peer's channel limit from its path (NCCL: 2 x NVLinks
/// to it, 2 over PCIe) is taken as the p2p channel count: no link count is
/// assumed of the graph.
struct P2pChoice {
  Protocol protocol = Protocol::Simple;
  int channels = 1;        ///< per peer
  Bytes step_payload = 0;  ///< payload of one step
};
P2pChoice p2p_choice(Bytes per_peer, int ranks, int most, const NcclConfig& cfg, const Protocol* protocol = nullptr);

/// The registry name an NCCL algorithm name stands for (tree ->
/// double_binary_tree); others unchanged.
std::string registry_name(const std::string& nccl_name);

}  // namespace kernbench::ccl
