// bindings.hpp -- one function per binding translation unit.
#pragma once

#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "sim/errors.hpp"
#include "topology/system.hpp"

namespace kernbench::bindings {

/// A cluster config's generated structure (bind_cluster.cpp; None for other configs); `full`: with every
/// switch, NIC and rank, else the counts only.
pybind11::object cluster_dict(const topology::Config& c, bool full);

/// Lets Ctrl-C reach a long run: every 2^18 events (a few ms) the run loop
/// takes the GIL, asks Python whether a signal arrived, and if so abandons
/// the run with the KeyboardInterrupt Python raised.
inline void poll_python_signals(sim::Simulation& s) {
  s.set_poll(1U << 18, [] {
    pybind11::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
  });
}

/// One binding call's hold on a System (see topology::System::Use): every
/// entry that runs or mutates a System -- or reads records a run may be
/// appending to -- takes one first. A second thread calling into the same
/// System waits (without the GIL, so the running thread can still poll for
/// Ctrl-C) until the first call returns: calls are serialised. A System
/// whose earlier run failed part-way refuses the call with a UsageError.
class Using {
 public:
  explicit Using(topology::System& system, bool check = true) : system_(system) {
    {
      pybind11::gil_scoped_release nogil;
      use_.emplace(system);
    }
    if (check) system.check_usable();
  }
  /// Runs `f` (a simulation run) with Ctrl-C polling and without the GIL.
  /// An error that escapes after events were processed leaves the System
  /// unusable (a LimitError or a KeyboardInterrupt stops between events:
  /// those leave it consistent, and it can run on).
  template <typename F>
  decltype(auto) run(F&& f) {
    poll_python_signals(system_.sim());
    const std::uint64_t before = system_.sim().events_processed();
    try {
      pybind11::gil_scoped_release nogil;
      return f();
    } catch (const LimitError&) {
      throw;
    } catch (const pybind11::error_already_set&) {
      throw;
    } catch (const std::exception& e) {
      if (system_.sim().events_processed() != before) use_->failed(std::string(e.what()));
      throw;
    }
  }

 private:
  topology::System& system_;
  std::optional<topology::System::Use> use_;
};

/// The `include_dirs=` of a config load: the folders its includes may read
/// besides the config's own folder tree. None: kernbench.system.include_dirs()
/// ($KERNBENCH_INCLUDE_PATH and the packaged configs); a path or a list of
/// paths: those (defined in bind_config.cpp).
std::vector<std::string> include_dirs_arg(pybind11::handle dirs);

// ---- the one rule for numeric arguments ------------------------------------
// Every byte count, count, flop count and time that Python passes goes
// through int_arg() or real_arg(): Python ints (and numpy integers) and
// floats with an integral value are accepted within range; bools, strings,
// NaN/inf, fractional values and out-of-range values are a UsageError that
// names the argument. Nothing is truncated.

inline std::string py_repr(pybind11::handle v) {
  try {
    return pybind11::repr(v).cast<std::string>();
  } catch (...) {
    return "<unprintable>";
  }
}

inline bool is_bool_like(pybind11::handle v) {
  if (PyBool_Check(v.ptr())) return true;
  const std::string type = Py_TYPE(v.ptr())->tp_name;
  return type == "numpy.bool_" || type == "numpy.bool";
}

/// `v` as an integer in [lo, hi] (by default any int64: the value's meaning
/// -- a size must be >= 0, a transfer at most 1 TiB -- is checked by the
/// C++ call it feeds, with its own message); `name` names the argument.
inline std::int64_t int_arg(pybind11::handle v, const std::string& name,
                            std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                            std::int64_t hi = std::numeric_limits<std::int64_t>::max()) {
  PyObject* o = v.ptr();
  const auto range = [&] { return " (allowed: " + std::to_string(lo) + " .. " + std::to_string(hi) + ")"; };
  if (is_bool_like(v)) throw UsageError(name + " must be an integer, got the bool " + py_repr(v));
  if (PyUnicode_Check(o) || PyBytes_Check(o))
    throw UsageError(name + " must be an integer, got the string " + py_repr(v));
  std::int64_t x = 0;
  if (!PyFloat_Check(o) && PyIndex_Check(o)) {  // int, numpy integer, anything with __index__
    pybind11::object index = pybind11::reinterpret_steal<pybind11::object>(PyNumber_Index(o));
    if (!index) throw pybind11::error_already_set();
    int overflow = 0;
    const long long y = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (overflow != 0) throw UsageError(name + " = " + py_repr(v) + " is out of range" + range());
    if (y == -1 && PyErr_Occurred()) throw pybind11::error_already_set();
    x = y;
  } else if (PyFloat_Check(o) || PyNumber_Check(o)) {  // float, numpy float
    const double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      throw UsageError(name + " must be an integer, got " + py_repr(v));
    }
    if (!std::isfinite(d)) throw UsageError(name + " must be a finite integer, got " + py_repr(v));
    if (d != std::floor(d))
      throw UsageError(name + " must be a whole number, got the fraction " + py_repr(v) + " (nothing is truncated)");
    if (d < -9223372036854775808.0 || d >= 9223372036854775808.0)
      throw UsageError(name + " = " + py_repr(v) + " is out of range" + range());
    x = static_cast<std::int64_t>(d);
  } else {
    throw UsageError(name + " must be an integer, got " + std::string(Py_TYPE(o)->tp_name) + " " + py_repr(v));
  }
  if (x < lo || x > hi) throw UsageError(name + " = " + std::to_string(x) + " is out of range" + range());
  return x;
}

