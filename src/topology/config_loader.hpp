// config_loader.hpp -- YAML -> Config, strictly.
//
// Every error is a ConfigError whose message starts with the file and the
// YAML path, e.g.
//   configs/topology.yaml: system.sips.w: expected a positive integer, got "two"
// Overrides (`--set path=value`) are applied to the YAML tree before it is
// typed, so they are checked against the very same schema.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "topology/config.hpp"

namespace kernbench::topology {

/// One `--set` override: a dotted YAML path (`system.sips.w`,
/// `graph.edges.3.latency` -- list items by index) and a YAML scalar value.
struct Override {
  std::string path;
  std::string value;
};

/// Loads `path` (following `include:`), applies `overrides`, types and checks it.
Config load_config(const std::string& path, const std::vector<Override>& overrides = {});

/// Same, from YAML text; `source` names it in messages (and anchors relative includes).
Config parse_config(const std::string& yaml_text, const std::string& source,
                    const std::vector<Override>& overrides = {});

// Strict quantity parsing ("<number> <unit>"); `where` prefixes errors.
// Units: time ps/ns/us/ms/s; size B/KB/MB/GB (1e3) and KiB/MiB/GiB (2^10);
// bandwidth B/s, KB/s, MB/s, GB/s, TB/s, KiB/s..GiB/s, and bits b/s..Tb/s,
// Gbps; frequency Hz/kHz/MHz/GHz. A missing or unknown unit is an error.
Time parse_time(const std::string& text, const std::string& where);
Bytes parse_bytes(const std::string& text, const std::string& where);
Bandwidth parse_bandwidth(const std::string& text, const std::string& where);
double parse_frequency_hz(const std::string& text, const std::string& where);

// The inverse, for messages and schema defaults: the largest unit that
// divides the value exactly ("4 KiB", "1500 ps", "256 GB/s"); parsing the
// result gives the value back.
std::string format_time(Time t);
std::string format_bytes(Bytes b);
std::string format_bandwidth(Bandwidth bw);

/// The schema (sections, keys, types, units, defaults, docs) as JSON text,
/// defined once here so Python can validate overrides and document configs.
std::string config_schema_json();

}  // namespace kernbench::topology
