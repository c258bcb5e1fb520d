// gemm.hpp -- a GEMM kernel on an SM array, by mechanism (CUTLASS/cuBLAS-like):
//  - the output is cut into CTA tiles of one of a few configurations
//    (kGemmTiles), optionally split along K (split-K) to fill the SMs;
//  - CTAs run in waves of one CTA per SM: a tile count of SMs + 1 takes two
//    waves, and a partial tile at an edge costs a whole one;
//  - each CTA's mainloop runs at one SM's tensor rate at the sustained clock
//    (gpu.sustained_clock_ratio x pe.clock), its K padded to the tile's K step;
//  - the operands stream from memory once (L2 keeps the reuse), at
//    gpu.gemm_memory_efficiency of the memory bandwidth: the memory-bound
//    regime (a skinny M reads the weights and does little else);
//  - every CTA loads its A and B panels (tile rows/columns x K) through L2,
//    at gpu.l2_bytes_per_clock: the cost of small tiles' reloads;
//  - split-K writes FP32 partials and reduces them (a streaming pass);
//  - every kernel pays gpu.kernel_latency (block scheduling, fill, drain).
// The configuration with the least time is chosen, as cuBLAS's heuristics
// aim to; ties go to the larger tile (listed first).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/gpu/spec.hpp"

namespace kernbench::kernels::gpu {

struct GemmTile {
  int m = 0, n = 0, k = 0;
};

/// The CTA tiles tried (Hopper-class warpgroup MMA shapes; K step 64).
inline constexpr GemmTile kGemmTiles[] = {{128, 256, 64}, {256, 128, 64}, {128, 128, 64}, {64, 256, 64},
                                          {128, 64, 64},  {64, 128, 64},  {64, 64, 64}};

struct GemmKernel {
  std::int64_t m = 0, n = 0, k = 0;
  Precision precision = Precision::Bf16;
  GemmTile tile;
  int split_k = 1;
  std::int64_t ctas = 0;    ///< tiles x splits
  std::int64_t waves = 0;   ///< ceil(ctas / SMs)
  sim::Time mainloop = 0;   ///< waves x one CTA's mainloop
  sim::Time memory = 0;     ///< operand and result bytes at the GEMM's memory rate
  sim::Time l2 = 0;         ///< every CTA's operand panels through L2
  sim::Time reduction = 0;  ///< split-K partials written and summed
  sim::Time duration = 0;   ///< kernel_latency + max(mainloop, memory, l2) + reduction
  double flops = 0.0;       ///< 2 m n k (useful work, not padding)
  Bytes bytes = 0;          ///< memory traffic
  /// What bounds it: "compute" (mainloop), "memory" (HBM) or "l2".
  const char* bound() const { return memory >= mainloop && memory >= l2 ? "memory" : l2 > mainloop ? "l2" : "compute"; }
};

/// One configuration's cost: `tile`, K split `split_k` ways (what plan_gemm compares).
GemmKernel gemm_config(const GpuSpec& gpu, std::int64_t m, std::int64_t n, std::int64_t k, Precision precision,
                       const GemmTile& tile, int split_k);

/// The GEMM C[m x n] = A[m x k] B[k x n] at `precision` on `gpu`: the cheapest configuration.
/// UsageError for a non-positive or absurd size (names the dimension).
GemmKernel plan_gemm(const GpuSpec& gpu, std::int64_t m, std::int64_t n, std::int64_t k, Precision precision);

}  // namespace kernbench::kernels::gpu
