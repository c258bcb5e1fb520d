// ring.cpp -- ring all-reduce: reduce-scatter then all-gather, 2(p-1) steps.
//
// Step t of the reduce-scatter: rank i sends block (i - t) mod p to rank
// i + 1, which adds it to its own. After p - 1 steps rank i holds block
// (i + 1) mod p summed over every rank; the all-gather passes the finished
// blocks on around the ring. Each step moves n/p bytes per rank, so on a
// ring of uncontended links it costs 2(p-1)(alpha + n/(p beta)).
//
// Over several boxes (logical/boxes.hpp) the ring is NCCL's: box after box,
// each box's ranks rotated by the channel, so channel c enters every box at
// its local rank c and leaves it from local rank c - 1. The channels cross
// between boxes on different rails, and each box's NICs carry their share:
// the inter-box hop is the ring's bottleneck at the boxes' NIC rate
// (with PXN the leaving send relays through local rank c, on the entry's rail).
#include "ccl/algorithms/algorithm.hpp"
#include "ccl/logical/line.hpp"
#include "ccl/logical/ring.hpp"

namespace kernbench::ccl {

std::vector<int> ring_order(const Plan& p) {
  if (!p.multi_node()) return p.world.ranks;
  std::vector<int> out;
  out.reserve(p.world.ranks.size());
  for (int b = 0; b < p.boxes->count(); ++b)
    for (std::size_t k = 0; k < p.boxes->ranks[static_cast<std::size_t>(b)].size(); ++k)
      out.push_back(p.world.ranks[static_cast<std::size_t>(p.boxes->at(b, p.channel + static_cast<int>(k)))]);
  return out;
}

namespace {

std::vector<std::pair<int, Slices>> owned(const Plan& p) {
  const std::vector<int> ring = ring_order(p);
  std::vector<std::pair<int, Slices>> out;
  for (int i = 0; i < p.world.size(); ++i)
    out.push_back({ring[static_cast<std::size_t>(i)], ring_owned(p.all(), p.world.size(), i)});
  return out;
}

// Broadcast: a pipelined chain from the root around the ring.
void broadcast(Schedule& s, const Plan& p) {
  const int n = p.world.size();
  std::vector<int> chain;
  for (int k = 0; k < n; ++k) chain.push_back((p.root + k) % n);
  chain_broadcast(s, chain, p.all(), p.pieces);
}

}  // namespace

Algorithm ring_algorithm() {
  Algorithm a;
  a.name = "ring";
  a.description = "reduce-scatter then all-gather around one ring of all ranks: 2(p-1) steps of n/p bytes";
  a.slices = [](const Plan& p) { return std::max(p.world.size(), p.pieces); };
  a.check = [](const Plan&) {};
  a.reduce_scatter = [](Schedule& s, const Plan& p) {
    s.phase("reduce-scatter");
    ring_reduce_scatter(s, ring_order(p), p.all());
  };
  a.all_gather = [](Schedule& s, const Plan& p) {
    s.phase("all-gather");
    ring_all_gather(s, ring_order(p), p.all());
  };
  a.all_reduce = [](Schedule& s, const Plan& p) {
    const std::vector<int> ring = ring_order(p);
    s.phase("reduce-scatter");
    ring_reduce_scatter(s, ring, p.all());
    s.phase("all-gather");
    ring_all_gather(s, ring, p.all());
  };
  a.owned = owned;
  a.broadcast = [](Schedule& s, const Plan& p) {
    s.phase("broadcast");
    broadcast(s, p);
  };
  return a;
}

}  // namespace kernbench::ccl
