// config.hpp -- the typed machine configuration (what topology.yaml says).
//
// Each YAML section topology owns (system, nodes, links, graph, fabric) maps
// to one struct here, with its defaults in one place; the sections of the
// layers above (pe, energy: runtime; k200, vgpu: platforms) travel in
// Config::sections, typed, and their owners read them back with accessors
// (runtime/config_section.hpp, platforms/*/config_section.hpp). Loading
// (topology/config/loader.hpp, src/config/) is strict: unknown keys, wrong types,
// missing units and non-positive rates are ConfigErrors naming the file and
// the YAML path. Quantities carry units in the YAML (`256 GB/s`, `5 ns`,
// `4 KiB`) and arrive here as integers: Time in ps, Bytes, Bandwidth in B/s.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/provenance.hpp"
#include "config/sections.hpp"
#include "sim/units.hpp"

namespace kernbench::topology {

using sim::Bandwidth;
using sim::Bytes;
using sim::Time;

/// What a node is. The generated machine uses the first five; explicit
/// graphs (K200 host, vGPU path) may use any.
enum class NodeKind { Pe, Router, HbmCtrl, Ucie, PcieEp, Host, Cpu, Memory, Switch, Engine, Gsp, Nic, Other };

/// Nodes that only forward traffic: they hold no memory a dma could read or
/// write and own no engine (routers, switches, UCIe and PCIe endpoints, NICs).
constexpr bool forwards_only(NodeKind k) {
  return k == NodeKind::Router || k == NodeKind::Switch || k == NodeKind::Ucie || k == NodeKind::PcieEp ||
         k == NodeKind::Nic;
}

/// Processing cost of a node, paid by every chunk that passes (a pipeline
/// delay, not a throughput limit), and whether it forwards chunk by chunk
/// (flit-aware, cut-through) or only whole transfers (store-and-forward).
struct NodeParams {
  Time overhead = 0;
  bool flit_aware = true;
  /// In-network reduction (explicit-graph switch nodes that declare
  /// `reduction: {bandwidth: ...}`): the rate at which the switch's
  /// reduction unit consumes input bytes, summed over the contributions
  /// (0: the node does not reduce). Read by the runtime's switch_reduce op.
  Bandwidth reduction{};
  /// Router pipeline (nodes.<kind>.pipeline): cycles per hop for routing,
  /// VC allocation and switch allocation, at `clock_hz`. The Machine folds
  /// pipeline_time() into the node's overhead, so the zero-load latency of a
  /// path is hops x (overhead + pipeline) + wire latency + serialisation.
  struct Pipeline {
    int route = 0;
    int vc_alloc = 0;
    int switch_alloc = 0;
    int cycles() const { return route + vc_alloc + switch_alloc; }
  } pipeline;
  std::int64_t clock_hz = 0;  ///< the pipeline's clock (required when it has cycles)
  /// Carries traffic between other nodes (explicit graphs, `transit:`).
  /// false: routes avoid the node unless it is an end of the transfer or no
  /// other path exists (a GPU does not forward between its NVLink and PCIe
  /// ports; software relays, NCCL's PXN, are the collective's choice).
  bool transit = true;
};

/// The pipeline's delay per hop: ceil(cycles x 1e12 / clock_hz) ps (0
/// without cycles).
Time pipeline_time(const NodeParams& node);

/// A channel's input buffer at its downstream node, per virtual channel
/// (links.<class>.buffer): `unbounded` (the ideal model: a chunk never
/// waits for space), a count of flits ("8 flits") or a size ("4 KiB",
/// rounded down to whole flits).
struct BufferSize {
  enum class Unit { Unbounded, Flits, Bytes };
  Unit unit = Unit::Unbounded;
  std::int64_t amount = 0;
  bool bounded() const { return unit != Unit::Unbounded; }
  /// Whole flits it holds (0 when unbounded).
  std::int64_t flits(Bytes flit) const {
    return unit == Unit::Flits ? amount : unit == Unit::Bytes ? amount / flit : 0;
  }
};
/// "unbounded", "8 flits" or "4 KiB".
std::string to_string(const BufferSize& b);
/// Parses the YAML text; the error message (empty on success) goes to `error`.
std::optional<BufferSize> parse_buffer_size(std::string_view text, std::string& error);

/// A physical link: `bandwidth` per direction per connection (full duplex),
/// wire latency, and `connections` parallel lanes (each its own Server).
struct LinkParams {
  Bandwidth bandwidth{};
  Time latency = 0;
  int connections = 1;
  BufferSize buffer{};  ///< per VC, at the downstream end (packet model)
  int vcs = 1;          ///< virtual channels: separate buffers and credits sharing the lanes
};
/// Most virtual channels per link (each is a buffer and a credit counter per channel).
inline constexpr int kMaxVcs = 64;

enum class SipTopology { Ring, Torus, Mesh };

struct GridSize {
  int w = 1;
  int h = 1;
  /// w x h in 64 bits: two int sides can never wrap it (1282 x 6700417 is 8589934594, not 2).
  std::int64_t count() const { return static_cast<std::int64_t>(w) * h; }
};

/// Where a SIP's PCIe endpoint attaches inside the SIP.
struct PcieAttach {
  int cube = 0;  ///< cube index (row-major in the cube grid)
  int row = 0;   ///< router row inside that cube
  int col = 0;   ///< router column
};

/// The SIP -> CUBE -> PE generator's input.
struct SystemConfig {
  std::string name = "machine";
  GridSize sips{1, 1};
  SipTopology sip_topology = SipTopology::Ring;
  GridSize cubes{1, 1};    ///< cube grid per SIP (a mesh, no wraparound)
  GridSize routers{4, 2};  ///< router mesh per cube
  int pes_per_cube = 8;    ///< PE i attaches to router i mod (w*h), row-major
  PcieAttach pcie_attach;

