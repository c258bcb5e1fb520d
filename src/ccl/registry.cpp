// registry.cpp -- the algorithms by name.
#include "ccl/algorithms.hpp"

#include "sim/errors.hpp"

namespace kernbench::ccl {

const std::vector<Algorithm>& registry() {
  static const std::vector<Algorithm> all = {
      ring_algorithm(),      bidir_ring_algorithm(),         torus2d_algorithm(), mesh2d_algorithm(),
      halving_doubling_algorithm(), double_binary_tree_algorithm(), lrab_algorithm(), nvls_algorithm(),
  };
  return all;
}

const Algorithm& find_algorithm(const std::string& name) {
  std::string known;
  for (const Algorithm& a : registry()) {
    if (a.name == name) return a;
    known += (known.empty() ? "" : ", ") + a.name;
  }
  throw UsageError("unknown collective algorithm '" + name + "' (known: " + known + ")");
}

std::vector<AlgorithmInfo> algorithms() {
  std::vector<AlgorithmInfo> out;
  for (const Algorithm& a : registry()) {
    AlgorithmInfo info{a.name, a.description, {}};
    if (a.all_reduce) info.collectives.push_back("all_reduce");
    if (a.reduce_scatter) info.collectives.push_back("reduce_scatter");
    if (a.all_gather) info.collectives.push_back("all_gather");
    if (a.broadcast) info.collectives.push_back("broadcast");
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace kernbench::ccl
