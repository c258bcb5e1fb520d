// config_section.hpp -- the `k200:` section (K200Config, config.hpp):
// registered into a config::Schema, read back from a loaded Config.
#pragma once

#include "platforms/k200/config.hpp"
#include "topology/config/config.hpp"

namespace kernbench::config {
class Schema;
}  // namespace kernbench::config

namespace kernbench::platforms::k200 {

/// Adds the root key `k200` and its sections.
void add_config_section(config::Schema& schema);

/// The `k200:` section of a loaded config, or nullptr when it has none.
inline const K200Config* config_of(const topology::Config& c) { return c.find<K200Config>(); }

}  // namespace kernbench::platforms::k200
