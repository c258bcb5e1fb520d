// params.cpp -- role lookup, distribution draws, jiffies.
#include "platforms/vgpu/params.hpp"
#include "platforms/vgpu/config_section.hpp"

#include <cmath>

#include "sim/errors.hpp"

namespace kernbench::platforms::vgpu {

namespace {

NodeId role(const topology::System& system, const std::string& role_name, const std::string& node) {
  if (const auto id = system.machine().find(node)) return *id;
  std::string known;
  for (const auto& n : system.machine().nodes()) known += (known.empty() ? "" : ", ") + n.name;
  throw ConfigError(system.config().source + ": vgpu.roles." + role_name + ": no node named \"" + node +
                    "\" in graph.nodes (nodes: " + known + ")");
}

}  // namespace

VgpuParams resolve_params(const topology::System& system) {
  const auto& c = system.config();
  const VgpuConfig* vgpu = config_of(c);
  if (!vgpu) throw ConfigError(c.source + ": the vGPU model needs a `vgpu:` section (see configs/vgpu.yaml)");
  VgpuParams p;
  p.cfg = *vgpu;
  const auto& r = p.cfg.roles;
  p.guest = role(system, "guest", r.guest);
  p.guest_memory = role(system, "guest_memory", r.guest_memory);
  p.host = role(system, "host", r.host);
  p.bounce = role(system, "bounce", r.bounce);
  p.gsp = role(system, "gsp", r.gsp);
  p.gr = role(system, "gr", r.gr);
  p.ce = role(system, "ce", r.ce);
  p.gpu_memory = role(system, "gpu_memory", r.gpu_memory);
  return p;
}

Time draw(const VgpuDistribution& d, sim::Rng& rng) {
  switch (d.kind) {
    case VgpuDistKind::Fixed: return d.mean;
    case VgpuDistKind::Uniform:
      return d.min + static_cast<Time>(rng.uniform() * static_cast<double>(d.max - d.min) + 0.5);
    case VgpuDistKind::Normal: {
      // Box-Muller with two draws always (the stream stays aligned run to run).
      const double u1 = rng.uniform(), u2 = rng.uniform();
      const double z = std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
      double x = static_cast<double>(d.mean) + z * static_cast<double>(d.sd);
      x = std::max(x, static_cast<double>(d.min));
      if (d.max > 0) x = std::min(x, static_cast<double>(d.max));
      return static_cast<Time>(std::llround(x));
    }
  }
  return d.mean;
}

std::int64_t jiffies_between(Time start, Time end, Time jiffy) {
  if (jiffy <= 0) throw UsageError("jiffies_between: jiffy must be > 0");
  return end / jiffy - start / jiffy;  // times are >= 0: integer division is floor
}

}  // namespace kernbench::platforms::vgpu
