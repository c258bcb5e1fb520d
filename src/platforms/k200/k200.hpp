// k200.hpp -- the Kunlun K200 (KL1) host as a protocol model.
//
// A K200 object attaches to a topology::System built from an explicit graph
// (configs/k200.yaml: host DRAM, CPU, PCIe root complex, per card a Gen4 x8
// link, a card switch, two dies "PDs" with HBM) and the `k200:` section of
// its config. It adds the engines the driver and the device use, each a
// sim::Server so queueing is measured: per card the eDMA channel pool (8),
// per die the channels a die may hold (3), the host's CPU copy threads, per
// die the device command queue and the die's clusters (a kernel holds its
// ncluster of them; kernels of different streams run side by side).
//
// Every model op is a coroutine on those engines; bytes that cross PCIe (or
// go between a die and its HBM) move through the System's fabric, so two
// dies sharing a card link contend for it for real. Every op is recorded in
// the simulation's OpLog (kinds: call, map, unmap, edma, poll, memcpy, pin,
// handoff, d2d, launch, fetch, dispatch, kernel, gemm, wait, hbm) with a resource
// id from resource_names() and a free tag, through a runtime::Recorder, which
// also writes each op's cause (runtime/recorder.hpp): `after` = the previous
// op of its thread of control (a host thread, a die's stream, a pipeline
// stage; a fork/join's last child; for a blocking wait, the kernel whose end
// released it; for a device fetch, the later of its launch and the stream's
// previous kernel), holder = the op that released the eDMA channel, die
// channel, copy thread, command queue or clusters it queued for. So a run's
// critical path is the exact walk of runtime/critical_path.hpp
// (critical_path(report)).
//
// Paths (see copy.cpp, launch.cpp, gemm.cpp, workload.cpp for each one's
// mechanism and the reference figures it was calibrated against).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/critical_path.hpp"
#include "runtime/recorder.hpp"
#include "sim/process.hpp"
#include "platforms/k200/config.hpp"
#include "sim/server.hpp"
#include "sim/store.hpp"
#include "sim/trigger.hpp"
#include "topology/config/config.hpp"
#include "topology/system.hpp"

