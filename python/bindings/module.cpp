// module.cpp -- the kernbench._core extension: exceptions and sub-bindings.
//
// Every typed C++ error becomes a Python exception deriving from
// KernbenchError (and from the matching builtin, e.g. ConfigError is also a
// ValueError), so callers can catch precisely or broadly.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "sim/errors.hpp"

namespace py = pybind11;

// Every platform of platforms.def binds itself with bind_<folder> (src/platforms/<folder>/bindings/).
namespace kernbench::bindings {
#define KERNBENCH_PLATFORM(folder) void bind_##folder(pybind11::module_& m);
#include "platforms/platforms.def"
#undef KERNBENCH_PLATFORM
}  // namespace kernbench::bindings

PYBIND11_MODULE(_core, m) {
  m.doc() = "kernbench C++ core: the discrete-event engine and the models built on it.";

  auto base = py::register_exception<kernbench::Error>(m, "KernbenchError", PyExc_RuntimeError);
  auto both = [&](PyObject* builtin) { return py::make_tuple(base, py::handle(builtin)); };
  // Registered after the base: pybind11 tries the most recent translator first.
  py::register_exception<kernbench::ConfigError>(m, "ConfigError", both(PyExc_ValueError));
  py::register_exception<kernbench::UsageError>(m, "UsageError", both(PyExc_ValueError));
  py::register_exception<kernbench::TopologyError>(m, "TopologyError", base);
  py::register_exception<kernbench::DeadlockError>(m, "DeadlockError", base);
  py::register_exception<kernbench::CapacityError>(m, "CapacityError", base);
  py::register_exception<kernbench::ProcessError>(m, "ProcessError", base);
  py::register_exception<kernbench::InternalError>(m, "InternalError", base);
  py::register_exception<kernbench::LimitError>(m, "LimitError", base);
  py::register_exception<kernbench::VerificationError>(m, "VerificationError", base);

  kernbench::bindings::bind_sim(m);
  kernbench::bindings::bind_topology(m);
  kernbench::bindings::bind_runtime(m);
  kernbench::bindings::bind_kernels(m);
  kernbench::bindings::bind_gpu(m);
  kernbench::bindings::bind_gqa(m);
  kernbench::bindings::bind_config(m);
  kernbench::bindings::bind_ccl(m);
  kernbench::bindings::bind_llama(m);
  kernbench::bindings::bind_energy(m);
  kernbench::bindings::bind_critical_path(m);
  kernbench::bindings::bind_serving(m);
#define KERNBENCH_PLATFORM(folder) kernbench::bindings::bind_##folder(m);
#include "platforms/platforms.def"
#undef KERNBENCH_PLATFORM
}
