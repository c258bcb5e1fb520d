// busy_histogram.hpp -- how long something was busy, per time bin, in
// bounded memory: kBins bins from an origin; when a busy interval reaches
// past the last bin, the bins are merged in pairs and their width doubles
// (as often as needed). The busy time is exact (integer ps, an interval cut
// at bin edges); only the resolution coarsens. The fabric keeps one per
// channel for a run's link tracks (topology/fabric/fabric.hpp record_busy).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "sim/units.hpp"

namespace kernbench::sim {

class BusyHistogram {
 public:
  static constexpr std::size_t kBins = 512;
  static constexpr Time kFirstWidth = 1000;  ///< ps: the width before any doubling

  explicit BusyHistogram(Time origin = 0) : origin_(origin) {}

  /// Adds the busy interval [a, b), a >= origin (earlier time is clipped).
  void add(Time a, Time b) {
    a = std::max(a, origin_);
    if (b <= a) return;
    if (bins_.empty()) bins_.assign(kBins, 0);
    while (b - origin_ > width_ * static_cast<Time>(kBins)) coarsen();
    for (auto i = static_cast<std::size_t>((a - origin_) / width_); a < b; ++i) {
      const Time edge = std::min(b, origin_ + width_ * static_cast<Time>(i + 1));
      bins_[i] += edge - a;
      a = edge;
    }
  }
  /// Doubles the width until it is at least `width` (a power-of-two multiple of kFirstWidth).
  void coarsen_to(Time width) {
    while (width_ < width) coarsen();
  }

  Time origin() const { return origin_; }
  Time width() const { return width_; }
  /// Busy ps per bin (empty: never busy); bin i is [origin + i width, origin + (i + 1) width).
  const std::vector<Time>& bins() const { return bins_; }
  Time total() const {
    Time t = 0;
    for (Time b : bins_) t += b;
    return t;
  }

 private:
  void coarsen() {
    for (std::size_t i = 0; i < bins_.size() / 2; ++i) bins_[i] = bins_[2 * i] + bins_[2 * i + 1];
    std::fill(bins_.begin() + static_cast<std::ptrdiff_t>(bins_.size() / 2), bins_.end(), 0);
    width_ *= 2;
  }

  Time origin_;
  Time width_ = kFirstWidth;
  std::vector<Time> bins_;
};

}  // namespace kernbench::sim
