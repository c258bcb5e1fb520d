// explicit_graph_detail.hpp -- the parts of graph: that relate nodes (layout, pinned routes), read by
// section.cpp's read_graph and defined in explicit_graph.cpp; the keys of one link and an explicit graph's
// links.<class> (link_classes.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/section.hpp"
#include "config/yaml_tree.hpp"
#include "topology/config/config.hpp"

namespace kernbench::topology::detail {

/// graph.layout: ranks, grid, packages and groups of the declared PEs.
void read_layout(const config::MapReader& r, ExplicitGraphConfig& g,
                 const std::unordered_map<std::string, std::size_t>& index, const std::vector<std::string>& names);
/// graph.routes: pinned paths, each a chain of existing edges from src to dst.
void read_routes(const config::MapReader& r, ExplicitGraphConfig& g,
                 const std::unordered_map<std::string, std::size_t>& index, const std::vector<std::string>& names,
                 const std::vector<std::vector<std::size_t>>& adjacent);

/// The keys of one link (bandwidth, latency, connections, vcs, buffer) into `p`: a class of links: or an edge.
void read_link(const config::MapReader& r, LinkParams& p);
/// An explicit graph's `links:` (root: its tree, overrides applied, a cluster expanded): checks each class
/// (its keys; an edge of the graph names it), merges its values into the edges of the class (an edge's own
/// value wins, a --set of the class wins over it) and takes links: out of the tree. Nothing for a system.
/// `edges_name` names the edges in messages (a cluster's: its box's).
void apply_link_classes(const config::Schema& schema, const config::Loader& l, config::Value& root,
                        const std::string& edges_name = "graph.edges");

}  // namespace kernbench::topology::detail
