// params.hpp -- the vGPU model's parameters, resolved against a System.
//
// VgpuParams is the `vgpu:` section of the config (topology/vgpu_config.hpp)
// plus the graph node ids of its roles, checked once: a role naming a node
// the graph lacks is a ConfigError that names the role, the node and the
// nodes the graph has. draw() samples a configured duration distribution
// from the run's seeded sim::Rng (the only randomness of the model).
#pragma once

#include <string>

#include "sim/rng.hpp"
#include "topology/system.hpp"
#include "platforms/vgpu/config.hpp"

namespace kernbench::platforms::vgpu {

using sim::Bytes;
using sim::Time;
using topology::NodeId;

struct VgpuParams {
  VgpuConfig cfg;
  NodeId guest = 0;
  NodeId guest_memory = 0;
  NodeId host = 0;
  NodeId bounce = 0;
  NodeId gsp = 0;
  NodeId gr = 0;
  NodeId ce = 0;
  NodeId gpu_memory = 0;
};

/// The parameters of `system` (its config must have a `vgpu:` section).
VgpuParams resolve_params(const topology::System& system);

/// One sample of `d` (>= 0), drawn from `rng`.
Time draw(const VgpuDistribution& d, sim::Rng& rng);

/// Host jiffies between two times: floor(end / jiffy) - floor(start / jiffy),
/// which is how a HZ=1000 kernel reports elapsed_ms.
std::int64_t jiffies_between(Time start, Time end, Time jiffy);

}  // namespace kernbench::platforms::vgpu
