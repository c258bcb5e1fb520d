// kernbench.hpp -- the top of the C++ library: the whole config schema,
// composed from every owner's sections, and loading against it.
//
// Lower layers know only their own sections (topology: system, graph,
// fabric; runtime: pe, energy; platforms: k200, vgpu); this is the one
// place that knows them all, so a file is checked strictly, every section,
// when it is loaded. Bindings, tests and tools load configs through here.
#pragma once

#include <string>
#include <vector>

#include "config/yaml_tree.hpp"
#include "topology/config/config.hpp"

namespace kernbench {

namespace config {
class Schema;
}  // namespace config

/// Every section of a config (built once, on first use).
const config::Schema& schema();

/// Loads `path` (following `include:`), applies `overrides`, types and checks it.
/// Includes may read `path`'s folder tree and the folders in `include_dirs`.
topology::Config load_config(const std::string& path, const std::vector<config::Override>& overrides = {},
                             const std::vector<std::string>& include_dirs = {});

/// Same, from YAML text; `source` names it in messages (and anchors relative includes).
topology::Config parse_config(const std::string& yaml_text, const std::string& source,
                              const std::vector<config::Override>& overrides = {},
                              const std::vector<std::string>& include_dirs = {});

/// The schema (sections, keys, types, units, defaults, docs) as JSON text.
std::string config_schema_json();

}  // namespace kernbench
