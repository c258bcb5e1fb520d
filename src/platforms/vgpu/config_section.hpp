// config_section.hpp -- the `vgpu:` section (VgpuConfig, config.hpp):
// registered into a config::Schema, read back from a loaded Config.
#pragma once

#include "platforms/vgpu/config.hpp"
#include "topology/config/config.hpp"

namespace kernbench::config {
class Schema;
}  // namespace kernbench::config

namespace kernbench::platforms::vgpu {

/// Adds the root key `vgpu` and its sections.
void add_config_section(config::Schema& schema);

/// The `vgpu:` section of a loaded config, or nullptr when it has none.
inline const VgpuConfig* config_of(const topology::Config& c) { return c.find<VgpuConfig>(); }

}  // namespace kernbench::platforms::vgpu
