// bind_energy.cpp -- the energy of a run and the HBM slices (capacity,
// pseudo-channel traffic) for Python.
//
// energy(system, program, result) and hbm_traffic(system, program) read the
// Program that ran (the Python RunResult keeps it); HbmAllocator plans what
// is resident in each slice and raises CapacityError when it does not fit.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "runtime/config_section.hpp"
#include "runtime/energy.hpp"
#include "runtime/hbm.hpp"

namespace py = pybind11;
using namespace kernbench::runtime;

namespace kernbench::bindings {

void bind_energy(py::module_& m) {
  m.def(
      "energy",
      [](topology::System& system, const Program& program, const RunResult& result) {
        const EnergyReport r = energy(system, program, result);
        py::dict d;
        d["total_j"] = r.total_j;
        d["dynamic_j"] = r.dynamic_j;
        d["static_j"] = r.static_j;
        d["makespan_ps"] = r.makespan;
        d["by"] = r.by;
        d["by_op_kind"] = r.by_op_kind;
        d["counts"] = r.counts;
        return d;
      },
      py::arg("system"), py::arg("program"), py::arg("result"),
      "Energy of `result` (a run of `program` on `system`, the system's latest run): total, dynamic and static "
      "joules, by shared label (dynamic:link:<class>, dynamic:memory:<name>, dynamic:compute:<engine>:<precision>, "
      "static:<node kind>), by op kind, and the counts priced.");

  m.def(
      "hbm_traffic",
      [](const topology::System& system, const Program& program) {
        const auto& hbm = runtime::pe_config(system.config()).hbm;
        py::list out;
        for (const HbmSliceTraffic& t : hbm_traffic(program, system.machine(), hbm)) {
          py::dict d;
          d["slice"] = t.slice;
          d["name"] = system.machine().node(t.slice).name;
          d["read"] = t.read;
          d["written"] = t.written;
          out.append(d);
        }
        return out;
      },
      py::arg("system"), py::arg("program"),
      "Bytes read from and written to each pseudo-channel of every HBM slice the program's moves touch "
      "(addresses striped over pe.hbm.pseudo_channels in units of pe.hbm.stripe).");

  py::class_<HbmAllocator>(m, "HbmAllocator",
                           "Reserves address ranges of the HBM slices (hbm_ctrl nodes); CapacityError past "
                           "pe.hbm.capacity, naming the slice, its PE, the item and the bytes.")
      .def(py::init([](const topology::System& s) {
             return new HbmAllocator(s.machine(), runtime::pe_config(s.config()).hbm);
           }),
           py::arg("system"), py::keep_alive<1, 2>())
      .def(
          "alloc",
          [](HbmAllocator& a, NodeId slice, Bytes bytes, const std::string& what) {
            const HbmRegion r = a.alloc(slice, bytes, what);
            return py::make_tuple(r.address, r.bytes);
          },
          py::arg("slice"), py::arg("bytes"), py::arg("what"), "Reserve `bytes`; returns (address, bytes).")
      .def_property_readonly("capacity", &HbmAllocator::capacity)
      .def("used", &HbmAllocator::used, py::arg("slice"))
      .def("free", &HbmAllocator::free, py::arg("slice"));
}

}  // namespace kernbench::bindings
