// config_section.hpp -- the `gpu:` section (GpuConfig, config.hpp):
// registered into a config::Schema, read back from a loaded Config.
#pragma once

#include "kernels/gpu/config.hpp"
#include "topology/config/config.hpp"

namespace kernbench::config {
class Schema;
}  // namespace kernbench::config

namespace kernbench::kernels::gpu {

/// Adds the root key `gpu`.
void add_config_section(config::Schema& schema);

/// The `gpu:` section of a loaded config (its defaults when absent).
inline const GpuConfig& config_of(const topology::Config& c) { return c.section<GpuConfig>(); }

}  // namespace kernbench::kernels::gpu