namespace kernbench::platforms::k200 {

using runtime::Chain;
using sim::Bytes;
using sim::Time;
using topology::NodeId;

/// A die of a card ("PD"): card index and die index within the card.
struct DieRef {
  int card = 0;
  int die = 0;
  friend bool operator==(const DieRef&, const DieRef&) = default;
};

enum class Direction { H2D, D2H };

/// What a host copy is asked to be.
enum class CopyKind {
  Pinned,           ///< host_alloc buffer (hugepage pool), direct eDMA when kl1_dma_direct
  Pageable,         ///< malloc buffer: bounce pipeline / serial bounce / page pinning, per the knobs
  Stock,            ///< pageable through the stock (pre-tuning) driver
  PeerSameCard,     ///< die -> die of one card through a host bounce buffer
  PeerCrossCard,    ///< direct peer copy across cards: refused by the driver (error 807)
  CrossCardStaged,  ///< die -> host pinned buffer -> die of another card
  D2D,              ///< inside one die's HBM
};

const char* to_string(CopyKind k);
const char* to_string(Direction d);
/// "pinned", "pageable", ... -> CopyKind; an unknown name lists the known ones (ConfigError).
CopyKind copy_kind_from(const std::string& name);
Direction direction_from(const std::string& name);

/// One copy request.
struct CopySpec {
  CopyKind kind = CopyKind::Pinned;
  Direction dir = Direction::H2D;  ///< host copies only
  Bytes bytes = 0;
  DieRef die{0, 0};   ///< the device side (source die of peer / staged / D2D copies)
  DieRef peer{0, 1};  ///< destination die of peer / staged copies
};

/// Time spent per op kind (from the op log rows of one run).
struct OpTotal {
  std::string kind;
  std::int64_t count = 0;
  Time time = 0;  ///< sum of end - start
  Bytes bytes = 0;
  /// Its part of the run's span: each instant in which k labels have an op
  /// at work counts 1/k to each (0 where not computed), so the parts and
  /// the idle rest add up to the span (times overlap; these do not).
  double share = 0;
};

/// Busy fraction of one engine or link over a run.
struct Utilization {
  std::string resource;
  double busy = 0.0;  ///< 0..1: busy time / elapsed (units in use / capacity for multi-unit engines)
};

/// What a run measured.
struct RunReport {
  Time start = 0;
  Time end = 0;
  Bytes bytes = 0;           ///< payload (copies) or 0
  double flops = 0.0;        ///< FLOPs (GEMMs) or 0
  std::string path;          ///< the path actually taken ("pinned direct", "bounce serial (pool exhausted)", ...)
  std::vector<OpTotal> ops;  ///< per-kind breakdown
  std::vector<Utilization> utilization;  ///< sorted, busiest first
  std::string bound;                     ///< the busiest resource
  std::size_t log_begin = 0;             ///< op-log rows of this run: [log_begin, log_end)
  std::size_t log_end = 0;
  std::size_t cause_begin = 0;  ///< cause nodes of this run (K200::recorder()): [cause_begin, cause_end)
  std::size_t cause_end = 0;
  Time elapsed() const { return end - start; }
  double gib_per_s() const;  ///< bytes / elapsed, in GiB/s (2^30 B/s, as the reference's tool)
  double gflops() const;
};

/// A kernel for the device queue.
struct KernelSpec {
  /// Conv: a convolution lowered to the GEMM m x n x k (m = output pixels, n = output channels,
  /// k = input channels x kernel area); with lowered_from > 0 the lowering (im2col) first reads
  /// that many input elements and writes the m x k matrix; 0 = the input already is A (1x1, stride 1).
  enum class Kind { Elementwise, Gemm, Conv } kind = Kind::Elementwise;
  std::int64_t elements = 0;  ///< elementwise
  std::int64_t m = 0, n = 0, k = 0;
  topology::Precision precision = topology::Precision::Fp32;
  int ncluster = 0;  ///< 0: the config's default
  std::int32_t tag = 0;
  std::int32_t launched_by = -1;  ///< the cause node of its launch (set by launch_task)
  std::int64_t lowered_from = 0;  ///< conv: input elements the im2col lowering reads (0: no lowering)
  Time framework_overhead = 0;    ///< a framework's per-op host work before the launch (C1's path); 0: none
};

/// The GEMM plan on one die (what plan_gemm() decided; gemm.cpp says how).
struct GemmPlan {
  int ncluster = 0;
  std::int64_t blocks = 0;        ///< output blocks (bm x bn), one cluster each
  std::int64_t block_m = 0;       ///< rows of C per block
  std::int64_t block_n = 0;       ///< columns of C per block
  std::int64_t waves = 0;         ///< rounds of ncluster blocks
  std::int64_t core_tiles = 0;    ///< micro-tiles per block
  std::int64_t core_rounds = 0;   ///< rounds of cores_per_cluster micro-tiles per block
  std::int64_t k_padded = 0;      ///< K rounded up to core_tile_k
  double tile_utilization = 0.0;  ///< useful / computed multiply-adds (quantization in M, N, K and over cores)
  Time compute_per_wave = 0;      ///< one block on one cluster
  Time scan_time = 0;             ///< the max-finding pass over A and B (0: none)
  Bytes scan_bytes = 0;           ///< bytes of A and B that pass reads
  Bytes hbm_per_wave = 0;         ///< A and B panels of one block (a wave moves this times its blocks)
  Bytes hbm_bytes = 0;            ///< total HBM traffic (scan, A and B panels, C)
  double spill_fraction = 0.0;    ///< of the K panel that does not fit a core
  double flops = 0.0;
  double peak_flops_per_s = 0.0;  ///< of the clusters used
};

class K200 {
 public:
  /// Attaches to `system`, whose config must have a graph and a k200 section.
  /// Checks the graph (nodes host.dram, card<i>.die<j>, card<i>.die<j>.hbm,
  /// the PCIe edges' bandwidth against the derived line rate).
  explicit K200(topology::System& system);
  K200(const K200&) = delete;
  K200& operator=(const K200&) = delete;

