// phold.hpp -- the PHOLD benchmark model, on three engines.
//
// PHOLD (Fujimoto, 1990): N logical processes; E events start at each LP;
// processing an event at an LP schedules one new event at a uniformly
// random LP after an exponential delay. The pending-event count stays at
// N*E, which makes it the standard stress test of an event queue.
//
// The same model runs on (a) coroutine processes, (b) plain callbacks and
// (c) a bare reference loop (std::priority_queue of plain structs), drawing
// the same random numbers in the same order, so all three process the same
// events in the same order and end with the same trace hash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/simulation.hpp"
#include "sim/units.hpp"

namespace kernbench::sim::models {

enum class PholdEngine { Coroutines, Callbacks, Bare };

/// Parses "coroutines" / "callbacks" / "bare"; an unknown name lists the known ones.
PholdEngine phold_engine_from_name(const std::string& name);
std::string phold_engine_name(PholdEngine engine);

struct PholdParams {
  std::uint32_t lps = 1024;           ///< N logical processes
  std::uint32_t events_per_lp = 1;    ///< E events initially pending per LP
  std::uint64_t events = 10'000'000;  ///< events to process before stopping
  Time mean_delay = kMicrosecond;     ///< mean of the exponential delay (a real time scale)
};

struct PholdResult {
  std::uint64_t events = 0;        ///< events processed
  Time end_time = 0;               ///< simulated time of the last event
  double wall_seconds = 0.0;       ///< wall time of the event loop alone
  std::uint64_t trace_hash = 0;    ///< hash of the (time, lp) sequence processed
  std::size_t pending = 0;         ///< pending events at the end (N*E)
  double bytes_per_pending = 0.0;  ///< queue (+ coroutine frame) bytes per pending event
  double events_per_second() const { return wall_seconds > 0 ? static_cast<double>(events) / wall_seconds : 0.0; }
};

/// Runs PHOLD on `sim` (its seed drives the random stream; the bare engine
/// copies the stream and leaves the simulation untouched).
PholdResult run_phold(Simulation& sim, PholdEngine engine, const PholdParams& params);

}  // namespace kernbench::sim::models
