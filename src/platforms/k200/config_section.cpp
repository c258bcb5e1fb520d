// config_section.cpp -- the `k200:` section: each key bound to its member
// of K200Config (defaults from config.hpp); the cross-key rules (framing
// bits, driver knobs, hugepage vs page, channels, sleeps, clusters,
// efficiencies) are the hooks between them.
#include "platforms/k200/config_section.hpp"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "config/section.hpp"

namespace kernbench::platforms::k200 {
namespace {

using config::Bound;
using config::format_bytes;
using config::format_time;
using config::MapReader;
using config::Section;
using topology::Config;

// 0 or 1 (or the values in `allowed`): the driver's knobs are module parameters.
void knob(const MapReader& r, std::string_view name, int value, std::initializer_list<int> allowed) {
  if (!r.get(name) || std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
  std::vector<std::string> v;
  for (int a : allowed) v.push_back(std::to_string(a));
  r.fail(name, "expected one of " + config::join(v, ", ") + ", got " + std::to_string(value));
}

}  // namespace

void add_config_section(config::Schema& schema) {
  Section<Config> root(schema, schema.root());
  root.rule([](const MapReader& top, Config& c) {
    if (top.get("k200") && !c.graph) top.fail_key("k200", "the K200 host is an explicit graph: give graph, not system");
  });
  Section<K200Config> k200 = root.map<K200Config>(
      "k200", [](Config& c) -> K200Config& { return c.section<K200Config>(); },
      "Kunlun K200 host parameters (with graph); every key has a default");
  k200.doc("A Kunlun K200 host (with an explicit graph): driver, eDMA, host copies, launch, compute.");
  Section<K200PcieConfig> k200_pcie = k200.map<K200PcieConfig>("pcie", &K200Config::pcie, "the card links");
  k200_pcie.doc("The host link of each card: raw rate and framing, from which the payload bandwidth is derived.");
  k200_pcie.rules({"the graph's edges of class link_class must carry lanes x lane_rate x data/total bits"});
  k200_pcie.add("link_class", &K200PcieConfig::link_class, "graph edge class of the card links");
  k200_pcie.add("lane_rate", &K200PcieConfig::lane_rate, "raw rate of one lane (16 GT/s = 16 Gb/s)")
      .min(Bound::Positive);
  k200_pcie.add("lanes", &K200PcieConfig::lanes, "lanes per link").min(Bound::Positive);
  k200_pcie.add("encoding_data_bits", &K200PcieConfig::encoding_data_bits, "line code data bits per block")
      .min(Bound::Positive);
  k200_pcie.add("encoding_total_bits", &K200PcieConfig::encoding_total_bits, "line code bits per block")
      .min(Bound::Positive);
  k200_pcie.rule([](const MapReader& p, K200PcieConfig& c) {
    if (c.encoding_data_bits > c.encoding_total_bits)
      p.fail("encoding_data_bits", "the data bits (" + std::to_string(c.encoding_data_bits) +
                                       ") exceed the block's total bits (" + std::to_string(c.encoding_total_bits) +
                                       ")");
  });
  k200_pcie.bytes("tlp_payload", &K200PcieConfig::tlp_payload, "max payload per TLP (MPS)").min(Bound::Positive);
  k200_pcie.bytes("tlp_overhead", &K200PcieConfig::tlp_overhead, "framing + header + LCRC per TLP")
      .min(Bound::NonNegative);
  k200_pcie.time("read_latency", &K200PcieConfig::read_latency, "extra round trip of an eDMA read (H2D) op")
      .min(Bound::NonNegative);
  Section<K200DriverConfig> k200_driver =
      k200.map<K200DriverConfig>("driver", &K200Config::driver, "driver knobs and path costs");
  k200_driver.doc("Driver knobs (0/1; kl1_bounce_d2h 1/2) and the costs of the driver's copy paths.");
  k200_driver.add("kl1_dma_direct", &K200DriverConfig::kl1_dma_direct, "1: pinned buffers go straight to the eDMA");
  k200_driver.rule(
      [](const MapReader& d, K200DriverConfig& v) { knob(d, "kl1_dma_direct", v.kl1_dma_direct, {0, 1}); });
  k200_driver.add("kl1_bounce_pipe", &K200DriverConfig::kl1_bounce_pipe,
                  "1: pageable copies use the overlapped bounce pipeline");
  k200_driver.rule(
      [](const MapReader& d, K200DriverConfig& v) { knob(d, "kl1_bounce_pipe", v.kl1_bounce_pipe, {0, 1}); });
  k200_driver.add("kl1_bounce_d2h", &K200DriverConfig::kl1_bounce_d2h,
                  "D2H bounce mode: 1 single-issue, 2 dual-concurrent");
  k200_driver.rule(
      [](const MapReader& d, K200DriverConfig& v) { knob(d, "kl1_bounce_d2h", v.kl1_bounce_d2h, {1, 2}); });
  k200_driver.add("kl1_pageable_pin", &K200DriverConfig::kl1_pageable_pin, "1: pin user pages, one eDMA per page");
  k200_driver.rule(
      [](const MapReader& d, K200DriverConfig& v) { knob(d, "kl1_pageable_pin", v.kl1_pageable_pin, {0, 1}); });
  k200_driver.add("kl1_p2p_stub", &K200DriverConfig::kl1_p2p_stub, "1: peer copies take the user-space fallback");
  k200_driver.rule([](const MapReader& d, K200DriverConfig& v) { knob(d, "kl1_p2p_stub", v.kl1_p2p_stub, {0, 1}); });
  k200_driver.time("call_overhead", &K200DriverConfig::call_overhead, "fixed cost of a pinned copy call")
      .min(Bound::NonNegative);
  k200_driver
      .time("pageable_call_overhead", &K200DriverConfig::pageable_call_overhead, "fixed cost of a pageable copy call")
      .min(Bound::NonNegative);
  k200_driver.bytes("page", &K200DriverConfig::page, "host page size").min(Bound::Positive);
  k200_driver.time("map_per_page", &K200DriverConfig::map_per_page, "map + unmap of one page of a pinned segment")
      .min(Bound::NonNegative);
  k200_driver.time("segment_overhead", &K200DriverConfig::segment_overhead, "fixed cost per pinned segment")
      .min(Bound::NonNegative);
  k200_driver.time("edma_setup", &K200DriverConfig::edma_setup, "descriptor programming + doorbell per eDMA op")
      .min(Bound::NonNegative);
  k200_driver.time("poll_period", &K200DriverConfig::poll_period, "completion polling period").min(Bound::Positive);
  k200_driver.time("poll_timeout", &K200DriverConfig::poll_timeout, "completion timeout").min(Bound::Positive);
  k200_driver.bytes("hugepage", &K200DriverConfig::hugepage, "pinned chunk and max segment").min(Bound::Positive);
  k200_driver.bytes("hugepage_pool", &K200DriverConfig::hugepage_pool, "pinned memory the driver can hand out")
      .min(Bound::NonNegative);
  k200_driver.bytes("bounce_buffer", &K200DriverConfig::bounce_buffer, "bounce buffer size").min(Bound::Positive);
  k200_driver.add("bounce_h2d_buffers", &K200DriverConfig::bounce_h2d_buffers, "H2D bounce buffers")
      .min(Bound::Positive);
  k200_driver.add("bounce_d2h_buffers", &K200DriverConfig::bounce_d2h_buffers, "D2H bounce buffers")
      .min(Bound::Positive);
  k200_driver
      .bytes("pipe_threshold", &K200DriverConfig::pipe_threshold,
             "pageable copies up to this size take the serial path")
      .min(Bound::NonNegative);
  k200_driver.bytes("pin_min", &K200DriverConfig::pin_min, "page pinning applies from this size up")
      .min(Bound::NonNegative);
  k200_driver.add("pin_batch", &K200DriverConfig::pin_batch, "pages pinned per batch").min(Bound::Positive);
  k200_driver.time("pin_per_page", &K200DriverConfig::pin_per_page, "per-page cost of the pin path")
      .min(Bound::NonNegative);
  k200_driver.time("pin_batch_overhead", &K200DriverConfig::pin_batch_overhead, "per-batch cost of the pin path")
      .min(Bound::NonNegative);
  k200_driver.bytes("p2p_chunk", &K200DriverConfig::p2p_chunk, "peer copy chunk").min(Bound::Positive);
  k200_driver.add("p2p_buffers", &K200DriverConfig::p2p_buffers, "peer copy bounce buffers").min(Bound::Positive);
  k200_driver.time("p2p_handoff", &K200DriverConfig::p2p_handoff, "per-chunk hand-off between the dies")
      .min(Bound::NonNegative);
  k200_driver.bytes("stock_bounce", &K200DriverConfig::stock_bounce, "stock driver's bounce chunk")
      .min(Bound::Positive);
  k200_driver.rule([](const MapReader& d, K200DriverConfig& v) {
    if (v.hugepage % v.page != 0)
      d.fail("hugepage", "the hugepage (" + format_bytes(v.hugepage) + ") must be a multiple of the page (" +
                             format_bytes(v.page) + ")");
  });
  Section<K200HostConfig> k200_host = k200.map<K200HostConfig>("host", &K200Config::host, "host copy threads");
  k200_host.doc("Host CPU copy threads of the bounce path.");
  k200_host.add("copy_threads", &K200HostConfig::copy_threads, "concurrent memcpy threads").min(Bound::Positive);
  k200_host.add("copy_from_user", &K200HostConfig::copy_from_user, "user -> bounce memcpy per thread")
      .min(Bound::Positive);
  k200_host.add("copy_to_user", &K200HostConfig::copy_to_user, "bounce -> user memcpy per thread").min(Bound::Positive);
  Section<K200EdmaConfig> k200_edma = k200.map<K200EdmaConfig>("edma", &K200Config::edma, "eDMA channels");
  k200_edma.doc("The eDMA engine of a card.");
  k200_edma.add("channels_per_card", &K200EdmaConfig::channels_per_card, "channels per card").min(Bound::Positive);
  k200_edma.add("channels_per_die", &K200EdmaConfig::channels_per_die, "channels a die may hold").min(Bound::Positive);
  k200_edma.rule([](const MapReader& e, K200EdmaConfig& c) {
    if (c.channels_per_die > c.channels_per_card)
      e.fail("channels_per_die", "a die cannot hold more channels (" + std::to_string(c.channels_per_die) +
                                     ") than its card has (" + std::to_string(c.channels_per_card) + ")");
  });
  Section<K200D2dConfig> k200_d2d = k200.map<K200D2dConfig>("d2d", &K200Config::d2d, "device-to-device copies");
  k200_d2d.doc("Device-to-device copies inside one die.");
  k200_d2d.add("bandwidth", &K200D2dConfig::bandwidth, "copy bandwidth").min(Bound::Positive);
  k200_d2d.time("sleep_min", &K200D2dConfig::sleep_min, "first of the completion sleep's range (usleep_range min)")
      .min(Bound::Positive);
  k200_d2d.time("sleep_max", &K200D2dConfig::sleep_max, "last of the sleep's range (usleep_range max)")
      .min(Bound::Positive);
  k200_d2d.choice("wake", &K200D2dConfig::wake,
                  "where each completion sleep wakes in [sleep_min, sleep_max]: low (another timer expires in "
                  "the range) or high (the hard expiry, nothing else expires)",
                  d2d_wake_names(), d2d_wake_from_string);
  k200_d2d.rule([](const MapReader& d, K200D2dConfig& c) {
    if (c.sleep_max < c.sleep_min)
      d.fail("sleep_max",
             "sleep_max (" + format_time(c.sleep_max) + ") is below sleep_min (" + format_time(c.sleep_min) + ")");
  });
  Section<K200LaunchConfig> k200_launch =
      k200.map<K200LaunchConfig>("launch", &K200Config::launch, "kernel launch and dispatch");
  k200_launch.doc("Kernel launch (host) and dispatch (device).");
  k200_launch.time("host_prep", &K200LaunchConfig::host_prep, "per launch, on the calling thread")
      .min(Bound::NonNegative);
  k200_launch.time("queue_submit", &K200LaunchConfig::queue_submit, "per launch, holding the device command queue")
      .min(Bound::NonNegative);
  k200_launch
      .time("dispatch_base", &K200LaunchConfig::dispatch_base,
            "device dispatch per kernel: the stream's command fetch (streams overlap)")
      .min(Bound::NonNegative);
  k200_launch
      .time("dispatch_per_cluster", &K200LaunchConfig::dispatch_per_cluster,
            "device dispatch per cluster used, holding the clusters")
      .min(Bound::NonNegative);
  k200_launch.time("wait_overhead", &K200LaunchConfig::wait_overhead, "host cost of noticing a finished kernel")
      .min(Bound::NonNegative);
  Section<K200ComputeConfig> k200_compute =
      k200.map<K200ComputeConfig>("compute", &K200Config::compute, "die compute and GEMM tiling");
  k200_compute.doc("The compute of one die and the GEMM kernel's tiling.");
  k200_compute.frequency("clock", &K200ComputeConfig::clock_hz, "cluster clock").min(Bound::Positive);
  k200_compute.add("clusters", &K200ComputeConfig::clusters, "clusters per die").min(Bound::Positive);
  k200_compute.add("cores_per_cluster", &K200ComputeConfig::cores_per_cluster, "cores per cluster")
      .min(Bound::Positive);
  k200_compute.add("fp32_flops_per_cycle", &K200ComputeConfig::fp32_flops_per_cycle, "FP32 FLOP per cycle per cluster")
      .min(Bound::Positive);
  k200_compute.add("fp16_flops_per_cycle", &K200ComputeConfig::fp16_flops_per_cycle, "FP16 FLOP per cycle per cluster")
      .min(Bound::Positive);
  k200_compute.add("default_ncluster", &K200ComputeConfig::default_ncluster, "clusters a kernel uses unless told")
      .min(Bound::Positive);
  k200_compute
      .add("elementwise_operands", &K200ComputeConfig::elementwise_operands,
           "tensors an elementwise kernel streams (two inputs and an output: 3)")
      .min(Bound::Positive);
  k200_compute
      .add("elementwise_bandwidth", &K200ComputeConfig::elementwise_bandwidth,
           "elementwise kernels: operand bytes per second per cluster")
      .min(Bound::Positive);
  k200_compute.add("elementwise_serial_bandwidth", &K200ComputeConfig::elementwise_serial_bandwidth,
                   "elementwise kernels: bytes per second of the part that does not spread over clusters (0: none)");
  k200_compute.choice("elementwise_rate", &K200ComputeConfig::elementwise_rate,
                      "fitted: elementwise kernels stream at the fitted rates at every size (capped by the die's "
                      "HBM link); hbm: the fitted rates up to elementwise_reference_elements, the rest at the HBM "
                      "link's rate",
                      elementwise_rate_names(), elementwise_rate_from_string);
  k200_compute
      .add("elementwise_reference_elements", &K200ComputeConfig::elementwise_reference_elements,
           "elementwise_rate hbm: elements streamed at the fitted rates (the largest measured kernel)")
      .min(Bound::Positive);
  k200_compute.choice("conv", &K200ComputeConfig::conv,
                      "how a conv reaches its GEMM: im2col (the lowered matrix materialised through HBM at "
                      "lowering_bandwidth) or implicit (no copy: the GEMM's panel fetch gathers the input)",
                      conv_lowering_names(), conv_lowering_from_string);
  k200_compute.add("lowering_bandwidth", &K200ComputeConfig::lowering_bandwidth,
                   "conv kernels: the im2col lowering's bytes (input read + matrix written) per second (0: free)");
  k200_compute
      .bytes("gemm_block_bytes", &K200ComputeConfig::gemm_block_bytes,
             "GEMM output block per cluster: side of this many bytes of elements")
      .min(Bound::Positive);
  k200_compute.add("core_tile_m", &K200ComputeConfig::core_tile_m, "a core's micro-tile: rows of C")
      .min(Bound::Positive);
  k200_compute.add("core_tile_n", &K200ComputeConfig::core_tile_n, "a core's micro-tile: columns of C")
      .min(Bound::Positive);
  k200_compute.add("core_tile_k", &K200ComputeConfig::core_tile_k, "K is consumed in steps of this many elements")
      .min(Bound::Positive);
  k200_compute
      .bytes("kpanel_capacity", &K200ComputeConfig::kpanel_capacity, "per core: K-panel bytes held without spilling")
      .min(Bound::Positive);
  k200_compute
      .add("fp32_efficiency", &K200ComputeConfig::fp32_efficiency, "% of a core's peak on a full micro-tile, FP32")
      .min(Bound::Positive);
  k200_compute
      .add("fp16_efficiency", &K200ComputeConfig::fp16_efficiency, "% of a core's peak on a full micro-tile, FP16")
      .min(Bound::Positive);
  k200_compute.add("spill_penalty", &K200ComputeConfig::spill_penalty, "% extra compute once the K panel spills")
      .min(Bound::NonNegative);
  k200_compute.add("operand_scan_bandwidth", &K200ComputeConfig::operand_scan_bandwidth,
                   "per fc call: the max-finding pass over A and B (0: none)");
  k200_compute
      .add("operand_scan_element_rate", &K200ComputeConfig::operand_scan_element_rate,
           "that pass's elements per second, whatever their width (0: no limit; it then follows the bytes alone)")
      .min(Bound::NonNegative);
  k200_compute.time("fc_overhead", &K200ComputeConfig::fc_overhead, "per xdnn fc call, besides launch/dispatch/wait")
      .min(Bound::NonNegative);
  k200_compute.bytes("hbm_capacity", &K200ComputeConfig::hbm_capacity, "HBM per die (a GEMM's A, B and C must fit)")
      .min(Bound::Positive);
  k200_compute.rule([](const MapReader& k, K200ComputeConfig& v) {
    if (v.default_ncluster > v.clusters)
      k.fail("default_ncluster", "default_ncluster (" + std::to_string(v.default_ncluster) + ") exceeds clusters (" +
                                     std::to_string(v.clusters) + ")");
    for (const char* e : {"fp32_efficiency", "fp16_efficiency"}) {
      const double x = std::string(e) == "fp32_efficiency" ? v.fp32_efficiency : v.fp16_efficiency;
      if (x > 100)
        k.fail(
            e, "an efficiency is a percentage of peak: expected (0, 100], got " + [&] {
              char b[32];
              std::snprintf(b, sizeof b, "%g", x);
              return std::string(b);
            }());
    }
  });
}

}  // namespace kernbench::platforms::k200
