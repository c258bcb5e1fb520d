// halving_doubling.cpp -- recursive halving (reduce-scatter) then recursive
// doubling (all-gather), Rabenseifner's all-reduce.
//
// log2(p) steps each way: at distance d a rank swaps half of its current
// range with rank i xor d, so step k moves n/2^k bytes. Only 2 log2(p)
// latencies instead of the ring's 2(p-1): it wins on small messages; the
// partners are far apart on a ring or mesh, so long messages contend and
// the ring wins there. Needs a power-of-two number of ranks.
#include "ccl/algorithms/algorithm.hpp"

#include <algorithm>

#include "sim/errors.hpp"

namespace kernbench::ccl {

namespace {

// Each rank's range after the reduce-scatter, and the steps to get there.
std::vector<Slices> halve(Schedule* s, const Plan& p) {
  const int n = p.world.size();
  const auto& ranks = p.world.ranks;
  std::vector<Slices> cur(static_cast<std::size_t>(n), p.all());
  for (int d = n / 2; d >= 1; d /= 2) {
    std::vector<Slices> next(cur);
    for (int i = 0; i < n; ++i) {
      const bool lower = (i & d) == 0;
      const Slices keep = block(cur[static_cast<std::size_t>(i)], 2, lower ? 0 : 1);
      const Slices give = block(cur[static_cast<std::size_t>(i)], 2, lower ? 1 : 0);
      if (s)
        s->transfer(ranks[static_cast<std::size_t>(i)], ranks[static_cast<std::size_t>(i ^ d)], give, Combine::Reduce);
      next[static_cast<std::size_t>(i)] = keep;
    }
    cur = std::move(next);
  }
  return cur;
}

void double_up(Schedule& s, const Plan& p) {
  const int n = p.world.size();
  const auto& ranks = p.world.ranks;
  std::vector<Slices> cur = halve(nullptr, p);
  for (int d = 1; d < n; d *= 2) {
    std::vector<Slices> next(cur);
    for (int i = 0; i < n; ++i) {
      const Slices mine = cur[static_cast<std::size_t>(i)], theirs = cur[static_cast<std::size_t>(i ^ d)];
      s.transfer(ranks[static_cast<std::size_t>(i)], ranks[static_cast<std::size_t>(i ^ d)], mine, Combine::Copy);
      next[static_cast<std::size_t>(i)] = Slices{std::min(mine.lo, theirs.lo), std::max(mine.hi, theirs.hi)};
    }
    cur = std::move(next);
  }
}

}  // namespace

Algorithm halving_doubling_algorithm() {
  Algorithm a;
  a.name = "halving_doubling";
  a.description =
      "recursive halving reduce-scatter + recursive doubling all-gather: 2 log2(p) steps (p a power of two)";
  a.slices = [](const Plan& p) { return p.world.size(); };
  a.check = [](const Plan& p) {
    const int n = p.world.size();
    if ((n & (n - 1)) != 0)
      throw UsageError("halving_doubling needs a power-of-two number of ranks, got " + std::to_string(n) +
                       " (use ring, bidir_ring or double_binary_tree for any count)");
  };
  a.reduce_scatter = [](Schedule& s, const Plan& p) {
    s.phase("reduce-scatter");
    halve(&s, p);
  };
  a.all_gather = [](Schedule& s, const Plan& p) {
    s.phase("all-gather");
    double_up(s, p);
  };
  a.all_reduce = [](Schedule& s, const Plan& p) {
    s.phase("reduce-scatter");
    halve(&s, p);
    s.phase("all-gather");
    double_up(s, p);
  };
  a.owned = [](const Plan& p) {
    std::vector<std::pair<int, Slices>> out;
    const std::vector<Slices> cur = halve(nullptr, p);
    for (int i = 0; i < p.world.size(); ++i)
      out.push_back({p.world.ranks[static_cast<std::size_t>(i)], cur[static_cast<std::size_t>(i)]});
    return out;
  };
  return a;
}

}  // namespace kernbench::ccl
