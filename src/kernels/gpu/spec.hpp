// spec.hpp -- one GPU of a machine as the kernel models see it: its
// datasheet facts read from where every machine keeps them (pe.clock and
// pe.gemm for the tensor peaks, the edge to its memory node for the memory
// bandwidth, pe.hbm.capacity) and the mechanism parameters of `gpu:`.
// Nothing here assumes a generated SIP/CUBE/PE machine: any graph whose PE
// names a memory works.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/gpu/config.hpp"
#include "runtime/pe_config.hpp"
#include "topology/config/config.hpp"
#include "topology/system.hpp"

namespace kernbench::kernels::gpu {

using sim::Bytes;
using topology::NodeId;
using topology::Precision;

/// ceil(a / b) for positive counts: tiles, waves, splits of the kernel models.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// How a kernel is launched (gpu.launch_host or gpu.launch_graph per kernel).
enum class Launch { Host, Graph };
const char* to_string(Launch l);

struct GpuSpec {
  std::string name;  ///< the PE node's name
  NodeId agent = 0;
  NodeId memory = 0;  ///< its memory node
  int sms = 0;
  double clock_hz = 0.0;       ///< pe.clock: the clock the tensor peaks are quoted at
  double sustained_hz = 0.0;   ///< clock_hz x gpu.sustained_clock_ratio
  sim::Bandwidth memory_bw{};  ///< the route's bottleneck to its memory (all lanes)
  Bytes memory_capacity = 0;   ///< pe.hbm.capacity
  const runtime::PeConfig* pe = nullptr;
  GpuConfig cfg;

  /// MACs per cycle of the whole GPU at `p` (pe.gemm); a ConfigError naming
  /// the key when the GPU has no such mode.
  int macs(Precision p) const;
  /// Datasheet peak FLOP/s at `p` (2 x MACs x pe.clock).
  double peak_flops(Precision p) const { return 2.0 * macs(p) * clock_hz; }
  /// One SM's sustained FLOP/s at `p` (the mainloop's rate).
  double sm_flops(Precision p) const { return 2.0 * macs(p) * sustained_hz / sms; }
  /// The achievable memory rate of a streaming kernel / of a GEMM's operands.
  sim::Bandwidth stream_bw() const { return scaled(cfg.stream_efficiency); }
  sim::Bandwidth gemm_bw() const { return scaled(cfg.gemm_memory_efficiency); }
  sim::Bandwidth scaled(double fraction) const;
  /// Host-side cost of launching one kernel.
  sim::Time launch_cost(Launch l) const { return l == Launch::Host ? cfg.launch_host : cfg.launch_graph; }
};

/// The GPU `agent` of `system` (a PE). TopologyError/ConfigError when it is
/// not a PE, names no memory, or the config declares no SMs (gpu.sms).
GpuSpec gpu_spec(topology::System& system, NodeId agent);

}  // namespace kernbench::kernels::gpu
