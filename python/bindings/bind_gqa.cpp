// bind_gqa.cpp -- the GQA attention model from Python: plan a case, or run
// it and get its metrics, as plain dicts (kernbench.gqa wraps them).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <utility>
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

// Test hook for the numeric check: `p` rebuilt op by op through the Program
// API, without the dependency edges (op, on) in `drop` and with the keys
// (op, key) in `rekey` given to those sends and recvs.
runtime::Program edited(const runtime::Program& p, const std::vector<std::pair<runtime::OpId, runtime::OpId>>& drop,
                        const std::vector<std::pair<runtime::OpId, std::int64_t>>& rekey) {
  using runtime::OpId;
  using runtime::OpKind;
  runtime::Program q(p.name());
  for (std::size_t t = 1; t < p.tags().size(); ++t) q.tag(p.tags()[t]);
  for (const auto& [op, on] : drop)
    if (op >= p.size() || std::find(p.op(op).deps.begin(), p.op(op).deps.end(), on) == p.op(op).deps.end())
      throw UsageError(p.name() + ": op " + std::to_string(op) + " does not depend on op " + std::to_string(on));
  for (const auto& [op, key] : rekey)
    if (op >= p.size() || (p.op(op).kind != OpKind::Send && p.op(op).kind != OpKind::Recv))
      throw UsageError(p.name() + ": op " + std::to_string(op) + " is not a send or recv");
  for (OpId i = 0; i < p.size(); ++i) {
    const runtime::Op& o = p.op(i);
    std::vector<OpId> deps;
    for (OpId d : o.deps)
      if (std::find(drop.begin(), drop.end(), std::pair<OpId, OpId>{i, d}) == drop.end()) deps.push_back(d);
    std::int64_t key = o.key;
    for (const auto& [op, k] : rekey)
      if (op == i) key = k;
    switch (o.kind) {
      case OpKind::Dma: q.dma(o.agent, o.move, deps, o.name, o.tag); break;
      case OpKind::Gemm: q.gemm(o.agent, o.flops, o.precision, deps, o.name, o.tag); break;
      case OpKind::Vector: q.vector(o.agent, o.bytes, deps, o.name, o.tag); break;
      case OpKind::Alloc: q.alloc(o.agent, o.bytes, deps, o.name); break;
      case OpKind::Free: {
        // free() adds its alloc as the last dependency itself.
        const auto it = std::find(deps.rbegin(), deps.rend(), o.target);
        if (it != deps.rend()) deps.erase(std::next(it).base());
        q.free(o.target, deps, o.name);
        break;
      }
      case OpKind::Send: q.send(o.agent, o.move.dst, o.move.bytes, key, deps, o.name, o.tag, o.move.src); break;
      case OpKind::Recv: q.recv(o.agent, o.peer, key, deps, o.name, o.tag, o.recv_mode); break;
      case OpKind::Barrier: q.barrier(o.agent, deps, o.name); break;
      case OpKind::Composite: throw UsageError(p.name() + ": edited() does not rebuild composites");
      case OpKind::SwitchReduce:
        q.switch_reduce(o.agent, p.switch_groups()[o.pipeline], o.move.bytes, deps, o.name, o.tag);
        break;
      case OpKind::Coflow:
        q.coflow(o.agent, p.coflows()[o.pipeline], o.move.bytes, o.latency, deps, o.name, o.tag);
        break;
      case OpKind::Launch:
      case OpKind::Kernel:  // a GQA program runs on SIP PEs: it has no GPU kernels to rebuild
        throw UsageError(p.name() + ": edited() does not rebuild GPU launches and kernels");
    }
    if ((o.kind == OpKind::Send || o.kind == OpKind::Recv || o.kind == OpKind::SwitchReduce) && !o.slices.empty())
      q.set_slices(i, o.slices);
  }
  return q;
}

}  // namespace

