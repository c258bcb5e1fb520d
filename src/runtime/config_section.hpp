// config_section.hpp -- the runtime's config sections: `pe:` (with `pe.hbm`)
// and `energy:`, registered into a config::Schema and read back from a
// loaded Config.
#pragma once

#include "runtime/energy_config.hpp"
#include "runtime/hbm_config.hpp"
#include "runtime/pe_config.hpp"
#include "topology/config/config.hpp"

namespace kernbench::config {
class Schema;
}  // namespace kernbench::config

namespace kernbench::runtime {

/// Adds the root key `pe` and its sections (gemm, ipcq, hbm).
void add_pe_section(config::Schema& schema);
/// Adds the root key `energy` and its sections.
void add_energy_section(config::Schema& schema);

/// The `pe:` section (its defaults when the file has none).
inline const PeConfig& pe_config(const topology::Config& c) { return c.section<PeConfig>(); }
inline PeConfig& pe_config(topology::Config& c) { return c.section<PeConfig>(); }
/// The `energy:` section (its defaults when the file has none).
inline const EnergyConfig& energy_config(const topology::Config& c) { return c.section<EnergyConfig>(); }
inline EnergyConfig& energy_config(topology::Config& c) { return c.section<EnergyConfig>(); }

}  // namespace kernbench::runtime
