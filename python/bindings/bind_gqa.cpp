// bind_gqa.cpp -- the GQA attention model from Python: plan a case, or run
// it and get its metrics, as plain dicts (kernbench.gqa wraps them).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "kernels/gqa.hpp"
#include "sim/errors.hpp"

namespace py = pybind11;
using namespace kernbench::kernels;
using kernbench::topology::System;

namespace kernbench::bindings {
namespace {

GqaSpec make_spec(const std::string& phase, int gqa_case, std::int64_t t_q, std::int64_t s_kv, std::int64_t tile_q,
                  std::int64_t tile_s, std::uint32_t kv_buffers, int sip, const std::vector<int>& cubes,
                  const std::string& precision) {
  GqaSpec s;
  s.phase = gqa_phase_from(phase);
  s.gqa_case = gqa_case;
  s.t_q = t_q;
  s.s_kv = s_kv;
  s.tile_q = tile_q;
  s.tile_s = tile_s;
  s.kv_buffers = kv_buffers;
  s.sip = sip;
  s.cubes = cubes;
  s.precision = precision_from(precision);
  return s;
}

py::dict plan_dict(const GqaPlan& p) {
  py::dict d;
  d["phase"] = std::string(to_string(p.spec.phase));
  d["case"] = p.spec.gqa_case;
  d["t_q"] = p.spec.t_q;
  d["s_kv"] = p.spec.s_kv;
  d["h_q"] = p.spec.h_q;
  d["d_head"] = p.spec.d_head;
  d["cubes"] = p.spec.cubes;
  d["n_cubes"] = p.n_cubes;
  d["pes_per_cube"] = p.pes_per_cube;
  d["rows_per_pe"] = p.rows_per_pe;
  d["tile_q"] = p.tile_q;
  d["tile_s"] = p.tile_s;
  d["q_tiles"] = p.q_tiles;
  d["kv_tokens_per_pe"] = p.kv_tokens_per_pe;
  d["active_pes"] = p.active_pes;
  d["compute_work"] = p.compute_work;
  d["flops"] = p.flops;
  d["kv_bytes_per_cube"] = p.kv_bytes_per_cube;
  d["scratch_per_pe"] = p.scratch_per_pe;
  d["scratch_budget"] = p.scratch_budget;
  d["scratch_breakdown"] = p.scratch_breakdown;
  d["dma_q"] = p.dma_q;
  d["dma_kv"] = p.dma_kv;
  d["dma_out"] = p.dma_out;
  d["ipcq_ring"] = p.ipcq_ring;
  d["ipcq_merge"] = p.ipcq_merge;
  d["gemm_ops"] = p.gemm_ops;
  d["vector_ops"] = p.vector_ops;
  return d;
}

}  // namespace

void bind_gqa(py::module_& m) {
  using Cubes = std::vector<int>;
  m.def(
      "gqa_plan",
      [](const System& s, const std::string& phase, int gqa_case, std::int64_t t_q, std::int64_t s_kv,
         std::int64_t tile_q, std::int64_t tile_s, std::uint32_t kv_buffers, int sip, const Cubes& cubes,
         const std::string& precision) {
        return plan_dict(plan_gqa(s, make_spec(phase, gqa_case, t_q, s_kv, tile_q, tile_s, kv_buffers, sip, cubes,
                                               precision)));
      },
      py::arg("system"), py::arg("phase"), py::arg("case"), py::arg("t_q"), py::arg("s_kv"), py::arg("tile_q") = 256,
      py::arg("tile_s") = 256, py::arg("kv_buffers") = 2, py::arg("sip") = 0, py::arg("cubes") = Cubes{},
      py::arg("precision") = "fp16",
      "Plan one GQA case (phase 'prefill' or 'decode', case 1..4): shares, tiles, scratch per PE, compute work, "
      "K/V bytes per cube and the closed-form op counts. ConfigError for bad inputs, CapacityError when the tiles "
      "overflow pe.scratch.");
  m.def(
      "gqa_run",
      [](System& s, const std::string& phase, int gqa_case, std::int64_t t_q, std::int64_t s_kv, std::int64_t tile_q,
         std::int64_t tile_s, std::uint32_t kv_buffers, int sip, const Cubes& cubes, const std::string& precision) {
        const GqaSpec spec = make_spec(phase, gqa_case, t_q, s_kv, tile_q, tile_s, kv_buffers, sip, cubes, precision);
        auto owner = std::make_shared<GqaResult>();
        Using use(s);  // one user of the System at a time
        use.run([&] { *owner = run_gqa(s, spec); });
        const GqaResult& r = *owner;
        py::dict d;
        d["run"] = std::shared_ptr<runtime::RunResult>(owner, &owner->run);  // op log, engines, traces
        d["plan"] = plan_dict(r.plan);
        d["latency_ps"] = r.latency;
        d["engine_busy_ps"] = r.engine_busy;
        d["engine_occupancy"] = r.engine_occupancy;
        d["link_bytes"] = r.link_bytes;
        d["op_counts"] = r.run.op_counts;
        d["op_bytes"] = r.run.op_bytes;
        d["peak_scratch"] = r.peak_scratch;
        py::dict windows;
        for (std::size_t t = 1; t < r.run.tags.size(); ++t) {
          const auto w = r.run.window(static_cast<std::int32_t>(t));
          if (w.first >= 0) windows[py::str(r.run.tags[t])] = py::make_tuple(w.first, w.second);
        }
        d["phase_windows_ps"] = windows;
        return d;
      },
      py::arg("system"), py::arg("phase"), py::arg("case"), py::arg("t_q"), py::arg("s_kv"), py::arg("tile_q") = 256,
      py::arg("tile_s") = 256, py::arg("kv_buffers") = 2, py::arg("sip") = 0, py::arg("cubes") = Cubes{},
      py::arg("precision") = "fp16",
      "Build and run one GQA case on the system (same arguments as gqa_plan). Returns a dict: plan, latency_ps, "
      "engine_busy_ps and engine_occupancy per engine kind, link_bytes per link class, op_counts and op_bytes by "
      "op kind, peak_scratch (most any PE held), phase_windows_ps per tag, run (the RunResult: op log, engines).");
}

}  // namespace kernbench::bindings