  const K200Config& config() const { return cfg_; }
  topology::System& system() { return system_; }
  int cards() const { return static_cast<int>(cards_.size()); }
  int dies_per_card(int card) const;

  /// Payload bandwidth of a card link, derived: lanes x lane_rate x
  /// data/total bits (the graph edge) x payload / (payload + TLP overhead).
  double pcie_line_bytes_per_s() const;
  double pcie_payload_bytes_per_s() const;
  /// Wire bytes of `payload` bytes: whole TLPs with their overhead.
  Bytes wire_bytes(Bytes payload) const;

  // ---- one-shot runs (each runs the simulation until it is done) ---------------
  RunReport copy(const CopySpec& spec);
  /// Several copies started together (e.g. one per card); the report spans
  /// all of them, its bytes are their sum and its path lists each path.
  RunReport copies(const std::vector<CopySpec>& specs);
  /// `threads` host threads each launch `kernels` kernels (thread t on stream
  /// t of `die`), then wait for their stream once; `loops` times. The
  /// report's ops give launch, dispatch and wait; per-kernel times are in
  /// LaunchStats.
  struct LaunchStats {
    double launch_us = 0.0;      ///< mean host time per launch call
    double wait_us = 0.0;        ///< mean wait call per loop
    double per_kernel_us = 0.0;  ///< loop time / kernels, per thread
    double single_us = 0.0;      ///< launch + wait of one kernel alone (sync dispatch latency)
    RunReport report;
  };
  LaunchStats launch_test(int threads, int kernels, int loops, const KernelSpec& kernel, DieRef die = {});
  /// The synchronous round trip: `threads` host threads (thread t on stream t
  /// of `die`) each `commands` times launch one kernel and wait for their
  /// stream. round_trip_us: mean launch-to-wait-return per command and
  /// thread; per_command_us: elapsed / all commands (throughput).
  struct DispatchStats {
    double round_trip_us = 0.0;
    double per_command_us = 0.0;
    double launch_us = 0.0;  ///< mean launch call
    double wait_us = 0.0;    ///< mean wait call
    RunReport report;
  };
  DispatchStats dispatch_test(int threads, int commands, const KernelSpec& kernel, DieRef die = {});
  /// One GEMM (an xdnn fc call: launch, dispatch, run, wait) on `die`.
  RunReport gemm(const KernelSpec& kernel, DieRef die = {});
  GemmPlan plan_gemm(const KernelSpec& kernel) const;

  // ---- building blocks (coroutines; usable from workloads) ----------------------
  // Each records its ops as the next ops of `ch`, the caller's thread of control.
  sim::Task<void> copy_task(Chain& ch, CopySpec spec, std::int32_t tag, std::string* path_out);
  /// Launches `kernel` into stream `stream` of `die` (streams run in order,
  /// each on its own; kernels of different streams share the die's clusters).
  sim::Task<void> launch_task(Chain& ch, int thread, DieRef die, KernelSpec kernel, int stream = 0);
  /// Blocks until every kernel launched to the die (all streams) has finished.
  sim::Task<void> wait_task(Chain& ch, int thread, DieRef die, std::int32_t tag = 0);
  /// Blocks until every kernel launched to stream `stream` of the die has finished.
  sim::Task<void> stream_wait_task(Chain& ch, int thread, DieRef die, int stream, std::int32_t tag = 0);
  /// Validation without running (UsageError/ConfigError naming the problem).
  void check(const CopySpec& spec);
  void check(const KernelSpec& kernel, DieRef die);
  void check(DieRef die) { (void)this->die(die); }