  /// Per-kind node parameters (the YAML `nodes:` section).
  struct Nodes {
    NodeParams pe{};
    NodeParams router{};
    NodeParams hbm_ctrl{};
    NodeParams ucie{};
    NodeParams pcie_ep{0, false, {}, {}, 0};  // store-and-forward
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
  std::string memory;  ///< a PE's own memory: the node holding its HBM (empty: none declared)
};

/// One link of an explicit graph (both directions, same parameters).
struct ExplicitEdge {
  std::string a;
  std::string b;
  std::string link_class = "link";
  LinkParams link;
};

/// The PE relations of an explicit graph (the YAML `graph.layout:`): the
/// rank order, an optional rank grid, and an optional group hierarchy
/// (packages of groups of PEs, the generator's SIPs of cubes of PEs).
/// The generator states the same relations for the machines it builds.
struct LayoutConfig {
  std::vector<std::string> ranks;  ///< PE names in rank order (empty: the pe nodes as listed)
  std::optional<GridSize> grid;    ///< the ranks as a w x h grid, row-major (2-D collectives)
  /// Hierarchy: rank r is PE r % pes_per_group of group (r / pes_per_group) %
  /// groups.count() of package r / (groups.count() * pes_per_group).
  std::optional<GridSize> packages;
  SipTopology package_topology = SipTopology::Ring;  ///< how packages are linked (hierarchical collectives)
  std::optional<GridSize> groups;                    ///< groups per package, as a grid (row-major)
  int pes_per_group = 0;
};

/// A pinned route of an explicit graph (the YAML `graph.routes:`): every
/// transfer from `src` to `dst` takes src -> via[0] -> ... -> dst, whatever
/// fabric.multipath says. One direction only (pin dst -> src separately).
struct PinnedRoute {
  std::string src;
  std::string dst;
  std::vector<std::string> via;  ///< the intermediate nodes, in order (may be empty: the direct link)
};

struct ExplicitGraphConfig {
  std::vector<ExplicitNode> nodes;
  std::vector<ExplicitEdge> edges;
  LayoutConfig layout;
  std::vector<PinnedRoute> routes;
};

/// Arithmetic precisions a GEMM engine may support.
/// Tf32 and Fp8 (E4M3) are tensor-core input formats (their accumulate is
/// FP32); appended so the codes of the first four never change.
enum class Precision { Fp32, Fp16, Bf16, Int8, Tf32, Fp8 };

enum class FabricModel { Packet, Flow };

struct FabricConfig {
  FabricModel model = FabricModel::Packet;
  Bytes chunk = 4 * sim::kKiB;  ///< packet model: transfers are cut into chunks of this size
  Bytes flit = 64;              ///< smallest unit; chunk must be a multiple of it
  Bytes request = 64;           ///< size of a DMA read request packet
  Bytes stripe = 0;             ///< lane striping unit on multi-connection links (0: the chunk)
  /// How a transfer uses the equal-cost paths of its (src, dst) pair: the name of a registered multipath policy
  /// (topology/routing/multipath.hpp: single, ecmp, spread; docs/architecture.md, "Routing").
  std::string multipath = "single";
};

/// Why the packet model cannot use `buffer` under `fabric` (empty when it
/// can): a bounded buffer holds whole flits and at least one chunk (virtual
/// cut-through), and at most 2^40 flits. The loader (`kernbench validate`,
/// sweeps' up-front check) and the packet fabric both apply it.
std::string packet_buffer_fault(const BufferSize& buffer, const FabricConfig& fabric);

struct ClusterInfo;  // topology/config/cluster.hpp

/// A whole configuration file (after includes and overrides).
struct Config {
  std::string source;  ///< file it came from (for messages)
  std::optional<SystemConfig> system;
  std::optional<ExplicitGraphConfig> graph;
  /// What a `cluster:` section generated (the graph above is its expansion; docs/cluster.md).
  std::shared_ptr<const ClusterInfo> cluster;
  FabricConfig fabric;
  /// Every value whose file declared its provenance beside it (config/provenance.hpp), in tree order.
  std::vector<config::ProvenanceEntry> provenance;
  /// The sections of higher layers, by type: pe and energy (runtime), k200
  /// and vgpu (platforms). Their owners' accessors read them.
  config::Sections sections;

  /// Section T, or nullptr when the file did not give it.
  template <typename T>
  const T* find() const {
    return sections.find<T>();
  }
  /// Section T, or its defaults when the file did not give it.
  template <typename T>
  const T& section() const {
    return sections.get<T>();
  }
  /// Section T, created with its defaults when absent.
  template <typename T>
  T& section() {
    return sections.get<T>();
  }
};

/// Bytes of one element of a precision (FP32 and TF32 4, FP16 and BF16 2, INT8 and FP8 1).
Bytes element_bytes(Precision precision);

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
