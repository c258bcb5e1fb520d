// spec.cpp -- see spec.hpp.
#include "kernels/gpu/spec.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/gpu/config_section.hpp"
#include "runtime/config_section.hpp"
#include "runtime/engine_timing.hpp"
#include "sim/errors.hpp"
#include "topology/fabric/fabric.hpp"

namespace kernbench::kernels::gpu {

const char* to_string(Launch l) { return l == Launch::Host ? "host" : "graph"; }

int GpuSpec::macs(Precision p) const {
  const int m = runtime::gemm_macs_per_cycle(*pe, p);
  if (m <= 0)
    throw ConfigError(name + ": pe.gemm." + topology::to_string(p) + " is 0: this GPU has no " +
                      topology::to_string(p) + " mode");
  return m;
}

sim::Bandwidth GpuSpec::scaled(double fraction) const {
  return sim::Bandwidth{std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::floor(static_cast<double>(memory_bw.bytes_per_s) * fraction)))};
}

GpuSpec gpu_spec(topology::System& system, NodeId agent) {
  const topology::Machine& m = system.machine();
  if (agent >= m.num_nodes()) throw UsageError("gpu kernel: no node " + std::to_string(agent));
  GpuSpec s;
  s.name = m.node(agent).name;
  if (m.node(agent).kind != topology::NodeKind::Pe)
    throw UsageError("gpu kernel on " + s.name + ": not a PE (kind " + topology::to_string(m.node(agent).kind) + ")");
  const topology::Config& c = system.config();
  s.cfg = config_of(c);
  if (s.cfg.sms <= 0)
    throw ConfigError(c.source + ": gpu.sms: 0: the machine declares no SM array, so " + s.name +
                      " cannot run a GPU kernel (set pe.target: gpu and the gpu: section; the NVIDIA presets "
                      "include configs/machines/nvidia-gpu.yaml)");
  s.agent = agent;
  s.memory = m.memory(agent, "a GPU kernel on " + s.name);
  s.sms = s.cfg.sms;
  s.pe = &runtime::pe_config(c);
  s.clock_hz = static_cast<double>(s.pe->clock_hz);
  s.sustained_hz = s.clock_hz * s.cfg.sustained_clock_ratio;
  s.memory_capacity = s.pe->hbm.capacity;
  // The memory rate: the bottleneck of the route to the memory node, every lane of each hop.
  const topology::Route& r = system.fabric().router().route(agent, s.memory);
  std::int64_t bw = 0;
  for (const topology::Hop& h : r.hop) {
    const std::int64_t hop = h.bandwidth.bytes_per_s * h.connections;
    bw = bw == 0 ? hop : std::min(bw, hop);
  }
  if (bw <= 0) throw TopologyError(s.name + ": no bandwidth on the route to its memory " + m.node(s.memory).name);
  s.memory_bw = sim::Bandwidth{bw};
  return s;
}

}  // namespace kernbench::kernels::gpu
