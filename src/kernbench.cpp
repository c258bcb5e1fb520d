// kernbench.cpp -- see kernbench.hpp.
#include "kernbench.hpp"

#include "ccl/config_section.hpp"
#include "config/schema.hpp"
#include "kernels/gpu/config_section.hpp"
#include "runtime/config_section.hpp"
#include "topology/config/loader.hpp"

namespace kernbench {

// Every platform of platforms.def registers its section with add_config_section (in its folder).
#define KERNBENCH_PLATFORM(folder)                 \
  namespace platforms::folder {                    \
  void add_config_section(config::Schema& schema); \
  }
#include "platforms/platforms.def"
#undef KERNBENCH_PLATFORM

namespace {

config::Schema make_schema() {
  config::Schema s;
  // The order the root's sections are read in: an error in an earlier one
  // is the one reported.
  topology::add_config_sections(s);  // include, cluster, system, nodes, links, graph, fabric
  runtime::add_pe_section(s);
  runtime::add_energy_section(s);
  kernels::gpu::add_config_section(s);
  ccl::add_config_section(s);
  // The platforms, each under the root key named as its folder (platforms.def).
  std::vector<std::string> order = {"include", "system", "nodes", "links", "graph",
                                    "cluster", "fabric", "pe",    "gpu",   "nccl"};
#define KERNBENCH_PLATFORM(folder)          \
  platforms::folder::add_config_section(s); \
  order.emplace_back(#folder);
#include "platforms/platforms.def"
#undef KERNBENCH_PLATFORM
  order.emplace_back("energy");
  // The order they are listed in (messages, `kernbench schema`, docs/config-reference.md).
  s.root().list_keys(std::move(order));
  return s;
}

}  // namespace

const config::Schema& schema() {
  static const config::Schema s = make_schema();
  return s;
}

topology::Config load_config(const std::string& path, const std::vector<config::Override>& overrides,
                             const std::vector<std::string>& include_dirs) {
  return topology::load_config(schema(), path, overrides, include_dirs);
}

topology::Config parse_config(const std::string& yaml_text, const std::string& source,
                              const std::vector<config::Override>& overrides,
                              const std::vector<std::string>& include_dirs) {
  return topology::parse_config(schema(), yaml_text, source, overrides, include_dirs);
}

std::string config_schema_json() { return config::schema_json(schema()); }

}  // namespace kernbench
