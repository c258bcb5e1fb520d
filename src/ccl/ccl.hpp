// ccl.hpp -- collectives on a machine's PEs: the public entry point.
//
// A collective is a Program of IPCQ sends and recvs (plus HBM loads and
// stores when the buffers live in HBM) built by one algorithm from the
// registry (algorithms/algorithm.hpp). `run_collective` builds it, runs it on the
// System and, unless switched off, checks it symbolically while it runs:
// every slice of every rank's buffer carries the set of ranks whose data
// it holds; a reducing recv adds the sender's set (a rank added twice is an
// error at once), a copying recv replaces it; at the end every rank must
// hold what the collective promises (all-reduce: every slice reduced over
// all ranks exactly once). A wrong schedule fails naming the rank, the
// slice and what it holds.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ccl/nccl.hpp"
#include "runtime/executor.hpp"
#include "runtime/pe_config.hpp"
#include "topology/system.hpp"

namespace kernbench::ccl {

using runtime::NodeId;
using sim::Bytes;
using sim::Time;

/// AllToAll: each rank's buffer holds one block per rank (rank order); block j
/// of rank i ends in block i of rank j's receive buffer (out of place, as
/// NCCL's; both buffers are `bytes_per_pe`).
enum class Collective { AllReduce, ReduceScatter, AllGather, Broadcast, AllToAll };
const char* to_string(Collective c);
Collective collective_from_string(const std::string& name);  // UsageError listing the names

/// Where each rank's buffer lives: its PE's scratch, or its HBM slice (sends
/// read from HBM; reducing recvs load the local slice, add, store it back).
enum class Buffer { Sram, Hbm };
const char* to_string(Buffer b);
Buffer buffer_from_string(const std::string& name);

enum class Verify { Auto, On, Off };
Verify verify_from_string(const std::string& name);  // auto | on | off

struct CollectiveSpec {
  Collective collective = Collective::AllReduce;
  /// A registry name, `tree` (double_binary_tree) or `auto`: on a GPU
  /// machine the NCCL model's choice (nccl.hpp), elsewhere ring (alltoall:
  /// pairwise, everywhere).
  std::string algorithm = "ring";
  /// GPU machines: auto | ll | ll128 | simple (auto: the tuner's choice for
  /// the algorithm). Elsewhere only auto.
  std::string protocol = "auto";
  int channels = 0;  ///< GPU machines: NCCL channels (alltoall: per peer; 0: NCCL's count for the size)
  /// Calls launched back to back on one stream (GPU machines: nccl-tests'
  /// iterations); latency is then the steady-state time per call.
  int calls = 1;
  /// GPU machines: host threads launching the ranks' kernels (nccl-tests -t;
  /// the ranks are split evenly, a thread launches its ranks one after
  /// another); 0: one per rank.
  int host_threads = 0;
  Bytes bytes_per_pe = 0;  ///< each rank's buffer
  /// alltoall only: bytes rank i sends rank j at [i x ranks + j] (empty: a
  /// block of bytes_per_pe / ranks for every pair). The diagonal stays local.
  std::vector<Bytes> counts;
  std::vector<NodeId> pes;  ///< the ranks, in rank order (empty: every PE of the machine)
  Buffer buffer = Buffer::Sram;
  int grid_w = 0, grid_h = 0;  ///< rank grid of 2-D algorithms (0: the most square factorisation)
  std::string inter;           ///< hierarchical: ring | torus | mesh across SIPs (empty: the machine's)
  int pieces = 4;  ///< pipeline pieces of chains and trees (1 .. 65536, at most one per byte of the buffer above 4)
  int root = 0;    ///< broadcast root (a rank)
  /// Auto: check when the symbolic state is small (ranks x slices x ranks
  /// <= 2^28 bits); On: always; Off: never.
  Verify verify = Verify::Auto;
  /// The routes the tuner reads (the system's router, whose searches are cached across collectives); null:
  /// a router of its own (every call searches the machine's graph again: on 256 boxes a few ms per rank).
  topology::Router* router = nullptr;
  /// GPU machines: `steps` simulates every protocol step of every channel;
  /// `pipeline` one coflow per channel (pipeline.hpp: the channel's hops at
  /// one pace, its chain's step latencies; flow fabric; ring, and tree
  /// across boxes); `auto` the pipeline across boxes on a flow fabric where
  /// the step model would cost more than kAutoPipelineWork, else steps.
  std::string fidelity = "auto";
};

/// fidelity=auto switches to the pipeline model above this much step-model
/// work: its sends (estimated 2 x ranks x slices) x the ranks (a send's
/// max-min re-solve spans the cluster's flows, so its cost grows with the
/// ranks). 2^24 is about 20 s of wall time on one core (docs/cluster.md).
inline constexpr std::int64_t kAutoPipelineWork = std::int64_t{1} << 24;

/// What a collective did.
struct CollectiveResult {
  std::string algorithm;
  std::string model = "sip";       ///< sip (PE_CPU dispatch per op) | nccl (a GPU machine, nccl.hpp)
  std::string protocol;            ///< nccl: ll | ll128 | simple
  std::string fidelity = "steps";  ///< steps | pipeline (CollectiveSpec::fidelity, resolved)
  int channels = 1;                ///< nccl: channels used
  Bytes step_bytes = 0;            ///< payload of one step (0: whole transfers)
  int calls = 1;
  Time predicted = 0;  ///< nccl: the tuner's time for the choice (0: an algorithm it does not price)
  Collective collective = Collective::AllReduce;
  int ranks = 0;
  int slices = 0;  ///< how finely each buffer was cut
  Bytes bytes_per_pe = 0;
  Time latency = 0;                 ///< makespan of the program (calls > 1: steady-state time per call)
  bool verified = false;            ///< the symbolic check ran (and passed: a failure throws)
  std::vector<std::string> phases;  ///< in order of first start
  std::map<std::string, std::pair<Time, Time>> phase_windows;  ///< [first start, last end] per phase
  std::map<std::string, Bytes> link_bytes;                     ///< payload bytes per link class (all directions)
  /// alltoall with counts: the bytes the run delivered to each rank (its
  /// receives that completed), checked against the counts' column sums.
  std::vector<Bytes> received;
  std::map<std::string, std::uint64_t> op_counts;
  runtime::RunResult run;
  /// bytes_per_pe / latency (the "algorithm bandwidth"), B/s.
  double algorithm_bandwidth() const;
};

/// Builds, runs and (see Verify) checks one collective on `system`.
CollectiveResult run_collective(topology::System& system, const CollectiveSpec& spec);

/// Builds the program only (for inspection, or to append to another);
/// `slices` receives the cut. `config` is the machine's (pe:, nccl:).
runtime::Program build_collective(const topology::Machine& machine, const topology::Config& config,
                                  const CollectiveSpec& spec, int* slices = nullptr);

/// The NCCL model's tuning table for `spec` on a GPU machine (nccl.hpp): every
/// (algorithm, protocol) it weighs, with its latency, bandwidth and time.
std::vector<TuneRow> tuning_table(const topology::Machine& machine, const topology::Config& config,
                                  const CollectiveSpec& spec);

struct AlgorithmInfo {
  std::string name;
  std::string description;
  std::vector<std::string> collectives;  ///< which collectives it implements
  bool in_network = false;               ///< reduces on switches that declare `reduction:` (nvls)
};
std::vector<AlgorithmInfo> algorithms();

}  // namespace kernbench::ccl
