// shares.hpp -- a span of time cut among labels by what is at work: each
// instant in which k labels have work counts 1/k to each, an instant with
// none is idle, so the shares and the idle rest add up to the span exactly
// (a breakdown that adds up, where per-label busy times overlap).
#pragma once

#include <algorithm>
#include <cstddef>
#include <tuple>
#include <vector>

#include "sim/units.hpp"

namespace kernbench::sim {

/// One end of a label's busy interval: (time, +1 start / -1 end, label).
using ShareEdge = std::tuple<Time, int, std::size_t>;

/// Per label, its share of [t0, t1) (ps); `idle` gets the rest. Sorts `edges`.
inline std::vector<double> share_span(std::vector<ShareEdge>& edges, std::size_t labels, Time t0, Time t1,
                                      double& idle) {
  std::sort(edges.begin(), edges.end());
  std::vector<int> busy(labels, 0);
  std::vector<double> share(labels, 0.0);
  idle = 0;
  Time prev = t0;
  std::size_t e = 0;
  while (true) {
    const Time now = e < edges.size() ? std::clamp(std::get<0>(edges[e]), t0, t1) : t1;
    if (now > prev) {
      int k = 0;
      for (int b : busy) k += b > 0;
      const double d = static_cast<double>(now - prev);
      if (k == 0) idle += d;
      for (std::size_t l = 0; l < labels; ++l)
        if (busy[l] > 0) share[l] += d / k;
      prev = now;
    }
    if (e == edges.size()) break;
    const Time at = std::get<0>(edges[e]);
    while (e < edges.size() && std::get<0>(edges[e]) == at) {
      busy[std::get<2>(edges[e])] += std::get<1>(edges[e]);
      ++e;
    }
  }
  return share;
}

}  // namespace kernbench::sim
