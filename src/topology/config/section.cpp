// section.cpp -- topology's sections of the config: the root's
// structure (system or graph), `system` with `nodes` and `links`, `graph`
// and `fabric`.
//
// The plain keys are bound to their members (config/section.hpp); the
// structural rules (exactly one of system and graph, the SIP count, the
// machine size, pcie_attach inside its grids, the graph's names, ends and
// connectivity) are the hand-written steps below.
#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "config/section.hpp"
#include "topology/config/cluster.hpp"
#include "topology/config/explicit_graph_detail.hpp"
#include "topology/config/loader.hpp"
#include "topology/graph/machine.hpp"
#include "topology/routing/multipath.hpp"

namespace kernbench::topology {
namespace {

using config::Bound;
using config::in_quotes;
using config::is_digit;
using config::item_path;
using config::join;
using config::KeyDef;
using config::MapReader;
using config::Section;
using config::suggestion;
using config::trim;
using config::Type;
using config::Value;

// The most square factorisation of n: a <= b, a * b = n.
std::pair<int, int> near_square(int n) {
  int a = static_cast<int>(std::sqrt(static_cast<double>(n)));
  while (a > 1 && n % a != 0) --a;
  return {a, n / a};
}

void read_sips(const MapReader& r, SystemConfig& s) {
  r.get_enum("topology", s.sip_topology, sip_topology_from_string);
  const bool has_w = r.get("w"), has_h = r.get("h");
  int count = 0;
  if (r.get_int("count", count)) {
    if (has_w || has_h) r.fail("count", "give either count or w and h, not both");
    int side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(count))));
    if (side * side != count) {
      const auto [a, b] = near_square(count);
      r.fail("count", std::to_string(count) + " SIPs is not a square grid: give " + r.path_of("w") + " and " +
                          r.path_of("h") + " (" + std::to_string(a) + "x" + std::to_string(b) + " or " +
                          std::to_string(b) + "x" + std::to_string(a) + ")");
    }
    s.sips = {side, side};
    return;
  }
  for (const char* k : {"w", "h"})
    if (!r.get(k))
      r.fail(k, "required key is missing (give " + r.path_of("w") + " and " + r.path_of("h") + ", or " +
                    r.path_of("count") + ")");
  r.get_int("w", s.sips.w);
  r.get_int("h", s.sips.h);
}

// "r<row>c<col>"
bool parse_router_name(std::string_view s, int& row, int& col) {
  if (s.size() < 4 || s[0] != 'r') return false;
  const std::size_t c = s.find('c');
  if (c == std::string_view::npos) return false;
  const std::string_view r = s.substr(1, c - 1), k = s.substr(c + 1);
  const auto digits = [](std::string_view d) {
    return !d.empty() && d.size() <= 9 && std::all_of(d.begin(), d.end(), is_digit);
  };
  if (!digits(r) || !digits(k)) return false;
  row = std::stoi(std::string(r));
  col = std::stoi(std::string(k));
  return true;
}

void read_pcie_attach(const MapReader& r, SystemConfig& s) {
  if (r.get_int("cube", s.pcie_attach.cube) && s.pcie_attach.cube >= s.cubes.count())
    r.fail("cube", "cube " + std::to_string(s.pcie_attach.cube) + " is outside the " + std::to_string(s.cubes.w) + "x" +
                       std::to_string(s.cubes.h) + " cube grid (cubes 0.." + std::to_string(s.cubes.count() - 1) + ")");
  std::string router;
  if (!r.get_string("router", router)) return;
  int row = 0, col = 0;
  if (!parse_router_name(router, row, col))
    r.fail("router", "expected a router name like \"r0c1\" (r<row>c<col>), got " + in_quotes(router));
  if (row >= s.routers.h || col >= s.routers.w)
    r.fail("router", "router " + in_quotes(router) + " is outside the " + std::to_string(s.routers.w) + "x" +
                         std::to_string(s.routers.h) + " router mesh (rows r0..r" + std::to_string(s.routers.h - 1) +
                         ", columns c0..c" + std::to_string(s.routers.w - 1) + ")");
  s.pcie_attach.row = row;
  s.pcie_attach.col = col;
}