  /// Names of the resource ids used in the op log.
  const std::vector<std::string>& resource_names() const { return rec_.resource_names(); }
  /// The op records and their causes.
  const runtime::Recorder& recorder() const { return rec_; }
  /// The exact critical path of a run (its cause nodes, walked back from its end).
  runtime::CriticalPath critical_path(const RunReport& r, const std::string& name = "K200") const;
  /// The op log the model records into (the System's).
  const sim::OpLog& log() const { return system_.sim().op_log(); }
  /// Where a run starts: time, op-log row, busy integrals of engines and links.
  struct Snapshot {
    Time t = 0;
    std::size_t row = 0;
    std::size_t cause = 0;
    std::vector<double> busy;  ///< per entry of meters_
  };
  Snapshot snapshot() const;
  /// Report from `s` to now.
  RunReport report(const Snapshot& s) const;

  /// Runs the simulation until every spawned process is done; a process still
  /// waiting afterwards is a DeadlockError naming it.
  void run_to_completion();

 private:
  struct Card;
  /// Kernels launched and finished, and the waits blocked on them.
  struct Counter {
    std::int64_t launched = 0;
    std::int64_t finished = 0;
    struct Waiter {
      std::int64_t count;  ///< kernels that must have finished
      sim::Trigger* done;
      std::int32_t* by;  ///< set to the node that finished the last of them
    };
    std::vector<Waiter> waiters;
    void finish(std::int32_t node);  ///< one more finished (its last op: `node`): wakes the waits now satisfied
  };
  /// One stream of a die: an in-order queue with its own command fetch.
  struct StreamQ {
    std::unique_ptr<sim::Store<KernelSpec>> pending;  ///< launched, not yet dispatched
    Counter count;
    bool running = false;
    Chain chain;  ///< the stream's device ops
  };
  struct Die {
    DieRef ref;
    NodeId node = 0;
    NodeId hbm = 0;
    sim::Bandwidth hbm_bandwidth{0};        ///< the die <-> HBM link's rate (graph edge): elementwise streaming's bound
    std::unique_ptr<sim::Server> channels;  ///< eDMA channels this die may hold
    std::unique_ptr<sim::Server> queue;     ///< device command queue (submission)
    std::unique_ptr<sim::Server> compute;   ///< the die's clusters (units): a kernel holds its ncluster
    std::unique_ptr<sim::Server> grant;     ///< one kernel at a time takes its clusters (no partial holds)
    std::vector<std::unique_ptr<StreamQ>> streams;  ///< by stream id, made on first launch
    Counter count;                                  ///< all streams of the die
    std::int32_t res_channels = 0, res_queue = 0, res_compute = 0, res_hbm = 0;
  };
  struct Card {
    NodeId link_up = 0;                           ///< card end of the PCIe link (switch side)
    std::optional<topology::ChannelId> down, up;  ///< the PCIe link's two channels
    std::unique_ptr<sim::Server> edma;            ///< the card's eDMA channel pool
    std::vector<Die> dies;
    std::int32_t res_edma = 0, res_link_down = 0, res_link_up = 0;
  };

  Die& die(DieRef d);
  std::int32_t add_resource(const std::string& name) { return rec_.add_resource(name); }
  /// Records one op as the next op of `ch` (op log row + cause); returns its node.
  std::int32_t record(Chain& ch, const char* kind_name, std::int32_t resource, std::int32_t tag, Time issue, Time start,
                      Time end, Bytes bytes = 0, double work = 0.0, std::int32_t holder = -1, std::int32_t after = -1,
                      Time ready = -1, std::int32_t wait_resource = -1);

