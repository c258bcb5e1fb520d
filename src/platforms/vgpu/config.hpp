// config.hpp -- the typed `vgpu:` section: everything about the
// virtualised-GPU forwarding path that is not the graph.
//
// The graph section of configs/vgpu.yaml holds the hardware (guest vCPU and
// memory, the trapped MMIO channel, the host backend, host bounce windows,
// PCIe, GSP, GR, CE, GPU memory); this section holds the protocol
// parameters the vGPU model (src/platforms/vgpu/) reads: the GSP RPC and its
// firmware service time, the host poller, the PDE forwards of a launch, the
// launch and copy costs, the guest driver ops, the bare-metal costs the
// guest/bare ratios use and the scripted perf workload. Defaults live here,
// in one place; configs/vgpu.yaml says where each value comes from.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/units.hpp"

namespace kernbench::platforms::vgpu {

/// How the host notices a message from the GSP (and a completion).
///   tick      -- a polled worker re-armed one quantum after each event it
///                waits for: every poll wait costs one full quantum
///                (the reading of the reference's "5 ms tick + firmware")
///   grid      -- a free-running periodic timer (ticks at phase + k*quantum):
///                a message is seen at the first tick at or after it arrives
///   interrupt -- the GSP raises an interrupt: each wait costs its latency
enum class VgpuPollMode { Tick, Grid, Interrupt };

/// A seeded distribution of a duration (drawn from the run's sim::Rng).
///   fixed:   always `mean`
///   uniform: uniform in [min, max]
///   normal:  mean, sd, clamped into [min, max] (max 0: no upper bound)
enum class VgpuDistKind { Fixed, Uniform, Normal };

inline const char* to_string(VgpuPollMode m) {
  return m == VgpuPollMode::Tick ? "tick" : m == VgpuPollMode::Grid ? "grid" : "interrupt";
}
inline std::optional<VgpuPollMode> vgpu_poll_mode_from_string(std::string_view s) {
  if (s == "tick") return VgpuPollMode::Tick;
  if (s == "grid") return VgpuPollMode::Grid;
  if (s == "interrupt") return VgpuPollMode::Interrupt;
  return std::nullopt;
}
inline std::vector<std::string> vgpu_poll_mode_names() { return {"tick", "grid", "interrupt"}; }

/// How the backend learns that a GR launch completed (VgpuLaunchConfig::completion):
///   poller    -- the completion reaches the host as a GSP message, noticed by the
///                backend's poller like an RPC reply (tick: one quantum after the job ends)
///   poll_loop -- the backend reads the completion itself every completion_poll
enum class VgpuCompletion { Poller, PollLoop };
inline const char* to_string(VgpuCompletion c) { return c == VgpuCompletion::Poller ? "poller" : "poll_loop"; }
inline std::optional<VgpuCompletion> vgpu_completion_from_string(std::string_view s) {
  if (s == "poller") return VgpuCompletion::Poller;
  if (s == "poll_loop") return VgpuCompletion::PollLoop;
  return std::nullopt;
}
inline std::vector<std::string> vgpu_completion_names() { return {"poller", "poll_loop"}; }

inline const char* to_string(VgpuDistKind k) {
  return k == VgpuDistKind::Fixed ? "fixed" : k == VgpuDistKind::Uniform ? "uniform" : "normal";
}
inline std::optional<VgpuDistKind> vgpu_dist_kind_from_string(std::string_view s) {
  if (s == "fixed") return VgpuDistKind::Fixed;
  if (s == "uniform") return VgpuDistKind::Uniform;
  if (s == "normal") return VgpuDistKind::Normal;
  return std::nullopt;
}
inline std::vector<std::string> vgpu_dist_kind_names() { return {"fixed", "uniform", "normal"}; }

struct VgpuDistribution {
  VgpuDistKind kind = VgpuDistKind::Normal;
  sim::Time mean = 17'500 * sim::kMicrosecond;
  sim::Time sd = 1'250 * sim::kMicrosecond;
  sim::Time min = 0;
  sim::Time max = 0;
};

/// Which graph nodes play which part (names of graph.nodes).
struct VgpuRoles {
  std::string guest = "guest_vcpu";        ///< where guest driver ops start (MMIO writes trap from here)
  std::string guest_memory = "guest_mem";  ///< guest RAM (source of H2D, sink of D2H)
  std::string host = "host_backend";       ///< the host backend worker (receives traps, talks to the GSP)
  std::string bounce = "host_bounce";      ///< host bounce windows the CE copies through
  std::string gsp = "gsp";                 ///< the GPU firmware processor
  std::string gr = "gr";                   ///< the compute engine
  std::string ce = "ce";                   ///< the copy engine
  std::string gpu_memory = "gpu_mem";      ///< GPU memory
};

struct VgpuPollConfig {
  VgpuPollMode mode = VgpuPollMode::Tick;
  sim::Time quantum = 5 * sim::kMillisecond;
  int waits_per_round_trip = 1;
  sim::Time interrupt_latency = 20 * sim::kMicrosecond;
  sim::Time phase = 0;  ///< grid mode: offset of the first tick
};

struct VgpuRpcConfig {
  VgpuDistribution firmware;                        ///< GSP service time of one RPC
  sim::Time host_cost = 20 * sim::kMicrosecond;     ///< backend CPU per RPC (marshal TX, parse reply)
  sim::Bytes tx_bytes = 256;                        ///< TX message moved host -> GSP
  sim::Bytes reply_bytes = 256;                     ///< reply moved GSP -> host
  sim::Time batch_entry = 500 * sim::kMicrosecond;  ///< extra firmware time per extra window in a batched RPC
};

struct VgpuPdeConfig {
  bool scratch_accepted = true;  ///< the scratch window install (once per guest context)
  /// One entry per guest window attempted per launch: "accept" or "refuse".
  std::vector<std::string> guest_windows = {"accept", "refuse", "refuse", "refuse", "refuse", "refuse", "refuse"};
  bool batching = false;        ///< what-if: all PDE forwards of a launch in one RPC
  bool cache_accepted = false;  ///< what-if: accepted guest windows are not forwarded again
};

struct VgpuLaunchConfig {
  sim::Time guest_driver = 10 * sim::kMicrosecond;    ///< guest driver work before the doorbell write traps
  sim::Time qmd_relocation = 60 * sim::kMicrosecond;  ///< QMD relocation / pre-write by the backend
  sim::Bytes param_shadow = 4 * sim::kKiB;            ///< kernel parameter shadow copy
  sim::Bytes program_shadow = 64 * sim::kKiB;         ///< program (code) shadow copy
  sim::Time shadow_cost = 30 * sim::kMicrosecond;     ///< backend CPU per shadow copy
  int bounce_pages_in = 100;
  int bounce_pages_out = 100;
  sim::Bytes page = 4 * sim::kKiB;
  sim::Time page_in_cost = 4 * sim::kMicrosecond;    ///< backend CPU per page copied in (map + copy setup)
  sim::Time page_out_cost = 500 * sim::kNanosecond;  ///< backend CPU per page copied out
  sim::Bytes doorbell_bytes = 8;
  sim::Time gr_first_setup = 7'700 * sim::kMicrosecond;  ///< GR channel/context bring-up, first launch of a context
  sim::Time gr_setup = 15 * sim::kMicrosecond;           ///< GPFIFO fetch + channel switch, later launches
  sim::Time kernel = 10 * sim::kMicrosecond;             ///< the launched kernel's execution on GR
  int kernel_cycles = 14'000;                            ///< clock64 cycles the kernel reports (P12)
  VgpuCompletion completion = VgpuCompletion::Poller;    ///< how the backend sees a GR completion
  sim::Time completion_poll = 10 * sim::kMicrosecond;    ///< poll_loop: backend completion-poll interval
  sim::Time give_up = 5'000 * sim::kMillisecond;         ///< completion poll gives up after this
  sim::Time msix = 30 * sim::kMicrosecond;               ///< MSI-X injection into the guest
};

struct VgpuCopyConfig {
  sim::Bytes window = 2 * sim::kMiB;             ///< bounce window cap: larger copies are split
  int windows = 2;                               ///< bounce windows in flight (pipelining)
  sim::Time setup = 40 * sim::kMicrosecond;      ///< backend CPU per copy (decode, window pick)
  sim::Time page_cost = 100 * sim::kNanosecond;  ///< backend CPU per page through a window
  sim::Time ce_setup = 5 * sim::kMicrosecond;    ///< CE method push + doorbell, per chunk
};

struct VgpuGuestOpsConfig {
  int init_rpcs = 5;                                 ///< RPCs of context creation (client, device, ...)
  sim::Time init_driver = 150 * sim::kMillisecond;   ///< guest driver init (same code as bare metal)
  int malloc_first_rpcs = 2;                         ///< RPCs of the first cudaMalloc (VA space + memory)
  int malloc_rpc_every = 8;                          ///< later mallocs forward one RPC every n-th call (pool growth)
  sim::Time malloc_driver = 15 * sim::kMicrosecond;  ///< guest driver work per malloc
};

/// The same workload with the forwarding path removed.
struct VgpuBareConfig {
  sim::Time init = 150 * sim::kMillisecond;  ///< process start -> device ready
  sim::Time malloc_first = 300 * sim::kMicrosecond;
  sim::Time malloc_steady = 15 * sim::kMicrosecond;
  sim::Time launch = 5 * sim::kMicrosecond;            ///< driver launch path up to the doorbell
  sim::Time gr_first_setup = 150 * sim::kMicrosecond;  ///< first launch of a context, native
  sim::Time interrupt = 3 * sim::kMicrosecond;         ///< completion interrupt to the waiting thread
  sim::Time copy_setup = 8 * sim::kMicrosecond;        ///< driver cost per copy call (pinned)
};

struct VgpuWorkloadConfig {
  int warm_launches = 100;
  int burst = 100;
  int mallocs = 16;
  sim::Bytes copy_min = 4 * sim::kKiB;
  sim::Bytes copy_max = 16 * sim::kMiB;
  int repetitions = 20;  ///< seeded repetitions for p50/p95 and P11
};

struct VgpuConfig {
  int guests = 1;
  sim::Time jiffy = sim::kMillisecond;  ///< host clock granularity of elapsed_ms (HZ=1000)
  VgpuRoles roles;
  VgpuPollConfig poll;
  VgpuRpcConfig rpc;
  VgpuPdeConfig pde;
  VgpuLaunchConfig launch;
  VgpuCopyConfig copy;
  VgpuGuestOpsConfig ops;
  VgpuBareConfig bare;
  VgpuWorkloadConfig workload;
};

}  // namespace kernbench::platforms::vgpu
