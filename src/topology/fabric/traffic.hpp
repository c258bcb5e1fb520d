// traffic.hpp -- synthetic traffic for NoC studies.
//
// Each source injects packets of `packet` bytes at `offered` bytes/s during
// [start, stop), with
//   poisson    exponential gaps (continuous time)
//   periodic   fixed gaps
//   bernoulli  at each cycle of length `cycle` (from `start`), a packet with
//              probability p = offered x cycle / packet -- the textbook
//              per-cycle injection process. Sampled as geometric gaps in
//              whole cycles (the same process, one event per packet rather
//              than one per cycle); p must be within (0, 1].
// The destination of source index s (endpoints are indexed as listed;
// grid patterns read them as a row-major grid_w-wide grid, s = y*grid_w + x):
//   uniform         any other endpoint, uniformly at random
//   transpose       (x, y) -> (y, x) on a square grid; the diagonal sends nothing
//   bitcomplement   s -> ~s (mod n): every index bit flipped; n a power of two
//   hotspot         the hotspot node with probability `hotspot_fraction`, else
//                   uniform (a draw that lands on the source itself sends nothing)
//   neighbour       with grid_w: (x, y) -> ((x+1) mod grid_w, y), the next one in
//                   the row, wrapping; without: the next endpoint in the list
// Packets are fabric transfers tagged with `tag`; their records are the
// measurement. Randomness comes from the simulation's seeded stream.
#pragma once

#include <string>
#include <vector>

#include "sim/event.hpp"
#include "topology/fabric/fabric.hpp"

namespace kernbench::topology {

enum class TrafficPattern { Uniform, Transpose, BitComplement, Hotspot, Neighbour };
enum class Injection { Poisson, Periodic, Bernoulli };

TrafficPattern traffic_pattern_from_name(const std::string& name);
Injection injection_from_name(const std::string& name);

struct TrafficSpec {
  TrafficPattern pattern = TrafficPattern::Uniform;
  Injection injection = Injection::Poisson;
  std::vector<NodeId> endpoints;  ///< sources and destinations (e.g. the PEs of a cube)
  int grid_w = 0;                 ///< transpose, neighbour: endpoints form a grid grid_w wide, row-major
  NodeId hotspot = 0;
  double hotspot_fraction = 0.5;
  Bandwidth offered{};  ///< per source
  Bytes packet = 64;
  Time cycle = 0;  ///< bernoulli: the injection cycle (> 0)
  Time start = 0;
  Time stop = 0;  ///< injection ends (exclusive)
  std::int32_t tag = 0;
};

class TrafficGenerator final : public sim::Handler {
 public:
  /// Checks the spec (clear errors for empty endpoint lists, a non-square
  /// transpose, zero rates) and schedules the first injection of every source.
  TrafficGenerator(Fabric& fabric, TrafficSpec spec);
  void on_event(std::uint64_t source) override;
  std::uint64_t injected() const { return injected_; }
  const TrafficSpec& spec() const { return spec_; }
  /// The destination of source index `s` (random for uniform and hotspot:
  /// one draw from the simulation's stream). Public so tests can check each
  /// pattern's mapping.
  NodeId destination(std::size_t s);
  /// The next injection gap (bernoulli: whole cycles). Public for tests.
  Time gap();

 private:
  Fabric& fabric_;
  TrafficSpec spec_;
  double mean_gap_ps_ = 0.0;
  double log_miss_ = 0.0;  ///< bernoulli: log(1 - p); 0 when p == 1
  std::uint64_t injected_ = 0;
};

}  // namespace kernbench::topology
