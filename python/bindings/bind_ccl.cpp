// bind_ccl.cpp -- collectives: run one on a System, list the algorithms.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <limits>
#include <optional>

#include "bindings.hpp"
#include "ccl/ccl.hpp"
#include "ccl/config_section.hpp"
#include "runtime/config_section.hpp"

namespace py = pybind11;
using namespace kernbench::ccl;

namespace kernbench::bindings {

namespace {

CollectiveSpec make_spec(const topology::System& system, const std::string& collective, const std::string& algorithm,
                         const py::object& bytes, const std::optional<std::vector<NodeRef>>& pes,
                         const std::string& buffer, const py::object& grid_w, const py::object& grid_h,
                         const std::string& inter, const py::object& pieces, const py::object& root,
                         const std::string& verify, const std::string& protocol, const py::object& channels,
                         const py::object& calls, const py::object& host_threads) {
  constexpr std::int64_t kInt = std::numeric_limits<int>::max(), kMinInt = std::numeric_limits<int>::min();
  CollectiveSpec spec;
  spec.collective = collective_from_string(collective);
  spec.algorithm = algorithm;
  spec.bytes_per_pe = int_arg(bytes, "collective: bytes_per_pe");
  // None: every PE; an empty list is a mistake, not "all".
  if (pes && pes->empty())
    throw UsageError("collective: pes is an empty list (pass None, or leave it out, for every PE)");
  if (pes)
    for (std::size_t i = 0; i < pes->size(); ++i)
      spec.pes.push_back(resolve(system, (*pes)[i], "collective: pes[" + std::to_string(i) + "]"));
  spec.buffer = buffer_from_string(buffer);
  spec.grid_w = static_cast<int>(int_arg(grid_w, "collective: grid width", kMinInt, kInt));
  spec.grid_h = static_cast<int>(int_arg(grid_h, "collective: grid height", kMinInt, kInt));
  spec.inter = inter;
  spec.pieces = static_cast<int>(int_arg(pieces, "collective: pieces", kMinInt, kInt));
  spec.root = static_cast<int>(int_arg(root, "collective: root", kMinInt, kInt));
  spec.verify = verify_from_string(verify);
  spec.protocol = protocol;
  spec.channels = static_cast<int>(int_arg(channels, "collective: channels", kMinInt, kInt));
  spec.calls = static_cast<int>(int_arg(calls, "collective: calls", kMinInt, kInt));
  spec.host_threads = static_cast<int>(int_arg(host_threads, "collective: host_threads", kMinInt, kInt));
  return spec;
}

}  // namespace

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
      .def_readonly("model", &CollectiveResult::model)
      .def_readonly("protocol", &CollectiveResult::protocol)
      .def_readonly("fidelity", &CollectiveResult::fidelity)
      .def_readonly("channels", &CollectiveResult::channels)
      .def_readonly("step_bytes", &CollectiveResult::step_bytes)
      .def_readonly("calls", &CollectiveResult::calls)
      .def_readonly("predicted_ps", &CollectiveResult::predicted)
      .def_readonly("phases", &CollectiveResult::phases)
      .def_readonly("phase_windows", &CollectiveResult::phase_windows)
      .def_readonly("link_bytes", &CollectiveResult::link_bytes)
      .def_readonly("received", &CollectiveResult::received)
      .def_readonly("op_counts", &CollectiveResult::op_counts)
      .def_property_readonly("algorithm_bandwidth", &CollectiveResult::algorithm_bandwidth,
                             "bytes per PE / latency, in B/s")
      .def_property_readonly("run", [](const std::shared_ptr<CollectiveResult>& r) {
        // The RunResult shares the collective result's lifetime.
        return std::shared_ptr<runtime::RunResult>(r, &r->run);
      });

