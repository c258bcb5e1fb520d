// pipeline.hpp -- the channel pipeline model of an NCCL collective
// (CollectiveSpec::fidelity = pipeline; docs/ccl.md "Fidelity").
//
// The step model (collective.cpp, schedule.hpp) simulates every step of
// every channel: ranks x channels x steps sends, each re-solving the fabric's
// shares. Over a thousand GPUs that is millions of sends. The pipeline model
// keeps what decides a large collective's time -- which links each channel's
// pipeline crosses, how the channels and any other traffic share them, and
// how many step latencies its dependency chain pays -- and drops the steps:
//   hops      channel c's logical hops, from the same logical topologies
//             the step model runs (ring_order: NCCL's ring box after box;
//             the tree's chains into each box's head and the double binary
//             tree over the heads), with PXN's relay expanded (src -> the
//             peer on dst's rail over the box, then its NIC);
//   bytes     every hop of these algorithms carries the same wire bytes W
//             (ring all-reduce 2(n-1)/n of the channel's part, reduce-scatter
//             and all-gather (n-1)/n, a tree every byte up and every byte
//             down, a broadcast chain every byte) over the format's and the
//             link's efficiency;
//   latency   the steps of the dependency chain (ring all-reduce 2(n-1),
//             reduce-scatter and all-gather n - 1, of which as many cross
//             boxes as the worst run of that length in the ring; tree
//             2 (chain length + tree depth); a broadcast chain n - 1), each
//             with its step latency (nccl.<proto>_step inside a box,
//             nccl.net_<proto>_step across) and its route's: the first whole,
//             every later one only what the pieces in flight do not hide,
//             max(0, latency - (in flight - 1) x piece / channel rate), with at
//             most nccl.steps pieces in flight and the tuner's bus bandwidth
//             over the channels as the channel rate;
//   piece     a protocol step's payload (at most a ring slice); a tree's
//             (Simple) halved as NCCL halves its chunk while a channel would
//             have fewer than depth x 8 of them (then x 4, x 1);
//   fill      a chain or tree fills one piece at a time, but the channels
//             beside it, whose chains start elsewhere on the same links, keep
//             the links busy meanwhile: only the last piece's trail through
//             the depth (depth - 1 pieces) is added, at the uncontended rate;
//   pace      one coflow per channel (Fabric::start_coflow): every hop at one
//             rate, the weighted max-min share of the busiest link (a link
//             two hops cross counts twice), re-solved when any flow on the
//             fabric starts or ends.
// A channel's coflow starts when every rank's kernel has started (the
// collective's launch and fixed cost, as in the step model). What it leaves
// out: the IPCQ units and slot credits (a channel is never held up by
// another's steps on the same GPU), the HBM loads and stores of reducing
// steps, and the stalls of individual steps -- so it is a lower bound on
// the step model's contention inside a box. It is not checked symbolically
// (there are no steps to follow); tests/python/test_pipeline_fidelity.py
// holds it to the step model where both run.
#pragma once

#include <string>
#include <vector>

#include "ccl/algorithms/algorithm.hpp"
#include "ccl/ccl.hpp"
#include "ccl/nccl.hpp"
#include "ccl/schedule.hpp"
#include "runtime/program.hpp"

namespace kernbench::ccl {

/// What the pipeline model reads of the machine and the protocol.
struct PipelineWire {
  Bytes footprint = 0;      ///< each rank's buffer (payload)
  double efficiency = 1.0;  ///< payload / wire bytes (protocol format x nccl.link_efficiency)
  Bytes piece = 0;          ///< payload of one pipeline piece (a protocol step)
  Time step = 0;            ///< latency of a step inside a box (nccl.<proto>_step)
  Time net_step = 0;        ///< latency of a step across boxes (nccl.net_<proto>_step)
  Time route = 0;           ///< wire and node latency rank to next rank inside a box (the slowest pair)
  Time net_route = 0;       ///< the same across boxes, one rail (the slowest)
  bool pxn = true;          ///< cross-box sends relayed through the peer on the receiver's rail
  int slots = 8;            ///< steps a hop has in flight (NCCL_STEPS, nccl.steps)
  bool simple = true;       ///< protocol Simple (the tree's chunk shrinks for small parts)
  /// B/s one channel moves at, as NCCL's tuner estimates it (the ring's bus
  /// bandwidth over the channels): how long a piece takes, so how much of a
  /// step's latency the pieces in flight hide.
  double channel_rate = 0.0;
};

/// Whether the pipeline model has a form for this algorithm and collective
/// on these ranks (ring: all-reduce, reduce-scatter, all-gather, broadcast;
/// double_binary_tree, nvls and nvls_tree: all-reduce across boxes, the
/// NVLS ones one coflow per rail); `why` says what is missing.
bool pipeline_supports(const Algorithm& a, Collective c, const Plan& plan, std::string* why = nullptr);

/// Resolves CollectiveSpec::fidelity for a prepared collective (its
/// algorithm, plan, protocol, channels and step wire): true when the
/// pipeline model runs it, with `pipe` filled (latencies and rates from what
/// the tuner read of the ranks, `facts`). `pipeline` that cannot run is a
/// UsageError naming why; `auto` takes it across boxes on a flow fabric
/// above kAutoPipelineWork.
bool choose_pipeline(const CollectiveSpec& spec, const topology::Config& config, bool gpu, const Algorithm& a,
                     const Plan& plan, Protocol protocol, int channels, const Wire& wire, const TunerFacts& facts,
                     PipelineWire& pipe);

/// Appends one coflow op per channel (`channels` of them, each on its part
/// of the buffer) to `prog`, each after every op of `entry`. Returns them.
std::vector<runtime::OpId> lower_pipeline(runtime::Program& prog, const Algorithm& a, Collective c, const Plan& plan,
                                          int channels, const PipelineWire& wire,
                                          const std::vector<runtime::OpId>& entry);

}  // namespace kernbench::ccl
