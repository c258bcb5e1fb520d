// bind_ccl.cpp -- collectives: run one on a System, list the algorithms.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "ccl/ccl.hpp"

namespace py = pybind11;
using namespace kernbench::ccl;

namespace kernbench::bindings {

void bind_ccl(py::module_& m) {
  py::class_<CollectiveResult, std::shared_ptr<CollectiveResult>>(m, "CollectiveResult",
                                                                   "What a collective did (times in ps).")
      .def_readonly("algorithm", &CollectiveResult::algorithm)
      .def_property_readonly("collective", [](const CollectiveResult& r) { return to_string(r.collective); })
      .def_readonly("ranks", &CollectiveResult::ranks)
      .def_readonly("slices", &CollectiveResult::slices)
      .def_readonly("bytes_per_pe", &CollectiveResult::bytes_per_pe)
      .def_readonly("latency_ps", &CollectiveResult::latency)
      .def_readonly("verified", &CollectiveResult::verified)
      .def_readonly("phases", &CollectiveResult::phases)
      .def_readonly("phase_windows", &CollectiveResult::phase_windows)
      .def_readonly("link_bytes", &CollectiveResult::link_bytes)
      .def_readonly("op_counts", &CollectiveResult::op_counts)
      .def_property_readonly("algorithm_bandwidth", &CollectiveResult::algorithm_bandwidth,
                             "bytes per PE / latency, in B/s")
      .def_property_readonly(
          "run", [](const std::shared_ptr<CollectiveResult>& r) {
            // The RunResult shares the collective result's lifetime.
            return std::shared_ptr<runtime::RunResult>(r, &r->run);
          });

  m.def(
      "run_collective",
      [](topology::System& system, const std::string& collective, const std::string& algorithm, std::int64_t bytes,
         const std::vector<NodeRef>& pes, const std::string& buffer, int grid_w, int grid_h, const std::string& inter,
         int pieces, int root, const std::string& verify) {
        CollectiveSpec spec;
        spec.collective = collective_from_string(collective);
        spec.algorithm = algorithm;
        spec.bytes_per_pe = bytes;
        for (std::size_t i = 0; i < pes.size(); ++i)
          spec.pes.push_back(resolve(system, pes[i], "collective: pes[" + std::to_string(i) + "]"));
        spec.buffer = buffer_from_string(buffer);
        spec.grid_w = grid_w;
        spec.grid_h = grid_h;
        spec.inter = inter;
        spec.pieces = pieces;
        spec.root = root;
        spec.verify = verify_from_string(verify);
        auto out = std::make_shared<CollectiveResult>();
        poll_python_signals(system.sim());
        {
          py::gil_scoped_release release;
          *out = run_collective(system, spec);
        }
        return out;
      },
      py::arg("system"), py::arg("collective"), py::arg("algorithm"), py::arg("bytes_per_pe"),
      py::arg("pes") = std::vector<NodeRef>{}, py::arg("buffer") = "sram", py::arg("grid_w") = 0,
      py::arg("grid_h") = 0, py::arg("inter") = "", py::arg("pieces") = 4, py::arg("root") = 0,
      py::arg("verify") = "auto", "Build, run and (verify=auto|on|off) symbolically check one collective.");

  m.def("ccl_algorithms", [] {
    py::list out;
    for (const AlgorithmInfo& a : algorithms()) {
      py::dict d;
      d["name"] = a.name;
      d["description"] = a.description;
      d["collectives"] = a.collectives;
      out.append(d);
    }
    return out;
  });
}

}  // namespace kernbench::bindings
