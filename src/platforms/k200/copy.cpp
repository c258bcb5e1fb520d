// copy.cpp -- the K200 driver's copy paths, as the reference describes them
// (shared/reference/k200-measured.md, "How the tuned driver moves data").
//
//   pinned (host_alloc), kl1_dma_direct=1:
//       call_overhead, then for each segment of min(hugepage, rest): map ->
//       eDMA -> poll -> unmap on one channel, strictly serial. The buffer's
//       hugepages come from a finite pool; when the pool cannot hold the
//       buffer the allocation falls back to ordinary memory and the copy
//       takes the serial bounce path (the measured 1 GB collapse).
//   pageable, kl1_bounce_pipe=1 and bytes > pipe_threshold:
//       H2D: copy_from_user of chunk n+1 overlaps the eDMA of chunk n, two
//       bounce buffers, one eDMA in flight. D2H mode 1: one eDMA in flight
//       into bounce_d2h_buffers buffers, copy_to_user of chunk n overlaps
//       the eDMA of chunk n+1; mode 2: two eDMAs in flight.
//   pageable, serial (pipeline off or small): per bounce_buffer chunk a
//       memcpy then an eDMA (H2D) or an eDMA then a memcpy (D2H), no overlap.
//   pageable, kl1_pageable_pin=1 and bytes >= pin_min: pin batches of
//       pin_batch pages, one eDMA per page.
//   stock driver: the serial bounce path in stock_bounce chunks.
//   same-card peer: the source die's write channel fills a host bounce
//       buffer, the destination die's read channel pulls from it (no CPU
//       copy), p2p_chunk chunks over p2p_buffers buffers, the D2H of chunk
//       i+1 overlapping the H2D of chunk i. kl1_p2p_stub=1: the user-space
//       fallback (a pageable D2H then a pageable H2D per chunk).
//   cross-card direct peer: refused (the driver's error 807).
//   cross-card staged: pinned D2H into a host buffer, pinned H2D out of it,
//       per hugepage chunk, double-buffered.
//   D2D: inside one die at k200.d2d.bandwidth, completion sleep-polled
//       (usleep_range(sleep_min, sleep_max) between checks, waking at the
//       range's low or high end: k200.d2d.wake).
#include <algorithm>

#include "platforms/k200/k200.hpp"
#include "sim/errors.hpp"

