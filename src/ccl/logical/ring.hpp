// ring.hpp -- the ring, a logical topology: ranks in ring order, each sending
// to the next (the last to the first), and the two phases every ring-based
// algorithm is made of (ring, bidir_ring, the rows of torus2d, LRAB's centre
// cubes and its inter-SIP ring).
#pragma once

#include <vector>

#include "ccl/schedule.hpp"

namespace kernbench::ccl {

/// The ranks 0..n-1, the world's ring order.
std::vector<int> iota_ranks(int n);

/// Ring reduce-scatter of `r` over `ring` (ranks in ring order) in n - 1
/// steps: step t, ring[i] sends block (i - t) mod n to ring[i + 1], which adds
/// it to its own. Afterwards ring[i] holds block (i + 1) % n of r, reduced.
void ring_reduce_scatter(Schedule& s, const std::vector<int>& ring, Slices r);
/// Ring all-gather: ring[i] starts with block (i + 1) % n, ends with all of r.
void ring_all_gather(Schedule& s, const std::vector<int>& ring, Slices r);
/// The block ring[i] owns after ring_reduce_scatter.
inline Slices ring_owned(Slices r, int n, int i) { return block(r, n, (i + 1) % n); }

}  // namespace kernbench::ccl
