// workload.cpp -- launch runs and the scripted perf workload.
#include "platforms/vgpu/workload.hpp"

#include <algorithm>

#include "sim/errors.hpp"

namespace kernbench::platforms::vgpu {

namespace {

sim::Process guest_launches(VgpuModel& m, int g, int n, std::vector<bool> hang, std::vector<LaunchResult>& out) {
  for (int i = 0; i < n; ++i) out.push_back(co_await m.launch(g, !hang[static_cast<std::size_t>(i)]));
}

sim::Process workload(VgpuModel& m, WorkloadResult& w) {
  const auto& c = m.params().cfg;
  const int g = 0;
  w.bare = m.bare();
  w.init = co_await m.init(g);
  for (int i = 0; i < c.workload.mallocs; ++i) w.mallocs.push_back(co_await m.malloc(g));
  w.first = co_await m.launch(g);
  w.msix = w.first.msix;
  for (int i = 0; i < c.workload.warm_launches; ++i) {
    const LaunchResult r = co_await m.launch(g);
    w.warm.push_back(r.guest_latency());
    w.kernel = r.kernel;
  }
  w.kernel_cycles = c.launch.kernel_cycles;
  // The burst: launches pushed back to back, one sync at the end.
  const Time b0 = m.sim().now();
  std::int32_t last = -1;
  for (int i = 0; i < c.workload.burst; ++i) {
    const bool final = i + 1 == c.workload.burst;
    const LaunchResult r = co_await m.launch(g, true, final && !m.bare());
    last = r.tag;
  }
  if (m.bare() && last >= 0) {
    co_await m.wait_job(last);
    m.follow(g, last);
    co_await m.cause_delay(m.chain(g), c.bare.interrupt, g, last, "interrupt", Resource::GuestCpu);
  }
  w.burst = m.sim().now() - b0;
  w.burst_launches = c.workload.burst;
  for (Bytes b = c.workload.copy_min; b <= c.workload.copy_max; b *= 2) {
    w.h2d.push_back(co_await m.copy(g, CopyDir::H2D, b));
    w.d2h.push_back(co_await m.copy(g, CopyDir::D2H, b));
  }
}

}  // namespace

LaunchRun run_launches(topology::System& system, int per_guest, int guests, const std::vector<int>& hang, bool bare) {
  if (per_guest < 1)
    throw UsageError("vgpu run_launches: launches per guest must be >= 1, got " + std::to_string(per_guest));
  VgpuModel m(system, bare);
  const int configured = m.params().cfg.guests;
  if (guests == 0) guests = configured;
  if (guests < 1 || guests > configured)
    throw UsageError("vgpu run_launches: " + std::to_string(guests) + " guests asked, the config has vgpu.guests = " +
                     std::to_string(configured) + " (raise it with --set vgpu.guests=N)");
  std::vector<bool> hung(static_cast<std::size_t>(per_guest), false);
  for (int h : hang) {
    if (h < 0 || h >= per_guest)
      throw UsageError("vgpu run_launches: hang index " + std::to_string(h) + " is outside 0.." +
                       std::to_string(per_guest - 1));
    hung[static_cast<std::size_t>(h)] = true;
  }
  const Time start = system.sim().now();
  std::vector<std::vector<LaunchResult>> out(static_cast<std::size_t>(guests));
  for (int g = 0; g < guests; ++g)
    system.sim().spawn("vgpu.guest" + std::to_string(g),
                       guest_launches(m, g, per_guest, hung, out[static_cast<std::size_t>(g)]));
  system.run();
  LaunchRun run;
  for (auto& v : out)
    for (auto& r : v) run.launches.push_back(std::move(r));
  run.poll_ticks = m.poller().ticks();
  run.gsp = m.gsp().stats();
  run.critical = m.critical_path(bare ? "vGPU launches (bare)" : "vGPU launches", start);
  return run;
}

WorkloadResult run_workload(topology::System& system, bool bare) {
  VgpuModel m(system, bare);
  WorkloadResult w;
  const Time start = system.sim().now();
  system.sim().spawn(bare ? "vgpu.bare_workload" : "vgpu.guest_workload", workload(m, w));
  system.run();
  w.critical = m.critical_path(bare ? "vGPU workload (bare)" : "vGPU workload", start);
  return w;
}

}  // namespace kernbench::platforms::vgpu
