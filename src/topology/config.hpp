// config.hpp -- the typed machine configuration (what topology.yaml says).
//
// Each YAML section maps to one struct here, with its defaults in one place.
// Loading (config_loader.cpp) is strict: unknown keys, wrong types, missing
// units and non-positive rates are ConfigErrors naming the file and the YAML
// path. Quantities carry units in the YAML (`256 GB/s`, `5 ns`, `4 KiB`) and
// arrive here as integers: Time in ps, Bytes, Bandwidth in B/s.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/units.hpp"
#include "runtime/energy_config.hpp"
#include "runtime/hbm_config.hpp"
#include "platforms/k200/config.hpp"
#include "platforms/vgpu/config.hpp"

namespace kernbench::topology {

using sim::Bandwidth;
using sim::Bytes;
using sim::Time;

/// What a node is. The generated machine uses the first five; explicit
/// graphs (K200 host, vGPU path) may use any.
enum class NodeKind { Pe, Router, HbmCtrl, Ucie, PcieEp, Host, Cpu, Memory, Switch, Engine, Gsp, Other };

/// Processing cost of a node, paid by every chunk that passes (a pipeline
/// delay, not a throughput limit), and whether it forwards chunk by chunk
/// (flit-aware, cut-through) or only whole transfers (store-and-forward).
struct NodeParams {
  Time overhead = 0;
  bool flit_aware = true;
};

/// A physical link: `bandwidth` per direction per connection (full duplex),
/// wire latency, and `connections` parallel lanes (each its own Server).
struct LinkParams {
  Bandwidth bandwidth{};
  Time latency = 0;
  int connections = 1;
};

enum class SipTopology { Ring, Torus, Mesh };

struct GridSize {
  int w = 1;
  int h = 1;
  int count() const { return w * h; }
};

/// Where a SIP's PCIe endpoint attaches inside the SIP.
struct PcieAttach {
  int cube = 0;    ///< cube index (row-major in the cube grid)
  int row = 0;     ///< router row inside that cube
  int col = 0;     ///< router column
};

/// The SIP -> CUBE -> PE generator's input.
struct SystemConfig {
  std::string name = "machine";
  GridSize sips{1, 1};
  SipTopology sip_topology = SipTopology::Ring;
  GridSize cubes{1, 1};        ///< cube grid per SIP (a mesh, no wraparound)
  GridSize routers{4, 2};      ///< router mesh per cube
  int pes_per_cube = 8;        ///< PE i attaches to router i mod (w*h), row-major
  PcieAttach pcie_attach;

  /// Per-kind node parameters (the YAML `nodes:` section).
  struct Nodes {
    NodeParams pe{};
    NodeParams router{};
    NodeParams hbm_ctrl{};
    NodeParams ucie{};
    NodeParams pcie_ep{0, false};
  } nodes;

  /// Link classes (the YAML `links:` section).
  struct Links {
    LinkParams pe;         ///< PE <-> its router
    LinkParams noc;        ///< router <-> router inside a cube
    LinkParams hbm;        ///< router <-> the PE's HBM controller slice
    LinkParams ucie_port;  ///< edge router <-> the cube side's UCIe adapter
    LinkParams ucie;       ///< UCIe adapter <-> the neighbour cube's adapter
    LinkParams pcie_port;  ///< attach router <-> the SIP's PCIe endpoint
    LinkParams pcie;       ///< PCIe endpoint <-> neighbour SIP's endpoint
  } links;
};

/// One node of an explicit graph.
struct ExplicitNode {
  std::string name;
  NodeKind kind = NodeKind::Other;
  NodeParams params;
};

/// One link of an explicit graph (both directions, same parameters).
struct ExplicitEdge {
  std::string a;
  std::string b;
  std::string link_class = "link";
  LinkParams link;
};

struct ExplicitGraphConfig {
  std::vector<ExplicitNode> nodes;
  std::vector<ExplicitEdge> edges;
};

/// Arithmetic precisions a GEMM engine may support.
enum class Precision { Fp32, Fp16, Bf16, Int8 };

/// The engines of every PE of a generated machine (the YAML `pe:` section).
/// The runtime turns each into a sim::Server per PE.
struct PeConfig {
  std::int64_t clock_hz = 1'000'000'000;  ///< engine clock
  Time dispatch = 20 * sim::kNanosecond;  ///< PE_CPU cost of dispatching one command
  Bytes scratch = sim::kMiB;              ///< per-PE SRAM budget
  int dma_channels = 2;                   ///< DMA commands in flight per PE
  /// GEMM engine throughput in multiply-accumulates per cycle, by precision
  /// (0: the engine has no such mode -- asking for it is an error).
  int gemm_macs_fp32 = 256;
  int gemm_macs_fp16 = 1024;
  int gemm_macs_bf16 = 1024;
  int gemm_macs_int8 = 2048;
  int vector_bytes_per_cycle = 128;       ///< vector engine (softmax, elementwise)
  int ipcq_slots = 8;                     ///< IPCQ slots at a PE per sending PE
  Bytes ipcq_slot = 4 * sim::kKiB;        ///< bytes per slot
  int ipcq_channels = 2;                  ///< IPCQ sends in flight per PE
  Time ipcq_bank_hop = sim::kNanosecond;  ///< fixed cost of one slot read out of scratch
  HbmConfig hbm;                          ///< the PE's HBM slice: capacity, pseudo-channels (`pe.hbm`)
};

enum class FabricModel { Packet, Flow };

struct FabricConfig {
  FabricModel model = FabricModel::Packet;
  Bytes chunk = 4 * sim::kKiB;  ///< packet model: transfers are cut into chunks of this size
  Bytes flit = 64;              ///< smallest unit; chunk must be a multiple of it
  Bytes request = 64;           ///< size of a DMA read request packet
  Bytes stripe = 0;             ///< lane striping unit on multi-connection links (0: the chunk)
};

/// A whole configuration file (after includes and overrides).
struct Config {
  std::string source;  ///< file it came from (for messages)
  std::optional<SystemConfig> system;
  std::optional<ExplicitGraphConfig> graph;
  FabricConfig fabric;
  PeConfig pe;  ///< engines of every PE (system machines)
  std::optional<K200Config> k200;  ///< Kunlun K200 host parameters (the `k200:` section), if given
  std::optional<VgpuConfig> vgpu;  ///< virtualised-GPU forwarding path (the `vgpu:` section), if given
  EnergyConfig energy;  ///< energy model (the `energy:` section; defaults in energy_config.hpp)
};

/// Names used in YAML and messages.
const char* to_string(NodeKind kind);
const char* to_string(SipTopology topology);
const char* to_string(FabricModel model);
const char* to_string(Precision precision);

/// Inverses of to_string (exact, case-sensitive names); nullopt for an unknown name.
std::optional<NodeKind> node_kind_from_string(std::string_view name);
std::optional<SipTopology> sip_topology_from_string(std::string_view name);
std::optional<FabricModel> fabric_model_from_string(std::string_view name);

/// Every name of each enum, in declaration order (for messages and the schema).
std::vector<std::string> node_kind_names();
std::vector<std::string> sip_topology_names();
std::vector<std::string> fabric_model_names();

}  // namespace kernbench::topology