  // Primitives.
  sim::Task<void> delay_op(Chain& ch, const char* kind_name, std::int32_t resource, std::int32_t tag, Time t,
                           Bytes bytes = 0);
  sim::Task<Time> poll_until(Chain& ch, Time done, std::int32_t resource, std::int32_t tag);
  sim::Task<void> edma(Chain& ch, DieRef d, Direction dir, Bytes bytes, std::int32_t tag);
  sim::Task<void> memcpy_host(Chain& ch, Direction dir, Bytes bytes, std::int32_t tag);
  sim::Task<void> pinned_segment(Chain& ch, DieRef d, Direction dir, Bytes bytes, std::int32_t tag);

  // Copy paths (copy.cpp).
  sim::Task<void> copy_pinned(Chain& ch, DieRef d, Direction dir, Bytes bytes, std::int32_t tag, std::string* path);
  sim::Task<void> copy_pageable(Chain& ch, DieRef d, Direction dir, Bytes bytes, std::int32_t tag, std::string* path);
  sim::Task<void> bounce_serial(Chain& ch, DieRef d, Direction dir, Bytes bytes, Bytes chunk, std::int32_t tag);
  sim::Task<void> bounce_pipeline(Chain& ch, DieRef d, Direction dir, Bytes bytes, std::int32_t tag);
  sim::Task<void> pin_path(Chain& ch, DieRef d, Direction dir, Bytes bytes, std::int32_t tag);
  sim::Task<void> peer_same_card(Chain& ch, DieRef src, DieRef dst, Bytes bytes, std::int32_t tag, std::string* path);
  sim::Task<void> cross_card_staged(Chain& ch, DieRef src, DieRef dst, Bytes bytes, std::int32_t tag);
  sim::Task<void> d2d(Chain& ch, DieRef d, Bytes bytes, std::int32_t tag);

  // Device (launch.cpp, gemm.cpp).
  StreamQ& stream(Die& d, int id);
  /// Until every kernel launched to `c` so far has finished; returns the node
  /// that finished the last of them (-1: nothing to wait for).
  sim::Task<std::int32_t> wait_for(Counter& c);
  sim::Task<void> wait_on(Chain& ch, Counter& c, std::int32_t res, std::int32_t tag);
  void ensure_device(Die& d, int id);
  sim::Process device_loop(Die& d, StreamQ& q);
  Time kernel_time(const KernelSpec& k, const Die& d) const;
  sim::Task<void> run_kernel(Chain& ch, Die& d, const KernelSpec& k);
  sim::Task<void> run_gemm(Chain& ch, Die& d, const KernelSpec& k);
  sim::Task<void> hbm_move(Chain& ch, Die& d, Bytes bytes, bool to_die, std::int32_t tag);
  /// A pass on the die that reads `read` and writes `write` bytes of its HBM (through the fabric, beside
  /// everyone's traffic) and lasts at least `at_least`: the fc's operand scan, a conv's im2col.
  sim::Task<void> hbm_pass(Chain& ch, Die& d, Bytes read, Bytes write, Time at_least, const char* kind,
                           std::int32_t tag);
  int ncluster_of(const KernelSpec& k) const;

  topology::System& system_;
  K200Config cfg_;
  NodeId host_dram_ = 0;
  std::vector<Card> cards_;
  runtime::Recorder rec_;
  std::unique_ptr<sim::Server> copy_threads_;
  std::int32_t res_host_copy_ = 0, res_driver_ = 0;
  /// What utilization is measured on: a Server (busy units) or a link channel (busy lane time).
  struct Meter {
    std::string name;
    const sim::Server* server = nullptr;
    topology::ChannelId channel = 0;
  };
  std::vector<Meter> meters_;
  double meter_busy(const Meter& m) const;
  Bytes pool_free_ = 0;  ///< hugepage pool not handed out
  int open_processes_ = 0;

  friend class Workload;
  friend struct Access;
};

/// Runs `t` as a top-level process.
inline sim::Process top(sim::Task<void> t) { co_await std::move(t); }

}  // namespace kernbench::platforms::k200
