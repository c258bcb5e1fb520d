// cluster.cpp -- the `cluster:` generator (cluster.hpp; the construction and its sources: docs/cluster.md).
#include "topology/config/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "config/quantity.hpp"
#include "config/reader.hpp"
#include "config/section.hpp"
#include "config/yaml_tree.hpp"
#include "topology/config/config.hpp"
#include "topology/config/explicit_graph_detail.hpp"

namespace kernbench::topology {
namespace {

using config::Bound;
using config::Entry;
using config::in_quotes;
using config::MapReader;
using config::Section;
using config::Type;
using config::Value;
using config::Where;

constexpr std::int64_t kGBps = 1'000'000'000;
constexpr sim::Time kNs = 1000;

std::string ratio(double o) {
  std::ostringstream s;
  s << o;
  return s.str();
}

std::optional<std::string> nic_from_string(std::string_view s) {
  for (const NicSpec& n : nic_catalog())
    if (n.name == s) return n.name;
  return std::nullopt;
}
std::vector<std::string> nic_names() {
  std::vector<std::string> out;
  for (const NicSpec& n : nic_catalog()) out.push_back(n.name);
  return out;
}
std::optional<std::string> kind_from_string(std::string_view s) {
  if (s == "fat-tree" || s == "rail-optimized") return std::string(s);
  return std::nullopt;
}

// ---- the YAML tree we generate ----
Value scalar(std::string text, const Where& w) {
  Value v;
  v.type = Value::Type::Scalar;
  v.text = std::move(text);
  v.where = w;
  return v;
}
Value map(std::vector<std::pair<std::string, Value>> entries, const Where& w) {
  Value v;
  v.type = Value::Type::Map;
  v.where = w;
  v.entries.reserve(entries.size());
  for (auto& [k, x] : entries) v.entries.push_back({std::move(k), w, std::move(x)});
  return v;
}
Value list(const Where& w) {
  Value v;
  v.type = Value::Type::List;
  v.where = w;
  return v;
}
void prefix(Value& item, std::string_view key, const std::string& p) {
  if (Value* v = item.find(key); v && v->type == Value::Type::Scalar) v->text = p + v->text;
}
const std::string* text_of(const Value& item, std::string_view key) {
  const Value* v = item.find(key);
  return v && v->type == Value::Type::Scalar ? &v->text : nullptr;
}

// The smallest divisor s of `up` with `lower` x (up / s) <= `ports`: the fewest switches above that take every
// uplink of `lower` switches, each joined to each of them by up / s parallel links.
int fewest_above(int lower, int up, int ports) {
  for (int s = 1; s <= up; ++s)
    if (up % s == 0 && static_cast<long long>(lower) * (up / s) <= ports) return s;
  return up;
}

struct Builder {
  Where w;
  Value nodes, edges;
  ClusterInfo& info;
  std::string switch_overhead, ib_rate, ib_latency, reduction;

