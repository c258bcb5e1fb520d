// bind.cpp -- the K200 platform's bindings: the Kunlun K200 model from Python (kernbench.k200 wraps these).
//
// Each call attaches a fresh K200 model to the given System (its engines
// start idle, its hugepage pool full), runs to completion from the System's
// current time with the GIL released, and returns plain dicts: the report
// (elapsed, bandwidth, per-op breakdown, utilization, bound resource) and
// the op-log rows [log_begin, log_end) of the run in the System's op log,
// and the run's exact critical path (critical_path_dict.hpp).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "critical_path_dict.hpp"
#include "platforms/k200/k200.hpp"
#include "platforms/k200/workload.hpp"
#include "sim/errors.hpp"

namespace py = pybind11;
using namespace kernbench::platforms::k200;
using kernbench::topology::System;

namespace kernbench::bindings {
namespace {

/// Op totals as a list of dicts; `key` names what they are totals of.
py::list totals_list(const std::vector<OpTotal>& totals, const char* key) {
  py::list out;
  for (const OpTotal& t : totals) {
    py::dict o;
    o[key] = t.kind;
    o["count"] = t.count;
    o["time_ps"] = t.time;
    o["bytes"] = t.bytes;
    o["share_ps"] = t.share;
    out.append(o);
  }
  return out;
}

py::dict report_dict(const RunReport& r, const K200& k) {
  py::dict d;
  d["start_ps"] = r.start;
  d["end_ps"] = r.end;
  d["elapsed_ps"] = r.elapsed();
  d["elapsed_us"] = sim::to_seconds(r.elapsed()) * 1e6;
  d["bytes"] = r.bytes;
  d["gib_per_s"] = r.gib_per_s();
  d["flops"] = r.flops;
  d["gflops"] = r.gflops();
  d["path"] = r.path;
  d["bound"] = r.bound;
  py::dict util;
  for (const Utilization& u : r.utilization) util[py::str(u.resource)] = u.busy;
  d["utilization"] = util;
  d["ops"] = totals_list(r.ops, "kind");
  d["log_begin"] = r.log_begin;
  d["log_end"] = r.log_end;
  d["resource_names"] = k.resource_names();
  // The run's op-log rows (for traces), unless there are too many to copy.
  constexpr std::size_t kMaxRows = 200'000;
  const sim::OpLog& log = k.log();
  if (r.log_end - r.log_begin <= kMaxRows) {
    py::dict rows;
    std::vector<std::string> kinds;
    std::vector<std::int32_t> res, tag;
    std::vector<std::int64_t> op, issue, start, end, bytes;
    for (std::size_t i = r.log_begin; i < r.log_end; ++i) {
      op.push_back(log.op()[i]);
      kinds.push_back(log.kind_names()[static_cast<std::size_t>(log.kind()[i])]);
      res.push_back(log.resource()[i]);
      tag.push_back(log.tag()[i]);
      issue.push_back(log.issue()[i]);
      start.push_back(log.start()[i]);
      end.push_back(log.end()[i]);
      bytes.push_back(log.bytes()[i]);
    }
    rows["op"] = op;
    rows["kind"] = kinds;
    rows["resource"] = res;
    rows["tag"] = tag;
    rows["issue_ps"] = issue;
    rows["start_ps"] = start;
    rows["end_ps"] = end;
    rows["bytes"] = bytes;
    d["log"] = rows;
  } else {
    d["log"] = py::none();
  }
  // The run's exact critical path (its recorded causes), unless it is too long to walk cheaply.
  if (r.cause_end - r.cause_begin <= kMaxRows)
    d["critical_path"] = critical_path_dict(k.critical_path(r));
  else
    d["critical_path"] = py::none();
  return d;
}

DieRef die_of(const py::handle& h, const char* what) {
  if (h.is_none()) return {};
  const auto t = h.cast<std::pair<std::int64_t, std::int64_t>>();
  if (t.first < 0 || t.second < 0 || t.first > 1'000'000 || t.second > 1'000'000)
    throw UsageError(std::string(what) + ": expected (card, die) with small non-negative numbers");
  return {static_cast<int>(t.first), static_cast<int>(t.second)};
}

CopySpec copy_spec(const std::string& kind, const std::string& direction, std::int64_t bytes, const py::handle& die,
                   const py::handle& peer) {
  CopySpec s;
  s.kind = copy_kind_from(kind);
  s.dir = direction_from(direction);
  if (bytes <= 0) throw UsageError("k200 copy: bytes must be > 0, got " + std::to_string(bytes));
  s.bytes = bytes;
  s.die = die_of(die, "k200 copy: die");
  s.peer = peer.is_none() ? DieRef{s.die.card, s.die.die == 0 ? 1 : 0} : die_of(peer, "k200 copy: peer");
  return s;
}

KernelSpec kernel_spec(const py::dict& d) {
  KernelSpec k;
  const std::string kind = d.contains("kind") ? d["kind"].cast<std::string>() : "gemm";
  if (kind == "gemm" || kind == "conv") {
    k.kind = kind == "gemm" ? KernelSpec::Kind::Gemm : KernelSpec::Kind::Conv;
    for (const char* key : {"m", "n", "k"})
      if (!d.contains(key)) throw UsageError("k200 " + kind + " kernel: missing '" + key + "'");
    k.m = d["m"].cast<std::int64_t>();
    k.n = d["n"].cast<std::int64_t>();
    k.k = d["k"].cast<std::int64_t>();
    if (kind == "conv") k.lowered_from = d.contains("lowered_from") ? d["lowered_from"].cast<std::int64_t>() : 0;
  } else if (kind == "elementwise") {
    k.kind = KernelSpec::Kind::Elementwise;
    if (!d.contains("elements")) throw UsageError("k200 elementwise kernel: missing 'elements'");
    k.elements = d["elements"].cast<std::int64_t>();
  } else {
    throw UsageError("k200 kernel: unknown kind '" + kind + "' (known: gemm, conv, elementwise)");
  }
  k.precision = precision_from(d.contains("precision") ? d["precision"].cast<std::string>() : "fp32");
  if (d.contains("framework_overhead_ps")) k.framework_overhead = d["framework_overhead_ps"].cast<std::int64_t>();
  k.ncluster = d.contains("ncluster") ? d["ncluster"].cast<int>() : 0;
  return k;
}

py::dict plan_dict(const GemmPlan& p) {
  py::dict d;
  d["ncluster"] = p.ncluster;
  d["blocks"] = p.blocks;
  d["block_m"] = p.block_m;
  d["block_n"] = p.block_n;
  d["waves"] = p.waves;
  d["core_tiles"] = p.core_tiles;
  d["core_rounds"] = p.core_rounds;
  d["k_padded"] = p.k_padded;
  d["tile_utilization"] = p.tile_utilization;
  d["scan_ps"] = p.scan_time;
  d["scan_bytes"] = p.scan_bytes;
  d["compute_per_wave_ps"] = p.compute_per_wave;
  d["hbm_per_block_bytes"] = p.hbm_per_wave;
  d["hbm_bytes"] = p.hbm_bytes;
  d["spill_fraction"] = p.spill_fraction;
  d["flops"] = p.flops;
  d["peak_flops_per_s"] = p.peak_flops_per_s;
  return d;
}

Step step_of(const py::dict& d) {
  Step st;
  const std::string op = d.contains("op") ? d["op"].cast<std::string>() : "";
  st.label = d.contains("label") ? d["label"].cast<std::string>() : op;
  if (op == "copy") {
    st.op = Step::Op::Copy;
    st.copy =
        copy_spec(d["kind"].cast<std::string>(), d.contains("direction") ? d["direction"].cast<std::string>() : "h2d",
                  d["bytes"].cast<std::int64_t>(), d.contains("die") ? py::handle(d["die"]) : py::none(),
                  d.contains("peer") ? py::handle(d["peer"]) : py::none());
  } else if (op == "launch") {
    st.op = Step::Op::Launch;
    st.kernel = kernel_spec(d["kernel"].cast<py::dict>());
    st.die = d.contains("die") ? die_of(d["die"], "k200 launch: die") : DieRef{};
  } else if (op == "wait") {
    st.op = Step::Op::Wait;
    st.die = d.contains("die") ? die_of(d["die"], "k200 wait: die") : DieRef{};
  } else {
    throw UsageError("k200 workload step: unknown op '" + op + "' (known: copy, launch, wait)");
  }
  return st;
}

}  // namespace

void bind_k200(py::module_& m) {
  m.def(
      "k200_info",
      [](System& system) {
        Using use(system);  // one user of the System at a time
        K200 k(system);
        py::dict d;
        d["cards"] = k.cards();
        std::vector<int> dies;
        for (int c = 0; c < k.cards(); ++c) dies.push_back(k.dies_per_card(c));
        d["dies_per_card"] = dies;
        d["pcie_line_bytes_per_s"] = k.pcie_line_bytes_per_s();
        d["pcie_payload_bytes_per_s"] = k.pcie_payload_bytes_per_s();
        const auto& c = k.config().compute;
        d["clusters"] = c.clusters;
        d["peak_fp32_flops_per_s"] = static_cast<double>(c.fp32_flops_per_cycle) * c.clusters * c.clock_hz;
        d["peak_fp16_flops_per_s"] = static_cast<double>(c.fp16_flops_per_cycle) * c.clusters * c.clock_hz;
        d["hugepage_pool"] = k.config().driver.hugepage_pool;
        d["hbm_capacity"] = c.hbm_capacity;  // per die
        d["core_tile_m"] = c.core_tile_m;
        return d;
      },
      py::arg("system"), "The K200 host's cards, dies, derived PCIe rates and peaks.");
  m.def(
      "k200_copy",
      [](System& system, const std::string& kind, const std::string& direction, std::int64_t bytes,
         const py::object& die, const py::object& peer) {
        const CopySpec s = copy_spec(kind, direction, bytes, die, peer);
        Using use(system);  // one user of the System at a time
        K200 k(system);
        const RunReport r = use.run([&] { return k.copy(s); });
        return report_dict(r, k);
      },
      py::arg("system"), py::arg("kind"), py::arg("direction") = "h2d", py::arg("bytes"), py::arg("die") = py::none(),
      py::arg("peer") = py::none(), "One K200 copy; returns its report dict.");
  m.def(
      "k200_copies",
      [](System& system, const std::vector<py::dict>& specs) {
        std::vector<CopySpec> v;
        for (const py::dict& d : specs)
          v.push_back(copy_spec(d["kind"].cast<std::string>(),
                                d.contains("direction") ? d["direction"].cast<std::string>() : "h2d",
                                d["bytes"].cast<std::int64_t>(), d.contains("die") ? py::handle(d["die"]) : py::none(),
                                d.contains("peer") ? py::handle(d["peer"]) : py::none()));
        Using use(system);  // one user of the System at a time
        K200 k(system);
        const RunReport r = use.run([&] { return k.copies(v); });
        return report_dict(r, k);
      },
      py::arg("system"), py::arg("specs"), "Several K200 copies started together.");
  m.def(
      "k200_launch_test",
      [](System& system, int threads, int kernels, int loops, std::int64_t elements, int ncluster,
         const py::object& die) {
        KernelSpec kernel;
        kernel.elements = elements;
        kernel.ncluster = ncluster;
        const DieRef d = die_of(die, "k200 launch: die");
        Using use(system);  // one user of the System at a time
        K200 k(system);
        k.check(kernel, d);
        const auto st = use.run([&] { return k.launch_test(threads, kernels, loops, kernel, d); });
        py::dict out = report_dict(st.report, k);
        out["launch_us"] = st.launch_us;
        out["wait_us"] = st.wait_us;
        out["per_kernel_us"] = st.per_kernel_us;
        out["single_us"] = st.single_us;
        return out;
      },
      py::arg("system"), py::arg("threads") = 1, py::arg("kernels") = 10, py::arg("loops") = 100,
      py::arg("elements") = 5120, py::arg("ncluster") = 0, py::arg("die") = py::none(),
      "The vendor launch test: threads x (kernels launches, one wait) x loops.");
  m.def(
      "k200_dispatch_test",
      [](System& system, int threads, int commands, std::int64_t elements, int ncluster, const py::object& die) {
        KernelSpec kernel;
        kernel.elements = elements;
        kernel.ncluster = ncluster;
        const DieRef d = die_of(die, "k200 dispatch: die");
        Using use(system);  // one user of the System at a time
        K200 k(system);
        k.check(kernel, d);
        const auto st = use.run([&] { return k.dispatch_test(threads, commands, kernel, d); });
        py::dict out = report_dict(st.report, k);
        out["round_trip_us"] = st.round_trip_us;
        out["per_command_us"] = st.per_command_us;
        out["launch_us"] = st.launch_us;
        out["wait_us"] = st.wait_us;
        return out;
      },
      py::arg("system"), py::arg("threads") = 1, py::arg("commands") = 100, py::arg("elements") = 5120,
      py::arg("ncluster") = 4, py::arg("die") = py::none(),
      "The synchronous round trip: threads (a stream each) x commands x (launch one kernel, wait for the stream).");
  m.def(
      "k200_gemm",
      [](System& system, std::int64_t mm, std::int64_t n, std::int64_t kk, const std::string& precision, int ncluster,
         const py::object& die) {
        KernelSpec g;
        g.kind = KernelSpec::Kind::Gemm;
        g.m = mm;
        g.n = n;
        g.k = kk;
        g.precision = precision_from(precision);
        g.ncluster = ncluster;
        const DieRef d = die_of(die, "k200 gemm: die");
        Using use(system);  // one user of the System at a time
        K200 k(system);
        k.check(g, d);
        const RunReport r = use.run([&] { return k.gemm(g, d); });
        py::dict out = report_dict(r, k);
        out["plan"] = plan_dict(k.plan_gemm(g));
        return out;
      },
      py::arg("system"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("precision") = "fp32",
      py::arg("ncluster") = 0, py::arg("die") = py::none(), "One xdnn-fc-like GEMM on a die (launch, run, wait).");
  m.def(
      "k200_run",
      [](System& system, const std::vector<py::dict>& streams) {
        std::vector<Stream> v;
        for (const py::dict& sd : streams) {
          Stream s;
          s.name = sd.contains("name") ? sd["name"].cast<std::string>() : "stream" + std::to_string(v.size());
          s.iterations = sd.contains("iterations") ? sd["iterations"].cast<int>() : 1;
          for (const py::handle& h : sd["steps"].cast<py::list>()) s.steps.push_back(step_of(h.cast<py::dict>()));
          v.push_back(std::move(s));
        }
        Using use(system);  // one user of the System at a time
        K200 k(system);
        const WorkloadResult r = use.run([&] { return run_workload(k, v); });
        py::dict out = report_dict(r.report, k);
        out["iteration_ends_ps"] = r.iteration_ends;
        out["labels"] = totals_list(r.by_label, "label");
        out["idle_ps"] = r.idle;
        out["paths"] = r.paths;
        return out;
      },
      py::arg("system"), py::arg("streams"),
      "Run K200 streams (dicts: name, iterations, steps = [{op: copy|launch|wait, ...}]) to completion.");
}

}  // namespace kernbench::bindings
