// registry.cpp -- the algorithms by name.
#include "ccl/algorithms.hpp"

#include <algorithm>

#include "sim/errors.hpp"

namespace kernbench::ccl {

Algorithm complete(Algorithm a) {
  if (a.name.empty()) throw UsageError("a collective algorithm needs a name");
  if (!a.all_reduce && !a.reduce_scatter && !a.all_gather && !a.broadcast && !a.all_to_all)
    throw UsageError("collective algorithm '" + a.name +
                     "' implements no collective (give all_reduce, "
                     "reduce_scatter, all_gather, broadcast or all_to_all)");
  if (!a.check) a.check = [](const Plan&) {};
  if (!a.slices) a.slices = [](const Plan& p) { return std::max(1, p.world.size()); };
  if (!a.owned)
    a.owned = [](const Plan& p) {
      std::vector<std::pair<int, Slices>> out;
      const int n = p.world.size();
      for (int r = 0; r < n; ++r) out.emplace_back(r, block(p.all(), n, r));
      return out;
    };
  return a;
}

const std::vector<Algorithm>& registry() {
  static const std::vector<Algorithm> all = {
      complete(ring_algorithm()),
      complete(bidir_ring_algorithm()),
      complete(torus2d_algorithm()),
      complete(mesh2d_algorithm()),
      complete(halving_doubling_algorithm()),
      complete(double_binary_tree_algorithm()),
      complete(lrab_algorithm()),
      complete(nvls_algorithm()),
      complete(pairwise_algorithm()),
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
    AlgorithmInfo info{a.name, a.description, {}, a.in_network};
    if (a.all_reduce) info.collectives.push_back("all_reduce");
    if (a.reduce_scatter) info.collectives.push_back("reduce_scatter");
    if (a.all_gather) info.collectives.push_back("all_gather");
    if (a.broadcast) info.collectives.push_back("broadcast");
    if (a.all_to_all) info.collectives.push_back("alltoall");
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace kernbench::ccl
