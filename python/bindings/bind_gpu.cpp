// bind_gpu.cpp -- the GPU execution target's kernel models from Python:
// gpu_spec / gpu_gemm / gpu_stream / gpu_attention return each model's
// figures as a dict (times in ps); Program.kernel (bind_runtime.cpp) appends
// one priced kernel. The lowering (kernbench.workloads.targets) joins them.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "bindings.hpp"
#include "kernels/gpu/attention.hpp"
#include "kernels/gpu/gemm.hpp"
#include "kernels/gpu/stream.hpp"
#include "runtime/config_section.hpp"
#include "runtime/engine_timing.hpp"

namespace py = pybind11;
using namespace kernbench::kernels::gpu;
using kernbench::topology::System;

namespace kernbench::bindings {

void bind_gpu(py::module_& m) {
  m.def(
      "exec_target",
      [](const System& s) { return std::string(runtime::to_string(runtime::pe_config(s.config()).target)); },
      py::arg("system"), "The machine's execution target, pe.target: 'sip' or 'gpu'.");
  m.def(
      "gpu_spec",
      [](System& s, const NodeRef& gpu) {
        const GpuSpec g = gpu_spec(s, resolve(s, gpu, "gpu_spec"));
        py::dict d;
        d["name"] = g.name;
        d["memory"] = s.machine().node(g.memory).name;
        d["sms"] = g.sms;
        d["clock_hz"] = g.clock_hz;
        d["sustained_hz"] = g.sustained_hz;
        d["memory_bytes_per_s"] = g.memory_bw.bytes_per_s;
        d["stream_bytes_per_s"] = g.stream_bw().bytes_per_s;
        d["gemm_bytes_per_s"] = g.gemm_bw().bytes_per_s;
        d["memory_capacity"] = g.memory_capacity;
        d["memory_utilization"] = g.cfg.memory_utilization;
        d["launch_host_ps"] = g.cfg.launch_host;
        d["launch_graph_ps"] = g.cfg.launch_graph;
        d["kernel_latency_ps"] = g.cfg.kernel_latency;
        d["framework_step_ps"] = g.cfg.framework_step;
        d["split_kv_chunk"] = kernels::gpu::kSplitChunk;  // fewest keys a split-KV CTA takes (attention.hpp)
        py::dict peaks;
        for (Precision p :
             {Precision::Fp32, Precision::Tf32, Precision::Fp16, Precision::Bf16, Precision::Fp8, Precision::Int8})
          if (runtime::gemm_macs_per_cycle(*g.pe, p) > 0) peaks[topology::to_string(p)] = g.peak_flops(p);
        d["peak_flops"] = peaks;
        return d;
      },
      py::arg("system"), py::arg("gpu"), "The GPU's datasheet facts and mechanism parameters (kernels/gpu/spec.hpp).");
  m.def(
      "gpu_gemm",
      [](System& s, const NodeRef& gpu, const py::object& m_, const py::object& n_, const py::object& k_,
         const std::string& precision) {
        const GpuSpec g = gpu_spec(s, resolve(s, gpu, "gpu_gemm"));
        const GemmKernel k = plan_gemm(g, int_arg(m_, "gpu_gemm: m"), int_arg(n_, "gpu_gemm: n"),
                                       int_arg(k_, "gpu_gemm: k"), precision_from(precision));
        py::dict d;
        d["m"] = k.m, d["n"] = k.n, d["k"] = k.k;
        d["precision"] = std::string(topology::to_string(k.precision));
        d["tile_m"] = k.tile.m, d["tile_n"] = k.tile.n, d["tile_k"] = k.tile.k;
        d["split_k"] = k.split_k, d["ctas"] = k.ctas, d["waves"] = k.waves;
        d["mainloop_ps"] = k.mainloop, d["memory_ps"] = k.memory, d["reduction_ps"] = k.reduction;
        d["duration_ps"] = k.duration;
        d["flops"] = k.flops, d["bytes"] = k.bytes;
        d["l2_ps"] = k.l2;
        d["bound"] = std::string(k.bound());
        return d;
      },
      py::arg("system"), py::arg("gpu"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("precision") = "bf16",
      "One GEMM kernel by mechanism (kernels/gpu/gemm.hpp): tile, split-K, waves, times in ps.");
  m.def(
      "gpu_stream",
      [](System& s, const NodeRef& gpu, const py::object& bytes) {
        const GpuSpec g = gpu_spec(s, resolve(s, gpu, "gpu_stream"));
        const StreamKernel k = plan_stream(g, int_arg(bytes, "gpu_stream: bytes"));
        py::dict d;
        d["bytes"] = k.bytes, d["memory_ps"] = k.memory, d["duration_ps"] = k.duration;
        return d;
      },
      py::arg("system"), py::arg("gpu"), py::arg("bytes"),
      "One memory-bound kernel moving `bytes` (kernels/gpu/stream.hpp).");
  m.def(
      "gpu_attention",
      [](System& s, const NodeRef& gpu, const py::object& batch, const py::object& heads, const py::object& kv_heads,
         const py::object& q_len, const py::object& kv_len, const py::object& head_dim, const py::object& elem_bytes,
         bool causal, const std::string& precision) {
        const GpuSpec g = gpu_spec(s, resolve(s, gpu, "gpu_attention"));
        AttentionShape a;
        a.batch = int_arg(batch, "gpu_attention: batch");
        a.heads = int_arg(heads, "gpu_attention: heads");
        a.kv_heads = int_arg(kv_heads, "gpu_attention: kv_heads");
        a.q_len = int_arg(q_len, "gpu_attention: q_len");
        a.kv_len = int_arg(kv_len, "gpu_attention: kv_len");
        a.head_dim = int_arg(head_dim, "gpu_attention: head_dim");
        a.elem_bytes = int_arg(elem_bytes, "gpu_attention: elem_bytes", 1, 8);
        a.causal = causal;
        a.precision = precision_from(precision);
        const AttentionKernel k = plan_attention(g, a);
        py::dict d;
        d["decode"] = k.decode, d["ctas"] = k.ctas, d["waves"] = k.waves, d["splits"] = k.splits;
        d["flops"] = k.flops, d["bytes"] = k.bytes;
        d["compute_ps"] = k.compute, d["memory_ps"] = k.memory, d["duration_ps"] = k.duration;
        return d;
      },
      py::arg("system"), py::arg("gpu"), py::arg("batch"), py::arg("heads"), py::arg("kv_heads"), py::arg("q_len"),
      py::arg("kv_len"), py::arg("head_dim"), py::arg("elem_bytes") = 2, py::arg("causal") = true,
      py::arg("precision") = "bf16", "One fused attention kernel (kernels/gpu/attention.hpp).");
}

}  // namespace kernbench::bindings
