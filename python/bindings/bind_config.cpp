// bind_config.cpp -- the config loader seen from Python: summaries, the
// schema JSON and the unit parsers.
//
// Python gets a plain dict summary rather than the typed structs: the CLI's
// `kernbench validate` and the tests need only the shape of the machine, and
// the structs will reach Python through the System binding when it exists.
// Errors arrive as kernbench.ConfigError (registered in module.cpp).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "kernbench.hpp"
#include "topology/config/loader.hpp"

namespace py = pybind11;
using namespace kernbench::topology;

namespace kernbench::bindings {
namespace {

using OverrideList = std::vector<std::pair<std::string, std::string>>;

std::vector<Override> to_overrides(const OverrideList& list) {
  std::vector<Override> out;
  out.reserve(list.size());
  for (const auto& [path, value] : list) out.push_back({path, value});
  return out;
}

py::dict grid(const GridSize& g) {
  py::dict d;
  d["w"] = g.w;
  d["h"] = g.h;
  d["count"] = g.count();
  return d;
}

// Each value that declared its provenance (config/provenance.hpp): path -> record.
py::dict provenance_dict(const Config& c) {
  py::dict out;
  for (const config::ProvenanceEntry& e : c.provenance) {
    py::dict r;
    r["value"] = e.value;
    r["kind"] = config::to_string(e.record.kind);
    r["source"] = e.record.text;
    r["data"] = e.record.data;
    r["rows"] = e.record.rows;
    r["note"] = e.record.note;
    r["file"] = e.file;
    r["line"] = e.record.where.line;
    out[py::str(e.path)] = r;
  }
  return out;
}

py::dict summary(const Config& c) {
  py::dict d;
  d["source"] = c.source;
  if (c.system) {
    const SystemConfig& s = *c.system;
    d["kind"] = "system";
    d["name"] = s.name;
    py::dict sips = grid(s.sips);
    sips["topology"] = to_string(s.sip_topology);
    d["sips"] = sips;
    d["cubes"] = grid(s.cubes);
    d["routers"] = grid(s.routers);
    d["pes_per_cube"] = s.pes_per_cube;
    d["total_pes"] = static_cast<long long>(s.sips.count()) * s.cubes.count() * s.pes_per_cube;
  } else {
    d["kind"] = "graph";
    if (c.cluster) d["cluster"] = cluster_dict(c, false);
    d["nodes"] = c.graph->nodes.size();
    d["edges"] = c.graph->edges.size();
  }
  py::dict f;
  f["model"] = to_string(c.fabric.model);
  f["chunk"] = c.fabric.chunk;
  f["flit"] = c.fabric.flit;
  f["request"] = c.fabric.request;
  f["stripe"] = c.fabric.stripe;
  d["fabric"] = f;
  d["provenance"] = provenance_dict(c);
  return d;
}

}  // namespace

std::vector<std::string> include_dirs_arg(py::handle dirs) {
  py::object list = py::reinterpret_borrow<py::object>(dirs);
  if (dirs.is_none()) list = py::module_::import("kernbench.system").attr("include_dirs")();
  const py::object fspath = py::module_::import("os").attr("fspath");
  std::vector<std::string> out;
  if (py::isinstance<py::str>(list) || py::hasattr(list, "__fspath__")) {
    out.push_back(py::str(fspath(list)));
    return out;
  }
  for (py::handle d : list) out.push_back(py::str(fspath(d)));
  return out;
}

void bind_config(py::module_& m) {
  m.def(
      "load_config_summary",
      [](const std::string& path, const OverrideList& overrides, const py::object& include_dirs) {
        return summary(kernbench::load_config(path, to_overrides(overrides), include_dirs_arg(include_dirs)));
      },
      py::arg("path"), py::arg("overrides") = OverrideList{}, py::arg("include_dirs") = py::none(),
      "Load a machine config (includes, then overrides as (path, value) pairs), check it strictly and return a "
      "summary dict: source, kind ('system' or 'graph'), the grid sizes or node/edge counts, and fabric. "
      "Raises ConfigError naming the file and the YAML path. Includes may read the file's folder tree and "
      "`include_dirs` (None: kernbench.system.include_dirs()).");
  m.def(
      "parse_config_summary",
      [](const std::string& text, const std::string& source, const OverrideList& overrides,
         const py::object& include_dirs) {
        return summary(kernbench::parse_config(text, source, to_overrides(overrides), include_dirs_arg(include_dirs)));
      },
      py::arg("text"), py::arg("source") = "<string>", py::arg("overrides") = OverrideList{},
      py::arg("include_dirs") = py::none(),
      "Like load_config_summary, from YAML text; `source` names it in messages and anchors relative includes.");
  m.def("config_schema", &kernbench::config_schema_json,
        "The config schema as JSON text: every section and key with its type, units, required/default and doc.");
  m.def(
      "parse_time", [](const std::string& text, const std::string& where) { return parse_time(text, where); },
      py::arg("text"), py::arg("where") = "", "'1.5 us' -> 1500000 (picoseconds, rounded to the nearest).");
  m.def(
      "parse_bytes", [](const std::string& text, const std::string& where) { return parse_bytes(text, where); },
      py::arg("text"), py::arg("where") = "", "'4 KiB' -> 4096 (must be a whole number of bytes).");
  m.def(
      "parse_bandwidth",
      [](const std::string& text, const std::string& where) { return parse_bandwidth(text, where).bytes_per_s; },
      py::arg("text"), py::arg("where") = "", "'25 Gb/s' -> 3125000000 (bytes per second, rounded to the nearest).");
}

}  // namespace kernbench::bindings
