// bind_sim.cpp -- Simulation, OpLog and the engine's reference models.
//
// Long runs release the GIL. Op-log columns reach numpy as views (no copy)
// whose base object is the OpLog itself, which Python owns once it has
// been taken out of the simulation: a later run can never invalidate them.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <memory>
#include <optional>

#include "bindings.hpp"
#include "sim/models/phold.hpp"
#include "sim/models/queue_model.hpp"
#include "sim/op_log.hpp"
#include "sim/simulation.hpp"

namespace py = pybind11;
using namespace kernbench::sim;

namespace kernbench::bindings {
namespace {

template <typename T>
py::array column(const std::vector<T>& v, py::handle owner) {
  return py::array_t<T>({static_cast<py::ssize_t>(v.size())}, {static_cast<py::ssize_t>(sizeof(T))}, v.data(), owner);
}

py::dict phold_dict(const models::PholdResult& r, models::PholdEngine engine) {
  py::dict d;
  d["engine"] = models::phold_engine_name(engine);
  d["events"] = r.events;
  d["end_time_ps"] = r.end_time;
  d["wall_s"] = r.wall_seconds;
  d["events_per_s"] = r.events_per_second();
  d["trace_hash"] = r.trace_hash;
  d["pending"] = r.pending;
  d["bytes_per_pending"] = r.bytes_per_pending;
  return d;
}

py::object nan_to_none(double x) { return std::isnan(x) ? py::object(py::none()) : py::object(py::float_(x)); }

}  // namespace

void bind_sim(py::module_& m) {
  m.attr("PICOSECOND") = kPicosecond;
  m.attr("NANOSECOND") = kNanosecond;
  m.attr("MICROSECOND") = kMicrosecond;
  m.attr("MILLISECOND") = kMillisecond;
  m.attr("SECOND") = kSecond;

  py::class_<OpLog, std::shared_ptr<OpLog>>(m, "OpLog",
                                            "Column-wise record of the ops of a run (numpy views, no copies).")
      .def("__len__", &OpLog::size)
      .def_property_readonly(
          "kind_names", [](const OpLog& l) { return l.kind_names(); }, "Names of the kind codes (index = code).")
      .def(
          "columns",
          [](py::object self) {
            const auto& l = self.cast<const OpLog&>();
            py::dict d;
            d["op"] = column(l.op(), self);
            d["agent"] = column(l.agent(), self);
            d["resource"] = column(l.resource(), self);
            d["kind"] = column(l.kind(), self);
            d["tag"] = column(l.tag(), self);
            d["issue_ps"] = column(l.issue(), self);
            d["start_ps"] = column(l.start(), self);
            d["end_ps"] = column(l.end(), self);
            d["bytes"] = column(l.bytes(), self);
            d["work"] = column(l.work(), self);
            return d;
          },
          "All columns as read-only-by-convention numpy views sharing this log's memory.");

  py::class_<Simulation>(m, "Simulation", "One simulation run: clock (ps), event queue, seeded RNG, op log.")
      .def(py::init([](std::int64_t seed) { return std::make_unique<Simulation>(non_negative(seed, "seed")); }),
           py::arg("seed") = 1)
      .def_property_readonly("now", &Simulation::now, "Current simulated time in ps.")
      .def_property_readonly("seed", &Simulation::seed)
      .def_property_readonly("events_processed", &Simulation::events_processed)
      .def_property_readonly("pending_events", &Simulation::pending_events)
      .def_property_readonly("peak_pending_events", &Simulation::peak_pending_events,
                             "Most events ever pending at once (the event queue's high-water mark).")
      .def("peek", &Simulation::peek, "Time of the next event in ps (2**63-1 when none).")
      .def("step", &Simulation::step, "Process one event; False if none was pending.")
      .def(
          "run",
          [](Simulation& s, std::optional<Time> until) {
            poll_python_signals(s);
            py::gil_scoped_release nogil;
            if (until) {
              s.run(*until);
            } else {
              s.run();
            }
          },
          py::arg("until") = py::none(), "Run until no event is pending, or through every event before `until` (ps).")
      .def(
          "set_limits",
          [](Simulation& s, std::optional<std::uint64_t> max_events, std::optional<Time> max_time_ps) {
            s.set_limits(max_events.value_or(UINT64_MAX), max_time_ps.value_or(kTimeInfinity));
          },
          py::arg("max_events") = py::none(), py::arg("max_time_ps") = py::none(),
          "Guard against runaway models: run() raises LimitError past either limit (None: no limit).")
      .def("live_processes", &Simulation::live_processes, "Names of processes started and not finished.")
      .def(
          "take_op_log",
          [](Simulation& s) {
            auto log = std::make_shared<OpLog>(std::move(s.op_log()));
            s.op_log() = OpLog{};
            return log;
          },
          "Move the op log out of the simulation (it continues with an empty one).");

  m.def(
      "run_phold",
      [](Simulation& sim, const std::string& engine, std::int64_t lps, std::int64_t events_per_lp, std::int64_t events,
         Time mean_delay_ps) {
        const auto e = models::phold_engine_from_name(engine);
        const auto n = non_negative(lps, "phold: lps"), per = non_negative(events_per_lp, "phold: events_per_lp");
        if (n > UINT32_MAX || per > UINT32_MAX || n * per > (1ULL << 28))
          throw UsageError("phold: lps x events_per_lp must stay below 2^28 pending events");
        models::PholdParams p{static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(per),
                              non_negative(events, "phold: events"), mean_delay_ps};
        models::PholdResult r;
        poll_python_signals(sim);
        {
          py::gil_scoped_release nogil;
          r = models::run_phold(sim, e, p);
        }
        return phold_dict(r, e);
      },
      py::arg("sim"), py::arg("engine") = "callbacks", py::arg("lps") = 1024, py::arg("events_per_lp") = 1,
      py::arg("events") = 1'000'000, py::arg("mean_delay_ps") = kMicrosecond,
      "Run PHOLD on `sim` with engine 'coroutines', 'callbacks' or 'bare'; returns rates and the trace hash.");

  m.def(
      "run_queue",
      [](Simulation& sim, Time mean_interarrival_ps, Time mean_service_ps, const std::string& service, int servers,
         std::int64_t customers, bool record_ops) {
        models::QueueParams p;
        p.mean_interarrival = mean_interarrival_ps;
        p.mean_service = mean_service_ps;
        p.service = models::service_from_name(service);
        p.servers = servers;
        p.customers = non_negative(customers, "queue: customers");
        p.record_ops = record_ops;
        models::QueueResult r;
        poll_python_signals(sim);
        {
          py::gil_scoped_release nogil;
          r = models::run_queue(sim, p);
        }
        py::dict d;
        d["served"] = r.served;
        d["end_time_ps"] = r.end_time;
        d["mean_wait_ps"] = r.mean_wait_ps;
        d["mean_sojourn_ps"] = r.mean_sojourn_ps;
        d["mean_queue_length"] = r.mean_queue_length;
        d["utilization"] = r.utilization;
        d["rho"] = r.rho;
        d["theory_wait_ps"] = nan_to_none(r.theory_wait_ps);
        return d;
      },
      py::arg("sim"), py::arg("mean_interarrival_ps"), py::arg("mean_service_ps"), py::arg("service") = "exponential",
      py::arg("servers") = 1, py::arg("customers") = 100'000, py::arg("record_ops") = true,
      "Run an M/M/c or M/D/c queue on `sim`; one op-log row per customer when record_ops.");
}

}  // namespace kernbench::bindings
