// bind_critical_path.cpp -- the critical path of a run, for Python.
//
// _core.critical_path(result) walks the causes the executor recorded and
// returns plain dicts (the Python wrapper, kernbench.critical_path, turns
// them into a table, a share by label and a summary).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
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
        py::list steps;
        for (const CriticalStep& s : cp.steps) {
          const NodeCause& c = result.causes.at(static_cast<std::size_t>(s.node));
          py::dict d;
          d["node"] = s.node;
          d["op"] = c.program_op >= 0 ? c.program_op : c.composite;
          d["name"] = c.name;
          d["kind"] = to_string(s.kind);
          d["op_kind"] = to_string(c.kind);
          d["agent"] = c.agent;
          d["engine"] = s.engine;
          d["start_ps"] = s.start;
          d["end_ps"] = s.end;
          d["duration_ps"] = s.duration();
          d["via"] = s.via;
          d["holder"] = s.holder;
          d["holder_name"] =
              s.holder >= 0 ? result.causes.at(static_cast<std::size_t>(s.holder)).name : std::string();
          d["waited_ps"] = s.waited;
          d["parts"] = s.parts;
          steps.append(d);
        }
        py::dict out;
        out["program"] = result.program;
        out["start_ps"] = cp.start;
        out["end_ps"] = cp.end;
        out["length_ps"] = cp.length();
        out["makespan_ps"] = cp.end - cp.start;
        out["steps"] = steps;
        out["share_ps"] = cp.share;
        return out;
      },
      py::arg("result"),
      "The chain of ops and waits that sets `result`'s makespan: steps in time order (node, op, name, kind, "
      "engine, start/end/duration in ps, via = how the path got there: start | op | dependency | "
      "resource:<engine> | message, holder = the dependency, holder or sender, waited_ps, parts by label) and "
      "the time on the path by label (engine:<kind>, link:<class>, wait:resource:<class>, wait:dependency).");
}

}  // namespace kernbench::bindings
