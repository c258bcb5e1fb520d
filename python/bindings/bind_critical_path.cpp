// bind_critical_path.cpp -- the critical path of a run, for Python.
//
// _core.critical_path(result) walks the causes the executor recorded and
// returns plain dicts (the Python wrapper, kernbench.critical_path, turns
// them into a table, a share by label and a summary).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "critical_path_dict.hpp"
#include "runtime/critical_path.hpp"

namespace py = pybind11;
using namespace kernbench::runtime;

namespace kernbench::bindings {

void bind_critical_path(py::module_& m) {
  m.def(
      "critical_path",
      [](const RunResult& result) {
        CriticalPath cp;
        {
          py::gil_scoped_release nogil;
          cp = critical_path(result);
        }
        py::dict out = critical_path_dict(cp);  // the dict every model's path is read as
        for (const py::handle& step : py::list(out["steps"])) {
          py::dict d = py::reinterpret_borrow<py::dict>(step);
          d["agent"] = result.causes.at(static_cast<std::size_t>(d["node"].cast<std::int32_t>())).agent;
        }
        out["program"] = result.program;
        return out;
      },
      py::arg("result"),
      "The chain of ops and waits that sets `result`'s makespan: steps in time order (node, op, name, kind, "
      "engine, start/end/duration in ps, via = how the path got there: start | op | dependency | "
      "resource:<engine> | message, holder = the dependency, holder or sender, waited_ps, parts by label) and "
      "the time on the path by label (engine:<kind>, link:<class>, wait:resource:<class>, wait:dependency).");
}

}  // namespace kernbench::bindings
