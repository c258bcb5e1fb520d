// bind.cpp -- the vGPU platform's bindings: the virtualised-GPU forwarding path from Python.
//
// vgpu_launches() and vgpu_workload() run the C++ model on a System loaded
// from a config with a `vgpu:` section (GIL released) and return plain
// dicts: times in ps, the op log as columns with its kind and resource
// names. kernbench.vgpu (python/kernbench/vgpu.py) builds the tables,
// ratios and percentiles on top.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "critical_path_dict.hpp"
#include "platforms/vgpu/config_section.hpp"
#include "platforms/vgpu/workload.hpp"
#include "sim/errors.hpp"

namespace py = pybind11;
using namespace kernbench::platforms::vgpu;
using kernbench::topology::System;

namespace kernbench::bindings {
namespace {

py::dict launch_dict(const LaunchResult& r) {
  py::dict d;
  d["guest"] = r.guest;
  d["index"] = r.index;
  d["tag"] = r.tag;
  d["first_of_context"] = r.first_of_context;
  d["timed_out"] = r.timed_out;
  d["error"] = r.error;
  d["issue_ps"] = r.issue;
  d["start_ps"] = r.start;
  d["end_ps"] = r.end;
  d["guest_done_ps"] = r.guest_done;
  d["host_ps"] = r.host();
  d["guest_latency_ps"] = r.guest_latency();
  d["elapsed_ms"] = r.elapsed_ms;
  d["forwards"] = r.forwards;
  d["accepted"] = r.accepted;
  d["refused"] = r.refused;
  d["rpcs"] = r.rpcs;
  d["poll_waits"] = r.poll_waits;
  d["forwarding_ps"] = r.forwarding;
  d["round_trips_ps"] = r.round_trips;
  d["gsp_wait_ps"] = r.gsp_wait;
  d["firmware_ps"] = r.firmware;
  d["poll_wait_ps"] = r.poll_wait;
  d["copy_in_ps"] = r.copy_in;
  d["doorbell_to_completion_ps"] = r.doorbell_to_completion;
  d["completion_wait_ps"] = r.completion_wait;
  d["kernel_ps"] = r.kernel;
  d["copy_out_ps"] = r.copy_out;
  d["msix_ps"] = r.msix;
  return d;
}

py::dict copy_dict(const CopyResult& r) {
  py::dict d;
  d["dir"] = r.dir == CopyDir::H2D ? "h2d" : "d2h";
  d["bytes"] = r.bytes;
  d["chunks"] = r.chunks;
  d["issue_ps"] = r.issue;
  d["push_latency_ps"] = r.first_ce_start - r.issue;
  d["latency_ps"] = r.latency();
  d["bandwidth_Bps"] = r.bandwidth();
  return d;
}

py::dict op_log_dict(System& s) {
  const auto& log = s.sim().op_log();
  py::dict d;
  d["op"] = log.op();
  d["agent"] = log.agent();
  d["resource"] = log.resource();
  d["kind"] = log.kind();
  d["tag"] = log.tag();
  d["issue"] = log.issue();
  d["start"] = log.start();
  d["end"] = log.end();
  d["bytes"] = log.bytes();
  d["work"] = log.work();
  d["kind_names"] = log.kind_names();
  d["resource_names"] = VgpuModel::resource_names();
  return d;
}

}  // namespace

void bind_vgpu(py::module_& m) {
  m.def(
      "vgpu_launches",
      [](System& s, std::int64_t per_guest, std::int64_t guests, const std::vector<std::int64_t>& hang, bool bare) {
        if (per_guest < 1 || per_guest > 100'000)
          throw UsageError("vgpu_launches: launches per guest must be in 1..100000, got " + std::to_string(per_guest));
        if (guests < 0 || guests > 1024)
          throw UsageError("vgpu_launches: guests must be in 0..1024 (0: vgpu.guests), got " + std::to_string(guests));
        std::vector<int> h;
        for (auto x : hang) {
          if (x < 0 || x >= per_guest)
            throw UsageError("vgpu_launches: hang index " + std::to_string(x) + " is outside 0.." +
                             std::to_string(per_guest - 1));
          h.push_back(static_cast<int>(x));
        }
        LaunchRun run;
        Using use(s);  // one user of the System at a time
        use.run([&] { run = run_launches(s, static_cast<int>(per_guest), static_cast<int>(guests), h, bare); });
        py::list launches;
        for (const auto& r : run.launches) launches.append(launch_dict(r));
        py::dict d;
        d["launches"] = launches;
        d["poll_ticks"] = run.poll_ticks;
        d["gsp_grants"] = run.gsp.grants;
        d["gsp_waited"] = run.gsp.waited;
        d["gsp_total_wait_ps"] = run.gsp.total_wait;
        d["gsp_max_wait_ps"] = run.gsp.max_wait;
        d["gsp_busy_ps"] = run.gsp.busy_unit_time;
        d["ops"] = op_log_dict(s);
        d["critical_path"] = critical_path_dict(run.critical);
        return d;
      },
      py::arg("system"), py::arg("launches_per_guest") = 1, py::arg("guests") = 0,
      py::arg("hang") = std::vector<std::int64_t>{}, py::arg("bare") = false,
      "Run launches_per_guest synchronised GR launches in each of `guests` guests (0: vgpu.guests), all starting "
      "at t=0; launch indices in `hang` never complete. Returns the decomposed launches, the op log and the run's "
      "exact critical path.");

  m.def(
      "vgpu_workload",
      [](System& s, bool bare) {
        WorkloadResult w;
        Using use(s);  // one user of the System at a time
        use.run([&] { w = run_workload(s, bare); });
        py::dict d;
        d["bare"] = w.bare;
        d["init_ps"] = w.init;
        d["mallocs_ps"] = w.mallocs;
        d["first"] = launch_dict(w.first);
        d["warm_ps"] = w.warm;
        d["burst_ps"] = w.burst;
        d["burst_launches"] = w.burst_launches;
        py::list h2d, d2h;
        for (const auto& c : w.h2d) h2d.append(copy_dict(c));
        for (const auto& c : w.d2h) d2h.append(copy_dict(c));
        d["h2d"] = h2d;
        d["d2h"] = d2h;
        d["msix_ps"] = w.msix;
        d["kernel_ps"] = w.kernel;
        d["kernel_cycles"] = w.kernel_cycles;
        const platforms::vgpu::VgpuConfig* vc = platforms::vgpu::config_of(s.config());
        d["repetitions"] = vc ? vc->workload.repetitions : 0;
        d["critical_path"] = critical_path_dict(w.critical);
        return d;
      },
      py::arg("system"), py::arg("bare") = false,
      "Run the scripted perf workload (init, mallocs, first launch, warm launches, burst, copy sweep) of one "
      "guest, or of bare metal; returns the raw measurements (ps) the P1-P12 metrics are computed from.");

  m.def("vgpu_kind_names", &VgpuModel::kind_names, "Op kinds the vGPU model records, in code order.");
}

}  // namespace kernbench::bindings