void bind_gqa(py::module_& m) {
  using Cubes = std::vector<int>;
  m.def(
      "gqa_plan",
      [](const System& s, const std::string& phase, int gqa_case, std::int64_t t_q, std::int64_t s_kv,
         std::int64_t tile_q, std::int64_t tile_s, std::uint32_t kv_buffers, int sip, const Cubes& cubes,
         const std::string& precision) {
        return plan_dict(
            plan_gqa(s, make_spec(phase, gqa_case, t_q, s_kv, tile_q, tile_s, kv_buffers, sip, cubes, precision)));
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
  m.def(
      "gqa_program",
      [](const System& s, const std::string& phase, int gqa_case, std::int64_t t_q, std::int64_t s_kv,
         std::int64_t tile_q, std::int64_t tile_s, std::uint32_t kv_buffers, int sip, const Cubes& cubes,
         const std::string& precision, int h_q, std::int64_t d_head, std::int64_t elem_bytes, int pe_first,
         int pe_count) {
        GqaSpec spec = make_spec(phase, gqa_case, t_q, s_kv, tile_q, tile_s, kv_buffers, sip, cubes, precision);
        // The group's shape and PEs (defaults: GqaSpec's, 8 query heads of 128 on every PE of the cubes);
        // the workload lowering places one KV group of any model on chosen PEs of a cube.
        spec.h_q = h_q;
        spec.d_head = d_head;
        spec.elem_bytes = elem_bytes;
        spec.pe_first = pe_first;
        spec.pe_count = pe_count;
        return gqa_program(s, spec);
      },
      py::arg("system"), py::arg("phase"), py::arg("case"), py::arg("t_q"), py::arg("s_kv"), py::arg("tile_q") = 256,
      py::arg("tile_s") = 256, py::arg("kv_buffers") = 2, py::arg("sip") = 0, py::arg("cubes") = Cubes{},
      py::arg("precision") = "fp16", py::arg("h_q") = 8, py::arg("d_head") = 128, py::arg("elem_bytes") = 2,
      py::arg("pe_first") = 0, py::arg("pe_count") = 0,
      "The Program of one GQA case (same arguments as gqa_plan, plus the group's query heads h_q, head size d_head, "
      "element size and the PEs pe_first .. pe_first + pe_count - 1 of each cube), to append to another.");
  m.def(
      "gqa_dataflow_run",
      [](System& s, const std::string& phase, int gqa_case, std::int64_t t_q, std::int64_t s_kv, std::int64_t tile_q,
         std::int64_t tile_s, std::uint32_t kv_buffers, int sip, const Cubes& cubes, const std::string& precision,
         const std::vector<std::pair<runtime::OpId, runtime::OpId>>& drop_deps,
         const std::vector<std::pair<runtime::OpId, std::int64_t>>& set_keys) {
        const GqaSpec spec = make_spec(phase, gqa_case, t_q, s_kv, tile_q, tile_s, kv_buffers, sip, cubes, precision);
        GqaPlan plan;
        std::vector<GqaOpData> data;
        runtime::Program prog = gqa_program(s, spec, &plan, &data);
        if (!drop_deps.empty() || !set_keys.empty()) prog = edited(prog, drop_deps, set_keys);
        runtime::RunResult run;
        poll_python_signals(s.sim());
        {
          py::gil_scoped_release nogil;
          run = runtime::Executor(s).run(prog);
        }
        const std::size_t n = prog.size();
        py::list kind(n), agent(n), peer(n), key(n), deps(n), name(n), role(n), buffer(n), first(n), lo(n), hi(n),
            rows(n), start(n), end(n);
        for (std::size_t i = 0; i < n; ++i) {
          const runtime::Op& o = prog.op(static_cast<runtime::OpId>(i));
          const GqaOpData& g = data[i];
          kind[i] = runtime::to_string(o.kind);
          agent[i] = o.agent;
          peer[i] = o.kind == runtime::OpKind::Send   ? static_cast<std::int64_t>(o.move.dst)
                    : o.kind == runtime::OpKind::Recv ? static_cast<std::int64_t>(o.peer)
                                                      : -1;
          key[i] = o.key;
          deps[i] = o.deps;
          name[i] = o.name;
          role[i] = to_string(g.role);
          buffer[i] = g.buffer;
          first[i] = g.first;
          lo[i] = g.lo;
          hi[i] = g.hi;
          rows[i] = g.rows;
          start[i] = run.ops[i].start;
          end[i] = run.ops[i].end;
        }
        py::dict ops;
        ops["kind"] = kind;
        ops["agent"] = agent;
        ops["peer"] = peer;
        ops["key"] = key;
        ops["deps"] = deps;
        ops["name"] = name;
        ops["role"] = role;
        ops["buffer"] = buffer;
        ops["first"] = first;
        ops["lo"] = lo;
        ops["hi"] = hi;
        ops["rows"] = rows;
        ops["start_ps"] = start;
        ops["end_ps"] = end;
        py::dict d;
        d["ops"] = ops;
        d["plan"] = plan_dict(plan);
        d["latency_ps"] = run.makespan();
        return d;
      },
      py::arg("system"), py::arg("phase"), py::arg("case"), py::arg("t_q"), py::arg("s_kv"), py::arg("tile_q") = 256,
      py::arg("tile_s") = 256, py::arg("kv_buffers") = 2, py::arg("sip") = 0, py::arg("cubes") = Cubes{},
      py::arg("precision") = "fp16", py::arg("drop_deps") = std::vector<std::pair<runtime::OpId, runtime::OpId>>{},
      py::arg("set_keys") = std::vector<std::pair<runtime::OpId, std::int64_t>>{},
      "Build and run one GQA case's Program (as gqa_run) and return what the numeric check interprets: per op "
      "(columns) its kind, agent, peer, key, deps, name and GqaOpData (role, buffer, first, lo, hi, rows) with its "
      "start and end in the run; plan; latency_ps. Test hook: drop_deps [(op, on)] removes those dependency edges "
      "and set_keys [(op, key)] rekeys those sends/recvs before the run.");
}

}  // namespace kernbench::bindings