void read_system(const MapReader& top, Config& c) {
  if (!top.get("system")) return;
  const MapReader r = top.child("system");
  SystemConfig s;
  r.read(s);  // name, cubes, routers, pes_per_cube; the rules below read sips and pcie_attach
  top.child("nodes").read(s.nodes);
  top.child("links").read(s.links);
  c.system = std::move(s);
}

void read_pipeline(const MapReader& r, NodeParams::Pipeline& p) {
  for (auto [key, cycles] :
       {std::pair{"route", &p.route}, std::pair{"vc_alloc", &p.vc_alloc}, std::pair{"switch_alloc", &p.switch_alloc}}) {
    r.get_int(key, *cycles);
    if (*cycles < 0 || *cycles > 1'000'000)
      r.fail(key, "expected a cycle count in 0..1000000, got " + std::to_string(*cycles));
  }
}

// A pipeline in cycles needs a clock to become time.
void check_clock(const MapReader& r, const NodeParams& n) {
  if (n.clock_hz < 0) r.fail("clock", "expected a positive frequency");
  if (n.pipeline.cycles() > 0 && n.clock_hz == 0)
    r.fail(r.get("clock") ? "clock" : "pipeline", "a pipeline of " + std::to_string(n.pipeline.cycles()) +
                                                      " cycles needs the node's clock (e.g. clock: 1 GHz)");
}

ExplicitGraphConfig read_graph(const MapReader& top) {
  const MapReader r = top.child("graph");
  ExplicitGraphConfig g;
  const std::vector<MapReader> nodes = r.list("nodes");
  if (nodes.empty()) r.fail("nodes", "expected at least one node, got an empty list");
  std::unordered_map<std::string, std::size_t> index;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const MapReader& m = nodes[i];
    ExplicitNode n;
    m.get_string("name", n.name);
    if (trim(n.name).empty()) m.fail("name", "a node name must not be empty");
    if (const auto it = index.find(n.name); it != index.end())
      m.fail("name", "duplicate node name " + in_quotes(n.name) + " (first defined at " +
                         item_path(r.path_of("nodes"), it->second) + ")");
    m.get_enum("kind", n.kind, node_kind_from_string);
    m.get_time("overhead", n.params.overhead);
    m.get_bool("flit_aware", n.params.flit_aware);
    m.get_bool("transit", n.params.transit);
    if (m.get("reduction")) {
      if (n.kind != NodeKind::Switch)
        m.fail("reduction",
               "only a switch node reduces in the network; " + in_quotes(n.name) + " is a " + to_string(n.kind));
      m.child("reduction").get_bandwidth("bandwidth", n.params.reduction);
    }
    if (m.get("pipeline")) read_pipeline(m.child("pipeline"), n.params.pipeline);
    m.get_frequency("clock", n.params.clock_hz);
    check_clock(m, n.params);
    if (m.get_string("memory", n.memory) && n.kind != NodeKind::Pe)
      m.fail("memory", "only a pe node has a memory of its own; " + in_quotes(n.name) + " is a " + to_string(n.kind));
    index.emplace(n.name, i);
    names.push_back(n.name);
    g.nodes.push_back(std::move(n));
  }

  std::vector<std::vector<std::size_t>> adjacent(g.nodes.size());
  const std::vector<MapReader> edges = r.list("edges");
  for (const MapReader& m : edges) {
    ExplicitEdge e;
    m.get_string("a", e.a);
    m.get_string("b", e.b);
    std::size_t ends[2] = {0, 0};
    for (int side = 0; side < 2; ++side) {
      const std::string& name = side ? e.b : e.a;
      const auto it = index.find(name);
      if (it == index.end())
        m.fail(side ? "b" : "a",
               "no node named " + in_quotes(name) + " in " + r.path_of("nodes") + suggestion(name, names));
      ends[side] = it->second;
    }
    if (ends[0] == ends[1]) m.fail("b", "self-loop: both ends are " + in_quotes(e.a));
    m.get_string("class", e.link_class);
    detail::read_link(m, e.link);
    adjacent[ends[0]].push_back(ends[1]);
    adjacent[ends[1]].push_back(ends[0]);
    g.edges.push_back(std::move(e));
  }

  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const std::string& mem = g.nodes[i].memory;
    if (mem.empty()) continue;
    const auto it = index.find(mem);
    if (it == index.end())
      nodes[i].fail("memory", "no node named " + in_quotes(mem) + " in " + r.path_of("nodes") + suggestion(mem, names));
    const NodeKind k = g.nodes[it->second].kind;
    if (k != NodeKind::HbmCtrl && k != NodeKind::Memory)
      nodes[i].fail("memory", in_quotes(mem) + " is a " + std::string(to_string(k)) +
                                  "; a PE's memory is a hbm_ctrl or memory node");
  }
  if (r.get("layout")) detail::read_layout(r.child("layout"), g, index, names);
  if (r.get("routes")) detail::read_routes(r, g, index, names, adjacent);

  // Every node must be reachable from the first (routing needs a connected graph).
  std::vector<bool> seen(g.nodes.size(), false);
  std::vector<std::size_t> todo{0};
  seen[0] = true;
  while (!todo.empty()) {
    const std::size_t u = todo.back();
    todo.pop_back();
    for (std::size_t v : adjacent[u])
      if (!seen[v]) seen[v] = true, todo.push_back(v);
  }
  for (std::size_t i = 0; i < seen.size(); ++i)
    if (!seen[i])
      nodes[i].fail("name", "the graph is disconnected: node " + in_quotes(g.nodes[i].name) +
                                " cannot be reached from " + in_quotes(g.nodes[0].name) + " (" +
                                item_path(r.path_of("nodes"), 0) + ")");
  return g;
}

