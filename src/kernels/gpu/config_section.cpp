// config_section.cpp -- the `gpu:` section, each key bound to its member of
// GpuConfig (defaults from there).
#include "kernels/gpu/config_section.hpp"

#include "config/section.hpp"

namespace kernbench::kernels::gpu {

using config::Bound;
using config::MapReader;
using config::Section;
using topology::Config;

void add_config_section(config::Schema& schema) {
  Section<Config> root(schema, schema.root());
  Section<GpuConfig> g = root.map<GpuConfig>(
      "gpu", [](Config& c) -> GpuConfig& { return c.section<GpuConfig>(); },
      "the GPU execution target's mechanism parameters (pe.target: gpu); every key has a default");
  g.doc(
      "The GPU execution target (pe.target: gpu): kernels with launch costs, GEMM on an SM array, "
      "streaming kernels, fused attention (docs/gpu-target.md). Datasheet facts stay in pe: and the graph.");
  g.add("sms", &GpuConfig::sms, "streaming multiprocessors (datasheet; 0: not a GPU)").min(Bound::NonNegative);
  g.add("sustained_clock_ratio", &GpuConfig::sustained_clock_ratio,
        "the tensor mainloop's sustained clock under the power limit / pe.clock")
      .min(Bound::Positive);
  g.add("stream_efficiency", &GpuConfig::stream_efficiency,
        "fraction of the memory bandwidth a streaming kernel sustains")
      .min(Bound::Positive);
  g.add("gemm_memory_efficiency", &GpuConfig::gemm_memory_efficiency,
        "fraction of the memory bandwidth a memory-bound GEMM's operand loads sustain")
      .min(Bound::Positive);
  g.add("l2_bytes_per_clock", &GpuConfig::l2_bytes_per_clock,
        "L2 -> SM operand bandwidth of the whole GPU per pe.clock cycle (0: no limit)")
      .min(Bound::NonNegative);
  g.add("attention_efficiency", &GpuConfig::attention_efficiency,
        "fraction of the tensor rate a fused attention's mainloop sustains")
      .min(Bound::Positive);
  g.time("launch_host", &GpuConfig::launch_host, "host time to launch one kernel (eager)").min(Bound::NonNegative);
  g.time("launch_graph", &GpuConfig::launch_graph, "per kernel of a CUDA graph replay").min(Bound::NonNegative);
  g.time("kernel_latency", &GpuConfig::kernel_latency,
         "GPU-side fixed cost of every kernel (CTA scheduling, pipeline fill, epilogue drain)")
      .min(Bound::NonNegative);
  g.time("framework_step", &GpuConfig::framework_step,
         "host time of the serving framework per model step (scheduling, inputs, sampling)")
      .min(Bound::NonNegative);
  g.add("max_split_k", &GpuConfig::max_split_k, "most K splits a GEMM may use").min(Bound::Positive);
  g.add("memory_utilization", &GpuConfig::memory_utilization,
        "fraction of the memory capacity the framework lets the model use")
      .min(Bound::Positive);
  g.rule([](const MapReader& r, GpuConfig& c) {
    const auto fraction = [&](const char* key, double v) {
      if (v > 1.0) r.fail(key, "a fraction, at most 1, got " + std::to_string(v));
    };
    fraction("stream_efficiency", c.stream_efficiency);
    fraction("gemm_memory_efficiency", c.gemm_memory_efficiency);
    fraction("attention_efficiency", c.attention_efficiency);
    fraction("memory_utilization", c.memory_utilization);
    if (c.sustained_clock_ratio > 1.5)
      r.fail("sustained_clock_ratio", "at most 1.5 x pe.clock, got " + std::to_string(c.sustained_clock_ratio));
  });
}

}  // namespace kernbench::kernels::gpu
