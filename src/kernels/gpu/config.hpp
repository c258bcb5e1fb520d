// config.hpp -- the typed `gpu:` section: the mechanism parameters of the GPU
// execution target (pe.target: gpu). The datasheet facts of a GPU stay where
// every machine keeps them (pe.clock, pe.gemm.<precision>, the memory edge's
// bandwidth, pe.hbm.capacity); this section adds its SM count and what was
// learned about how kernels run on it. Every NVIDIA preset includes one file
// of these (configs/machines/nvidia-gpu.yaml), each value with its provenance.
#pragma once

#include "sim/units.hpp"

namespace kernbench::kernels::gpu {

using sim::Time;

struct GpuConfig {
  /// Streaming multiprocessors (datasheet). 0: the machine is not a GPU;
  /// a GPU kernel then fails naming the key.
  int sms = 0;
  /// The tensor mainloop's sustained clock under the power limit, as a
  /// fraction of pe.clock (the clock the datasheet's tensor peaks are quoted at).
  double sustained_clock_ratio = 1.0;
  /// Fraction of the memory bandwidth a streaming kernel (copy, elementwise,
  /// norm, softmax, optimizer, decode attention) sustains with every SM busy.
  double stream_efficiency = 1.0;
  /// Fraction of the memory bandwidth a GEMM's operand loads sustain when the
  /// GEMM is memory-bound (skinny M: the weights are read once).
  double gemm_memory_efficiency = 1.0;
  /// L2 -> SM operand bandwidth of the whole GPU, bytes per pe.clock cycle:
  /// every CTA loads its A and B panels through L2, so small tiles (more
  /// reloads of the same operands) are bound here. 0: no limit.
  int l2_bytes_per_clock = 0;
  /// Fraction of the tensor rate a fused attention's mainloop sustains
  /// (two GEMMs and a softmax per tile, FlashAttention-style).
  double attention_efficiency = 0.5;
  /// Host CPU time to launch one kernel from the framework (eager mode):
  /// the host runs ahead of the GPU, so it shows only when kernels are shorter.
  Time launch_host = 5 * sim::kMicrosecond;
  /// Per kernel of a CUDA graph replay (the GPU front end walks the graph).
  Time launch_graph = sim::kMicrosecond;
  /// GPU-side fixed cost of every kernel: from its launch reaching the GPU
  /// to its last CTA retired (block scheduling, pipeline fill, epilogue drain).
  Time kernel_latency = 2 * sim::kMicrosecond;
  /// Host time of the serving framework per model step (one prefill or one
  /// decode iteration): scheduling, input preparation, sampling -- the GPU
  /// idles meanwhile (a synchronous engine loop, as vLLM's). 0: none.
  Time framework_step = 0;
  /// Most K splits a GEMM may use to fill the SMs (split-K, with a reduction).
  int max_split_k = 16;
  /// Fraction of the memory capacity the framework lets the model use (vLLM's
  /// gpu_memory_utilization); the rest is its reserve.
  double memory_utilization = 0.9;
};

}  // namespace kernbench::kernels::gpu
