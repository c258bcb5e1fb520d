// kernbench.cpp -- see kernbench.hpp. The order below is the order of the
// root's keys in the schema (and in docs/config-reference.md).
#include "kernbench.hpp"

#include "platforms/k200/config_section.hpp"
#include "platforms/vgpu/config_section.hpp"
#include "runtime/config_section.hpp"

namespace kernbench {
namespace {

config::Schema make_schema() {
  config::Schema s;
  topology::add_config_sections(s);  // include, system, nodes, links, graph, fabric
  runtime::add_pe_section(s);
  platforms::vgpu::add_config_section(s);
  platforms::k200::add_config_section(s);
  runtime::add_energy_section(s);
  return s;
}

}  // namespace

const config::Schema& schema() {
  static const config::Schema s = make_schema();
  return s;
}

topology::Config load_config(const std::string& path, const std::vector<config::Override>& overrides) {
  return topology::load_config(schema(), path, overrides);
}

topology::Config parse_config(const std::string& yaml_text, const std::string& source,
                              const std::vector<config::Override>& overrides) {
  return topology::parse_config(schema(), yaml_text, source, overrides);
}

std::string config_schema_json() { return config::schema_json(schema()); }

}  // namespace kernbench
