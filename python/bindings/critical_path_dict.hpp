// critical_path_dict.hpp -- a CriticalPath as the plain dict Python reads
// (kernbench.critical_path.CriticalPath), for the models that are not a
// Program (K200, vGPU); the executor's binding (bind_critical_path.cpp)
// writes the same keys.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "runtime/critical_path.hpp"

namespace kernbench::bindings {

inline pybind11::dict critical_path_dict(const runtime::CriticalPath& cp) {
  namespace py = pybind11;
  py::list steps;
  for (const runtime::CriticalStep& s : cp.steps) {
    py::dict d;
    d["node"] = s.node;
    d["op"] = s.op;
    d["name"] = s.name;
    d["kind"] = runtime::to_string(s.kind);
    d["op_kind"] = s.op_kind;
    d["engine"] = s.engine;
    d["start_ps"] = s.start;
    d["end_ps"] = s.end;
    d["duration_ps"] = s.duration();
    d["via"] = s.via;
    d["holder"] = s.holder;
    d["holder_name"] = s.holder_name;
    d["waited_ps"] = s.waited;
    d["parts"] = s.parts;
    d["channels"] = s.channels;
    steps.append(d);
  }
  py::dict out;
  out["program"] = cp.name;
  out["start_ps"] = cp.start;
  out["end_ps"] = cp.end;
  out["length_ps"] = cp.length();
  out["makespan_ps"] = cp.end - cp.start;
  out["steps"] = steps;
  out["share_ps"] = cp.share;
  out["channels_ps"] = cp.channels;
  return out;
}

}  // namespace kernbench::bindings
