// loader.hpp -- YAML -> Config, strictly, against a schema.
//
// Every error is a ConfigError whose message starts with the file and the
// YAML path, e.g.
//   configs/topology.yaml: system.sips.w: expected a positive integer, got "two"
// Overrides (`--set path=value`) are applied to the YAML tree before it is
// typed, so they are checked against the very same schema. The schema is
// composed by the library's top (kernbench.hpp: kernbench::load_config), as
// topology knows only its own sections; add_config_sections() adds them.
#pragma once

#include <string>
#include <vector>

#include "config/quantity.hpp"
#include "config/yaml_tree.hpp"
#include "topology/config/config.hpp"

namespace kernbench::config {
class Schema;
}  // namespace kernbench::config

namespace kernbench::topology {

using config::Override;

// Quantity text (src/config/quantity.hpp), under their old names here.
using config::format_bandwidth;
using config::format_bytes;
using config::format_time;
using config::parse_bandwidth;
using config::parse_bytes;
using config::parse_frequency_hz;
using config::parse_time;

/// Adds topology's sections to `schema`: the root's doc and structure
/// (exactly one of system and graph), include, system, nodes, links, graph
/// and fabric.
void add_config_sections(config::Schema& schema);

/// Loads `path` (following `include:`), applies `overrides`, types and checks
/// it against `schema` (kernbench::schema() for the whole config). Includes
/// may read the file's folder tree and `include_dirs` (config/yaml_tree.hpp).
Config load_config(const config::Schema& schema, const std::string& path, const std::vector<Override>& overrides = {},
                   const std::vector<std::string>& include_dirs = {});

/// Same, from YAML text; `source` names it in messages (and anchors relative includes).
Config parse_config(const config::Schema& schema, const std::string& yaml_text, const std::string& source,
                    const std::vector<Override>& overrides = {}, const std::vector<std::string>& include_dirs = {});

}  // namespace kernbench::topology
