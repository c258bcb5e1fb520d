// line.cpp -- the line's reduce-scatter and all-gather, and pipelined
// chains (line.hpp).
//
// A line of n ranks reduces block b from both ends towards rank b (partial
// sums flow inwards along the line), so every hop is between neighbours and
// no message has to cross the line to close a ring. The link next to an
// end carries n - 1 blocks each way, like a ring's n - 1 steps, but the
// blocks near the middle wait for partials from both sides.
#include "ccl/logical/line.hpp"

#include <algorithm>

namespace kernbench::ccl {

void line_reduce_scatter(Schedule& s, const std::vector<int>& line, Slices r) {
  const int n = static_cast<int>(line.size());
  // Hops in data order: a partial sum must have gathered everything from
  // its end of the line before it moves on, so the hop d ranks away from
  // the owner comes before the hop d - 1 away.
  for (int d = n - 1; d >= 1; --d)
    for (int b = 0; b < n; ++b) {
      const Slices blk = block(r, n, b);
      // From the left: rank b - d passes sum(0 .. b-d) on to b - d + 1.
      if (b - d >= 0)
        s.transfer(line[static_cast<std::size_t>(b - d)], line[static_cast<std::size_t>(b - d + 1)], blk,
                   Combine::Reduce);
      // From the right: rank b + d passes sum(b+d .. n-1) on to b + d - 1.
      if (b + d < n)
        s.transfer(line[static_cast<std::size_t>(b + d)], line[static_cast<std::size_t>(b + d - 1)], blk,
                   Combine::Reduce);
    }
}

void line_all_gather(Schedule& s, const std::vector<int>& line, Slices r) {
  const int n = static_cast<int>(line.size());
  for (int d = 1; d < n; ++d)
    for (int b = 0; b < n; ++b) {
      const Slices blk = block(r, n, b);
      if (b + d < n)
        s.transfer(line[static_cast<std::size_t>(b + d - 1)], line[static_cast<std::size_t>(b + d)], blk,
                   Combine::Copy);
      if (b - d >= 0)
        s.transfer(line[static_cast<std::size_t>(b - d + 1)], line[static_cast<std::size_t>(b - d)], blk,
                   Combine::Copy);
    }
}

void chain_reduce(Schedule& s, const std::vector<int>& chain, Slices r, int pieces) {
  const int k = std::max(1, std::min(pieces, r.hi - r.lo));
  for (int piece = 0; piece < k; ++piece)
    for (std::size_t i = 0; i + 1 < chain.size(); ++i)
      s.transfer(chain[i], chain[i + 1], block(r, k, piece), Combine::Reduce);
}

void chain_broadcast(Schedule& s, const std::vector<int>& chain, Slices r, int pieces) {
  const int k = std::max(1, std::min(pieces, r.hi - r.lo));
  for (int piece = 0; piece < k; ++piece)
    for (std::size_t i = 0; i + 1 < chain.size(); ++i)
      s.transfer(chain[i], chain[i + 1], block(r, k, piece), Combine::Copy);
}

}  // namespace kernbench::ccl
