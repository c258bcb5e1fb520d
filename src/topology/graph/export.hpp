// export.hpp -- any machine written out as an explicit graph.
//
// The generator's nodes, links and PE relations (ranks, memories, the
// package/group hierarchy) as an ExplicitGraphConfig: a Config with it in
// place of `system:` builds the same machine from a graph (same nodes, same
// links in the same order, same relations). Routes may differ where the
// generator's dimension-ordered routing and the graph's shortest paths
// choose differently between equal-cost paths; on a machine where every
// route is unique (one cube of a router line) they are the same.
#pragma once

#include "topology/config/config.hpp"
#include "topology/graph/machine.hpp"

namespace kernbench::topology {

/// The machine as an explicit graph with its layout (graph.layout).
ExplicitGraphConfig explicit_graph(const Machine& machine);

/// `config` with its machine replaced by explicit_graph(Machine(config)).
Config as_explicit(const Config& config);

}  // namespace kernbench::topology