  m.def(
      "run_collective",
      [](topology::System& system, const std::string& collective, const std::string& algorithm, const py::object& bytes,
         const std::optional<std::vector<NodeRef>>& pes, const std::string& buffer, const py::object& grid_w,
         const py::object& grid_h, const std::string& inter, const py::object& pieces, const py::object& root,
         const std::string& verify, const std::string& protocol, const py::object& channels, const py::object& calls,
         const py::object& host_threads, const std::vector<Bytes>& counts, const std::string& fidelity) {
        CollectiveSpec spec = make_spec(system, collective, algorithm, bytes, pes, buffer, grid_w, grid_h, inter,
                                        pieces, root, verify, protocol, channels, calls, host_threads);
        spec.counts = counts;
        spec.fidelity = fidelity;
        Using use(system);
        spec.router = &system.fabric().router();
        return use.run([&] { return std::make_shared<CollectiveResult>(run_collective(system, spec)); });
      },
      py::arg("system"), py::arg("collective"), py::arg("algorithm"), py::arg("bytes_per_pe"),
      py::arg("pes") = py::none(), py::arg("buffer") = "sram", py::arg("grid_w") = 0, py::arg("grid_h") = 0,
      py::arg("inter") = "", py::arg("pieces") = 4, py::arg("root") = 0, py::arg("verify") = "auto",
      py::arg("protocol") = "auto", py::arg("channels") = 0, py::arg("calls") = 1, py::arg("host_threads") = 0,
      py::arg("counts") = std::vector<Bytes>{}, py::arg("fidelity") = "auto",
      "Build, run and (verify=auto|on|off) symbolically check one collective (GPU machines: the NCCL model, "
      "with protocol, channels, calls back to back and host_threads; alltoall: counts, the bytes rank i sends "
      "rank j at [i * ranks + j], the delivered bytes checked instead).");
  m.def(
      "collective_program",
      [](topology::System& system, const std::string& collective, const std::string& algorithm, const py::object& bytes,
         const std::optional<std::vector<NodeRef>>& pes, const std::string& buffer, const py::object& grid_w,
         const py::object& grid_h, const std::string& inter, const py::object& pieces, const py::object& root,
         const std::string& protocol, const py::object& channels, const std::string& fidelity) {
        CollectiveSpec spec = make_spec(system, collective, algorithm, bytes, pes, buffer, grid_w, grid_h, inter,
                                        pieces, root, "off", protocol, channels, py::int_(1), py::int_(0));
        spec.fidelity = fidelity;
        // The system's router: its searches are kept across the collectives of a lowering (a step appends
        // hundreds over the same GPUs). Held like a run, as the router's caches grow.
        Using use(system, /*check=*/false);
        spec.router = &system.fabric().router();
        return build_collective(system.machine(), system.config(), spec);
      },
      py::arg("system"), py::arg("collective"), py::arg("algorithm"), py::arg("bytes_per_pe"),
      py::arg("pes") = py::none(), py::arg("buffer") = "sram", py::arg("grid_w") = 0, py::arg("grid_h") = 0,
      py::arg("inter") = "", py::arg("pieces") = 4, py::arg("root") = 0, py::arg("protocol") = "auto",
      py::arg("channels") = 0, py::arg("fidelity") = "auto",
      "The Program of one collective (same arguments as run_collective, no verification), to append to another.");

  m.def(
      "nccl_tune",
      [](const topology::System& system, const std::string& collective, const py::object& bytes,
         const std::optional<std::vector<NodeRef>>& pes) {
        const CollectiveSpec spec =
            make_spec(system, collective, "auto", bytes, pes, "hbm", py::int_(0), py::int_(0), "", py::int_(4),
                      py::int_(0), "off", "auto", py::int_(0), py::int_(1), py::int_(0));
        py::list out;
        for (const TuneRow& r : tuning_table(system.machine(), system.config(), spec)) {
          py::dict d;
          d["algorithm"] = r.algorithm;
          d["protocol"] = to_string(r.protocol);
          d["channels"] = r.channels;
          d["latency_ps"] = r.latency;
          d["bandwidth_Bps"] = r.bandwidth;
          d["time_ps"] = r.time;
          out.append(d);
        }
        return out;
      },
      py::arg("system"), py::arg("collective"), py::arg("bytes_per_pe"), py::arg("pes") = py::none(),
      "The NCCL model's tuning table (src/ccl/nccl.hpp) for one collective: every (algorithm, protocol) it "
      "weighs with its latency, bandwidth and predicted time; `auto` takes the smallest time.");
  m.def(
      "nccl_config",
      [](const topology::System& system) {
        const NcclConfig& c = nccl_config(system.config());
        py::dict d;
        d["call_host_ps"] = c.call_host;
        d["ll_base_ps"] = c.ll_base;
        d["ll128_base_ps"] = c.ll128_base;
        d["simple_base_ps"] = c.simple_base;
        d["ll_step_ps"] = c.ll_step;
        d["ll128_step_ps"] = c.ll128_step;
        d["simple_step_ps"] = c.simple_step;
        d["link_efficiency"] = c.link_efficiency;
        d["buffsize"] = c.buffsize;
        d["steps"] = c.steps;
        d["nvls_base_ps"] = c.nvls_base;
        d["nvls_issue_Bps"] = c.nvls_issue.bytes_per_s;
        d["nvls_chunk"] = c.nvls_chunk;
        d["max_steps_per_transfer"] = c.max_steps_per_transfer;
        return d;
      },
      py::arg("system"), "The machine's nccl: section (times in ps).");
  m.def(
      "_int_arg", [](const py::object& value, const std::string& name) { return int_arg(value, name); },
      py::arg("value"), py::arg("name"),
      "The bindings' rule for a byte count or count: an int >= 0 (or an integral float); anything else is a "
      "UsageError naming `name`.");

  m.def("ccl_algorithms", [] {
    py::list out;
    for (const AlgorithmInfo& a : algorithms()) {
      py::dict d;
      d["name"] = a.name;
      d["description"] = a.description;
      d["collectives"] = a.collectives;
      d["in_network"] = a.in_network;
      out.append(d);
    }
    return out;
  });
}

}  // namespace kernbench::bindings
