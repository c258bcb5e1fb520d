// cluster.hpp -- the `cluster:` section: many GPU boxes on a generated scale-out fabric (docs/cluster.md).
//
// A cluster config is expanded on the YAML tree before the root is read (loader.cpp, after the overrides, so
// `--set cluster.nodes=N` works): the box file is loaded as `include:` loads files, its graph copied once per
// node under the prefix n<i>., NICs (n<i>.nic<j>), leaf, spine and core switches and their edges generated,
// and the result is an ordinary `graph:` tree plus the box's other sections deep-merged under the cluster
// file's own (the cluster file's keys win). Everything then goes through the explicit-graph reader and all
// its checks. Config::cluster keeps a ClusterInfo describing what was generated.
#pragma once

#include <string>
#include <vector>

#include "sim/units.hpp"

namespace kernbench::config {
class Schema;
struct SectionDef;
struct Value;
class Loader;
}  // namespace kernbench::config

namespace kernbench::topology {

/// cluster.fabric: the scale-out network.
struct ClusterFabricConfig {
  std::string kind = "rail-optimized";  ///< fat-tree | rail-optimized
  int tiers = 2;                        ///< 2 (leaf, spine) or 3 (leaf, spine, core)
  int radix = 0;                        ///< switch ports; 0: the NIC's switch generation
  double oversubscription = 1;          ///< down:up at the leaf = o:1
  sim::Bandwidth reduction{};           ///< IB SHARP on every scale-out switch (0: none)
  sim::Time link_latency = -1;          ///< every ib cable; -1: the catalog's
  sim::Time switch_overhead = -1;       ///< every scale-out switch; -1: the catalog's
};

/// The `cluster:` section as written.
struct ClusterConfig {
  int nodes = 1;
  std::string box;
  int nics_per_node = 0;  ///< 0: one per GPU of the box
  std::string nic = "cx7-ndr-400";
  ClusterFabricConfig fabric;
};

/// One NIC of the catalog (cluster.cpp, sources in docs/cluster.md).
struct NicSpec {
  std::string name;
  sim::Bandwidth line_rate;  ///< per direction
  sim::Bandwidth host_rate;  ///< its PCIe host interface, per direction
  sim::Time overhead;        ///< the NIC's forwarding delay
  int switch_radix;          ///< ports of the matching switch generation
  std::string switch_name;
  sim::Time switch_overhead;  ///< port-to-port
  sim::Time link_latency;     ///< a cable
  sim::Time host_latency;     ///< its PCIe link when the box's GPU has none to copy
};
const std::vector<NicSpec>& nic_catalog();

/// One scale-out switch as generated.
struct ClusterSwitch {
  std::string name;
  int tier = 1;        ///< 1 leaf, 2 spine, 3 core
  int down_links = 0;  ///< links (lanes) towards the NICs, used
  int up_links = 0;    ///< links towards the next tier, used
  int group = 0;       ///< leaves: the scalable unit (rail-optimized) or 0; spines of 3 tiers: the pod
  int pod = 0;         ///< leaves and spines: the pod (3 tiers; 0 with 2)
};

/// What the generator built (Config::cluster).
struct ClusterInfo {
  ClusterConfig config;  ///< as read, with radix and nics_per_node resolved
  std::string box_source;
  int gpus_per_node = 0;
  NicSpec nic;
  int leaf_down = 0;  ///< ports per leaf towards NICs: floor(radix x o / (o + 1))
  int leaf_up = 0;    ///< radix - leaf_down
  int pods = 1;
  std::vector<ClusterSwitch> leaves, spines, cores;
  std::vector<std::string> nics;   ///< node-major: nics[node x nics_per_node + j]
  std::vector<int> nic_leaf;       ///< the leaf index of each NIC
  std::vector<std::string> ranks;  ///< GPU names in rank order
  int max_nodes = 0;               ///< the most nodes this fabric (tiers, radix, o, nics) holds
};

/// Adds the `cluster` section (documented keys; read by expand_cluster) to the root of `schema`.
void add_cluster_section(config::Schema& schema, config::SectionDef& root);

/// When `root` has a `cluster:` key: reads it against the schema, generates the machine and replaces `root`
/// by the generated tree (graph plus the box's and the file's other sections). Returns false (and leaves
/// `root` alone) when there is no cluster key.
bool expand_cluster(const config::Schema& schema, config::Loader& loader, config::Value& root, ClusterInfo& out);

}  // namespace kernbench::topology