/// `v` as a real number (flops: fractional values are fine); bools and
/// strings are a UsageError naming the argument. With `check`, NaN, inf and
/// values below `lo` are too; without, the C++ call it feeds checks the
/// value with its own message (Program::gemm: "FLOPs must be >= 0").
inline double real_arg(pybind11::handle v, const std::string& name, bool check = true, double lo = 0.0) {
  PyObject* o = v.ptr();
  if (is_bool_like(v)) throw UsageError(name + " must be a number, got the bool " + py_repr(v));
  if (PyUnicode_Check(o) || PyBytes_Check(o))
    throw UsageError(name + " must be a number, got the string " + py_repr(v));
  if (!PyFloat_Check(o) && !PyIndex_Check(o) && !PyNumber_Check(o))
    throw UsageError(name + " must be a number, got " + std::string(Py_TYPE(o)->tp_name) + " " + py_repr(v));
  const double d = PyFloat_AsDouble(o);
  if (d == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    throw UsageError(name + " must be a number, got " + py_repr(v));
  }
  if (!check) return d;
  if (!std::isfinite(d)) throw UsageError(name + " must be finite, got " + py_repr(v));
  if (d < lo) throw UsageError(name + " must be >= " + std::to_string(lo) + ", got " + py_repr(v));
  return d;
}

/// int_arg for an optional argument (None stays empty).
inline std::optional<std::int64_t> opt_int_arg(pybind11::handle v, const std::string& name,
                                               std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                                               std::int64_t hi = std::numeric_limits<std::int64_t>::max()) {
  if (v.is_none()) return std::nullopt;
  return int_arg(v, name, lo, hi);
}

/// "fp16" -> Precision::Fp16; an unknown name lists the known ones.
inline topology::Precision precision_from(const std::string& name) {
  using topology::Precision;
  for (Precision p :
       {Precision::Fp32, Precision::Tf32, Precision::Fp16, Precision::Bf16, Precision::Fp8, Precision::Int8})
    if (name == topology::to_string(p)) return p;
  throw ConfigError("unknown precision '" + name + "' (known: fp32, tf32, fp16, bf16, fp8, int8)");
}

/// A count from Python that must not be negative (taken as int64 so that a
/// negative value gets a clear error instead of a pybind11 TypeError).
inline std::uint64_t non_negative(std::int64_t v, const char* what) {
  if (v < 0) throw UsageError(std::string(what) + " must be >= 0, got " + std::to_string(v));
  return static_cast<std::uint64_t>(v);
}

/// A node given from Python: by id or by name (ids are signed here so that
/// a negative one gets our error, not a pybind11 signature dump).
using NodeRef = std::variant<std::int64_t, std::string>;

/// The node id of `ref`; an unknown name or an out-of-range id is an error
/// that says so (prefixed by `what`, e.g. "gemm: pes[3]").
inline topology::NodeId resolve(const topology::System& s, const NodeRef& ref, const std::string& what = "node") {
  if (const auto* id = std::get_if<std::int64_t>(&ref)) {
    if (*id < 0 || static_cast<std::uint64_t>(*id) >= s.machine().num_nodes())
      throw UsageError(what + ": node id " + std::to_string(*id) + " out of range (" +
                       std::to_string(s.machine().num_nodes()) + " nodes)");
    return static_cast<topology::NodeId>(*id);
  }
  return s.machine().at(std::get<std::string>(ref));
}

void bind_sim(pybind11::module_& m);
void bind_topology(pybind11::module_& m);
void bind_runtime(pybind11::module_& m);
void bind_kernels(pybind11::module_& m);
void bind_gpu(pybind11::module_& m);
void bind_gqa(pybind11::module_& m);
void bind_config(pybind11::module_& m);
void bind_ccl(pybind11::module_& m);
void bind_llama(pybind11::module_& m);
void bind_energy(pybind11::module_& m);
void bind_critical_path(pybind11::module_& m);
void bind_serving(pybind11::module_& m);

}  // namespace kernbench::bindings
