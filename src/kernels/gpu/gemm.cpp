// gemm.cpp -- see gemm.hpp.
#include "kernels/gpu/gemm.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/gemm.hpp"
#include "sim/errors.hpp"

namespace kernbench::kernels::gpu {

namespace {

// Largest dimension one GEMM may have: 2^31 rows (a cuBLAS int); the
// products below then stay far inside int64 and double.
constexpr std::int64_t kMaxDim = std::int64_t{1} << 31;

}  // namespace

namespace {
void check_dims(const GpuSpec& gpu, std::int64_t m, std::int64_t n, std::int64_t k) {
  for (const auto& [v, what] : {std::pair{m, "m"}, std::pair{n, "n"}, std::pair{k, "k"}})
    if (v < 1 || v > kMaxDim)
      throw UsageError("gpu gemm on " + gpu.name + ": " + what + " = " + std::to_string(v) + " (expected 1 .. 2^31)");
}
}  // namespace

GemmKernel gemm_config(const GpuSpec& gpu, std::int64_t m, std::int64_t n, std::int64_t k, Precision precision,
                       const GemmTile& t, int s) {
  check_dims(gpu, m, n, k);
  if (t.m < 1 || t.n < 1 || t.k < 1 || s < 1) throw UsageError("gpu gemm on " + gpu.name + ": bad tile or split");
  const double sm_rate = gpu.sm_flops(precision);
  const Bytes e = topology::element_bytes(precision);
  const Bytes c_e = gemm_c_elem_bytes(precision);  // the SIP GEMM's rule: int32 for int8, 16 bits for fp8
  const double io = static_cast<double>(m) * k * e + static_cast<double>(k) * n * e + static_cast<double>(m) * n * c_e;
  const std::int64_t tiles = ceil_div(m, t.m) * ceil_div(n, t.n);
  const std::int64_t k_steps = ceil_div(k, t.k);
  GemmKernel g;
  g.m = m, g.n = n, g.k = k, g.precision = precision, g.tile = t, g.split_k = s;
  g.ctas = tiles * s;
  g.waves = ceil_div(g.ctas, gpu.sms);
  const double cta_k = static_cast<double>(ceil_div(k_steps, s) * t.k);  // K padded to whole steps
  const double cta_flops = 2.0 * t.m * t.n * cta_k;
  g.mainloop = sim::ps_from_double(static_cast<double>(g.waves) * cta_flops / sm_rate * 1e12, "gpu gemm mainloop");
  g.bytes = static_cast<Bytes>(io);
  g.memory = sim::transfer_time(g.bytes, gpu.gemm_bw());
  if (gpu.cfg.l2_bytes_per_clock > 0) {
    const double panels = static_cast<double>(g.ctas) * (t.m + t.n) * cta_k * static_cast<double>(e);
    g.l2 = sim::ps_from_double(panels / (gpu.cfg.l2_bytes_per_clock * gpu.clock_hz) * 1e12, "gpu gemm l2");
  }
  if (s > 1) {  // FP32 partials: each split writes m x n, one pass reads them all back
    const Bytes partials = static_cast<Bytes>(2.0 * s * static_cast<double>(m) * n * 4);
    g.reduction = sim::transfer_time(partials, gpu.stream_bw());
    g.bytes += partials;
  }
  g.duration = gpu.cfg.kernel_latency + std::max({g.mainloop, g.memory, g.l2}) + g.reduction;
  g.flops = 2.0 * static_cast<double>(m) * n * k;
  return g;
}

GemmKernel plan_gemm(const GpuSpec& gpu, std::int64_t m, std::int64_t n, std::int64_t k, Precision precision) {
  check_dims(gpu, m, n, k);
  GemmKernel best;
  best.duration = std::numeric_limits<sim::Time>::max();
  for (const GemmTile& t : kGemmTiles) {
    const std::int64_t tiles = ceil_div(m, t.m) * ceil_div(n, t.n);
    // Split K only to fill idle SMs, into at least one K step per split.
    int max_split = 1;
    if (tiles < gpu.sms)
      max_split =
          static_cast<int>(std::min<std::int64_t>({gpu.cfg.max_split_k, ceil_div(gpu.sms, tiles), ceil_div(k, t.k)}));
    for (int s = 1; s <= max_split; ++s) {
      const GemmKernel g = gemm_config(gpu, m, n, k, precision, t, s);
      if (g.duration < best.duration) best = g;
    }
  }
  return best;
}

}  // namespace kernbench::kernels::gpu
