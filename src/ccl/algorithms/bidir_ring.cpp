// bidir_ring.cpp -- two rings at once, one each way, each on half the data.
//
// The buffer's first half goes around the ring clockwise and the second
// half counter-clockwise, so both directions of every link carry data: on
// full-duplex links the bandwidth term halves against the one-way ring,
// for the same 2(p-1) step latencies.
#include "ccl/algorithms/algorithm.hpp"
#include "ccl/logical/ring.hpp"

#include <algorithm>

namespace kernbench::ccl {

namespace {

std::vector<int> reversed(std::vector<int> v) {
  std::reverse(v.begin(), v.end());
  return v;
}

Slices half(const Plan& p, int h) { return block(p.all(), 2, h); }

void reduce_scatter(Schedule& s, const Plan& p) {
  ring_reduce_scatter(s, p.world.ranks, half(p, 0));
  ring_reduce_scatter(s, reversed(p.world.ranks), half(p, 1));
}

void all_gather(Schedule& s, const Plan& p) {
  ring_all_gather(s, p.world.ranks, half(p, 0));
  ring_all_gather(s, reversed(p.world.ranks), half(p, 1));
}

}  // namespace

Algorithm bidir_ring_algorithm() {
  Algorithm a;
  a.name = "bidir_ring";
  a.description = "two rings in opposite directions, each reducing half of the buffer";
  a.slices = [](const Plan& p) { return 2 * p.world.size(); };
  a.check = [](const Plan&) {};
  a.reduce_scatter = [](Schedule& s, const Plan& p) {
    s.phase("reduce-scatter");
    reduce_scatter(s, p);
  };
  a.all_gather = [](Schedule& s, const Plan& p) {
    s.phase("all-gather");
    all_gather(s, p);
  };
  a.all_reduce = [](Schedule& s, const Plan& p) {
    s.phase("reduce-scatter");
    reduce_scatter(s, p);
    s.phase("all-gather");
    all_gather(s, p);
  };
  a.owned = [](const Plan& p) {
    // Clockwise: ranks[i] owns block (i+1) of the first half; the reversed
    // ring's position j = n-1-i owns block (j+1) of the second half.
    const int n = p.world.size();
    std::vector<std::pair<int, Slices>> out;
    for (int i = 0; i < n; ++i) {
      const int rank = p.world.ranks[static_cast<std::size_t>(i)];
      out.push_back({rank, ring_owned(half(p, 0), n, i)});
      out.push_back({rank, ring_owned(half(p, 1), n, n - 1 - i)});
    }
    return out;
  };
  return a;
}

}  // namespace kernbench::ccl
