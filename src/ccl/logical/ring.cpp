// ring.cpp -- the ring's reduce-scatter and all-gather (ring.hpp). Each of
// the n - 1 steps moves one block of n per rank, so on a ring of uncontended
// links a reduce-scatter costs (n-1)(alpha + |r|/(n beta)).
#include "ccl/logical/ring.hpp"

namespace kernbench::ccl {

std::vector<int> iota_ranks(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

void ring_reduce_scatter(Schedule& s, const std::vector<int>& ring, Slices r) {
  const int n = static_cast<int>(ring.size());
  for (int t = 0; t + 1 < n; ++t)
    for (int i = 0; i < n; ++i)
      s.transfer(ring[static_cast<std::size_t>(i)], ring[static_cast<std::size_t>((i + 1) % n)],
                 block(r, n, ((i - t) % n + n) % n), Combine::Reduce);
}

void ring_all_gather(Schedule& s, const std::vector<int>& ring, Slices r) {
  const int n = static_cast<int>(ring.size());
  for (int t = 0; t + 1 < n; ++t)
    for (int i = 0; i < n; ++i)
      s.transfer(ring[static_cast<std::size_t>(i)], ring[static_cast<std::size_t>((i + 1) % n)],
                 block(r, n, ((i + 1 - t) % n + n) % n), Combine::Copy);
}

}  // namespace kernbench::ccl
