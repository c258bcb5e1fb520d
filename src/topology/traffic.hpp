// traffic.hpp -- synthetic traffic for NoC studies.
//
// Each source injects packets of `packet` bytes at `offered` bytes/s, with
// exponential (Poisson) or fixed (periodic) gaps, during [start, stop). The
// destination follows the pattern:
//   uniform    any other endpoint, uniformly at random
//   transpose  the endpoint at the transposed (row, col) of a square grid
//   hotspot    the hotspot node with probability `hotspot_fraction`, else uniform
//   neighbour  the next endpoint in the list (a ring over the sources)
// Packets are fabric transfers tagged with `tag`; their records are the
// measurement. Randomness comes from the simulation's seeded stream.
#pragma once

#include <string>
#include <vector>

#include "sim/event.hpp"
#include "topology/fabric.hpp"

namespace kernbench::topology {

enum class TrafficPattern { Uniform, Transpose, Hotspot, Neighbour };
enum class Injection { Poisson, Periodic };

TrafficPattern traffic_pattern_from_name(const std::string& name);
Injection injection_from_name(const std::string& name);

struct TrafficSpec {
  TrafficPattern pattern = TrafficPattern::Uniform;
  Injection injection = Injection::Poisson;
  std::vector<NodeId> endpoints;  ///< sources and destinations (e.g. the PEs of a cube)
  int grid_w = 0;                 ///< transpose: endpoints form a grid_w x grid_w grid, row-major
  NodeId hotspot = 0;
  double hotspot_fraction = 0.5;
  Bandwidth offered{};            ///< per source
  Bytes packet = 64;
  Time start = 0;
  Time stop = 0;                  ///< injection ends (exclusive)
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

 private:
  NodeId destination(std::size_t source);
  Time gap();

  Fabric& fabric_;
  TrafficSpec spec_;
  double mean_gap_ps_ = 0.0;
  std::uint64_t injected_ = 0;
};

}  // namespace kernbench::topology