// The `system:` section's own rules, in the order they were always checked.
void system_rules(Section<SystemConfig>& sys) {
  sys.rule([](const MapReader& r, SystemConfig& s) { read_sips(r.child("sips"), s); });
}

void grid_keys(Section<GridSize> g) {
  g.doc("A w x h grid (columns x rows).");
  g.add("w", &GridSize::w, "width (columns)").req().min(Bound::Positive);
  g.add("h", &GridSize::h, "height (rows)").req().min(Bound::Positive);
}

void pipeline_keys(Section<NodeParams::Pipeline> p) {
  p.doc(
      "A router pipeline in cycles per hop (BookSim's routing / VC allocation / switch allocation stages); "
      "its time, cycles / clock rounded up to a ps, is paid with the node's overhead by every chunk.");
  for (auto [key, m, what] : {std::tuple{"route", &NodeParams::Pipeline::route, "route computation"},
                              std::tuple{"vc_alloc", &NodeParams::Pipeline::vc_alloc, "virtual-channel allocation"},
                              std::tuple{"switch_alloc", &NodeParams::Pipeline::switch_alloc, "switch allocation"}})
    p.add(key, m, std::string("cycles of ") + what).min(Bound::NonNegative);
  p.rule(read_pipeline);
}

void node_keys(Section<NodeParams> n, bool flit_aware) {
  n.doc("Parameters of one node kind.");
  n.time("overhead", &NodeParams::overhead, "processing delay paid by every chunk passing the node")
      .req()
      .min(Bound::NonNegative);
  n.add("flit_aware", &NodeParams::flit_aware, "forwards chunk by chunk (cut-through); false: store-and-forward")
      .dflt(flit_aware);
  pipeline_keys(n.map<NodeParams::Pipeline>("pipeline", &NodeParams::pipeline,
                                            "router pipeline: cycles per hop (added to overhead at `clock`)"));
  n.frequency("clock", &NodeParams::clock_hz, "clock of the pipeline (required when it has cycles)");
  n.rule(check_clock);
}

