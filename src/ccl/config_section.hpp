// config_section.hpp -- the `nccl:` section (NcclConfig, nccl.hpp):
// registered into a config::Schema, read back from a loaded Config.
#pragma once

#include "ccl/nccl.hpp"
#include "topology/config/config.hpp"

namespace kernbench::config {
class Schema;
}  // namespace kernbench::config

namespace kernbench::ccl {

/// Adds the root key `nccl`.
void add_config_section(config::Schema& schema);

/// The `nccl:` section of a loaded config (its defaults when absent).
inline const NcclConfig& nccl_config(const topology::Config& c) { return c.section<NcclConfig>(); }

}  // namespace kernbench::ccl