  void switch_node(const std::string& name) {
    std::vector<std::pair<std::string, Value>> e{
        {"name", scalar(name, w)}, {"kind", scalar("switch", w)}, {"overhead", scalar(switch_overhead, w)}};
    if (!reduction.empty()) e.emplace_back("reduction", map({{"bandwidth", scalar(reduction, w)}}, w));
    nodes.items.push_back(map(std::move(e), w));
  }
  void edge(const std::string& a, const std::string& b, const std::string& cls, const std::string& rate,
            const std::string& latency, int connections) {
    std::vector<std::pair<std::string, Value>> e{{"a", scalar(a, w)},
                                                 {"b", scalar(b, w)},
                                                 {"class", scalar(cls, w)},
                                                 {"bandwidth", scalar(rate, w)},
                                                 {"latency", scalar(latency, w)}};
    if (connections != 1) e.emplace_back("connections", scalar(std::to_string(connections), w));
    edges.items.push_back(map(std::move(e), w));
  }
  void ib(const std::string& a, const std::string& b, int connections) {
    edge(a, b, "ib", ib_rate, ib_latency, connections);
  }
};

}  // namespace

const std::vector<NicSpec>& nic_catalog() {
  // [CX7] NVIDIA ConnectX-7 400G adapters product brief (2022): up to 400 Gb/s NDR InfiniBand per port, PCIe Gen5
  //   x16 host interface. 400 Gb/s = 50 GB/s per direction; Gen5 x16 = 32 GT/s x 16 x 128/130 / 8 = 63.015 GB/s.
  // [CX6] NVIDIA ConnectX-6 VPI product brief (2020): up to 200 Gb/s HDR InfiniBand, PCIe Gen4 x16 host interface.
  //   200 Gb/s = 25 GB/s; Gen4 x16 = 16 GT/s x 16 x 128/130 / 8 = 31.508 GB/s.
  // [QM9700] NVIDIA Quantum-2 QM9700 switch datasheet (2021): 64 ports of 400 Gb/s NDR (32 OSFP cages).
  // [QM8700] NVIDIA Quantum QM8700 switch datasheet (2019): 40 ports of 200 Gb/s HDR (QSFP56).
  // assumed: NIC forwarding 500 ns (an RDMA send's NIC-side processing, of the order of the ~1 us end-to-end IB
  //   verbs latencies NVIDIA quotes; no per-NIC figure is published), switch port-to-port 130 ns (the order quoted
  //   for InfiniBand switches; we found no datasheet figure to cite), cable 50 ns (about 10 m at 5 ns/m).
  static const std::vector<NicSpec> catalog{
      {"cx7-ndr-400", sim::Bandwidth{50 * kGBps}, sim::Bandwidth{63'015'000'000}, 500 * kNs, 64, "Quantum-2 QM9700",
       130 * kNs, 50 * kNs, 250 * kNs},
      {"cx6-hdr-200", sim::Bandwidth{25 * kGBps}, sim::Bandwidth{31'508'000'000}, 500 * kNs, 40, "Quantum QM8700",
       130 * kNs, 50 * kNs, 250 * kNs},
  };
  return catalog;
}

void add_cluster_section(config::Schema& schema, config::SectionDef& root_def) {
  Section<Config> root(schema, root_def);
  Section<ClusterConfig> c = root.section<ClusterConfig>(
      "cluster", Type::Map, "many GPU boxes on a generated scale-out fabric (instead of system and graph)");
  c.doc(
      "A cluster: `nodes` copies of a box preset, one NIC per rail, on a generated InfiniBand fat-tree "
      "(docs/cluster.md). It is expanded into a graph before the config is read.");
  c.rules({"exclusive with system and graph (it generates the graph)", "nics_per_node <= the box's GPUs",
           "nodes <= the most the fabric holds (tiers, radix, oversubscription, nics_per_node)"});
  c.add("nodes", &ClusterConfig::nodes, "GPU boxes (any integer >= 1)").req().min(Bound::Positive);
  c.add("box", &ClusterConfig::box,
        "the box: a preset name (configs/machines/<name>.yaml) or a file, resolved as include: resolves files")
      .req();
  c.add("nics_per_node", &ClusterConfig::nics_per_node,
        "scale-out NICs per box; NIC j sits beside the box's GPU j (default: one per GPU)")
      .min(Bound::Positive)
      .no_default();
  c.choice("nic", &ClusterConfig::nic, "the NIC (line rate, host interface, switch generation)", nic_names(),
           nic_from_string);
  Section<ClusterFabricConfig> f =
      c.map<ClusterFabricConfig>("fabric", &ClusterConfig::fabric, "the scale-out fabric; every key has a default");
  f.doc("The scale-out fat-tree: its kind, tiers, switch radix and leaf oversubscription.");
  f.rules({"tiers is 2 or 3", "radix >= 2", "leaf ports: down = floor(radix x o / (o + 1)) >= 1, up = radix - down"});
  f.choice("kind", &ClusterFabricConfig::kind,
           "fat-tree: NIC ports fill leaves in rank order; rail-optimized: one leaf per rail per group of nodes",
           {"fat-tree", "rail-optimized"}, kind_from_string);
  f.add("tiers", &ClusterFabricConfig::tiers, "switch tiers: 2 (leaf, spine) or 3 (leaf, spine, core)")
      .min(Bound::Positive);
  f.add("radix", &ClusterFabricConfig::radix, "ports per switch (default: the NIC's switch: 64 NDR, 40 HDR)")
      .min(Bound::Positive)
      .no_default();
  f.add("oversubscription", &ClusterFabricConfig::oversubscription, "down:up ports at the leaf = o:1")
      .min(Bound::Positive);
  f.add("reduction", &ClusterFabricConfig::reduction,
        "in-network reduction (IB SHARP) on every scale-out switch: input bytes per second (default: none)")
      .min(Bound::Positive)
      .no_default();
  f.time("link_latency", &ClusterFabricConfig::link_latency, "every InfiniBand cable (default: the NIC catalog's)")
      .min(Bound::NonNegative)
      .no_default();
  f.time("switch_overhead", &ClusterFabricConfig::switch_overhead,
         "every scale-out switch, port to port (default: the NIC catalog's)")
      .min(Bound::NonNegative)
      .no_default();
  f.rule([](const MapReader& r, ClusterFabricConfig& x) {
    if (x.tiers != 2 && x.tiers != 3) r.fail("tiers", "expected 2 or 3 tiers, got " + std::to_string(x.tiers));
    if (r.get("radix") && x.radix < 2)
      r.fail("radix", "a switch needs at least 2 ports, got " + std::to_string(x.radix));
  });
}

bool expand_cluster(const config::Schema& schema, config::Loader& loader, Value& root, ClusterInfo& info) {
  Value* cv = root.find("cluster");
  if (!cv) return false;
  for (const Entry& e : root.entries)
    for (const char* k : {"system", "graph", "nodes"})  // links: gives classes of the box's edges (below)
      if (e.key == k)
        loader.fail(e.key_where, k,
                    std::string("give either cluster or ") + k + ", not both: cluster generates the machine's graph");
  const MapReader r(loader, *cv, "cluster", *schema.root().find("cluster")->section);
  ClusterConfig cc;
  r.read(cc);
  const Where w = cv->where;
  const NicSpec nic =
      *std::find_if(nic_catalog().begin(), nic_catalog().end(), [&](const NicSpec& n) { return n.name == cc.nic; });
  if (cc.fabric.radix == 0) cc.fabric.radix = nic.switch_radix;
  if (cc.fabric.link_latency < 0) cc.fabric.link_latency = nic.link_latency;
  if (cc.fabric.switch_overhead < 0) cc.fabric.switch_overhead = nic.switch_overhead;

  // ---- the box ----
  Value box = loader.load_named_file(*cv->find("box"), "cluster.box");
  if (box.find("system") || !box.find("graph"))
    loader.fail(cv->find("box")->where, "cluster.box",
                in_quotes(cc.box) + " is not a box: a cluster's box is an explicit graph (graph:), " +
                    (box.find("system") ? "it gives system:" : "it gives no graph:"));
  // Link classes: the cluster file's (and --set's) over the box's, into the box's edges here, so every box has
  // them and the generated NIC and ib links keep the catalog's figures System.cluster() reports.
  if (const auto at =
          std::find_if(root.entries.begin(), root.entries.end(), [](const Entry& e) { return e.key == "links"; });
      at != root.entries.end()) {
    Value* bl = box.find("links");
    if (!bl) bl = &box.entries.emplace_back(Entry{"links", at->key_where, Value{}}).value;
    config::merge_values(*bl, std::move(at->value));
    root.entries.erase(at);
  }
  detail::apply_link_classes(
      schema, loader, box,
      "the box's graph.edges (" + cc.box + "; the generated NIC and ib links take cluster.nic and cluster.fabric)");
  Value graph = std::move(*box.find("graph"));
  box.entries.erase(
      std::find_if(box.entries.begin(), box.entries.end(), [](const Entry& e) { return e.key == "graph"; }));
  const Value* bnodes = graph.find("nodes");
  const Value* bedges = graph.find("edges");
  if (!bnodes || bnodes->type != Value::Type::List || !bedges || bedges->type != Value::Type::List)
    loader.fail(graph.where, "cluster.box", in_quotes(cc.box) + ": its graph needs lists of nodes and edges");
  std::vector<std::string> gpus;
  if (const Value* lay = graph.find("layout");
      lay && lay->find("ranks") && lay->find("ranks")->type == Value::Type::List)
    for (const Value& v : lay->find("ranks")->items) gpus.push_back(v.text);
  if (gpus.empty())
    for (const Value& n : bnodes->items)
      if (const std::string* k = text_of(n, "kind"); k && *k == "pe" && text_of(n, "name"))
        gpus.push_back(*text_of(n, "name"));
  if (gpus.empty()) loader.fail(cv->find("box")->where, "cluster.box", in_quotes(cc.box) + " has no pe node (GPU)");
  const int g = static_cast<int>(gpus.size());
  if (cc.nics_per_node == 0) cc.nics_per_node = g;
  if (cc.nics_per_node > g)
    r.fail("nics_per_node", std::to_string(cc.nics_per_node) +
                                " NICs per node, but NIC j pairs with GPU j and the box " + in_quotes(cc.box) +
                                " has " + std::to_string(g) + " GPUs");
  // Each GPU's PCIe neighbour (its PCIe switch), where its NIC attaches; the GPU itself without a pcie edge.
  std::vector<std::string> attach(gpus);
  std::vector<std::string> host_latency(gpus.size(), config::format_time(nic.host_latency));
  for (const Value& e : bedges->items) {
    const std::string *a = text_of(e, "a"), *b = text_of(e, "b"), *cls = text_of(e, "class");
    if (!a || !b || !cls || *cls != "pcie") continue;
    for (int j = 0; j < g; ++j)
      if (attach[j] == gpus[j] && (*a == gpus[j] || *b == gpus[j])) {
        attach[j] = *a == gpus[j] ? *b : *a;
        if (const std::string* lat = text_of(e, "latency")) host_latency[j] = *lat;
      }
  }

  // ---- sizing (docs/cluster.md, "Construction") ----
  const int n = cc.nodes, rails = cc.nics_per_node, k = cc.fabric.radix;
  const double o = cc.fabric.oversubscription;
  const bool rail = cc.fabric.kind == "rail-optimized";
  const int down = static_cast<int>(std::floor(k * o / (o + 1) + 1e-9)), up = k - down;
  if (down < 1)
    r.fail("fabric", "a leaf of " + std::to_string(k) + " ports at oversubscription " + ratio(o) +
                         " has no port towards the NICs (down = floor(radix x o / (o + 1)) = 0): raise "
                         "cluster.fabric.oversubscription or cluster.fabric.radix");
  const int pod_down = k / 2;  // a 3-tier spine: half its ports down, half up (non-blocking above the leaf)
  const int groups_per_pod = rail ? pod_down / rails : 0;
  long long max_nodes = 0;
  if (cc.fabric.tiers == 2)
    max_nodes = rail ? static_cast<long long>(k / rails) * down : static_cast<long long>(k) * down / rails;
  else
    max_nodes =
        rail ? static_cast<long long>(k) * groups_per_pod * down : static_cast<long long>(k) * pod_down * down / rails;
  if (max_nodes < 1) max_nodes = 0;
  if (n > max_nodes) {
    const std::string keys =
        "cluster.fabric.tiers, cluster.fabric.radix, cluster.fabric.oversubscription, "
        "cluster.fabric.kind and cluster.nics_per_node";
    r.fail("nodes", std::to_string(n) + " nodes do not fit a " + std::to_string(cc.fabric.tiers) + "-tier " +
                        cc.fabric.kind + " of " + std::to_string(k) + "-port switches with " + std::to_string(rails) +
                        " NICs per node (" + keys + "): it holds at most " + std::to_string(max_nodes) + " nodes" +
                        (cc.fabric.tiers == 2 ? "; tiers: 3 holds more" : ""));
  }
  const int leaves = rail ? (n + down - 1) / down * rails : (n * rails + down - 1) / down;
  const int per_pod = cc.fabric.tiers == 3 ? (rail ? groups_per_pod * rails : pod_down) : leaves;
  const int pods = (leaves + per_pod - 1) / per_pod;

  info = ClusterInfo{};
  info.config = cc;
  info.box_source = cc.box;
  info.gpus_per_node = g;
  info.nic = nic;
  info.leaf_down = down;
  info.leaf_up = up;
  info.pods = pods;
  info.max_nodes = static_cast<int>(std::min<long long>(max_nodes, 1 << 30));

  Builder bld{w,
              list(w),
              list(w),
              info,
              config::format_time(cc.fabric.switch_overhead),
              config::format_bandwidth(nic.line_rate),
              config::format_time(cc.fabric.link_latency),
              cc.fabric.reduction.bytes_per_s > 0 ? config::format_bandwidth(cc.fabric.reduction) : ""};
  const std::size_t box_nodes = bnodes->items.size(), box_edges = bedges->items.size();
  bld.nodes.items.reserve(static_cast<std::size_t>(n) * (box_nodes + rails) + leaves * 3);
  bld.edges.items.reserve(static_cast<std::size_t>(n) * (box_edges + 2 * rails) + leaves * 64);

  // ---- the boxes and their NICs ----
  Value ranks = list(w), routes = list(w);
  const Value* broutes = graph.find("routes");
  const std::string nic_overhead = config::format_time(nic.overhead),
                    host_rate = config::format_bandwidth(nic.host_rate);
  for (int a = 0; a < n; ++a) {
    const std::string p = "n" + std::to_string(a) + ".";
    for (const Value& v : bnodes->items) {
      Value x = v;
      prefix(x, "name", p);
      prefix(x, "memory", p);
      bld.nodes.items.push_back(std::move(x));
    }
    for (const Value& v : bedges->items) {
      Value x = v;
      prefix(x, "a", p);
      prefix(x, "b", p);
      bld.edges.items.push_back(std::move(x));
    }
    if (broutes && broutes->type == Value::Type::List)
      for (const Value& v : broutes->items) {
        Value x = v;
        prefix(x, "src", p);
        prefix(x, "dst", p);
        if (Value* via = x.find("via"); via && via->type == Value::Type::List)
          for (Value& hop : via->items) hop.text = p + hop.text;
        routes.items.push_back(std::move(x));
      }
    for (const std::string& gpu : gpus) {
      ranks.items.push_back(scalar(p + gpu, w));
      info.ranks.push_back(p + gpu);
    }
    for (int j = 0; j < rails; ++j) {
      const std::string name = p + "nic" + std::to_string(j);
      bld.nodes.items.push_back(
          map({{"name", scalar(name, w)}, {"kind", scalar("nic", w)}, {"overhead", scalar(nic_overhead, w)}}, w));
      bld.edge(name, p + attach[j], "pcie", host_rate, host_latency[j], 1);
      info.nics.push_back(name);
    }
  }

  // ---- leaves: NIC ports in rank order (fat-tree) or one leaf per rail per group of `down` nodes ----
  for (int l = 0; l < leaves; ++l) {
    ClusterSwitch s{"leaf" + std::to_string(l), 1, 0, 0, rail ? l / rails : 0, l / per_pod};
    info.leaves.push_back(s);
    bld.switch_node(s.name);
  }
  info.nic_leaf.resize(info.nics.size());
  for (int a = 0; a < n; ++a)
    for (int j = 0; j < rails; ++j) {
      const int idx = a * rails + j;
      const int l = rail ? (a / down) * rails + j : idx / down;
      info.nic_leaf[idx] = l;
      ++info.leaves[l].down_links;
      bld.ib(info.nics[idx], info.leaves[l].name, 1);
    }

  // ---- spines: every leaf of a pod reaches every spine of it; cores join the pods' spines ----
  const auto leaves_in = [&](int pod) { return std::min(per_pod, leaves - pod * per_pod); };
  if (cc.fabric.tiers == 2) {
    const int spines = leaves == 1 ? 0 : fewest_above(leaves, up, k);
    const int links = spines ? up / spines : 0;
    for (int s = 0; s < spines; ++s) {
      info.spines.push_back({"spine" + std::to_string(s), 2, leaves * links, 0, 0, 0});
      bld.switch_node(info.spines.back().name);
    }
    for (int l = 0; l < leaves; ++l)
      for (int s = 0; s < spines; ++s) {
        info.leaves[l].up_links += links;
        bld.ib(info.leaves[l].name, info.spines[s].name, links);
      }
  } else if (pods > 1 || leaves > 1) {
    for (int pod = 0; pod < pods; ++pod)
      for (int j = 0; j < up; ++j) {
        info.spines.push_back(
            {"spine" + std::to_string(pod * up + j), 2, leaves_in(pod), pods > 1 ? leaves_in(pod) : 0, pod, pod});
        bld.switch_node(info.spines.back().name);
      }
    for (int l = 0; l < leaves; ++l) {
      const int pod = l / per_pod;
      for (int j = 0; j < up; ++j) {
        ++info.leaves[l].up_links;
        bld.ib(info.leaves[l].name, info.spines[pod * up + j].name, 1);
      }
    }
    if (pods > 1) {
      const int per_group = leaves_in(0);  // cores per spine index j: as many as a full pod's spine has uplinks
      for (int j = 0; j < up; ++j)
        for (int m = 0; m < per_group; ++m) {
          info.cores.push_back({"core" + std::to_string(j * per_group + m), 3, 0, 0, 0, 0});
          bld.switch_node(info.cores.back().name);
        }
      for (int pod = 0; pod < pods; ++pod)
        for (int j = 0; j < up; ++j)
          for (int m = 0; m < leaves_in(pod); ++m) {
            ++info.cores[j * per_group + m].down_links;
            bld.ib(info.spines[pod * up + j].name, info.cores[j * per_group + m].name, 1);
          }
    }
  }

  // ---- the tree: the box's other sections under the cluster file's (its keys win), the generated graph ----
  std::vector<std::pair<std::string, Value>> layout{
      {"ranks", std::move(ranks)},
      {"packages",
       map({{"w", scalar(std::to_string(n), w)}, {"h", scalar("1", w)}, {"topology", scalar("ring", w)}}, w)},
      {"groups", map({{"w", scalar("1", w)}, {"h", scalar("1", w)}}, w)},
      {"pes_per_group", scalar(std::to_string(g), w)}};
  std::vector<std::pair<std::string, Value>> gen{
      {"nodes", std::move(bld.nodes)}, {"edges", std::move(bld.edges)}, {"layout", map(std::move(layout), w)}};
  if (!routes.items.empty()) gen.emplace_back("routes", std::move(routes));
  root.entries.erase(
      std::find_if(root.entries.begin(), root.entries.end(), [](const Entry& e) { return e.key == "cluster"; }));
  config::merge_values(box, std::move(root));
  box.entries.push_back({"graph", w, map(std::move(gen), w)});
  root = std::move(box);
  return true;
}

}  // namespace kernbench::topology
