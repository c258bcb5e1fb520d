// bind_topology.cpp -- System: load a machine, schedule work, read records.
//
// Records come back as dicts of numpy arrays (copied out of the C++
// structs once, after the run); node and channel tables likewise. Runs
// release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <variant>

#include "bindings.hpp"
#include "config/quantity.hpp"
#include "kernbench.hpp"
#include "sim/errors.hpp"
#include "topology/config/loader.hpp"
#include "topology/graph/export.hpp"
#include "solver/maxmin.hpp"
#include "topology/fabric/packet/packet_fabric.hpp"
#include "topology/system.hpp"

namespace py = pybind11;
using namespace kernbench::topology;
using kernbench::sim::Time;

namespace kernbench::bindings {
namespace {

Time when(System& s, const py::object& at) {
  const auto t = opt_int_arg(at, "at_ps");
  return t ? *t : s.sim().now();
}

template <typename T, typename F>
py::array_t<T> column(std::size_t n, F&& get) {
  py::array_t<T> a(static_cast<py::ssize_t>(n));
  auto m = a.template mutable_unchecked<1>();
  for (std::size_t i = 0; i < n; ++i) m(static_cast<py::ssize_t>(i)) = get(i);
  return a;
}

std::vector<Override> to_overrides(const std::vector<std::pair<std::string, std::string>>& sets) {
  std::vector<Override> out;
  for (const auto& [k, v] : sets) out.push_back(Override{k, v});
  return out;
}

py::dict transfers_dict(const Fabric& f) {
  const auto& r = f.records();
  const std::size_t n = r.size();
  py::dict d;
  d["id"] = column<std::uint64_t>(n, [&](auto i) { return r[i].id; });
  d["request"] = column<std::int64_t>(n, [&](auto i) { return r[i].request; });
  d["src"] = column<std::uint32_t>(n, [&](auto i) { return r[i].src; });
  d["dst"] = column<std::uint32_t>(n, [&](auto i) { return r[i].dst; });
  d["bytes"] = column<std::int64_t>(n, [&](auto i) { return r[i].bytes; });
  d["issue_ps"] = column<std::int64_t>(n, [&](auto i) { return r[i].issue; });
  d["end_ps"] = column<std::int64_t>(n, [&](auto i) { return r[i].end; });
  d["overhead_ps"] = column<std::int64_t>(n, [&](auto i) { return r[i].parts.overhead; });
  d["transmission_ps"] = column<std::int64_t>(n, [&](auto i) { return r[i].parts.transmission; });
  d["drain_ps"] = column<std::int64_t>(n, [&](auto i) { return r[i].parts.drain; });
  d["queuing_ps"] = column<std::int64_t>(n, [&](auto i) { return r[i].parts.queuing; });
  d["hops"] = column<std::uint32_t>(n, [&](auto i) { return r[i].hops; });
  d["chunks"] = column<std::uint32_t>(n, [&](auto i) { return r[i].chunks; });
  d["tag"] = column<std::int32_t>(n, [&](auto i) { return r[i].tag; });
  d["agent"] = column<std::int32_t>(n, [&](auto i) { return r[i].agent; });
  d["path"] = column<std::uint32_t>(n, [&](auto i) { return r[i].path; });
  d["stripes"] = column<std::uint32_t>(n, [&](auto i) { return r[i].stripes; });
  d["parent"] = column<std::int64_t>(n, [&](auto i) {
    return r[i].parent == kNoTransfer ? std::int64_t{-1} : static_cast<std::int64_t>(r[i].parent);
  });
  return d;
}

py::dict route_dict(System& s, const Route& r) {
  py::dict d;
  std::vector<std::string> names, classes;
  for (NodeId n : r.nodes) names.push_back(s.machine().node(n).name);
  for (ChannelId c : r.channels) classes.push_back(s.machine().channel(c).link_class);
  d["nodes"] = names;
  d["channels"] = r.channels;
  d["classes"] = classes;
  d["hops"] = r.hops();
  d["bottleneck_Bps"] = r.bottleneck.bytes_per_s;
  d["rate_Bps"] = path_rate(r);
  std::vector<std::int64_t> hop_rates;  // bandwidth x connections per channel, in order
  for (const Hop& h : r.hop) hop_rates.push_back(h.bandwidth.bytes_per_s * h.connections);
  d["hop_rates_Bps"] = hop_rates;
  d["wire_latency_ps"] = r.wire_latency;
  d["node_overhead_ps"] = r.node_overhead;
  return d;
}

py::dict dma_dict(const System& s) {
  const auto& ops = s.dma_ops();
  const std::size_t n = ops.size();
  py::dict d;
  d["kind"] = py::cast([&] {
    std::vector<std::string> k;
    for (const auto& o : ops) k.push_back(o.kind == DmaKind::Read ? "read" : "write");
    return k;
  }());
  d["issuer"] = column<std::uint32_t>(n, [&](auto i) { return ops[i].issuer; });
  d["memory"] = column<std::uint32_t>(n, [&](auto i) { return ops[i].memory; });
  d["bytes"] = column<std::int64_t>(n, [&](auto i) { return ops[i].bytes; });
  d["tag"] = column<std::int32_t>(n, [&](auto i) { return ops[i].tag; });
  d["done"] = column<bool>(n, [&](auto i) { return ops[i].done; });
  d["issue_ps"] = column<std::int64_t>(n, [&](auto i) { return ops[i].result.issue; });
  d["end_ps"] = column<std::int64_t>(n, [&](auto i) { return ops[i].done ? ops[i].result.end : Time{-1}; });
  d["overhead_ps"] = column<std::int64_t>(n, [&](auto i) { return ops[i].result.parts.overhead; });
  d["transmission_ps"] = column<std::int64_t>(n, [&](auto i) { return ops[i].result.parts.transmission; });
  d["drain_ps"] = column<std::int64_t>(n, [&](auto i) { return ops[i].result.parts.drain; });
  d["queuing_ps"] = column<std::int64_t>(n, [&](auto i) { return ops[i].result.parts.queuing; });
  return d;
}

py::tuple grid(const GridSize& g) { return py::make_tuple(g.w, g.h); }

py::dict layout_dict(const Machine& m) {
  py::dict d;
  std::vector<std::string> ranks;
  std::vector<py::object> memories;
  std::vector<int> sip, cube, pe;
  for (NodeId id : m.pes()) {
    const NodeInfo& n = m.node(id);
    ranks.push_back(n.name);
    const auto mem = m.memory_of(id);
    memories.push_back(mem ? py::object(py::str(m.node(*mem).name)) : py::object(py::none()));
    sip.push_back(n.sip);
    cube.push_back(n.cube);
    pe.push_back(n.pe);
  }
  d["ranks"] = ranks;
  d["memories"] = memories;
  d["package"] = sip;
  d["group"] = cube;
  d["pe"] = pe;
  const PeHierarchy& h = m.hierarchy();
  d["packages"] = grid(h.packages);
  d["package_topology"] = std::string(to_string(h.package_topology));
  d["groups"] = grid(h.groups);
  d["pes_per_group"] = h.pes_per_group;
  d["declared"] = h.declared;
  d["grid"] = m.rank_grid() ? py::object(grid(*m.rank_grid())) : py::object(py::none());
  return d;
}

py::dict explicit_graph_dict(const Machine& m) {
  using kernbench::config::format_bandwidth;
  using kernbench::config::format_time;
  const ExplicitGraphConfig g = explicit_graph(m);
  py::list nodes, edges;
  for (const ExplicitNode& n : g.nodes) {
    py::dict x;
    x["name"] = n.name;
    x["kind"] = std::string(to_string(n.kind));
    x["overhead"] = format_time(n.params.overhead);
    x["flit_aware"] = n.params.flit_aware;
    if (!n.memory.empty()) x["memory"] = n.memory;
    nodes.append(x);
  }
  for (const ExplicitEdge& e : g.edges) {
    py::dict x;
    x["a"] = e.a;
    x["b"] = e.b;
    x["class"] = e.link_class;
    x["bandwidth"] = format_bandwidth(e.link.bandwidth);
    x["latency"] = format_time(e.link.latency);
    x["connections"] = e.link.connections;
    x["buffer"] = to_string(e.link.buffer);  // the packet model's finite buffers travel with the twin
    x["vcs"] = e.link.vcs;
    edges.append(x);
  }
  const LayoutConfig& l = g.layout;
  py::dict layout;
  if (!l.ranks.empty()) layout["ranks"] = l.ranks;
  if (l.grid) layout["grid"] = py::dict(py::arg("w") = l.grid->w, py::arg("h") = l.grid->h);
  if (l.packages) {
    layout["packages"] = py::dict(py::arg("w") = l.packages->w, py::arg("h") = l.packages->h,
                                  py::arg("topology") = std::string(to_string(l.package_topology)));
    layout["groups"] = py::dict(py::arg("w") = l.groups->w, py::arg("h") = l.groups->h);
    layout["pes_per_group"] = l.pes_per_group;
  }
  py::dict d;
  d["nodes"] = nodes;
  d["edges"] = edges;
  if (py::len(layout) > 0) d["layout"] = layout;
  return d;
}

}  // namespace

void bind_topology(py::module_& m) {
  py::class_<System>(m, "System", "A machine ready to run: config, graph, simulation and fabric.")
      .def_static(
          "load",
          [](const std::string& path, const std::vector<std::pair<std::string, std::string>>& sets, std::uint64_t seed,
             const py::object& include_dirs) {
            return std::make_unique<System>(
                kernbench::load_config(path, to_overrides(sets), include_dirs_arg(include_dirs)), seed);
          },
          py::arg("path"), py::arg("overrides") = std::vector<std::pair<std::string, std::string>>{},
          py::arg("seed") = 1, py::arg("include_dirs") = py::none(),
          "Load a YAML machine config (with --set style overrides) and build it; includes may read its folder "
          "tree and `include_dirs` (None: kernbench.system.include_dirs()).")
      .def_static(
          "from_yaml",
          [](const std::string& text, const std::string& source,
             const std::vector<std::pair<std::string, std::string>>& sets, std::uint64_t seed,
             const py::object& include_dirs) {
            return std::make_unique<System>(
                kernbench::parse_config(text, source, to_overrides(sets), include_dirs_arg(include_dirs)), seed);
          },
          py::arg("text"), py::arg("source") = "<string>",
          py::arg("overrides") = std::vector<std::pair<std::string, std::string>>{}, py::arg("seed") = 1,
          py::arg("include_dirs") = py::none())
      .def_property_readonly(
          "now",
          [](System& s) {
            Using use(s, false);
            return s.sim().now();
          },
          "Current simulated time (ps).")
      .def_property_readonly("fabric_model", [](const System& s) { return std::string(s.fabric().model_name()); })
      .def_property_readonly("num_nodes", [](const System& s) { return s.machine().num_nodes(); })
      .def_property_readonly("in_flight",
                             [](System& s) {
                               Using use(s, false);
                               return s.fabric().in_flight();
                             })
      .def_property_readonly("events_processed",
                             [](System& s) {
                               Using use(s, false);
                               return s.sim().events_processed();
                             })
      .def_property_readonly("peak_pending_events", [](System& s) { return s.sim().peak_pending_events(); })
      .def_property_readonly("chunk_hops",
                             [](System& s) -> std::uint64_t {
                               auto* p = dynamic_cast<PacketFabric*>(&s.fabric());
                               return p ? p->chunk_hops() : 0;
                             })
      .def(
          "cluster", [](const System& s) { return cluster_dict(s.config(), true); },
          "A cluster config's generated structure (docs/cluster.md): nodes, GPUs and NICs per node, the NIC, leaves, "
          "spines and cores with their links and capacities, NIC names and leaves, rank -> GPU and node; None "
          "for other configs.")
      .def("node_id", [](const System& s, const std::string& name) { return s.machine().at(name); })
      .def("node_name",
           [](const System& s, const NodeRef& id) { return s.machine().node(resolve(s, id, "node_name")).name; })
      .def(
          "pes",
          [](const System& s) {
            std::vector<std::string> out;
            for (NodeId id : s.machine().pes()) out.push_back(s.machine().node(id).name);
            return out;
          },
          "Names of all PEs, in rank order ((sip, cube, pe) order on a generated machine).")
      .def(
          "layout", [](const System& s) { return layout_dict(s.machine()); },
          "The PE relations: ranks, their memories and coordinates, the group hierarchy and the rank grid.")
      .def(
          "explicit_graph", [](const System& s) { return explicit_graph_dict(s.machine()); },
          "The machine as an explicit `graph:` section (nodes, edges, layout), as plain data.")
      .def(
          "nodes",
          [](const System& s) {
            const auto& n = s.machine().nodes();
            py::dict d;
            std::vector<std::string> names, kinds;
            for (const auto& x : n) {
              names.push_back(x.name);
              kinds.push_back(to_string(x.kind));
            }
            d["name"] = names;
            d["kind"] = kinds;
            d["sip"] = column<std::int32_t>(n.size(), [&](auto i) { return n[i].sip; });
            d["cube"] = column<std::int32_t>(n.size(), [&](auto i) { return n[i].cube; });
            d["row"] = column<std::int32_t>(n.size(), [&](auto i) { return n[i].row; });
            d["col"] = column<std::int32_t>(n.size(), [&](auto i) { return n[i].col; });
            d["pe"] = column<std::int32_t>(n.size(), [&](auto i) { return n[i].pe; });
            d["overhead_ps"] = column<std::int64_t>(n.size(), [&](auto i) { return n[i].params.overhead; });
            d["flit_aware"] = column<bool>(n.size(), [&](auto i) { return n[i].params.flit_aware; });
            return d;
          },
          "Node table: name, kind, coordinates, overhead, flit_aware.")
      .def(
          "channels",
          [](System& s) {
            Using use(s, false);
            const auto& c = s.machine().channels();
            py::dict d;
            std::vector<std::string> cls;
            for (const auto& x : c) cls.push_back(x.link_class);
            d["src"] = column<std::uint32_t>(c.size(), [&](auto i) { return c[i].from; });
            d["dst"] = column<std::uint32_t>(c.size(), [&](auto i) { return c[i].to; });
            d["class"] = cls;
            d["bandwidth_Bps"] =
                column<std::int64_t>(c.size(), [&](auto i) { return c[i].link.bandwidth.bytes_per_s; });
            d["latency_ps"] = column<std::int64_t>(c.size(), [&](auto i) { return c[i].link.latency; });
            d["connections"] = column<std::int32_t>(c.size(), [&](auto i) { return c[i].link.connections; });
            d["bytes"] = column<std::int64_t>(
                c.size(), [&](auto i) { return s.fabric().channel_stats(static_cast<ChannelId>(i)).bytes; });
            d["busy_ps"] = column<double>(
                c.size(), [&](auto i) { return s.fabric().channel_stats(static_cast<ChannelId>(i)).busy_time; });
            return d;
          },
          "Channel table (one row per link direction) with the bytes and busy time so far.")
      .def(
          "route",
          [](System& s, const NodeRef& a, const NodeRef& b) {
            Using use(s, false);  // the router caches routes
            const Route& r = s.fabric().router().route(resolve(s, a), resolve(s, b));
            std::vector<std::string> names;
            for (NodeId n : r.nodes) names.push_back(s.machine().node(n).name);
            return names;
          },
          py::arg("src"), py::arg("dst"), "Node names along the route from src to dst.")
      .def(
          "route_info",
          [](System& s, const NodeRef& a, const NodeRef& b) {
            Using use(s, false);  // the router caches routes
            return route_dict(s, s.fabric().router().route(resolve(s, a), resolve(s, b)));
          },
          py::arg("src"), py::arg("dst"),
          "Route details: nodes, channel ids and classes, hops, per-lane bottleneck (B/s), path rate "
          "(B/s), latency sums.")
      .def(
          "route_paths",
          [](System& s, const NodeRef& a, const NodeRef& b) {
            Using use(s, false);
            py::list out;
            for (const Route& r : s.fabric().router().paths(resolve(s, a), resolve(s, b))) out.append(route_dict(s, r));
            return out;
          },
          py::arg("src"), py::arg("dst"),
          "Every equal-cost path from src to dst in the tie order (route_info's dict each); fabric.multipath "
          "says how transfers use them.")
      .def_property_readonly(
          "multipath", [](System& s) { return s.fabric().config().multipath; },
          "fabric.multipath of this machine: the name of its multipath policy (single, ecmp, spread or one "
          "registered).")
      .def(
          "max_min_rates",
          [](System& s, const std::vector<std::pair<NodeRef, NodeRef>>& paths) {
            Using use(s, false);
            // Exact max-min (progressive filling) allocation of the paths'
            // routes, each channel a resource of bandwidth x connections.
            solver::MaxMinSolver solver;
            std::unordered_map<ChannelId, solver::MaxMinSolver::ResourceId> res;
            std::vector<solver::MaxMinSolver::FlowId> flows;
            for (const auto& [a, b] : paths) {
              const Route& r = s.fabric().router().route(resolve(s, a), resolve(s, b));
              if (r.channels.empty()) throw UsageError("max_min_rates: a path from a node to itself has no rate");
              std::vector<solver::MaxMinSolver::ResourceId> uses;
              for (ChannelId c : r.channels) {
                auto it = res.find(c);
                if (it == res.end()) {
                  const LinkParams& l = s.machine().channel(c).link;
                  it = res.emplace(c, solver.add_resource(static_cast<double>(l.bandwidth.bytes_per_s) * l.connections))
                           .first;
                }
                uses.push_back(it->second);
              }
              flows.push_back(solver.add_flow(uses));
            }
            solver.solve();
            std::vector<double> rates;
            for (auto f : flows) rates.push_back(solver.rate(f));
            return rates;
          },
          py::arg("paths"), "Max-min fair rates (B/s) of concurrent flows along the routes of (src, dst) pairs.")
      .def(
          "transfer",
          [](System& s, const NodeRef& src, const NodeRef& dst, const py::object& bytes, const py::object& at,
             std::int32_t tag, const py::object& address) {
            Using use(s);
            const NodeId a = resolve(s, src, "transfer: src"), b = resolve(s, dst, "transfer: dst");
            return s.transfer(a, b, int_arg(bytes, "transfer: bytes"), when(s, at), tag,
                              static_cast<std::uint64_t>(int_arg(address, "transfer: address", 0)));
          },
          py::arg("src"), py::arg("dst"), py::arg("bytes"), py::arg("at_ps") = py::none(), py::arg("tag") = 0,
          py::arg("address") = 0, "Schedule a transfer; returns its request id (the `request` column).")
      .def(
          "dma",
          [](System& s, const std::string& kind, const NodeRef& issuer, const NodeRef& memory, const py::object& bytes,
             const py::object& at, std::int32_t tag, const py::object& address) {
            Using use(s);
            DmaKind k;
            if (kind == "read") {
              k = DmaKind::Read;
            } else if (kind == "write") {
              k = DmaKind::Write;
            } else {
              throw ConfigError("dma: unknown kind '" + kind + "' (known: read, write)");
            }
            const NodeId i = resolve(s, issuer, "dma: issuer"), mem = resolve(s, memory, "dma: memory");
            return s.dma(k, i, mem, int_arg(bytes, "dma: bytes"), when(s, at), tag,
                         static_cast<std::uint64_t>(int_arg(address, "dma: address", 0)));
          },
          py::arg("kind"), py::arg("issuer"), py::arg("memory"), py::arg("bytes"), py::arg("at_ps") = py::none(),
          py::arg("tag") = 0, py::arg("address") = 0, "Schedule a DMA read or write; returns its index in dma_ops().")
      .def(
          "traffic",
          [](System& s, const std::string& pattern, const std::vector<NodeRef>& endpoints, double offered_gbps,
             const py::object& packet, const py::object& start_ps, const py::object& stop_ps,
             const std::string& injection, std::optional<NodeRef> hotspot, double hotspot_fraction, int grid_w,
             std::int32_t tag, const py::object& cycle_ps) {
            Using use(s);
            TrafficSpec spec;
            spec.pattern = traffic_pattern_from_name(pattern);
            spec.injection = injection_from_name(injection);
            for (const auto& e : endpoints) spec.endpoints.push_back(resolve(s, e));
            // A rate, not a count: any float; NaN and <= 0 are the generator's
            // ConfigError, and a rate past int64 B/s has no integer value.
            if (offered_gbps > 9.2e9)
              throw ConfigError("traffic: offered load " + std::to_string(offered_gbps) +
                                " GB/s is out of range (at most 9.2e9 GB/s)");
            spec.offered =
                offered_gbps > 0 ? kernbench::sim::Bandwidth::gb_per_s(offered_gbps) : kernbench::sim::Bandwidth{0};
            spec.packet = int_arg(packet, "traffic: packet_bytes");
            spec.start = int_arg(start_ps, "traffic: start_ps");
            spec.stop = int_arg(stop_ps, "traffic: stop_ps");
            if (hotspot)
              spec.hotspot = resolve(s, *hotspot);
            else if (spec.pattern == TrafficPattern::Hotspot)
              throw ConfigError("traffic: hotspot pattern needs `hotspot`");
            spec.hotspot_fraction = hotspot_fraction;
            spec.grid_w = grid_w;
            spec.tag = tag;
            spec.cycle = opt_int_arg(cycle_ps, "traffic: cycle_ps").value_or(0);
            return s.traffic(std::move(spec)).injected();
          },
          py::arg("pattern"), py::arg("endpoints"), py::arg("offered_gbps"), py::arg("packet_bytes"),
          py::arg("start_ps"), py::arg("stop_ps"), py::arg("injection") = "poisson", py::arg("hotspot") = py::none(),
          py::arg("hotspot_fraction") = 0.5, py::arg("grid_w") = 0, py::arg("tag") = 0,
          py::arg("cycle_ps") = py::none(),
          "Start a synthetic traffic generator over `endpoints` (per-source offered load in GB/s; "
          "injection='bernoulli' needs cycle_ps, the injection cycle).")
      .def(
          "run",
          [](System& s, const py::object& until_ps) {
            const auto until = opt_int_arg(until_ps, "run: until_ps");
            Using use(s);
            use.run([&] {
              if (until) {
                s.run(*until);
              } else {
                s.run();
              }
            });
          },
          py::arg("until_ps") = py::none(), "Run until idle, or through every event before until_ps.")
      .def(
          "set_limits",
          [](System& s, const py::object& max_events, const py::object& max_time_ps) {
            const auto events = opt_int_arg(max_events, "set_limits: max_events", 0);
            const auto time = opt_int_arg(max_time_ps, "set_limits: max_time_ps");
            Using use(s, false);
            s.sim().set_limits(events ? static_cast<std::uint64_t>(*events) : UINT64_MAX,
                               time.value_or(kernbench::sim::kTimeInfinity));
          },
          py::arg("max_events") = py::none(), py::arg("max_time_ps") = py::none(),
          "Guard against runaway models: runs raise LimitError past either limit (None: no limit).")
      .def(
          "transfers",
          [](System& s) {
            Using use(s, false);
            return transfers_dict(s.fabric());
          },
          "Per-transfer records (numpy columns), including the four-part breakdown.")
      .def(
          "dma_ops",
          [](System& s) {
            Using use(s, false);
            return dma_dict(s);
          },
          "Per-DMA-op results (numpy columns).")
      .def("op_log_kinds",
           [](System& s) {
             Using use(s, false);
             return s.sim().op_log().kind_names();
           })
      .def_property_readonly(
          "failure",
          [](System& s) {
            Using use(s, false);
            return s.failure();
          },
          "Why this System refuses further runs (an earlier run failed part-way); '' if usable.");

  // Last line of defence: an allocation that fails anywhere below is a
  // CapacityError that says so, never a bare MemoryError / std::bad_alloc.
  static PyObject* capacity_error = m.attr("CapacityError").ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const std::bad_alloc&) {
      PyErr_SetString(capacity_error,
                      "out of memory: the request needs more memory than this machine has (a count or size far "
                      "beyond what the model supports; see the argument limits in docs/python-api.md)");
    }
  });
}

}  // namespace kernbench::bindings
