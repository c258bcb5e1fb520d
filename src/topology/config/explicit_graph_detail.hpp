// explicit_graph_detail.hpp -- the parts of graph: that relate nodes (layout, pinned routes), read by
// section.cpp's read_graph; defined in explicit_graph.cpp.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/section.hpp"
#include "topology/config/config.hpp"

namespace kernbench::topology::detail {

/// graph.layout: ranks, grid, packages and groups of the declared PEs.
void read_layout(const config::MapReader& r, ExplicitGraphConfig& g,
                 const std::unordered_map<std::string, std::size_t>& index, const std::vector<std::string>& names);
/// graph.routes: pinned paths, each a chain of existing edges from src to dst.
void read_routes(const config::MapReader& r, ExplicitGraphConfig& g,
                 const std::unordered_map<std::string, std::size_t>& index, const std::vector<std::string>& names,
                 const std::vector<std::vector<std::size_t>>& adjacent);

}  // namespace kernbench::topology::detail
