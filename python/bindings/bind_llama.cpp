// bind_llama.cpp -- the LLaMA-3.1-70B decoder layer from Python: plan it, or
// run it and get latency, tokens/s, per-phase times and the RunResult, as
// plain dicts (kernbench.llama wraps them).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "workloads/llama.hpp"
#include "sim/errors.hpp"

namespace py = pybind11;
using namespace kernbench::workloads;
using kernbench::topology::System;

namespace kernbench::bindings {
namespace {

using Refs = std::vector<NodeRef>;

LlamaSpec make_spec(const System& sys, const Refs& pes, const std::string& phase, std::int64_t tokens,
                    std::int64_t s_kv, int tp, int replicas, int first_pe, int chunks, const std::string& precision,
                    const std::string& allreduce, std::int64_t tile_q, std::int64_t tile_s, const py::dict& dims) {
  LlamaSpec s;
  s.phase = llama_phase_from(phase);
  s.tokens = tokens;
  s.s_kv = s_kv;
  s.tp = tp;
  s.replicas = replicas;
  s.first_pe = first_pe;
  s.chunks = chunks;
  s.precision = precision_from(precision);
  s.allreduce = allreduce;
  s.tile_q = tile_q;
  s.tile_s = tile_s;
  for (std::size_t i = 0; i < pes.size(); ++i)
    s.pes.push_back(resolve(sys, pes[i], "llama pes[" + std::to_string(i) + "]"));
  for (const auto& [k, v] : dims) {
    const std::string key = py::str(k);
    const auto val = v.cast<std::int64_t>();
    if (key == "hidden")
      s.dims.hidden = val;
    else if (key == "heads")
      s.dims.heads = static_cast<int>(val);
    else if (key == "kv_heads")
      s.dims.kv_heads = static_cast<int>(val);
    else if (key == "head_dim")
      s.dims.head_dim = val;
    else if (key == "intermediate")
      s.dims.intermediate = val;
    else if (key == "elem_bytes")
      s.dims.elem_bytes = val;
    else
      throw UsageError("llama dims: unknown key '" + key +
                       "' (known: hidden, heads, kv_heads, head_dim, intermediate, elem_bytes)");
  }
  return s;
}

py::dict plan_dict(const LlamaPlan& p) {
  py::dict d;
  d["phase"] = std::string(to_string(p.spec.phase));
  d["tokens"] = p.spec.tokens;
  d["s_kv"] = p.spec.s_kv;
  d["tp"] = p.spec.tp;
  d["replicas"] = p.spec.replicas;
  d["chunks"] = p.spec.chunks;
  d["chunk_tokens"] = p.chunk_tokens;
  d["allreduce"] = p.spec.allreduce;
  d["group_pes"] = p.group_pes;
  d["groups_per_rank"] = p.groups_per_rank;
  d["gqa_case"] = p.gqa_case;
  d["ranks"] = p.ranks;
  d["flops_qkv"] = p.flops_qkv;
  d["flops_attention"] = p.flops_attention;
  d["flops_o"] = p.flops_o;
  d["flops_mlp"] = p.flops_mlp;
  d["flops_model"] = p.flops_model;
  d["flops_executed"] = p.flops_executed;
  d["vector_bytes"] = p.vector_bytes;
  d["allreduce_bytes"] = p.allreduce_bytes;
  d["weight_bytes_per_rank"] = p.weight_bytes_per_rank;
  d["kv_cache_bytes"] = p.kv_cache_bytes;
  return d;
}

}  // namespace

void bind_llama(py::module_& m) {
  const char* args_doc =
      "phase 'prefill' (tokens = prompt = S_kv) or 'decode' (tokens = batch of sequences, s_kv per sequence); tp "
      "divides the 64 query heads; replicas data-parallel copies on the next tp PEs each from first_pe (placement "
      "order: SIP, cubes in snake order, PE); chunks micro-batches (0: auto); allreduce a ccl algorithm; dims "
      "overrides the model dimensions (hidden, heads, kv_heads, head_dim, intermediate, elem_bytes); pes an explicit "
      "placement (names or ids, tp x replicas, rank-major; a KV group's PEs consecutive in one cube).";
  m.def(
      "llama_plan",
      [](const System& s, const std::string& phase, std::int64_t tokens, std::int64_t s_kv, int tp, int replicas,
         int first_pe, int chunks, const std::string& precision, const std::string& allreduce, std::int64_t tile_q,
         std::int64_t tile_s, const py::dict& dims, const Refs& pes) {
        return plan_dict(plan_llama(s, make_spec(s, pes, phase, tokens, s_kv, tp, replicas, first_pe, chunks, precision,
                                                 allreduce, tile_q, tile_s, dims)));
      },
      py::arg("system"), py::arg("phase"), py::arg("tokens"), py::arg("s_kv") = 0, py::arg("tp") = 8,
      py::arg("replicas") = 1, py::arg("first_pe") = 0, py::arg("chunks") = 0, py::arg("precision") = "bf16",
      py::arg("allreduce") = "ring", py::arg("tile_q") = 256, py::arg("tile_s") = 256, py::arg("dims") = py::dict(),
      py::arg("pes") = Refs{},
      (std::string("Plan one LLaMA-3.1-70B decoder layer: sharding, GQA case, analytic FLOPs and bytes. ") + args_doc)
          .c_str());
  m.def(
      "llama_run",
      [](System& s, const std::string& phase, std::int64_t tokens, std::int64_t s_kv, int tp, int replicas,
         int first_pe, int chunks, const std::string& precision, const std::string& allreduce, std::int64_t tile_q,
         std::int64_t tile_s, const py::dict& dims, const Refs& pes) {
        const LlamaSpec spec = make_spec(s, pes, phase, tokens, s_kv, tp, replicas, first_pe, chunks, precision,
                                         allreduce, tile_q, tile_s, dims);
        auto owner = std::make_shared<LlamaResult>();
        Using use(s);  // one user of the System at a time
        use.run([&] { *owner = run_llama(s, spec); });
        const LlamaResult& r = *owner;
        py::dict d;
        d["run"] = std::shared_ptr<runtime::RunResult>(owner, &owner->run);
        d["program"] = py::cast(std::move(owner->program));
        d["plan"] = plan_dict(r.plan);
        d["latency_ps"] = r.latency;
        d["tokens_per_s"] = r.tokens_per_s;
        d["flops_program"] = r.flops_program;
        d["link_bytes"] = r.link_bytes;
        d["op_counts"] = r.run.op_counts;
        d["op_bytes"] = r.run.op_bytes;
        py::dict phases;
        for (const auto& [name, p] : r.phases) {
          py::dict x;
          x["first_start_ps"] = p.first_start;
          x["last_end_ps"] = p.last_end;
          x["active_ps"] = p.active;
          x["share_ps"] = p.share;
          x["flops"] = p.flops;
          x["send_bytes"] = p.send_bytes;
          phases[py::str(name)] = x;
        }
        d["phases"] = phases;
        d["idle_ps"] = r.idle;
        return d;
      },
      py::arg("system"), py::arg("phase"), py::arg("tokens"), py::arg("s_kv") = 0, py::arg("tp") = 8,
      py::arg("replicas") = 1, py::arg("first_pe") = 0, py::arg("chunks") = 0, py::arg("precision") = "bf16",
      py::arg("allreduce") = "ring", py::arg("tile_q") = 256, py::arg("tile_s") = 256, py::arg("dims") = py::dict(),
      py::arg("pes") = Refs{},
      (std::string("Build and run one LLaMA-3.1-70B decoder layer (same arguments as llama_plan). Returns a dict: "
                   "plan, latency_ps, tokens_per_s, flops_program, phases (per phase: first_start_ps, last_end_ps, "
                   "active_ps = union of its ops' intervals, share_ps = its part of the latency, flops, send_bytes), "
                   "idle_ps (with the shares, the latency), link_bytes, op_counts, op_bytes, "
                   "run (the RunResult). ") +
       args_doc)
          .c_str());
}

}  // namespace kernbench::bindings
