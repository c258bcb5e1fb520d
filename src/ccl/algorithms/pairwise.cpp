// pairwise.cpp -- alltoall as direct sends to every peer: NCCL's grouped
// ncclSend/ncclRecv (its p2p schedule, src/enqueue.cc scheduleP2pTasksToPlan).
//
// In round r (1 .. n-1) rank i sends its block for rank (i + r) % n straight
// to that rank and receives its block from rank (i - r) % n; each pair's
// block is split over the pair's channels (Plan::peer_channels), each
// channel its own queue. Every round's sends are ready at once: how many run
// together is what the ranks' IPCQ engines and the fabric allow, so on a
// switch every pair streams concurrently and on a mesh the routes contend.
// A rank's own block is copied locally (in HBM: a load and a store).
#include "ccl/algorithms/algorithm.hpp"
#include "sim/errors.hpp"

namespace kernbench::ccl {

namespace {

void pairwise_all_to_all(Schedule& s, const Plan& p) {
  const int n = p.world.size();
  const int channels = std::max(1, p.peer_channels);
  for (int r = 1; r < n; ++r)
    for (int i = 0; i < n; ++i) {
      const int j = (i + r) % n;
      const Slices from = alltoall_send_block(p, j), to = alltoall_recv_block(p, i);
      for (int c = 0; c < channels; ++c) {
        if (channels > 1) s.set_channel(c);
        s.transfer(p.world.ranks[static_cast<std::size_t>(i)], block(from, channels, c),
                   p.world.ranks[static_cast<std::size_t>(j)], block(to, channels, c), Combine::Copy);
      }
    }
  s.set_channel(-1);
  for (int i = 0; i < n; ++i)
    s.local_copy(p.world.ranks[static_cast<std::size_t>(i)], alltoall_send_block(p, i), alltoall_recv_block(p, i));
}

}  // namespace

Algorithm pairwise_algorithm() {
  Algorithm a;
  a.name = "pairwise";
  a.description = "alltoall: every rank sends each peer its block directly, all pairs at once (NCCL's p2p)";
  // Both buffers (send, receive), a block per rank, each cut per channel.
  a.slices = [](const Plan& p) { return 2 * p.world.size() * std::max(1, p.peer_channels); };
  a.all_to_all = pairwise_all_to_all;
  return a;
}

}  // namespace kernbench::ccl
