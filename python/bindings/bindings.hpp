// bindings.hpp -- one function per binding translation unit.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <variant>

#include "sim/errors.hpp"
#include "topology/system.hpp"

namespace kernbench::bindings {

/// Lets Ctrl-C reach a long run: every 2^18 events (a few ms) the run loop
/// takes the GIL, asks Python whether a signal arrived, and if so abandons
/// the run with the KeyboardInterrupt Python raised.
inline void poll_python_signals(sim::Simulation& s) {
  s.set_poll(1U << 18, [] {
    pybind11::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
  });
}

/// "fp16" -> Precision::Fp16; an unknown name lists the known ones.
inline topology::Precision precision_from(const std::string& name) {
  using topology::Precision;
  for (Precision p : {Precision::Fp32, Precision::Fp16, Precision::Bf16, Precision::Int8})
    if (name == topology::to_string(p)) return p;
  throw ConfigError("unknown precision '" + name + "' (known: fp32, fp16, bf16, int8)");
}

/// A count from Python that must not be negative (taken as int64 so that a
/// negative value gets a clear error instead of a pybind11 TypeError).
inline std::uint64_t non_negative(std::int64_t v, const char* what) {
  if (v < 0) throw UsageError(std::string(what) + " must be >= 0, got " + std::to_string(v));
  return static_cast<std::uint64_t>(v);
}

/// A node given from Python: by id or by name (ids are signed here so that
/// a negative one gets our error, not a pybind11 signature dump).
using NodeRef = std::variant<std::int64_t, std::string>;

/// The node id of `ref`; an unknown name or an out-of-range id is an error
/// that says so (prefixed by `what`, e.g. "gemm: pes[3]").
inline topology::NodeId resolve(const topology::System& s, const NodeRef& ref, const std::string& what = "node") {
  if (const auto* id = std::get_if<std::int64_t>(&ref)) {
    if (*id < 0 || static_cast<std::uint64_t>(*id) >= s.machine().num_nodes())
      throw UsageError(what + ": node id " + std::to_string(*id) + " out of range (" +
                       std::to_string(s.machine().num_nodes()) + " nodes)");
    return static_cast<topology::NodeId>(*id);
  }
  return s.machine().at(std::get<std::string>(ref));
}

void bind_sim(pybind11::module_& m);
void bind_topology(pybind11::module_& m);
void bind_runtime(pybind11::module_& m);
void bind_kernels(pybind11::module_& m);
void bind_gqa(pybind11::module_& m);
void bind_config(pybind11::module_& m);
void bind_k200(pybind11::module_& m);
void bind_ccl(pybind11::module_& m);
void bind_vgpu(pybind11::module_& m);
void bind_llama(pybind11::module_& m);
void bind_energy(pybind11::module_& m);
void bind_critical_path(pybind11::module_& m);

}  // namespace kernbench::bindings
