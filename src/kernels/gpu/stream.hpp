// stream.hpp -- memory-bound kernels on a GPU (copies, elementwise, norms,
// softmax, the optimizer, embedding gathers): their bytes stream through the
// SMs at gpu.stream_efficiency of the memory bandwidth, plus the kernel's
// fixed latency. No DMA channel, no scratch tile: a GPU's load/store units
// read HBM directly, and every SM takes a share of the grid.
#pragma once

#include "kernels/gpu/spec.hpp"

namespace kernbench::kernels::gpu {

struct StreamKernel {
  Bytes bytes = 0;         ///< read + written
  sim::Time memory = 0;    ///< bytes at the achievable streaming rate
  sim::Time duration = 0;  ///< kernel_latency + memory
};

/// A kernel that reads and writes `bytes` in all (UsageError if negative).
StreamKernel plan_stream(const GpuSpec& gpu, Bytes bytes);

}  // namespace kernbench::kernels::gpu