// The keys of one link, declared once for a link class (links.<class>) and an explicit graph's edge
// (graph.edges[]); detail::read_link reads them into a LinkParams in all. An explicit graph's class
// (`required` false) may leave any key to its edges.
template <typename S>
void declare_link_keys(Section<S>& s, bool required = true) {
  const LinkParams lp{};
  KeyDef& bw = s.key("bandwidth", Type::Bandwidth, "bandwidth per direction per connection").min(Bound::Positive);
  if (required) bw.req();
  KeyDef& lat = s.key("latency", Type::Time, "wire latency").min(Bound::NonNegative);
  if (required) lat.req();
  s.key("connections", Type::Int, "parallel lanes, each its own server (at most 1024)")
      .dflt(lp.connections)
      .min(Bound::Positive);
  s.key("buffer", Type::String,
        "packet model: input buffer per VC at the downstream node: unbounded, \"N flits\" or a size (whole flits); "
        "chunks advance only with credits")
      .dflt("unbounded");
  s.key("vcs", Type::Int, "virtual channels (each its own buffer and credits; a transfer uses id mod vcs)")
      .dflt(lp.vcs)
      .min(Bound::Positive);
}

void link_keys(Section<LinkParams> l) {
  l.doc("A link class: per-direction bandwidth per connection, wire latency, parallel connections.");
  declare_link_keys(l);
  l.rule([](const MapReader& r, LinkParams& p) { detail::read_link(r, p); });
}

// The YAML node of a dotted key ("graph.edges[3].connections"), or its nearest parent's (for the file and line).
const Value* value_at(const Value& root, const std::string& key) {
  const Value* found = &root;
  for (std::string rest = key; !rest.empty();) {
    const std::size_t dot = rest.find('.');
    const std::string part = rest.substr(0, dot);
    rest = dot == std::string::npos ? "" : rest.substr(dot + 1);
    const Value* next = nullptr;
    if (const auto br = part.find('['); br != std::string::npos) {  // edges[3]
      const Value* list = found->find(part.substr(0, br));
      const std::size_t i = std::stoul(part.substr(br + 1));
      if (list && list->type == Value::Type::List && i < list->items.size()) next = &list->items[i];
    } else {
      next = found->find(part);
    }
    if (!next) break;
    found = next;
  }
  return found;
}

// The packet model's buffers against fabric.chunk and fabric.flit, as the packet fabric checks them when it
// is built (packet_buffer_fault): here too, so `validate` and sweeps' up-front check refuse what System.load
// would. Only link classes the machine builds links of count.
void check_packet_buffers(const MapReader& top, const Config& c) {
  if (c.fabric.model != FabricModel::Packet) return;
  std::vector<std::pair<std::string, const BufferSize*>> used;
  if (c.system) {
    const SystemConfig& s = *c.system;
    const SystemConfig::Links& l = s.links;
    const bool noc = s.routers.w > 1 || s.routers.h > 1;
    const bool ucie = s.cubes.w > 1 || s.cubes.h > 1;
    const bool pcie = s.sips.w > 1 || s.sips.h > 1;
    for (const auto& [name, link, built] : {std::tuple<const char*, const LinkParams*, bool>{"pe", &l.pe, true},
                                            {"noc", &l.noc, noc},
                                            {"hbm", &l.hbm, true},
                                            {"ucie_port", &l.ucie_port, ucie},
                                            {"ucie", &l.ucie, ucie},
                                            {"pcie_port", &l.pcie_port, true},
                                            {"pcie", &l.pcie, pcie}})
      if (built) used.emplace_back(std::string("links.") + name + ".buffer", &link->buffer);
  } else if (c.graph) {
    for (std::size_t i = 0; i < c.graph->edges.size(); ++i)
      used.emplace_back("graph.edges[" + std::to_string(i) + "].buffer", &c.graph->edges[i].link.buffer);
  }
  for (const auto& [key, buffer] : used)
    if (const std::string fault = packet_buffer_fault(*buffer, c.fabric); !fault.empty())
      top.loader().fail(value_at(top.value(), key)->where, key, fault);
}

}  // namespace

