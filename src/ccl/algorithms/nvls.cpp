// nvls.cpp -- in-network all-reduce (NVLink SHARP, "NVLS"-like) over the
// reducing switches every rank is linked to.
//
// Each switch that declares `reduction:` and has a direct link from every
// rank takes a part of the buffer, in proportion to the ranks' bandwidth to
// it (the narrowest rank's link x lanes: 5/4/4/5 NVLink4 links on HGX H100
// give parts of 5/18, 4/18, 4/18, 5/18). Each part is cut into `pieces`
// chunks; every chunk is one switch_reduce: each rank sends it to the
// switch once, the switch reduces the contributions and multicasts the sum
// back. The chunks of one switch pipeline through its gather, reduce and
// multicast stages, and the switches work in parallel, so each rank sends
// its whole buffer once and receives it once: on uncontended links
// T ~ (B / port bandwidth) + two chunk times, against ring's
// 2 (p-1)/p B / port bandwidth (docs/ccl.md derives the closed form).
#include <numeric>

#include "ccl/algorithms/algorithm.hpp"
#include "ccl/logical/switch_star.hpp"
#include "sim/errors.hpp"

namespace kernbench::ccl {
namespace {

void all_reduce(Schedule& s, const Plan& p) {
  const std::vector<Part> ps = star_parts(p.machine, p.pes, "nvls");
  s.phase("in-network");
  // Chunk c of switch j: slices [base_j + c w_j, base_j + (c + 1) w_j),
  // where switch j's part starts at base_j = pieces x (w_0 + ... + w_{j-1}).
  // Chunks are emitted in pipeline order: chunk 0 of every switch first.
  const double total = weight_sum(ps);
  for (int c = 0; c < p.pieces; ++c) {
    std::int32_t base = 0;
    for (const Part& q : ps) {
      const std::int32_t lo = base + c * q.weight;
      s.switch_reduce(q.sw, p.world.ranks, Slices{lo, lo + q.weight}, q.weight / total);
      base += p.pieces * q.weight;
    }
  }
}

}  // namespace

Algorithm nvls_algorithm() {
  Algorithm a;
  a.name = "nvls";
  a.description =
      "in-network all-reduce (NVLink SHARP-like): each rank sends every chunk once to a reducing switch, which "
      "reduces and multicasts it back; chunks pipelined over every reducing switch linked to all ranks";
  a.in_network = true;
  a.slices = [](const Plan& p) { return p.pieces * weight_sum(star_parts(p.machine, p.pes, "nvls")); };
  a.check = [](const Plan& p) { star_parts(p.machine, p.pes, "nvls"); };
  a.all_reduce = all_reduce;
  return a;
}

}  // namespace kernbench::ccl
