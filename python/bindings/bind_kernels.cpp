// bind_kernels.cpp -- kernel models from Python: plan a GEMM, build its Program.
//
// gemm_plan() returns the plan as a plain dict (shares as columns, ready for
// pandas); gemm_program() returns the C++ runtime Program (kernbench._core.
// Program, bound in bind_runtime.cpp) that System.run_program() runs. PEs
// and homes are node names or ids.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <variant>
#include <vector>

#include "bindings.hpp"
#include "kernels/gemm.hpp"
#include "sim/errors.hpp"

namespace py = pybind11;
using namespace kernbench::kernels;
using kernbench::topology::System;

namespace kernbench::bindings {
namespace {

GemmSpec make_spec(const System& s, std::int64_t m, std::int64_t n, std::int64_t k, const std::string& precision,
                   const std::vector<NodeRef>& pes, std::int64_t tile_m, std::int64_t tile_n, std::int64_t tile_k,
                   bool pinned, std::uint32_t buffers, const std::vector<NodeRef>& homes) {
  GemmSpec spec;
  spec.m = m;
  spec.n = n;
  spec.k = k;
  spec.precision = precision_from(precision);
  for (const auto& p : pes) spec.pes.push_back(resolve(s, p, "gemm pes"));
  for (const auto& h : homes) spec.homes.push_back(resolve(s, h, "gemm homes"));
  spec.tile_m = tile_m;
  spec.tile_n = tile_n;
  spec.tile_k = tile_k;
  spec.pinned = pinned;
  spec.buffers = buffers;
  return spec;
}

py::dict plan_dict(const System& s, const GemmPlan& p) {
  const auto& m = s.machine();
  py::dict d;
  d["m"] = p.spec.m;
  d["n"] = p.spec.n;
  d["k"] = p.spec.k;
  d["precision"] = std::string(topology::to_string(p.spec.precision));
  d["pinned"] = p.spec.pinned;
  d["buffers"] = p.spec.buffers;
  d["n_pes"] = p.spec.pes.size();
  d["grid_m"] = p.grid_m;
  d["grid_n"] = p.grid_n;
  d["tile_m"] = p.tile_m;
  d["tile_n"] = p.tile_n;
  d["tile_k"] = p.tile_k;
  d["elem_bytes"] = p.elem_bytes;
  d["c_elem_bytes"] = p.c_elem_bytes;
  d["acc_elem_bytes"] = p.acc_elem_bytes;
  d["scratch_budget"] = p.scratch_budget;
  d["scratch_per_pe"] = p.scratch_per_pe;
  d["steps_total"] = p.steps_total;
  d["limit"] = p.limit;
  d["ideal_ps"] = p.ideal_ps;
  d["estimate_ps"] = p.estimate_ps;
  d["flops"] = p.flops;
  d["peak_flops_per_s"] = p.peak_flops_per_s;
  d["read_bytes_per_s"] = p.read_bytes_per_s;
  d["write_bytes_per_s"] = p.write_bytes_per_s;
  d["hbm_bytes"] = p.hbm_bytes;
  d["critical"] = p.critical;
  const GemmShare& c = p.critical_share();
  // The critical share's per-step stage times, at the top level for convenience.
  d["steps"] = c.steps;
  d["tiles_m"] = c.tiles_m;
  d["tiles_n"] = c.tiles_n;
  d["tiles_k"] = c.tiles_k;
  d["load_ps"] = c.load_ps;
  d["store_ps"] = c.store_ps;
  d["dma_ps"] = c.dma_ps;
  d["compute_ps"] = c.compute_ps;
  d["latency_ps"] = c.latency_ps;
  d["step_ps"] = c.step_ps;
  d["pinned_ps"] = c.pinned_ps;
  // Every share, as columns.
  py::dict sh;
  auto col = [&](const char* name, auto get) {
    py::list l;
    for (const GemmShare& x : p.shares) l.append(get(x));
    sh[name] = l;
  };
  col("pe", [](const GemmShare& x) { return x.pe; });
  col("pe_name", [&](const GemmShare& x) { return m.node(x.pe).name; });
  col("home", [](const GemmShare& x) { return x.home; });
  col("home_name", [&](const GemmShare& x) { return m.node(x.home).name; });
  col("m0", [](const GemmShare& x) { return x.m0; });
  col("m", [](const GemmShare& x) { return x.m; });
  col("n0", [](const GemmShare& x) { return x.n0; });
  col("n", [](const GemmShare& x) { return x.n; });
  col("tiles_m", [](const GemmShare& x) { return x.tiles_m; });
  col("tiles_n", [](const GemmShare& x) { return x.tiles_n; });
  col("tiles_k", [](const GemmShare& x) { return x.tiles_k; });
  col("steps", [](const GemmShare& x) { return x.steps; });
  col("load_a", [](const GemmShare& x) { return x.load_a; });
  col("load_b", [](const GemmShare& x) { return x.load_b; });
  col("store_c", [](const GemmShare& x) { return x.store_c; });
  col("flops_per_step", [](const GemmShare& x) { return x.flops; });
  col("pinned_bytes", [](const GemmShare& x) { return x.pinned; });
  col("scratch", [](const GemmShare& x) { return x.scratch; });
  col("step_ps", [](const GemmShare& x) { return x.step_ps; });
  col("ideal_ps", [](const GemmShare& x) { return x.ideal_ps; });
  col("estimate_ps", [](const GemmShare& x) { return x.estimate_ps; });
  d["shares"] = sh;
  return d;
}

}  // namespace

void bind_kernels(py::module_& m) {
  using Refs = std::vector<NodeRef>;
  m.def(
      "gemm_plan",
      [](const System& s, std::int64_t mm, std::int64_t n, std::int64_t k, const std::string& precision,
         const Refs& pes, std::int64_t tile_m, std::int64_t tile_n, std::int64_t tile_k, bool pinned,
         std::uint32_t buffers, const Refs& homes) {
        return plan_dict(
            s, plan_gemm(s, make_spec(s, mm, n, k, precision, pes, tile_m, tile_n, tile_k, pinned, buffers, homes)));
      },
      py::arg("system"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("precision") = "fp16",
      py::arg("pes") = Refs{}, py::arg("tile_m") = 0, py::arg("tile_n") = 0, py::arg("tile_k") = 0,
      py::arg("pinned") = false, py::arg("buffers") = 2, py::arg("homes") = Refs{},
      "Plan C[M,N] = A[M,K] B[K,N] on `pes` (names or ids; default the first PE): the M x N split, tiles "
      "(0: searched within pe.scratch), per-PE scratch, per-step stage estimates, the steady-state limit "
      "('dma' or 'compute') and its ideal time. Returns a dict; 'shares' holds one column per field, one row per "
      "PE. ConfigError for bad inputs or a precision the engine lacks; CapacityError when tiles overflow scratch.");
  m.def(
      "gemm_program",
      [](const System& s, std::int64_t mm, std::int64_t n, std::int64_t k, const std::string& precision,
         const Refs& pes, std::int64_t tile_m, std::int64_t tile_n, std::int64_t tile_k, bool pinned,
         std::uint32_t buffers, const Refs& homes) {
        return gemm_program(s, make_spec(s, mm, n, k, precision, pes, tile_m, tile_n, tile_k, pinned, buffers, homes));
      },
      py::arg("system"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("precision") = "fp16",
      py::arg("pes") = Refs{}, py::arg("tile_m") = 0, py::arg("tile_n") = 0, py::arg("tile_k") = 0,
      py::arg("pinned") = false, py::arg("buffers") = 2, py::arg("homes") = Refs{},
      "The Program of the planned GEMM (same arguments as gemm_plan): per PE an alloc, [the pinned B DMA, tag "
      "'pinned'], one composite tile pipeline (tag 'gemm'; stages 'load', 'compute', 'store') and a free. "
      "Run it with System.run_program().");
}

}  // namespace kernbench::bindings