void add_config_sections(config::Schema& schema) {
  Section<Config> root(schema, schema.root());
  root.doc("A kernbench machine configuration.");
  root.rules({"exactly one of system, graph and cluster (cluster is expanded into a graph first)",
              "nodes and links are required with system; nodes is refused with graph, where links gives the "
              "classes of its edges (links.<class>)",
              "included files are merged first (maps deep-merged, this file's keys win); cycles are errors",
              "--set PATH=VALUE overrides apply after includes; numeric path components index lists",
              "at most 2^24 lanes (links x connections, both directions) in one machine"});
  root.rule([](const MapReader& top, Config&) {
    const Value* sys = top.get("system");
    const Value* graph = top.get("graph");
    if (sys && graph) top.fail_key("graph", "give either system or graph, not both");
    if (!sys && !graph)
      top.loader().fail(top.value().where, "",
                        "missing system, graph or cluster: a config describes a generated machine (system), an "
                        "explicit graph (graph) or a cluster of boxes (cluster)");
    for (const char* k : {"nodes", "links"})
      if (sys && !top.get(k))
        top.loader().fail(top.value().where, k,
                          std::string("required key is missing: a system config needs ") + k + " (" +
                              join(top.section().find(k)->section->names(), ", ") + ")");
    // A graph's links: is merged into its edges before this reader (detail::apply_link_classes).
    if (!sys && top.get("nodes"))
      top.fail_key("nodes", "nodes belongs to a system config; a graph config gives node parameters in graph.nodes");
  });
  root.key("include", Type::Strings,
           "file or list of files merged under this one, relative to its folder; confined to its folder tree, the "
           "packaged configs and --include-dir folders");

  add_cluster_section(schema, schema.root());  // read before the root, by expand_cluster (loader.cpp)

  // ---- system: the SIP -> CUBE -> PE generator, with nodes and links ----
  const SystemConfig sys_defaults{};
  Section<SystemConfig> sys = root.section<SystemConfig>("system", Type::Map, "a generated SIP/CUBE/PE machine");
  root.rule(read_system);
  sys.doc("The SIP -> CUBE -> PE machine generator.");
  sys.add("name", &SystemConfig::name, "name of the machine, for reports");
  Section<SystemConfig> sips = sys.section<SystemConfig>("sips", Type::Map, "the SIP grid and its topology");
  sys.key_def("sips").req();
  sips.doc("The grid of SIPs and how they are connected.");
  sips.rules({"give w and h, or count alone (a perfect square: w = h = sqrt(count))"});
  sips.key("w", Type::Int, "SIP grid width").min(Bound::Positive);
  sips.key("h", Type::Int, "SIP grid height").min(Bound::Positive);
  sips.key("count", Type::Int, "number of SIPs, a perfect square (instead of w and h)").min(Bound::Positive);
  sips.key("topology", Type::Enum, "how the SIPs are linked over PCIe").req().one_of(sip_topology_names());
  system_rules(sys);
  grid_keys(sys.map<GridSize>("cubes", &SystemConfig::cubes, "the cube grid of each SIP (a mesh)"));
  sys.key_def("cubes").req();
  grid_keys(sys.map<GridSize>("routers", &SystemConfig::routers, "the router mesh of each cube"));
  sys.key_def("routers").req();
  sys.add("pes_per_cube", &SystemConfig::pes_per_cube, "PEs per cube; PE i attaches to router i mod (w*h), row-major")
      .req()
      .min(Bound::Positive);
  sys.rule([](const MapReader& r, SystemConfig& s) {
    // Node ids are ints downstream (and GridSize::count() multiplies ints):
    // refuse machines whose counts overflow them. Each factor is below 2^63
    // and we stop multiplying once past INT_MAX, so nothing overflows here.
    // Also a practical cap: every PE brings an HBM slice and routers their
    // links; past a few million nodes a machine no longer fits in memory.
    const auto cells = [](const GridSize& g) { return static_cast<__int128>(g.w) * g.h; };
    constexpr __int128 kMaxMachineNodes = 1 << 20;  // ~1 M nodes (~1 GB); the 512-PE default has ~1.6 K
    __int128 total = cells(s.sips);
    if (total <= kMaxMachineNodes) total *= cells(s.cubes);
    if (total <= kMaxMachineNodes) total *= 2 * static_cast<__int128>(s.pes_per_cube) + cells(s.routers);
    if (total > kMaxMachineNodes)
      r.loader().fail(r.value().where, r.path(),
                      "the machine is too large: more than " +
                          std::to_string(static_cast<long long>(kMaxMachineNodes)) + " PEs, HBM slices and routers");
  });
  Section<SystemConfig> attach =
      sys.section<SystemConfig>("pcie_attach", Type::Map, "attachment of the SIP's PCIe endpoint");
  attach.doc("Where each SIP's PCIe endpoint attaches inside the SIP.");
  attach.key("cube", Type::Int, "cube index, row-major in the cube grid")
      .dflt(sys_defaults.pcie_attach.cube)
      .min(Bound::NonNegative);
  attach.key("router", Type::String, "router r<row>c<col> inside that cube's router mesh")
      .dflt("r" + std::to_string(sys_defaults.pcie_attach.row) + "c" + std::to_string(sys_defaults.pcie_attach.col));
  sys.rule([](const MapReader& r, SystemConfig& s) {
    if (r.get("pcie_attach")) read_pcie_attach(r.child("pcie_attach"), s);
  });

  Section<SystemConfig::Nodes> nodes =
      root.section<SystemConfig::Nodes>("nodes", Type::Map, "per-kind node parameters (with system)");
  nodes.doc("Per-kind node parameters of the generated machine (system configs only).");
  using Nodes = SystemConfig::Nodes;
  node_keys(nodes.map<NodeParams>("pe", &Nodes::pe, "processing elements"), sys_defaults.nodes.pe.flit_aware);
  node_keys(nodes.map<NodeParams>("router", &Nodes::router, "NoC routers"), sys_defaults.nodes.router.flit_aware);
  node_keys(nodes.map<NodeParams>("hbm_ctrl", &Nodes::hbm_ctrl, "HBM controller slices"),
            sys_defaults.nodes.hbm_ctrl.flit_aware);
  node_keys(nodes.map<NodeParams>("ucie", &Nodes::ucie, "UCIe adapters on cube sides"),
            sys_defaults.nodes.ucie.flit_aware);
  node_keys(nodes.map<NodeParams>("pcie_ep", &Nodes::pcie_ep, "the SIP's PCIe endpoint"),
            sys_defaults.nodes.pcie_ep.flit_aware);
  for (const char* k : {"pe", "router", "hbm_ctrl", "ucie", "pcie_ep"}) nodes.key_def(k).req();

  Section<SystemConfig::Links> links = root.section<SystemConfig::Links>(
      "links", Type::Map, "link classes: the generated machine's (system) or an explicit graph's (graph)");
  links.doc(
      "Link classes. A system config gives the generator's seven classes, each with its bandwidth and latency; "
      "an explicit graph may give any class its edges name (graph.edges[].class), its values stated once for "
      "every edge of the class.");
  links.rules({"with system: pe, noc, hbm, ucie_port, ucie, pcie_port and pcie, each required, no other class",
               "with graph: any class an edge names; an edge's own value wins over the file's links.<class> value",
               "a --set of links.<class>.<key> overrides every edge of the class, also those stating their own "
               "value"});
  using Links = SystemConfig::Links;
  link_keys(links.map<LinkParams>("pe", &Links::pe, "PE <-> its router"));
  link_keys(links.map<LinkParams>("noc", &Links::noc, "router <-> router inside a cube"));
  link_keys(links.map<LinkParams>("hbm", &Links::hbm, "router <-> the PE's HBM controller slice"));
  link_keys(links.map<LinkParams>("ucie_port", &Links::ucie_port, "edge router <-> the cube side's UCIe adapter"));
  link_keys(links.map<LinkParams>("ucie", &Links::ucie, "UCIe adapter <-> the neighbour cube's adapter"));
  link_keys(links.map<LinkParams>("pcie_port", &Links::pcie_port, "attach router <-> the SIP's PCIe endpoint"));
  link_keys(links.map<LinkParams>("pcie", &Links::pcie, "PCIe endpoint <-> the neighbour SIP's endpoint"));
  for (const char* k : {"pe", "noc", "hbm", "ucie_port", "ucie", "pcie_port", "pcie"}) links.key_def(k).req();
  // A placeholder (config/schema.cpp): no file key matches it; detail::apply_link_classes reads graph classes.
  Section<LinkParams> any = links.section<LinkParams>(
      "<class>", Type::Map, "graph configs: a class of graph.edges, values for every edge of that class");
  any.doc("One link class of an explicit graph: any key left out here is given by each edge of the class.");
  declare_link_keys(any, false);
  for (KeyDef& k : any.def().keys) k.no_default();  // a key a class leaves out is its edges' (or their default)

  // ---- graph: an explicit node/edge graph, read by read_graph ----
  Section<ExplicitGraphConfig> graph =
      root.section<ExplicitGraphConfig>("graph", Type::Map, "an explicit graph (instead of system)");
  root.rule([](const MapReader& top, Config& c) {
    if (top.get("graph")) c.graph = read_graph(top);
  });
  graph.doc("An explicit node/edge graph (K200 host, vGPU path).");
  graph.rules({"node names are unique", "edges join two different existing nodes",
               "every node can be reached from the first one"});
  Section<ExplicitNode> gn = graph.section<ExplicitNode>("nodes", Type::List, "the nodes (at least one)");
  graph.key_def("nodes").req();
  gn.doc("One node of an explicit graph.");
  gn.key("name", Type::String, "unique, non-empty node name").req();
  gn.key("kind", Type::Enum, "what the node is").req().one_of(node_kind_names());
  gn.key("overhead", Type::Time, "processing delay paid by every chunk passing the node").req().min(Bound::NonNegative);
  gn.key("flit_aware", Type::Bool, "forwards chunk by chunk (cut-through); false: store-and-forward")
      .dflt(ExplicitNode{}.params.flit_aware);
  gn.key("transit", Type::Bool,
         "carries traffic between other nodes; false: routes pass through it only when no other path exists "
         "(a GPU between its NVLink and PCIe ports)")
      .dflt(ExplicitNode{}.params.transit);
  Section<NodeParams::Pipeline> gp = gn.section<NodeParams::Pipeline>(
      "pipeline", Type::Map, "router pipeline in cycles per hop (see nodes.router.pipeline)");
  gp.doc("A router pipeline in cycles per hop (see nodes.router.pipeline).");
  for (const char* k : {"route", "vc_alloc", "switch_alloc"})
    gp.key(k, Type::Int, std::string("cycles of the ") + k + " stage").dflt(0).min(Bound::NonNegative);
  gn.key("clock", Type::Frequency, "clock of the pipeline");
  gn.key("memory", Type::String, "pe nodes: the hbm_ctrl or memory node holding this PE's own memory (its HBM)");
  Section<ExplicitNode> gred = gn.section<ExplicitNode>(
      "reduction", Type::Map, "switch nodes: in-network reduction (NVLink SHARP-like), used by the nvls all-reduce");
  gred.doc(
      "A switch that declares it receives each rank's contribution of a chunk, reduces them and multicasts "
      "the result to every rank (the runtime's switch_reduce op).");
  gred.key("bandwidth", Type::Bandwidth,
           "input bytes the reduction unit consumes per second, summed over the contributions")
      .req()
      .min(Bound::Positive);
  Section<LayoutConfig> layout =
      graph.section<LayoutConfig>("layout", Type::Map, "the PEs' rank order, rank grid and group hierarchy");
  layout.doc("The relations kernels and collectives read (the generator states the same for its machines).");
  layout.rules({"ranks are pe nodes, each once; without ranks, every pe node in the order listed",
                "grid.w x grid.h is the number of ranks",
                "packages, groups and pes_per_group come together; their product is the number of ranks",
                "rank r is PE r % pes_per_group of group (r / pes_per_group) % groups of package "
                "r / (groups x pes_per_group)"});
  layout.key("ranks", Type::Strings, "pe node names in rank order");
  Section<LayoutConfig> lgrid = layout.section<LayoutConfig>("grid", Type::Map, "the ranks as a w x h grid, row-major");
  lgrid.doc("The rank grid of the 2-D collectives (torus2d, mesh2d).");
  lgrid.key("w", Type::Int, "grid width (columns)").req().min(Bound::Positive);
  lgrid.key("h", Type::Int, "grid height (rows)").req().min(Bound::Positive);
  Section<LayoutConfig> lpk =
      layout.section<LayoutConfig>("packages", Type::Map, "the package grid (the generator's SIPs)");
  lpk.doc("The grid of packages and how they are linked.");
  lpk.key("w", Type::Int, "package grid width").req().min(Bound::Positive);
  lpk.key("h", Type::Int, "package grid height").req().min(Bound::Positive);
  lpk.key("topology", Type::Enum, "how the packages are linked (hierarchical collectives)")
      .dflt(to_string(LayoutConfig{}.package_topology))
      .one_of(sip_topology_names());
  Section<LayoutConfig> lgr =
      layout.section<LayoutConfig>("groups", Type::Map, "the group grid of each package (the generator's cubes)");
  lgr.doc("The grid of groups (PEs sharing a cube) in each package, row-major.");
  lgr.key("w", Type::Int, "group grid width").req().min(Bound::Positive);
  lgr.key("h", Type::Int, "group grid height").req().min(Bound::Positive);
  layout.key("pes_per_group", Type::Int, "PEs per group").min(Bound::Positive);
  Section<PinnedRoute> gr = graph.section<PinnedRoute>(
      "routes", Type::List, "pinned routes: every transfer src -> dst takes this path (one direction)");
  gr.doc("A pinned route: src -> via... -> dst along existing edges; it overrides fabric.multipath for the pair.");
  gr.rules({"src, dst and every via node exist; src != dst", "consecutive nodes are joined by an edge",
            "no node twice; at most one route per (src, dst)"});
  gr.key("src", Type::String, "the sending node").req();
  gr.key("dst", Type::String, "the receiving node").req();
  gr.key("via", Type::Strings, "the intermediate nodes in order (empty or absent: the direct edge)");
  Section<ExplicitEdge> ge = graph.section<ExplicitEdge>("edges", Type::List, "the links");
  graph.key_def("edges").req();
  ge.doc("One link of an explicit graph (both directions, same parameters).");
  ge.key("a", Type::String, "name of one end").req();
  ge.key("b", Type::String, "name of the other end").req();
  ge.key("class", Type::String, "link class, for reports").dflt(ExplicitEdge{}.link_class);
  declare_link_keys(ge);  // read by read_graph's read_link
  for (const char* k : {"bandwidth", "latency"})
    ge.key_def(k).doc += std::string(" (or its class's, links.<class>.") + k + ")";

  // The machine's real size, from the config alone: `validate` refuses what
  // could never be built, naming the key that brings the most lanes.
  root.rule([](const MapReader& top, Config& c) {
    const LaneCount n = count_lanes(c);
    if (const std::string over = lanes_over_limit(n); !over.empty()) {
      // The key's own node (its file and line, or its --set), else its nearest parent's.
      top.loader().fail(value_at(top.value(), n.key)->where, n.key, over);
    }
  });

  // ---- fabric ----
  Section<FabricConfig> fabric =
      root.map<FabricConfig>("fabric", &Config::fabric, "the fabric model; every key has a default");
  fabric.doc("How bytes move through the graph.");
  fabric.rules({"chunk is a multiple of flit"});
  fabric.choice("model", &FabricConfig::model, "packet: chunks pipelined hop by hop; flow: max-min fair sharing",
                fabric_model_names(), fabric_model_from_string);
  fabric.bytes("chunk", &FabricConfig::chunk, "packet model: transfers are cut into chunks of this size")
      .min(Bound::Positive);
  fabric.bytes("flit", &FabricConfig::flit, "smallest unit on a link").min(Bound::Positive);
  fabric.bytes("request", &FabricConfig::request, "size of a DMA read request packet").min(Bound::Positive);
  fabric.bytes("stripe", &FabricConfig::stripe, "lane striping unit on multi-connection links (0: the chunk)")
      .min(Bound::NonNegative);
  fabric.choice("multipath", &FabricConfig::multipath, multipath_doc(), multipath_policy_names(),
                multipath_policy_from_string);
  fabric.rule([](const MapReader& r, FabricConfig& f) {
    if (f.chunk % f.flit != 0)
      r.fail(r.get("chunk") ? "chunk" : "flit", "the chunk (" + config::format_bytes(f.chunk) +
                                                    ") must be a multiple of the flit (" +
                                                    config::format_bytes(f.flit) + ")");
  });
  // After fabric: the links' buffers against its chunk and flit.
  root.rule([](const MapReader& top, Config& c) { check_packet_buffers(top, c); });
}

}  // namespace kernbench::topology