namespace kernbench::platforms::k200 {

namespace {

std::string die_name(DieRef d) { return "card" + std::to_string(d.card) + ".die" + std::to_string(d.die); }

}  // namespace

sim::Task<void> K200::pinned_segment(Chain& ch, DieRef d, Direction dir, Bytes bytes, std::int32_t tag) {
  const auto& drv = cfg_.driver;
  const Bytes pages = (bytes + drv.page - 1) / drv.page;
  const Time half = (drv.segment_overhead + pages * drv.map_per_page) / 2;
  co_await delay_op(ch, "map", res_driver_, tag, half);
  co_await edma(ch, d, dir, bytes, tag);
  co_await delay_op(ch, "unmap", res_driver_, tag, half);
}

sim::Task<void> K200::copy_pinned(Chain& ch, DieRef d, Direction dir, Bytes bytes, std::int32_t tag,
                                  std::string* path) {
  const auto& drv = cfg_.driver;
  if (!drv.kl1_dma_direct) {
    if (path) *path = "pinned with kl1_dma_direct=0: bounced like pageable";
    std::string inner;
    co_await copy_pageable(ch, d, dir, bytes, tag, &inner);
    if (path) *path += " (" + inner + ")";
    co_return;
  }
  const Bytes need = (bytes + drv.hugepage - 1) / drv.hugepage * drv.hugepage;
  if (need > pool_free_) {
    if (path)
      *path = "pinned: hugepage pool exhausted (needs " + std::to_string(need / sim::kMiB) + " MiB, " +
              std::to_string(pool_free_ / sim::kMiB) + " MiB free) -> bounce serial";
    co_await delay_op(ch, "call", res_driver_, tag, drv.pageable_call_overhead);
    co_await bounce_serial(ch, d, dir, bytes, drv.bounce_buffer, tag);
    co_return;
  }
  if (path) *path = "pinned direct";
  pool_free_ -= need;
  co_await delay_op(ch, "call", res_driver_, tag, drv.call_overhead);
  for (Bytes done = 0; done < bytes;) {
    const Bytes seg = std::min(drv.hugepage, bytes - done);
    co_await pinned_segment(ch, d, dir, seg, tag);
    done += seg;
  }
  pool_free_ += need;
}

sim::Task<void> K200::copy_pageable(Chain& ch, DieRef d, Direction dir, Bytes bytes, std::int32_t tag,
                                    std::string* path) {
  const auto& drv = cfg_.driver;
  co_await delay_op(ch, "call", res_driver_, tag, drv.pageable_call_overhead);
  if (drv.kl1_pageable_pin && bytes >= drv.pin_min) {
    if (path) *path = "pageable pin (one eDMA per page)";
    co_await pin_path(ch, d, dir, bytes, tag);
  } else if (drv.kl1_bounce_pipe && bytes > drv.pipe_threshold) {
    if (path)
      *path = dir == Direction::H2D
                  ? "bounce pipeline"
                  : (drv.kl1_bounce_d2h == 2 ? "bounce pipeline (d2h mode 2)" : "bounce pipeline (d2h mode 1)");
    co_await bounce_pipeline(ch, d, dir, bytes, tag);
  } else {
    if (path) *path = "bounce serial";
    co_await bounce_serial(ch, d, dir, bytes, drv.bounce_buffer, tag);
  }
}

sim::Task<void> K200::bounce_serial(Chain& ch, DieRef d, Direction dir, Bytes bytes, Bytes chunk, std::int32_t tag) {
  for (Bytes done = 0; done < bytes;) {
    const Bytes c = std::min(chunk, bytes - done);
    if (dir == Direction::H2D) {
      co_await memcpy_host(ch, dir, c, tag);
      co_await edma(ch, d, dir, c, tag);
    } else {
      co_await edma(ch, d, dir, c, tag);
      co_await memcpy_host(ch, dir, c, tag);
    }
    done += c;
  }
}

namespace {

/// The two stages of a bounce pipeline over `buffers` buffers: the first
/// fills a buffer, the second drains it; chunks are handed over in order.
/// Each hand-over carries the op that made it (a filled chunk: the fill's
/// last op; a freed buffer: the drain's), the next op's other dependency.
struct Pipe {
  Pipe(sim::Simulation& sim, int buffers)
      : free(sim, "bounce.free", static_cast<std::size_t>(buffers)), ready(sim, "bounce.ready") {
    for (int i = 0; i < buffers; ++i) (void)free.try_put(-1);
  }
  sim::Store<std::int32_t> free;                     ///< the op that freed the buffer (-1: never used)
  sim::Store<std::pair<Bytes, std::int32_t>> ready;  ///< (chunk bytes, the op that filled it)
  Bytes next = 0;                                    ///< bytes claimed by the first stage so far
};

/// The stage's next op also waits for `node` (a hand-over): it follows
/// whichever ended last.
void also_after(const runtime::Recorder& rec, Chain& ch, std::int32_t node) { ch.last = rec.later(ch.last, node); }

/// The one bounce pipeline (pageable copies, same-card peer, staged cross-card): `bytes` in chunks of `chunk`
/// through `buffers` host buffers. `fillers` first-stage coroutines claim chunks in order and run
/// `fill_one(stage, c)` on each once a buffer is free; one second-stage coroutine takes the filled chunks in order
/// and runs `drain_one(stage, c)`, then frees the buffer. The stages fork from `ch` and join into it; each op of a
/// stage also follows the hand-over it waited for.
template <typename Fill, typename Drain>
sim::Task<void> run_bounce(sim::Simulation& sim, const runtime::Recorder& rec, Chain& ch, Bytes bytes, Bytes chunk,
                           int buffers, int fillers, const char* fill_name, const char* drain_name, Fill fill_one,
                           Drain drain_one) {
  Pipe pipe(sim, buffers);
  const Bytes chunks = (bytes + chunk - 1) / chunk;
  auto fill = [&](Chain& st) -> sim::Task<void> {
    for (;;) {
      if (pipe.next >= bytes) co_return;
      const Bytes c = std::min(chunk, bytes - pipe.next);
      pipe.next += c;
      also_after(rec, st, co_await pipe.free.get());
      co_await fill_one(st, c);
      co_await pipe.ready.put({c, st.last});
    }
  };
  auto drain = [&](Chain& st) -> sim::Task<void> {
    for (Bytes i = 0; i < chunks; ++i) {
      const auto [c, filled] = co_await pipe.ready.get();
      also_after(rec, st, filled);
      co_await drain_one(st, c);
      co_await pipe.free.put(st.last);
    }
  };
  sim::Join j(sim);
  Chain stages[3] = {ch, ch, ch};  // the stages fork from the caller's chain
  for (int f = 0; f < fillers; ++f) j.spawn(fill_name, fill(stages[f + 1]), &stages[f + 1].last);
  j.spawn(drain_name, drain(stages[0]), &stages[0].last);
  co_await j.wait();
  ch.last = j.last();
}

}  // namespace

sim::Task<void> K200::bounce_pipeline(Chain& ch, DieRef d, Direction dir, Bytes bytes, std::int32_t tag) {
  const auto& drv = cfg_.driver;
  const int buffers = dir == Direction::H2D ? drv.bounce_h2d_buffers : drv.bounce_d2h_buffers;
  // First stage: the memcpy (H2D) or the eDMA (D2H); D2H mode 2 runs two.
  const int fillers = dir == Direction::D2H && drv.kl1_bounce_d2h == 2 ? 2 : 1;
  co_await run_bounce(
      system_.sim(), rec_, ch, bytes, drv.bounce_buffer, buffers, fillers, "k200.bounce_fill", "k200.bounce_drain",
      [&](Chain& st, Bytes c) -> sim::Task<void> {
        if (dir == Direction::H2D)
          co_await memcpy_host(st, dir, c, tag);
        else
          co_await edma(st, d, dir, c, tag);
      },
      [&](Chain& st, Bytes c) -> sim::Task<void> {
        if (dir == Direction::H2D)
          co_await edma(st, d, dir, c, tag);
        else
          co_await memcpy_host(st, dir, c, tag);
      });
}

sim::Task<void> K200::pin_path(Chain& ch, DieRef d, Direction dir, Bytes bytes, std::int32_t tag) {
  const auto& drv = cfg_.driver;
  const Bytes pages = (bytes + drv.page - 1) / drv.page;
  Bytes done = 0;
  for (Bytes p0 = 0; p0 < pages; p0 += drv.pin_batch) {
    const Bytes n = std::min<Bytes>(drv.pin_batch, pages - p0);
    co_await delay_op(ch, "pin", res_driver_, tag, drv.pin_batch_overhead + n * drv.pin_per_page);
    for (Bytes p = 0; p < n; ++p) {
      const Bytes c = std::min(drv.page, bytes - done);
      co_await edma(ch, d, dir, c, tag);
      done += c;
    }
  }
}

sim::Task<void> K200::peer_same_card(Chain& ch, DieRef src, DieRef dst, Bytes bytes, std::int32_t tag,
                                     std::string* path) {
  const auto& drv = cfg_.driver;
  sim::Simulation& sim = system_.sim();
  if (drv.kl1_p2p_stub) {
    // The user-space fallback: each chunk down to a user buffer and back up
    // through the pageable paths, no overlap.
    if (path) *path = "peer via the user-space fallback (kl1_p2p_stub=1)";
    for (Bytes done = 0; done < bytes;) {
      const Bytes c = std::min(drv.p2p_chunk, bytes - done);
      co_await copy_pageable(ch, src, Direction::D2H, c, tag, nullptr);
      co_await copy_pageable(ch, dst, Direction::H2D, c, tag, nullptr);
      done += c;
    }
    co_return;
  }
  if (path) *path = "peer through a host bounce buffer";
  co_await delay_op(ch, "call", res_driver_, tag, drv.call_overhead);
  co_await run_bounce(
      sim, rec_, ch, bytes, drv.p2p_chunk, drv.p2p_buffers, 1, "k200.peer_d2h", "k200.peer_h2d",
      [&](Chain& st, Bytes c) -> sim::Task<void> { co_await edma(st, src, Direction::D2H, c, tag); },
      [&](Chain& st, Bytes c) -> sim::Task<void> {
        co_await delay_op(st, "handoff", res_driver_, tag, drv.p2p_handoff);
        co_await edma(st, dst, Direction::H2D, c, tag);
      });
}

sim::Task<void> K200::cross_card_staged(Chain& ch, DieRef src, DieRef dst, Bytes bytes, std::int32_t tag) {
  const auto& drv = cfg_.driver;
  sim::Simulation& sim = system_.sim();
  // Two user calls per chunk, each a pinned copy of one segment.
  co_await run_bounce(
      sim, rec_, ch, bytes, drv.hugepage, drv.p2p_buffers, 1, "k200.staged_d2h", "k200.staged_h2d",
      [&](Chain& st, Bytes c) -> sim::Task<void> {
        co_await delay_op(st, "call", res_driver_, tag, drv.call_overhead);
        co_await pinned_segment(st, src, Direction::D2H, c, tag);
      },
      [&](Chain& st, Bytes c) -> sim::Task<void> {
        co_await delay_op(st, "call", res_driver_, tag, drv.call_overhead);
        co_await pinned_segment(st, dst, Direction::H2D, c, tag);
      });
}

sim::Task<void> K200::d2d(Chain& ch, DieRef ref, Bytes bytes, std::int32_t tag) {
  sim::Simulation& sim = system_.sim();
  Die& d = die(ref);
  const Time t0 = sim.now();
  const Time done = t0 + sim::transfer_time(bytes, cfg_.d2d.bandwidth);
  // Sleep-poll: check, then usleep_range(sleep_min, sleep_max) until done. The hrtimer of a
  // usleep_range sleep may fire anywhere in the range (soft expiry min, hard expiry max, the range
  // being its slack): `wake` says where (low: at min, high: at max). The first check comes after
  // the first sleep (the copy was just started).
  const Time sleep = cfg_.d2d.wake == D2dWake::Low ? cfg_.d2d.sleep_min : cfg_.d2d.sleep_max;
  const Time check = t0 + std::max<Time>(1, (done - t0 + sleep - 1) / sleep) * sleep;
  co_await sim.delay(check - t0);
  record(ch, "d2d", d.res_hbm, tag, t0, t0, done, bytes);
  record(ch, "sleep_poll", res_driver_, tag, done, done, check);
}

void check_copy(const K200& k, const CopySpec& s, int cards, const std::vector<int>& dies) {
  (void)k;
  if (s.bytes <= 0) throw UsageError("K200 copy: bytes must be > 0, got " + std::to_string(s.bytes));
  topology::check_transfer_size(s.bytes, "K200 copy");
  const auto check_die = [&](DieRef d, const char* what) {
    if (d.card < 0 || d.card >= cards)
      throw UsageError(std::string("K200 copy: ") + what + " card " + std::to_string(d.card) +
                       " does not exist (the config has " + std::to_string(cards) + " cards)");
    if (d.die < 0 || d.die >= dies[static_cast<std::size_t>(d.card)])
      throw UsageError(std::string("K200 copy: ") + what + " card" + std::to_string(d.card) + " has no die " +
                       std::to_string(d.die));
  };
  check_die(s.die, "source/device");
  const bool peer =
      s.kind == CopyKind::PeerSameCard || s.kind == CopyKind::PeerCrossCard || s.kind == CopyKind::CrossCardStaged;
  if (!peer) return;
  check_die(s.peer, "destination");
  if (s.die == s.peer)
    throw UsageError("K200 peer copy: source and destination are the same die (" + die_name(s.die) +
                     "); use kind 'd2d'");
  if ((s.kind == CopyKind::PeerSameCard || s.kind == CopyKind::PeerCrossCard) && s.die.card != s.peer.card)
    throw UsageError("K200 peer copy " + die_name(s.die) + " -> " + die_name(s.peer) +
                     " refused by the driver (error 807, XPUERR_NOPEER: no peer access across cards): stage it "
                     "through host memory (kind 'cross_card_staged')");
  if (s.kind == CopyKind::PeerCrossCard)
    throw UsageError("K200 peer copy kind 'peer_cross_card' names dies of one card (" + die_name(s.die) + ", " +
                     die_name(s.peer) + "); use kind 'peer'");
  if (s.kind == CopyKind::CrossCardStaged && s.die.card == s.peer.card)
    throw UsageError("K200 cross-card staged copy: " + die_name(s.die) + " and " + die_name(s.peer) +
                     " are on the same card; use kind 'peer'");
}

sim::Task<void> K200::copy_task(Chain& ch, CopySpec spec, std::int32_t tag, std::string* path) {
  switch (spec.kind) {
    case CopyKind::Pinned: co_await copy_pinned(ch, spec.die, spec.dir, spec.bytes, tag, path); break;
    case CopyKind::Pageable: co_await copy_pageable(ch, spec.die, spec.dir, spec.bytes, tag, path); break;
    case CopyKind::Stock:
      if (path)
        *path =
            "stock driver: bounce serial in " + std::to_string(cfg_.driver.stock_bounce / sim::kKiB) + " KiB chunks";
      co_await delay_op(ch, "call", res_driver_, tag, cfg_.driver.pageable_call_overhead);
      co_await bounce_serial(ch, spec.die, spec.dir, spec.bytes, cfg_.driver.stock_bounce, tag);
      break;
    case CopyKind::PeerSameCard: co_await peer_same_card(ch, spec.die, spec.peer, spec.bytes, tag, path); break;
    case CopyKind::PeerCrossCard: break;  // refused by check_copy
    case CopyKind::CrossCardStaged:
      if (path) *path = "cross-card staged through host pinned buffers";
      co_await cross_card_staged(ch, spec.die, spec.peer, spec.bytes, tag);
      break;
    case CopyKind::D2D:
      if (path) *path = "d2d (sleep-polled completion)";
      co_await d2d(ch, spec.die, spec.bytes, tag);
      break;
  }
}

void K200::check(const CopySpec& spec) {
  std::vector<int> dies;
  for (int c = 0; c < cards(); ++c) dies.push_back(dies_per_card(c));
  check_copy(*this, spec, cards(), dies);
  // The page-pin path is one eDMA per page: refuse sizes that would take
  // hundreds of millions of ops (minutes of wall time) instead of hanging.
  const auto& drv = cfg_.driver;
  constexpr sim::Bytes kMaxPinnedPages = sim::Bytes{1} << 22;
  const sim::Bytes pages = (spec.bytes + drv.page - 1) / drv.page;
  const bool pins = drv.kl1_pageable_pin && spec.bytes >= drv.pin_min &&
                    (spec.kind == CopyKind::Pageable || (spec.kind == CopyKind::Pinned && !drv.kl1_dma_direct));
  if (pins && pages > kMaxPinnedPages)
    throw UsageError("K200 copy: kl1_pageable_pin=1 moves " + std::to_string(spec.bytes) + " B as " +
                     std::to_string(pages) + " one-page eDMAs; the model takes at most " +
                     std::to_string(kMaxPinnedPages) + " (16 GiB of 4 KiB pages)");
}

RunReport K200::copy(const CopySpec& spec) { return copies({spec}); }

RunReport K200::copies(const std::vector<CopySpec>& specs) {
  if (specs.empty()) throw UsageError("K200 copies: no copy given");
  for (const CopySpec& spec : specs) check(spec);
  const Snapshot s = snapshot();
  std::vector<std::string> paths(specs.size());
  std::vector<Chain> chains(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i)
    system_.sim().spawn(std::string("k200.copy.") + to_string(specs[i].kind) + "#" + std::to_string(i),
                        top(copy_task(chains[i], specs[i], static_cast<std::int32_t>(i), &paths[i])));
  run_to_completion();
  RunReport r = report(s);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    r.bytes += specs[i].bytes;
    r.path += (i ? "; " : "") + paths[i];
  }
  return r;
}

}  // namespace kernbench::platforms::k200
