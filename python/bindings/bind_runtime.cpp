// bind_runtime.cpp -- Program, RunResult and running a Program on a System.
//
// Programs take node ids (the Python wrapper in kernbench/program.py maps
// names to ids). A RunResult is immutable once returned, so its op-log
// columns reach numpy as views whose base is the result object.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <optional>

#include "bindings.hpp"
#include "runtime/executor.hpp"
#include "sim/errors.hpp"

namespace py = pybind11;
using namespace kernbench::runtime;
using kernbench::topology::Precision;

namespace kernbench::bindings {
namespace {

OpKind compute_from(const std::string& name) {
  if (name == "gemm") return OpKind::Gemm;
  if (name == "vector") return OpKind::Vector;
  throw ConfigError("composite: unknown compute stage '" + name + "' (known: gemm, vector)");
}

std::vector<Move> moves(const std::vector<std::tuple<NodeId, NodeId, py::object>>& in, const char* what) {
  std::vector<Move> out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const auto& [s, d, b] = in[i];
    out.push_back(Move{s, d, int_arg(b, std::string(what) + "[" + std::to_string(i) + "] bytes")});
  }
  return out;
}

template <typename T>
py::array view(const std::vector<T>& v, py::handle owner) {
  return py::array_t<T>({static_cast<py::ssize_t>(v.size())}, {static_cast<py::ssize_t>(sizeof(T))}, v.data(), owner);
}

std::int32_t tag_index(const RunResult& r, const py::object& tag) {
  if (py::isinstance<py::int_>(tag)) return tag.cast<std::int32_t>();
  const auto name = tag.cast<std::string>();
  for (std::size_t i = 0; i < r.tags.size(); ++i)
    if (r.tags[i] == name) return static_cast<std::int32_t>(i);
  throw ConfigError("no tag '" + name + "' in program " + r.program);
}

Engine engine_from(const std::string& name) {
  std::string known;
  for (int e = 0; e < kEngines; ++e) {
    if (name == to_string(static_cast<Engine>(e))) return static_cast<Engine>(e);
    known += std::string(e ? ", " : "") + to_string(static_cast<Engine>(e));
  }
  throw ConfigError("unknown engine '" + name + "' (known: " + known + ")");
}

RecvMode recv_mode_from(const std::string& name) {
  for (RecvMode m : {RecvMode::Consume, RecvMode::Reduce, RecvMode::NoConsume})
    if (name == to_string(m)) return m;
  throw ConfigError("unknown recv mode '" + name + "' (known: consume, reduce, no_consume)");
}

}  // namespace

