// loader.cpp -- YAML tree -> Config: the file is read into a tree
// (config/yaml_tree.hpp), the overrides applied, a cluster expanded, an
// explicit graph's link classes merged into its edges, and the root map read
// against the schema (config/reader.hpp), every owner's section by its own
// bindings and hooks.
#include "topology/config/loader.hpp"

#include "config/provenance.hpp"
#include "config/reader.hpp"
#include "topology/config/cluster.hpp"
#include "topology/config/explicit_graph_detail.hpp"

namespace kernbench::topology {
namespace {

Config load(const config::Schema& schema, config::Loader& l, config::Value root) {
  l.apply_overrides(root);
  ClusterInfo cluster;
  const bool is_cluster = expand_cluster(schema, l, root, cluster);  // cluster: -> graph: (cluster.hpp)
  // Before a graph's links.<class> values are copied into its edges: a class's provenance is listed once.
  std::vector<config::ProvenanceEntry> provenance = config::collect_provenance(l, root);
  detail::apply_link_classes(schema, l, root);  // a graph's links.<class> into its edges
  const config::MapReader top(l, root, "", schema.root());
  Config c;
  c.source = l.source();
  if (is_cluster) c.cluster = std::make_shared<const ClusterInfo>(std::move(cluster));
  top.read(c);
  c.provenance = std::move(provenance);
  return c;
}

}  // namespace

Config load_config(const config::Schema& schema, const std::string& path, const std::vector<Override>& overrides,
                   const std::vector<std::string>& include_dirs) {
  config::Loader l(path, overrides, include_dirs);
  return load(schema, l, l.load_root_file(path));
}

Config parse_config(const config::Schema& schema, const std::string& yaml_text, const std::string& source,
                    const std::vector<Override>& overrides, const std::vector<std::string>& include_dirs) {
  config::Loader l(source, overrides, include_dirs);
  return load(schema, l, l.load_text(yaml_text, source));
}

}  // namespace kernbench::topology
