// registry.cpp -- the algorithms by name: the built-ins, then those added
// with register_algorithm.
#include "ccl/algorithms/algorithm.hpp"

#include <algorithm>
#include <deque>
#include <utility>

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

namespace {

// The registry: the built-ins first, in a fixed order, then registered ones. A deque, so that references handed out
// by find_algorithm stay valid while it grows.
std::deque<Algorithm>& algorithms_store() {
  static std::deque<Algorithm> all = {
#define KERNBENCH_ALGORITHM(factory) complete(factory##_algorithm()),
#include "ccl/algorithms/algorithms.def"
#undef KERNBENCH_ALGORITHM
  };
  return all;
}

}  // namespace

const std::deque<Algorithm>& registry() { return algorithms_store(); }

const Algorithm& register_algorithm(Algorithm a) {
  Algorithm done = complete(std::move(a));
  for (const Algorithm& b : algorithms_store())
    if (b.name == done.name) throw UsageError("collective algorithm '" + done.name + "' is registered already");
  algorithms_store().push_back(std::move(done));
  return algorithms_store().back();
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
