// bindings.hpp -- one function per binding translation unit.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <variant>

#include "sim/errors.hpp"
#include "topology/system.hpp"

namespace kernbench::bindings {

/// A node given from Python: by id or by name.
using NodeRef = std::variant<topology::NodeId, std::string>;

/// The node id of `ref`; an unknown name or an out-of-range id is an error
/// that says so (prefixed by `what`, e.g. "gemm: pes[3]").
inline topology::NodeId resolve(const topology::System& s, const NodeRef& ref, const std::string& what = "node") {
  if (const auto* id = std::get_if<topology::NodeId>(&ref)) {
    if (*id >= s.machine().num_nodes())
      throw UsageError(what + ": node id " + std::to_string(*id) + " out of range (" +
                       std::to_string(s.machine().num_nodes()) + " nodes)");
    return *id;
  }
  return s.machine().at(std::get<std::string>(ref));
}

void bind_sim(pybind11::module_& m);
void bind_topology(pybind11::module_& m);
void bind_runtime(pybind11::module_& m);
void bind_kernels(pybind11::module_& m);
void bind_config(pybind11::module_& m);

}  // namespace kernbench::bindings