void bind_runtime(py::module_& m) {
  using Ids = std::vector<OpId>;
  py::class_<Program>(m, "Program", "A DAG of ops placed on agents (node ids).")
      .def(py::init<std::string>(), py::arg("name") = "program")
      .def_property_readonly("name", &Program::name)
      .def("__len__", &Program::size)
      .def("tag", &Program::tag, py::arg("label"), "The id of a tag label (interned).")
      .def_property_readonly("tags", &Program::tags)
      .def(
          "dma",
          [](Program& p, NodeId agent, NodeId src, NodeId dst, const py::object& bytes, Ids deps, std::string name,
             std::int32_t tag) {
            const Bytes b = int_arg(bytes, "dma: bytes");
            return p.dma(agent, Move{src, dst, b}, std::move(deps), std::move(name), tag);
          },
          py::arg("agent"), py::arg("src"), py::arg("dst"), py::arg("bytes"), py::arg("deps") = Ids{},
          py::arg("name") = "", py::arg("tag") = 0)
      .def(
          "gemm",
          [](Program& p, NodeId agent, const py::object& flops, const std::string& precision, Ids deps,
             std::string name, std::int32_t tag) {
            const double f = real_arg(flops, "gemm: flops", false);
            return p.gemm(agent, f, precision_from(precision), std::move(deps), std::move(name), tag);
          },
          py::arg("agent"), py::arg("flops"), py::arg("precision") = "fp16", py::arg("deps") = Ids{},
          py::arg("name") = "", py::arg("tag") = 0)
      .def(
          "kernel",
          [](Program& p, NodeId agent, const py::object& duration, const py::object& launch, const py::object& flops,
             const std::string& precision, const py::object& bytes, Ids deps, std::string name, std::int32_t tag,
             std::int32_t ctas, std::int32_t sms) {
            KernelCost c;
            c.duration = int_arg(duration, "kernel: duration_ps", 0);
            c.launch = int_arg(launch, "kernel: launch_ps", 0);
            c.flops = real_arg(flops, "kernel: flops", false);
            c.precision = precision_from(precision);
            c.bytes = int_arg(bytes, "kernel: bytes", 0);
            c.ctas = ctas;
            c.sms = sms;
            return p.kernel(agent, c, std::move(deps), std::move(name), tag);
          },
          py::arg("agent"), py::arg("duration_ps"), py::arg("launch_ps") = 0, py::arg("flops") = 0.0,
          py::arg("precision") = "bf16", py::arg("bytes") = 0, py::arg("deps") = Ids{}, py::arg("name") = "",
          py::arg("tag") = 0, py::arg("ctas") = 0, py::arg("sms") = 0,
          "A GPU kernel priced by a kernel model: a launch op of launch_ps after the agent's previous launch "
          "(none when 0), then the kernel of duration_ps on its SM array after that and deps. ctas, sms: a "
          "compute-bound kernel's CTAs and the SMs it was priced on (it runs in more waves while collectives "
          "hold some of them).")
      .def(
          "vector",
          [](Program& p, NodeId agent, const py::object& bytes, Ids deps, std::string name, std::int32_t tag) {
            return p.vector(agent, int_arg(bytes, "vector: bytes"), std::move(deps), std::move(name), tag);
          },
          py::arg("agent"), py::arg("bytes"), py::arg("deps") = Ids{}, py::arg("name") = "", py::arg("tag") = 0)
      .def(
          "alloc",
          [](Program& p, NodeId agent, const py::object& bytes, Ids deps, std::string name) {
            return p.alloc(agent, int_arg(bytes, "alloc: bytes"), std::move(deps), std::move(name));
          },
          py::arg("agent"), py::arg("bytes"), py::arg("deps") = Ids{}, py::arg("name") = "")
      .def("free", &Program::free, py::arg("alloc"), py::arg("deps") = Ids{}, py::arg("name") = "")
      .def(
          "send",
          [](Program& p, NodeId agent, NodeId peer, const py::object& bytes, std::int64_t key, Ids deps,
             std::string name, std::int32_t tag, std::optional<NodeId> source) {
            const Bytes b = int_arg(bytes, "send: bytes");
            return p.send(agent, peer, b, key, std::move(deps), std::move(name), tag, source);
          },
          py::arg("agent"), py::arg("peer"), py::arg("bytes"), py::arg("key"), py::arg("deps") = Ids{},
          py::arg("name") = "", py::arg("tag") = 0, py::arg("source") = py::none(),
          "IPCQ send of `bytes` to PE `peer` in slot-sized segments, read from `source` (default: the agent).")
      .def(
          "recv",
          [](Program& p, NodeId agent, NodeId peer, std::int64_t key, Ids deps, std::string name, std::int32_t tag,
             const std::string& mode) {
            return p.recv(agent, peer, key, std::move(deps), std::move(name), tag, recv_mode_from(mode));
          },
          py::arg("agent"), py::arg("peer"), py::arg("key"), py::arg("deps") = Ids{}, py::arg("name") = "",
          py::arg("tag") = 0, py::arg("mode") = "consume",
          "IPCQ recv of `peer`'s send with this key: mode consume (slot reads), reduce (vector engine) or no_consume.")
      .def("barrier", &Program::barrier, py::arg("agent"), py::arg("deps"), py::arg("name") = "")
      .def(
          "composite",
          [](Program& p, NodeId agent, const py::object& tiles,
             const std::vector<std::tuple<NodeId, NodeId, py::object>>& loads, const std::string& compute,
             const py::object& flops, const std::string& precision, const py::object& vector_bytes,
             const std::vector<std::tuple<NodeId, NodeId, py::object>>& stores, const py::object& buffers, Ids deps,
             std::string name, std::int32_t tag, std::int32_t load_tag, std::int32_t compute_tag,
             std::int32_t store_tag) {
            Pipeline pipe;
            pipe.tiles = static_cast<std::uint32_t>(int_arg(tiles, "composite: tiles", 0, UINT32_MAX));
            pipe.loads = moves(loads, "composite: loads");
            pipe.compute = compute_from(compute);
            pipe.flops = real_arg(flops, "composite: flops", false);
            pipe.precision = precision_from(precision);
            pipe.vector_bytes = int_arg(vector_bytes, "composite: vector_bytes");
            pipe.stores = moves(stores, "composite: stores");
            pipe.buffers = static_cast<std::uint32_t>(int_arg(buffers, "composite: buffers", 0, UINT32_MAX));
            pipe.load_tag = load_tag;
            pipe.compute_tag = compute_tag;
            pipe.store_tag = store_tag;
            return p.composite(agent, std::move(pipe), std::move(deps), std::move(name), tag);
          },
          py::arg("agent"), py::arg("tiles"), py::arg("loads"), py::arg("compute") = "gemm", py::arg("flops") = 0.0,
          py::arg("precision") = "fp16", py::arg("vector_bytes") = 0,
          py::arg("stores") = std::vector<std::tuple<NodeId, NodeId, py::object>>{}, py::arg("buffers") = 2,
          py::arg("deps") = Ids{}, py::arg("name") = "", py::arg("tag") = 0, py::arg("load_tag") = -1,
          py::arg("compute_tag") = -1, py::arg("store_tag") = -1,
          "A tile pipeline: per tile, `loads` (src, dst, bytes), a compute stage, `stores`; N-buffered.")
      .def("depend", &Program::depend, py::arg("op"), py::arg("on"), "Add a dependency (may form a cycle).")
      .def("append", &Program::append, py::arg("sub"), py::arg("after") = Ids{},
           py::arg("per_agent") = std::map<NodeId, Ids>{},
           "Append a whole sub-program (a kernel's, a collective's); its ops without deps wait for `after`, and "
           "those on an agent of `per_agent` (agent -> ops) for that agent's ops too (on any other agent: all of "
           "them). Returns the id of its first op.")
      .def("sinks", &Program::sinks, py::arg("first") = 0, "Ops from `first` on that no later op depends on.")
      .def(
          "op_columns",
          [](const Program& p) {
            // Per op, by id: what it was given (ops_df() joins these to the timings).
            std::vector<std::string> names, kinds;
            std::vector<std::int32_t> tags;
            std::vector<NodeId> agents;
            for (const Op& op : p.ops()) {
              names.push_back(op.name);
              kinds.push_back(to_string(op.kind));
              tags.push_back(op.tag);
              agents.push_back(op.agent);
            }
            py::dict d;
            d["name"] = names;
            d["kind"] = kinds;
            d["tag"] = tags;
            d["agent"] = agents;
            return d;
          },
          "Per op, by id: name, kind, tag id and agent (node id).");

  py::class_<RunResult, std::shared_ptr<RunResult>>(m, "RunResult", "What a Program did on a machine.")
      .def_readonly("program", &RunResult::program)
      .def_readonly("start_ps", &RunResult::start)
      .def_readonly("end_ps", &RunResult::end)
      .def_property_readonly("makespan_ps", &RunResult::makespan)
      .def_readonly("tags", &RunResult::tags)
      .def_readonly("op_counts", &RunResult::op_counts)
      .def_readonly("op_bytes", &RunResult::op_bytes)
      .def_readonly("peak_scratch", &RunResult::peak_scratch)
      .def_property_readonly("kind_names", [](const RunResult& r) { return r.log.kind_names(); })
      .def_readonly("log_names", &RunResult::log_names)
      .def(
          "ops",
          [](const RunResult& r) {
            const std::size_t n = r.ops.size();
            py::array_t<std::int64_t> ready(static_cast<py::ssize_t>(n)), start(static_cast<py::ssize_t>(n)),
                end(static_cast<py::ssize_t>(n));
            for (std::size_t i = 0; i < n; ++i) {
              ready.mutable_at(i) = r.ops[i].ready;
              start.mutable_at(i) = r.ops[i].start;
              end.mutable_at(i) = r.ops[i].end;
            }
            py::dict d;
            d["ready_ps"] = ready;
            d["start_ps"] = start;
            d["end_ps"] = end;
            return d;
          },
          "Per program op: ready (dependencies done), start (engine granted), end; numpy columns.")
      .def(
          "log",
          [](py::object self) {
            const auto& l = self.cast<const RunResult&>().log;
            py::dict d;
            d["op"] = view(l.op(), self);
            d["agent"] = view(l.agent(), self);
            d["resource"] = view(l.resource(), self);
            d["kind"] = view(l.kind(), self);
            d["tag"] = view(l.tag(), self);
            d["issue_ps"] = view(l.issue(), self);
            d["start_ps"] = view(l.start(), self);
            d["end_ps"] = view(l.end(), self);
            d["bytes"] = view(l.bytes(), self);
            d["work"] = view(l.work(), self);
            return d;
          },
          "The op log (one row per op and pipeline stage) as numpy views.")
      .def(
          "engines",
          [](const RunResult& r) {
            py::dict d;
            std::vector<std::string> names, kinds;
            std::vector<NodeId> pes;
            std::vector<double> busy;
            std::vector<std::uint64_t> grants;
            std::vector<std::int64_t> wait;
            std::vector<int> cap;
            for (const EngineUse& u : r.engines) {
              names.push_back(u.name);
              kinds.push_back(to_string(u.engine));
              pes.push_back(u.pe);
              busy.push_back(u.busy);
              grants.push_back(u.grants);
              wait.push_back(u.total_wait);
              cap.push_back(u.capacity);
            }
            d["name"] = names;
            d["engine"] = kinds;
            d["pe"] = pes;
            d["capacity"] = cap;
            d["busy_ps"] = busy;
            d["grants"] = grants;
            d["wait_ps"] = wait;
            return d;
          },
          "Per PE engine: busy unit-time, grants, queueing wait (the op log's `resource` indexes rows).")
      .def(
          "links",
          [](const RunResult& r) {
            py::dict d;
            std::vector<std::string> names, classes;
            std::vector<int> lanes;
            std::vector<std::int64_t> bandwidth, bytes;
            std::vector<std::vector<Time>> busy;
            for (const LinkUse& u : r.links) {
              names.push_back(u.name);
              classes.push_back(u.link_class);
              lanes.push_back(u.lanes);
              bandwidth.push_back(u.bandwidth);
              bytes.push_back(u.bytes);
              busy.push_back(u.busy);
            }
            d["bin_ps"] = r.link_bin;
            d["name"] = names;
            d["link_class"] = classes;
            d["lanes"] = lanes;
            d["bandwidth_Bps"] = bandwidth;
            d["bytes"] = bytes;
            d["busy_ps"] = busy;
            return d;
          },
          "Per channel busy during the run (packet fabric; empty on the flow fabric): name, link_class, lanes, "
          "bandwidth_Bps (per lane), bytes, busy_ps (lane-ps per bin of bin_ps from start_ps).")
      .def(
          "window", [](const RunResult& r, const py::object& tag) { return r.window(tag_index(r, tag)); },
          py::arg("tag"), "(first start, last end) in ps of the ops and stages with this tag (name or id).")
      .def(
          "busy_within",
          [](const RunResult& r, NodeId pe, const std::string& engine, Time t0, Time t1) {
            return r.busy_within(pe, engine_from(engine), t0, t1);
          },
          py::arg("pe"), py::arg("engine"), py::arg("t0_ps"), py::arg("t1_ps"),
          "Busy unit-time of an engine of a PE inside [t0, t1).");

  m.def(
      "run_program",
      [](topology::System& system, const Program& program) {
        Using use(system);
        return use.run([&] { return std::make_shared<RunResult>(Executor(system).run(program)); });
      },
      py::arg("system"), py::arg("program"), "Run a Program on a System to completion.");
}

}  // namespace kernbench::bindings
