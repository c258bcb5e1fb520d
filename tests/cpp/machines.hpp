// machines.hpp -- small machine configs built in C++ for the topology tests
// (no YAML, so these tests do not depend on the loader), and the one YAML text
// the loader tests share (kOnePeSystemYaml).
#pragma once

#include <string>
#include <vector>

#include "runtime/config_section.hpp"
#include "topology/config/config.hpp"

namespace kernbench::testing {

using namespace kernbench::topology;
using namespace kernbench::runtime;  // the pe:, energy: and pe.hbm sections
using sim::Bandwidth;
using sim::kNanosecond;

/// The smallest generated machine as YAML text (one PE; every overhead 1 ns, every link 1 GB/s and 1 ns), for
/// loader tests that add or override a section of their own.
inline const std::string kOnePeSystemYaml = R"(system:
  sips: {w: 1, h: 1, topology: ring}
  cubes: {w: 1, h: 1}
  routers: {w: 1, h: 1}
  pes_per_cube: 1
nodes:
  pe: {overhead: 1 ns}
  router: {overhead: 1 ns}
  hbm_ctrl: {overhead: 1 ns}
  ucie: {overhead: 1 ns}
  pcie_ep: {overhead: 1 ns}
links:
  pe: {bandwidth: 1 GB/s, latency: 1 ns}
  noc: {bandwidth: 1 GB/s, latency: 1 ns}
  hbm: {bandwidth: 1 GB/s, latency: 1 ns}
  ucie_port: {bandwidth: 1 GB/s, latency: 1 ns}
  ucie: {bandwidth: 1 GB/s, latency: 1 ns}
  pcie_port: {bandwidth: 1 GB/s, latency: 1 ns}
  pcie: {bandwidth: 1 GB/s, latency: 1 ns}
)";

inline LinkParams link(double gbps, Time latency, int connections = 1) {
  return LinkParams{Bandwidth::gb_per_s(gbps), latency, connections};
}

/// A generated machine with round numbers: every overhead and latency is a
/// distinct multiple of 1 ns so closed forms are easy to check.
inline Config system_config(int sips_w = 1, int sips_h = 1, SipTopology topo = SipTopology::Ring, int cubes_w = 2,
                            int cubes_h = 1, int routers_w = 4, int routers_h = 2, int pes = 8) {
  Config c;
  c.source = "test-system";
  SystemConfig s;
  s.sips = {sips_w, sips_h};
  s.sip_topology = topo;
  s.cubes = {cubes_w, cubes_h};
  s.routers = {routers_w, routers_h};
  s.pes_per_cube = pes;
  s.nodes.pe = {1 * kNanosecond, true};
  s.nodes.router = {2 * kNanosecond, true};
  s.nodes.hbm_ctrl = {10 * kNanosecond, true};
  s.nodes.ucie = {3 * kNanosecond, true};
  s.nodes.pcie_ep = {50 * kNanosecond, false};
  s.links.pe = link(512, 500);
  s.links.noc = link(256, 500);
  s.links.hbm = link(256, 1 * kNanosecond);
  s.links.ucie_port = link(512, 500);
  s.links.ucie = link(128, 2 * kNanosecond, 4);
  s.links.pcie_port = link(256, 500);
  s.links.pcie = link(64, 100 * kNanosecond);
  c.system = s;
  return c;
}

/// One SIP of cubes_w x cubes_h cubes for program tests, with the PE engine
/// values their closed forms are computed from pinned here (so a change of
/// defaults does not move them): a 1 GHz clock, 20 ns dispatch, 2 DMA
/// channels, 1024 fp16 MACs per cycle (2.048 TFLOPS) and 1 MiB of scratch.
inline Config program_config(int cubes_w, int cubes_h) {
  Config c = system_config(1, 1, SipTopology::Ring, cubes_w, cubes_h);
  pe_config(c).clock_hz = 1'000'000'000;
  pe_config(c).dispatch = 20 * kNanosecond;
  pe_config(c).dma_channels = 2;
  pe_config(c).gemm_macs_fp16 = 1024;
  pe_config(c).scratch = sim::kMiB;
  return c;
}

/// An explicit chain a - b - c - ... with the given link and node parameters.
inline Config chain_config(const std::vector<NodeParams>& nodes, const std::vector<LinkParams>& links) {
  Config c;
  c.source = "test-chain";
  ExplicitGraphConfig g;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    g.nodes.push_back(ExplicitNode{"n" + std::to_string(i), NodeKind::Other, nodes[i]});
  for (std::size_t i = 0; i < links.size(); ++i)
    g.edges.push_back(ExplicitEdge{"n" + std::to_string(i), "n" + std::to_string(i + 1), "link", links[i]});
  c.graph = g;
  return c;
}

/// The PEs of `c` as NCCL's GPUs with nothing but the links to wait on:
/// `channels` NCCL channels of 8 slots of 512 KiB, reductions far faster than
/// any link, instant slot credits.
inline void nccl_gpus(Config& c, int channels) {
  PeConfig& pe = pe_config(c);
  pe.target = ExecTarget::Gpu;
  pe.ipcq_channels = channels;
  pe.ipcq_slots = 8;
  pe.ipcq_slot = 512 * sim::kKiB;
  pe.ipcq_bank_hop = 0;
  pe.vector_bytes_per_cycle = 1 << 20;
  pe.clock_hz = 1'000'000'000;
  pe.ipcq_credit = IpcqCredit::Instant;
}

}  // namespace kernbench::testing
