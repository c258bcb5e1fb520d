// config.hpp -- the typed `k200:` section: everything about a Kunlun K200
// host that is not the graph (driver knobs and costs, eDMA channels, host
// copy threads, launch/dispatch, the compute clusters of a die).
//
// The graph section of configs/k200.yaml holds the hardware nodes and links
// (host DRAM, CPU, root complex, per card a PCIe link, a card switch, two
// dies with HBM); this section holds the parameters the K200 protocol model
// (src/platforms/k200/) reads. Defaults live here, in one place; the keys
// are bound to these members once, in config_section.cpp, and the YAML
// comments say where each value comes from.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/units.hpp"

namespace kernbench::platforms::k200 {

/// How an elementwise kernel's bytes stream (K200ComputeConfig::elementwise_rate): `fitted` -- at the rate the
/// single-kernel waits fit, at every size (capped by the die's HBM link); `hbm` -- the fitted rate up to
/// elementwise_reference_elements, every byte beyond at the die's HBM link rate (the datasheet peak).
enum class ElementwiseRate { Fitted, Hbm };
inline const char* to_string(ElementwiseRate r) { return r == ElementwiseRate::Fitted ? "fitted" : "hbm"; }
inline std::optional<ElementwiseRate> elementwise_rate_from_string(std::string_view s) {
  if (s == "fitted") return ElementwiseRate::Fitted;
  if (s == "hbm") return ElementwiseRate::Hbm;
  return std::nullopt;
}
inline std::vector<std::string> elementwise_rate_names() { return {"fitted", "hbm"}; }

/// How a conv reaches its GEMM (K200ComputeConfig::conv): `im2col` materialises the lowered matrix through HBM
/// at lowering_bandwidth first; `implicit` lowers inside the GEMM's panel fetch (no copy).
enum class ConvLowering { Im2col, Implicit };
inline const char* to_string(ConvLowering c) { return c == ConvLowering::Im2col ? "im2col" : "implicit"; }
inline std::optional<ConvLowering> conv_lowering_from_string(std::string_view s) {
  if (s == "im2col") return ConvLowering::Im2col;
  if (s == "implicit") return ConvLowering::Implicit;
  return std::nullopt;
}
inline std::vector<std::string> conv_lowering_names() { return {"im2col", "implicit"}; }

/// Where in its [sleep_min, sleep_max] range a D2D completion's usleep_range-style sleep wakes (K200D2dConfig):
/// `low` -- at sleep_min (another timer expires in the range and the hrtimer code runs this one with it);
/// `high` -- at sleep_max (nothing else expires: the hard expiry, an idle CPU).
enum class D2dWake { Low, High };
inline const char* to_string(D2dWake w) { return w == D2dWake::Low ? "low" : "high"; }
inline std::optional<D2dWake> d2d_wake_from_string(std::string_view s) {
  if (s == "low") return D2dWake::Low;
  if (s == "high") return D2dWake::High;
  return std::nullopt;
}
inline std::vector<std::string> d2d_wake_names() { return {"low", "high"}; }

/// The host link of each card: its raw rate and the framing the model
/// derives the payload bandwidth from (see K200::pcie_payload_bytes_per_s).
struct K200PcieConfig {
  std::string link_class = "pcie";          ///< graph edge class of the card <-> root complex links
  sim::Bandwidth lane_rate{2'000'000'000};  ///< raw bit rate of one lane (16 GT/s = 16 Gb/s)
  int lanes = 8;
  int encoding_data_bits = 128;                    ///< line code: data bits per block
  int encoding_total_bits = 130;                   ///< line code: bits on the wire per block
  sim::Bytes tlp_payload = 256;                    ///< max payload per TLP (MPS)
  sim::Bytes tlp_overhead = 24;                    ///< framing + header + LCRC per TLP
  sim::Time read_latency = 3 * sim::kMicrosecond;  ///< extra round trip of an eDMA read (H2D) op
};

/// Driver knobs and the costs of the driver's paths.
struct K200DriverConfig {
  int kl1_dma_direct = 1;    ///< 1: pinned buffers go straight to the eDMA; 0: they bounce like pageable
  int kl1_bounce_pipe = 1;   ///< 1: pageable copies > pipe_threshold use the overlapped bounce pipeline
  int kl1_bounce_d2h = 1;    ///< D2H bounce mode: 1 single-issue, 2 dual-concurrent
  int kl1_pageable_pin = 0;  ///< 1: pageable copies >= pin_min pin user pages, one eDMA per page
  int kl1_p2p_stub = 0;      ///< 1: peer copies take the user-space fallback (debug stub)
  sim::Time call_overhead = 5 * sim::kMicrosecond;            ///< fixed cost of a pinned copy call
  sim::Time pageable_call_overhead = 17 * sim::kMicrosecond;  ///< fixed cost of a pageable copy call
  sim::Bytes page = 4 * sim::kKiB;
  sim::Time map_per_page = 5 * sim::kNanosecond;   ///< map + unmap of one page of a pinned segment
  sim::Time segment_overhead = sim::kMicrosecond;  ///< fixed cost of a pinned segment (map/unmap calls)
  sim::Time edma_setup = sim::kMicrosecond;        ///< descriptor program + doorbell, per eDMA op
  sim::Time poll_period = 2 * sim::kMicrosecond;   ///< completion polling period
  sim::Time poll_timeout = 20 * sim::kSecond;      ///< a completion later than this is an error
  sim::Bytes hugepage = 2 * sim::kMiB;             ///< pinned chunk (and max segment)
  sim::Bytes hugepage_pool = 512 * sim::kMiB;      ///< pinned memory the driver can hand out
  sim::Bytes bounce_buffer = sim::kMiB;            ///< bounce buffer size (per channel)
  int bounce_h2d_buffers = 2;
  int bounce_d2h_buffers = 3;
  sim::Bytes pipe_threshold = sim::kMiB;                  ///< pageable copies <= this take the serial path
  sim::Bytes pin_min = 64 * sim::kKiB;                    ///< page pinning applies from this size up
  int pin_batch = 512;                                    ///< pages pinned per batch
  sim::Time pin_per_page = 2 * sim::kMicrosecond;         ///< per-page cost of the pin path
  sim::Time pin_batch_overhead = 10 * sim::kMicrosecond;  ///< per-batch cost (get_user_pages call)
  sim::Bytes p2p_chunk = sim::kMiB;
  int p2p_buffers = 2;
  sim::Time p2p_handoff = 5 * sim::kMicrosecond;  ///< per-chunk hand-off between the two dies
  sim::Bytes stock_bounce = 128 * sim::kKiB;      ///< stock (pre-tuning) driver's bounce chunk
};

/// Host side: the CPU copy threads of the bounce path.
struct K200HostConfig {
  int copy_threads = 2;                           ///< concurrent memcpy threads
  sim::Bandwidth copy_from_user{10'000'000'000};  ///< user -> bounce memcpy, per thread
  sim::Bandwidth copy_to_user{8'000'000'000};     ///< bounce -> user memcpy, per thread
};

/// The eDMA engine of a card.
struct K200EdmaConfig {
  int channels_per_card = 8;
  int channels_per_die = 3;
};

/// Device-to-device copies inside one die.
struct K200D2dConfig {
  sim::Bandwidth bandwidth{66'000'000'000};
  sim::Time sleep_min = 10 * sim::kMicrosecond;  ///< first sleep of the completion sleep-poll
  sim::Time sleep_max = sim::kMillisecond;       ///< last sleep of the range
  D2dWake wake = D2dWake::Low;                   ///< where in [sleep_min, sleep_max] each sleep wakes
};

/// Kernel launch and device dispatch.
struct K200LaunchConfig {
  sim::Time host_prep = 1650 * sim::kNanosecond;       ///< per launch, on the calling host thread
  sim::Time queue_submit = 600 * sim::kNanosecond;     ///< per launch, holding the device command queue
  sim::Time dispatch_base = 5 * sim::kMicrosecond;     ///< device: per kernel, the stream's command fetch
  sim::Time dispatch_per_cluster = sim::kMicrosecond;  ///< device: per cluster a kernel uses
  sim::Time wait_overhead = 2 * sim::kMicrosecond;     ///< host: noticing a finished kernel in a wait
};

/// The compute of one die (a "PD") and the xdnn fc (GEMM) kernel's mapping
/// onto it (see gemm.cpp for the mechanism).
struct K200ComputeConfig {
  std::int64_t clock_hz = 900'000'000;
  int clusters = 8;
  int cores_per_cluster = 16;
  int fp32_flops_per_cycle = 2000;  ///< per cluster
  int fp16_flops_per_cycle = 8000;  ///< per cluster
  int default_ncluster = 8;
  int elementwise_operands = 3;                         ///< tensors an elementwise kernel streams (a + b -> c: 3)
  sim::Bandwidth elementwise_bandwidth{4'000'000'000};  ///< per cluster: operand bytes streamed per second
  sim::Bandwidth elementwise_serial_bandwidth{0};       ///< the part that does not spread over clusters (0: none)
  ElementwiseRate elementwise_rate = ElementwiseRate::Fitted;  ///< how large kernels stream (see ElementwiseRate)
  int elementwise_reference_elements = 5120;                   ///< hbm: the fitted rate up to this many elements
  ConvLowering conv = ConvLowering::Im2col;                    ///< how a conv reaches its GEMM
  sim::Bandwidth lowering_bandwidth{0};         ///< conv -> GEMM lowering (im2col): bytes read + written per second
  sim::Bytes gemm_block_bytes = sim::kKiB;      ///< output block per cluster: a side of this many bytes of elements
  int core_tile_m = 16;                         ///< a core's micro-tile: rows of C
  int core_tile_n = 16;                         ///< a core's micro-tile: columns of C
  int core_tile_k = 32;                         ///< K is consumed in steps of this many elements
  sim::Bytes kpanel_capacity = 10 * sim::kKiB;  ///< per core: K-panel bytes held without spilling
  double fp32_efficiency = 60;                  ///< % of a core's peak on a full micro-tile (no spill)
  double fp16_efficiency = 75;
  double spill_penalty = 100;                ///< % extra compute once the K panel spills
  sim::Bandwidth operand_scan_bandwidth{0};  ///< per fc call, the max-finding pass over A and B; 0 = none
  double operand_scan_element_rate = 0;      ///< that pass's elements per second, whatever their width; 0 = no limit
  sim::Time fc_overhead = 40 * sim::kMicrosecond;  ///< per xdnn fc call, besides launch/dispatch/wait
  sim::Bytes hbm_capacity = 8 * sim::kGiB;         ///< HBM per die: a GEMM's operands must fit
};

/// The whole `k200:` section.
struct K200Config {
  K200PcieConfig pcie;
  K200DriverConfig driver;
  K200HostConfig host;
  K200EdmaConfig edma;
  K200D2dConfig d2d;
  K200LaunchConfig launch;
  K200ComputeConfig compute;
};

}  // namespace kernbench::platforms::k200
