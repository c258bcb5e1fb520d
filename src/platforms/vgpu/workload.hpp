// workload.hpp -- runs of the vGPU model: launches of one or more guests,
// and the scripted perf workload whose metrics (P1-P12 of the reference)
// are compared guest vs bare metal.
//
// Each function builds a VgpuModel on `system` (whose config has a `vgpu:`
// section), spawns the guest processes, runs the simulation to the end and
// returns what happened; the op log of the run stays in system.sim().
#pragma once

#include <vector>

#include "platforms/vgpu/model.hpp"

namespace kernbench::platforms::vgpu {

struct LaunchRun {
  std::vector<LaunchResult> launches;  ///< guest-major: guest 0's launches, then guest 1's...
  std::uint64_t poll_ticks = 0;        ///< ticks of the grid poller (grid mode)
  sim::ServerStats gsp;                ///< the GSP queue over the run
  runtime::CriticalPath critical;      ///< the run's exact critical path (its recorded causes)
};

/// `per_guest` launches by each of `guests` guests (0: vgpu.guests), all
/// starting at t = 0, each launch synchronised before the next. Launch
/// indices listed in `hang` (per guest, 0-based) never complete.
LaunchRun run_launches(topology::System& system, int per_guest, int guests = 0, const std::vector<int>& hang = {},
                       bool bare = false);

/// The scripted workload of one guest (or bare metal): init, mallocs, first
/// launch, warm synchronised launches, a burst with one sync, the copy
/// sweep H2D and D2H from copy_min to copy_max (x2 steps).
struct WorkloadResult {
  bool bare = false;
  Time init = 0;              ///< P1
  std::vector<Time> mallocs;  ///< P2: [0] first, the rest steady
  LaunchResult first;         ///< P3 (guest_latency), P3h (elapsed_ms)
  std::vector<Time> warm;     ///< P4: guest-visible latency of each warm launch
  Time burst = 0;             ///< P10: first push -> sync returns
  int burst_launches = 0;
  std::vector<CopyResult> h2d, d2h;  ///< P7/P8 (P5 from the smallest copy)
  Time msix = 0;                     ///< P6: completion interrupt of the first launch
  Time kernel = 0;                   ///< P9: the kernel's time on GR (warm launch)
  int kernel_cycles = 0;             ///< P12
  runtime::CriticalPath critical;    ///< the run's exact critical path (its recorded causes)
};

WorkloadResult run_workload(topology::System& system, bool bare);

}  // namespace kernbench::platforms::vgpu
