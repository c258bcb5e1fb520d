// causes.cpp -- the apportioning of a node's work time over its labels.
#include "runtime/causes.hpp"

#include <cmath>

namespace kernbench::runtime {

void apportion(Time total, const std::vector<double>& weights, double weight_sum, std::vector<Time>& shares) {
  shares.assign(weights.size(), 0);
  if (weights.empty()) return;
  Time given = 0;
  std::size_t biggest = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    shares[i] = static_cast<Time>(std::floor(static_cast<double>(total) * weights[i] / weight_sum));
    given += shares[i];
    if (weights[i] > weights[biggest]) biggest = i;
  }
  shares[biggest] += total - given;
}

}  // namespace kernbench::runtime
