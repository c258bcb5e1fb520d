// test_k200.cpp -- the K200 protocol model against the reference figures.
#include <catch2/catch.hpp>

#include <filesystem>

#include "kernbench.hpp"
#include "platforms/k200/config_section.hpp"
#include "platforms/k200/k200.hpp"
#include "platforms/k200/workload.hpp"
#include "sim/errors.hpp"
#include "topology/config/loader.hpp"

using namespace kernbench;
using namespace kernbench::platforms::k200;

namespace {

std::string k200_yaml() {
  return (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "configs" / "k200.yaml").string();
}

topology::Config k200_config(const std::vector<topology::Override>& o = {}) {
  return kernbench::load_config(k200_yaml(), o);
}

/// Measured GiB/s of the reference (shared/reference/k200-measured.md).
struct Row {
  const char* name;
  CopyKind kind;
  std::vector<topology::Override> knobs;
  double h2d[4], d2h[4];  // 1 MiB, 64 MiB, 256 MiB, 1 GiB
};

const std::vector<Row>& reference_rows() {
  static const std::vector<Row> rows = {
      {"pinned", CopyKind::Pinned, {}, {11.8, 12.5, 12.5, 5.6}, {12.0, 12.9, 12.9, 5.0}},
      {"pageable pipeline on", CopyKind::Pageable, {}, {5.03, 9.95, 10.11, 10.16}, {5.59, 7.70, 7.85, 7.83}},
      {"pageable pipeline off",
       CopyKind::Pageable,
       {{"k200.driver.kl1_bounce_pipe", "0"}},
       {5.03, 5.53, 5.53, 5.58},
       {5.41, 4.92, 4.91, 4.92}},
      {"stock driver pageable", CopyKind::Stock, {}, {3.90, 4.27, 4.27, 4.28}, {4.36, 4.38, 4.40, 4.40}},
  };
  return rows;
}

double copy_gib(CopyKind kind, Direction dir, sim::Bytes bytes, const std::vector<topology::Override>& o = {}) {
  topology::System sys(k200_config(o));
  K200 k(sys);
  CopySpec s;
  s.kind = kind;
  s.dir = dir;
  s.bytes = bytes;
  if (kind == CopyKind::PeerSameCard) s.peer = {0, 1};
  return k.copy(s).gib_per_s();
}

}  // namespace

// The orderings every K200 measurement shows (configs/k200.measured.yaml), held by the model over the
// whole table: these were printed tables once; `kernbench calibrate --check configs/k200.yaml` prints the
// figures against their measurements.
TEST_CASE("K200 copies keep the measured orderings: pinned > pageable > stock, the pipeline, P2P's rise", "[k200]") {
  const sim::Bytes M = sim::kMiB;
  for (auto dir : {Direction::H2D, Direction::D2H}) {
    for (sim::Bytes b : {64 * M, 256 * M}) {
      INFO(to_string(dir) << " " << b / M << " MiB");
      const double pinned = copy_gib(CopyKind::Pinned, dir, b), pageable = copy_gib(CopyKind::Pageable, dir, b),
                   stock = copy_gib(CopyKind::Stock, dir, b);
      CHECK(pinned > pageable);
      CHECK(pageable > stock);
      // The bounce pipeline overlaps the staging copy with the DMA: off, pageable copies are slower.
      CHECK(copy_gib(CopyKind::Pageable, dir, b, {{"k200.driver.kl1_bounce_pipe", "0"}}) < pageable);
    }
    // Pinning every page on the fly costs far more than it saves (0.44 / 0.69 GiB/s measured).
    CHECK(copy_gib(CopyKind::Pageable, dir, 64 * M, {{"k200.driver.kl1_pageable_pin", "1"}}) <
          0.2 * copy_gib(CopyKind::Pageable, dir, 64 * M));
  }
  // Same-card P2P rises with size (5.95 GiB/s at 1 MiB to 11.3 at 512 MiB measured) and never falls.
  double last = 0.0;
  for (sim::Bytes b : {M, 4 * M, 16 * M, 64 * M, 256 * M, 512 * M}) {
    const double g = copy_gib(CopyKind::PeerSameCard, Direction::D2H, b);
    CHECK(g >= last);
    last = g;
  }
  CHECK(last > 1.5 * copy_gib(CopyKind::PeerSameCard, Direction::D2H, M));
}

TEST_CASE("K200 launch, dispatch and GEMM keep the measured orderings", "[k200]") {
  double launch1 = 0.0;
  for (int threads : {1, 4}) {
    topology::System sys(k200_config());
    K200 k(sys);
    KernelSpec add{KernelSpec::Kind::Elementwise, 5120};
    add.ncluster = 4;
    const auto st = k.launch_test(threads, 10, 100, add);
    INFO("threads " << threads);
    CHECK(st.launch_us > 0.0);
    CHECK(st.per_kernel_us >= st.launch_us);  // a loop of launches cannot outrun its launch calls
    CHECK(st.single_us > st.launch_us);       // one kernel alone: its launch, then the wait for it
    if (threads == 1)
      launch1 = st.launch_us;
    else
      CHECK(st.launch_us >= launch1);  // more threads share the driver: no faster per launch
    topology::System sys2(k200_config());
    K200 k2(sys2);
    const auto d = k2.dispatch_test(threads, 100, add);
    CHECK(d.round_trip_us >= d.launch_us);
    CHECK(d.round_trip_us > 0.0);
  }
  // A bigger elementwise kernel waits longer (11.7 us at 128 elements, 29.6 at 5120 measured, 1 cluster).
  const auto single = [](int n, int nc) {
    topology::System sys(k200_config());
    K200 k(sys);
    KernelSpec add;
    add.elements = n;
    add.ncluster = nc;
    return k.launch_test(1, 1, 1, add).single_us;
  };
  CHECK(single(5120, 1) > single(128, 1));
  const auto gflops = [](std::int64_t mn, std::int64_t kk, topology::Precision prec, int nc) {
    topology::System sys(k200_config());
    K200 k(sys);
    return k.gemm({KernelSpec::Kind::Gemm, 0, mn, mn, kk, prec, nc}).gflops();
  };
  // FP16 beats FP32 on the same square (20100 vs 7800 GFLOPS at 2048 measured); a small square is slower
  // per FLOP than a large one (launch and dispatch amortised).
  CHECK(gflops(2048, 2048, topology::Precision::Fp16, 4) > gflops(2048, 2048, topology::Precision::Fp32, 0));
  for (auto prec : {topology::Precision::Fp32, topology::Precision::Fp16}) {
    CHECK(gflops(512, 512, prec, 4) < gflops(2048, 2048, prec, 4));
    for (int kk : {128, 512, 2048, 8192}) CHECK(gflops(2048, kk, prec, 4) > 0.0);
  }
}

TEST_CASE("K200 config: the k200 section is typed strictly", "[k200]") {
  REQUIRE_NOTHROW(k200_config());
  const topology::Config c = k200_config();
  REQUIRE(config_of(c));
  CHECK(config_of(c)->driver.kl1_bounce_pipe == 1);
  CHECK(config_of(c)->driver.poll_period == 2 * sim::kMicrosecond);
  CHECK(config_of(c)->driver.hugepage == 2 * sim::kMiB);
  REQUIRE_THROWS_WITH(k200_config({{"k200.driver.kl1_bounce_pipe", "3"}}),
                      Catch::Contains("k200.driver.kl1_bounce_pipe") && Catch::Contains("expected one of 0, 1"));
  REQUIRE_THROWS_WITH(k200_config({{"k200.driver.kl1_bounce_d2h", "0"}}), Catch::Contains("expected one of 1, 2"));
  REQUIRE_THROWS_WITH(k200_config({{"k200.driver.poll_perod", "2 us"}}),
                      Catch::Contains("unknown key") && Catch::Contains("poll_period"));
  REQUIRE_THROWS_WITH(k200_config({{"k200.host.copy_to_user", "7"}}), Catch::Contains("k200.host.copy_to_user"));
  REQUIRE_THROWS_WITH(k200_config({{"k200.compute.fp16_efficiency", "120"}}), Catch::Contains("percentage"));
  REQUIRE_THROWS_WITH(k200_config({{"k200.edma.channels_per_die", "9"}}), Catch::Contains("channels_per_die"));
  // The link's graph bandwidth must be what k200.pcie derives.
  topology::System sys(k200_config({{"k200.pcie.lanes", "16"}}));
  REQUIRE_THROWS_WITH(K200(sys), Catch::Contains("derives") && Catch::Contains("host.rc"));
}

TEST_CASE("K200 PCIe arithmetic: line and payload rates", "[k200]") {
  topology::System sys(k200_config());
  K200 k(sys);
  CHECK(k.pcie_line_bytes_per_s() == Approx(16e9 * 8 / 8 * 128.0 / 130.0));
  CHECK(k.pcie_payload_bytes_per_s() == Approx(k.pcie_line_bytes_per_s() * 256.0 / 280.0));
  CHECK(k.wire_bytes(256) == 280);
  CHECK(k.wire_bytes(257) == 257 + 48);
}

TEST_CASE("K200 pinned copy follows its closed form", "[k200]") {
  // call, then one 2 MiB segment: map, eDMA (setup + TLPs on the line rate
  // + wire latencies), completion seen at the next 2 us poll tick, unmap.
  topology::System sys(k200_config());
  K200 k(sys);
  const auto& d = k.config().driver;
  CopySpec s;
  s.kind = CopyKind::Pinned;
  s.dir = Direction::D2H;
  s.bytes = 2 * sim::kMiB;
  const RunReport r = k.copy(s);
  const sim::Time half = (d.segment_overhead + 512 * d.map_per_page) / 2;
  const sim::Time wire = sim::transfer_time(k.wire_bytes(s.bytes), sim::Bandwidth{15'753'846'000});
  const sim::Time latency = (100 + 50 + 300 + 100) * sim::kNanosecond;  // hbm, card link, pcie, host bus
  const sim::Time done = d.call_overhead + half + d.edma_setup + wire + latency;
  const sim::Time seen = (done + d.poll_period - 1) / d.poll_period * d.poll_period;
  CHECK(r.elapsed() == seen + half);
  CHECK(r.path == "pinned direct");
  // H2D adds the read round trip.
  topology::System sys2(k200_config());
  K200 k2(sys2);
  s.dir = Direction::H2D;
  const sim::Time done2 = done + k2.config().pcie.read_latency;
  CHECK(k2.copy(s).elapsed() == (done2 + d.poll_period - 1) / d.poll_period * d.poll_period + half);
}

TEST_CASE("K200 reproduces the reference copy table", "[k200]") {
  const sim::Bytes sizes[4] = {sim::kMiB, 64 * sim::kMiB, 256 * sim::kMiB, sim::kGiB};
  for (const Row& row : reference_rows()) {
    for (auto dir : {Direction::H2D, Direction::D2H}) {
      const double* ref = dir == Direction::H2D ? row.h2d : row.d2h;
      for (int i = 0; i < 4; ++i) {
        const double model = copy_gib(row.kind, dir, sizes[i], row.knobs);
        INFO(row.name << " " << to_string(dir) << " " << sizes[i] / sim::kMiB << " MiB: model " << model
                      << " GiB/s, measured " << ref[i]);
        // The 5 % bound: every row at 256 MiB, and the 64 MiB and
        // 1 GiB columns too. 1 MiB points are predictions (docs/k200.md
        // lists their errors): within 25 %, except the known miss below.
        if (i >= 1)
          CHECK(model == Approx(ref[i]).epsilon(0.05));
        else if (!(dir == Direction::D2H && row.kind == CopyKind::Pageable))
          CHECK(model == Approx(ref[i]).epsilon(0.25));
        else  // known miss: 1 MiB pageable D2H measured faster than steady state (cache-warm copy_to_user)
          CHECK(model < ref[i]);
      }
    }
  }
}

TEST_CASE("K200 same-card P2P matches the reference at every size", "[k200]") {
  const std::pair<sim::Bytes, double> ref[] = {{1, 5.95},   {4, 9.24},    {16, 10.73},
                                               {64, 11.20}, {256, 11.31}, {512, 11.32}};
  for (auto [mib, gib] : ref) {
    INFO(mib << " MiB");
    CHECK(copy_gib(CopyKind::PeerSameCard, Direction::D2H, mib * sim::kMiB) == Approx(gib).epsilon(0.05));
  }
  // kl1_p2p_stub=1: the user-space fallback, ~2.5 GB/s before the fix.
  const double stub =
      copy_gib(CopyKind::PeerSameCard, Direction::D2H, 64 * sim::kMiB, {{"k200.driver.kl1_p2p_stub", "1"}});
  CHECK(stub == Approx(2.5).epsilon(0.15));
}

TEST_CASE("K200 driver knobs change the path and the figures", "[k200]") {
  const sim::Bytes big = 64 * sim::kMiB;
  for (auto dir : {Direction::H2D, Direction::D2H}) {
    const double on = copy_gib(CopyKind::Pageable, dir, big);
    const double off = copy_gib(CopyKind::Pageable, dir, big, {{"k200.driver.kl1_bounce_pipe", "0"}});
    const double pin = copy_gib(CopyKind::Pageable, dir, big, {{"k200.driver.kl1_pageable_pin", "1"}});
    CHECK(off < 0.75 * on);  // pipeline off -> serial: memcpy and eDMA no longer overlap
    CHECK(pin < 0.2 * off);  // one eDMA per 4 KiB page
    // Up to the pipe threshold the knob changes nothing: both take the serial path.
    CHECK(copy_gib(CopyKind::Pageable, dir, sim::kMiB) ==
          copy_gib(CopyKind::Pageable, dir, sim::kMiB, {{"k200.driver.kl1_bounce_pipe", "0"}}));
    // Below pin_min, pinning does not apply.
    CHECK(copy_gib(CopyKind::Pageable, dir, 32 * sim::kKiB) ==
          copy_gib(CopyKind::Pageable, dir, 32 * sim::kKiB, {{"k200.driver.kl1_pageable_pin", "1"}}));
  }
  // Page pinning: the per-page eDMA figure of the reference (D2H 0.69 GB/s).
  CHECK(copy_gib(CopyKind::Pageable, Direction::D2H, big, {{"k200.driver.kl1_pageable_pin", "1"}}) ==
        Approx(0.69).epsilon(0.05));
  // Direct DMA off: pinned buffers bounce like pageable ones.
  topology::System sys(k200_config({{"k200.driver.kl1_dma_direct", "0"}}));
  K200 k(sys);
  CopySpec s;
  s.bytes = big;
  const RunReport r = k.copy(s);
  CHECK_THAT(r.path, Catch::Contains("kl1_dma_direct=0") && Catch::Contains("bounce pipeline"));
  CHECK(r.gib_per_s() == Approx(copy_gib(CopyKind::Pageable, Direction::H2D, big)).epsilon(1e-9));
  // D2H mode 2 keeps two eDMAs in flight: no gain while copy_to_user bounds
  // the pipeline (as measured), a gain once the eDMA side is the bound.
  CHECK(copy_gib(CopyKind::Pageable, Direction::D2H, big, {{"k200.driver.kl1_bounce_d2h", "2"}}) ==
        Approx(copy_gib(CopyKind::Pageable, Direction::D2H, big)).epsilon(0.02));
  const topology::Override fast_cpu{"k200.host.copy_to_user", "40 GiB/s"};
  CHECK(copy_gib(CopyKind::Pageable, Direction::D2H, big, {fast_cpu, {"k200.driver.kl1_bounce_d2h", "2"}}) >
        1.03 * copy_gib(CopyKind::Pageable, Direction::D2H, big, {fast_cpu}));
}

TEST_CASE("K200 pinned copies fall back to the bounce path when the hugepage pool runs out", "[k200]") {
  for (auto dir : {Direction::H2D, Direction::D2H}) {
    topology::System sys(k200_config());
    K200 k(sys);
    CopySpec s;
    s.dir = dir;
    s.bytes = sim::kGiB;
    const RunReport r = k.copy(s);
    CHECK_THAT(r.path, Catch::Contains("hugepage pool exhausted"));
    // ... and then runs exactly the serial bounce figures.
    CHECK(r.gib_per_s() ==
          Approx(copy_gib(CopyKind::Pageable, dir, sim::kGiB, {{"k200.driver.kl1_bounce_pipe", "0"}})).epsilon(0.01));
    // With a pool that holds it, 1 GiB goes direct.
    const double direct = copy_gib(CopyKind::Pinned, dir, sim::kGiB, {{"k200.driver.hugepage_pool", "2 GiB"}});
    CHECK(direct > 2 * r.gib_per_s());
    CHECK(direct == Approx(copy_gib(CopyKind::Pinned, dir, 256 * sim::kMiB)).epsilon(0.01));
  }
  // The boundary: the pool holds exactly 512 MiB.
  CHECK(copy_gib(CopyKind::Pinned, Direction::H2D, 512 * sim::kMiB) > 12.0);
  CHECK(copy_gib(CopyKind::Pinned, Direction::H2D, 512 * sim::kMiB + 1) < 6.0);
}

TEST_CASE("K200 cross-card peer copies are refused; staging through the host works", "[k200]") {
  topology::System sys(k200_config());
  K200 k(sys);
  CopySpec s;
  s.kind = CopyKind::PeerSameCard;
  s.bytes = 16 * sim::kMiB;
  s.die = {0, 0};
  s.peer = {1, 0};
  REQUIRE_THROWS_AS(k.copy(s), UsageError);
  REQUIRE_THROWS_WITH(k.copy(s), Catch::Contains("error 807") && Catch::Contains("card0.die0 -> card1.die0") &&
                                     Catch::Contains("cross_card_staged"));
  s.kind = CopyKind::PeerCrossCard;
  REQUIRE_THROWS_WITH(k.copy(s), Catch::Contains("error 807"));
  s.kind = CopyKind::CrossCardStaged;
  const RunReport r = k.copy(s);
  CHECK(r.gib_per_s() > 5.0);
  CHECK(r.gib_per_s() < k.pcie_payload_bytes_per_s() / sim::kGiB);
  s.peer = {0, 0};
  s.kind = CopyKind::PeerSameCard;
  REQUIRE_THROWS_WITH(k.copy(s), Catch::Contains("same die"));
  s.peer = {3, 0};
  REQUIRE_THROWS_WITH(k.copy(s), Catch::Contains("card 3 does not exist"));
}

TEST_CASE("K200 multi-card scaling: no shared bottleneck is linear, a shared link is not", "[k200]") {
  const sim::Bytes b = 64 * sim::kMiB;
  for (auto kind : {CopyKind::Pinned, CopyKind::Pageable}) {
    topology::System one_sys(k200_config());
    K200 one(one_sys);
    CopySpec s;
    s.kind = kind;
    s.bytes = b;
    const double single = one.copy(s).gib_per_s();
    // One process per card: each brings its own copy thread.
    topology::System two_sys(k200_config({{"k200.host.copy_threads", "2"}}));
    K200 two(two_sys);
    CopySpec t = s;
    t.die = {1, 0};
    const RunReport both = two.copies({s, t});
    CHECK(both.gib_per_s() == Approx(2 * single).epsilon(0.01));
  }
  // Two dies of one card share its x8 link.
  topology::System sys(k200_config());
  K200 k(sys);
  CopySpec a;
  a.bytes = b;
  CopySpec c = a;
  c.die = {0, 1};
  const RunReport shared = k.copies({a, c});
  CHECK(shared.gib_per_s() < 1.1 * copy_gib(CopyKind::Pinned, Direction::H2D, b));
  CHECK(shared.gib_per_s() <= k.pcie_payload_bytes_per_s() / sim::kGiB);
  CHECK(shared.bound == "card0.pcie_down");
}

TEST_CASE("K200 launch and dispatch against the vendor test", "[k200]") {
  topology::System sys(k200_config());
  K200 k(sys);
  KernelSpec add;
  add.elements = 5120;
  // The vendor loop ran at ncluster 4: the reference's waits are at 1 and 4,
  // and at 1 a 5120-element kernel alone takes 29.6 us, more than the loop's
  // 19.3 per kernel. Predicted (no parameter fitted on it).
  add.ncluster = 4;
  const auto one = k.launch_test(1, 10, 100, add);
  CHECK(one.launch_us == Approx(2.25).epsilon(0.05));  // ref 2.05-2.46
  CHECK(one.per_kernel_us == Approx(19.3).epsilon(0.05));
  topology::System sys4(k200_config());
  K200 k4(sys4);
  const auto four = k4.launch_test(4, 10, 100, add);
  CHECK(four.launch_us >= 2.19);  // ref 2.19-2.61: threads contend for the device queue
  CHECK(four.launch_us <= 2.61);
  // Threads launching together queue for the command queue: 4 x queue_submit
  // per launch in steady state (2.4 us), and the first launches wait longer.
  topology::System sys_burst(k200_config());
  K200 burst(sys_burst);
  CHECK(burst.launch_test(4, 3, 1, add).launch_us == Approx((2.25 + 2.85 + 3.45 + 4.05 + 8 * 2.4) / 12).epsilon(1e-9));
  // Single-kernel waits (elementwise add, ncluster 1 / 4).
  const std::tuple<int, int, double, double> waits[] = {
      {128, 1, 11.7, 0.01}, {128, 4, 14.0, 0.01}, {5120, 1, 29.6, 0.01}, {5120, 4, 20.6, 0.01}};
  for (auto [n, nc, ref, eps] : waits) {
    topology::System s1(k200_config());
    K200 k1(s1);
    KernelSpec e;
    e.elements = n;
    e.ncluster = nc;
    INFO(n << " elements, ncluster " << nc);
    CHECK(k1.launch_test(1, 1, 1, e).wait_us == Approx(ref).epsilon(eps));
  }
  REQUIRE_THROWS_WITH(k.launch_test(65, 1, 1, add), Catch::Contains("65 threads need a stream each"));
  add.ncluster = 9;
  REQUIRE_THROWS_WITH(k.launch_test(1, 1, 1, add), Catch::Contains("ncluster 9"));
}

TEST_CASE("K200 dispatch: the synchronous round trip per thread, a stream each", "[k200]") {
  // The repo's "dispatch ~26 us (1 thread) / ~25 us (4 threads)" is
  // untraceable (ref: approximate, 15 %); no parameter is fitted on it. The
  // model's round trip of the vendor kernel (5120 elements, ncluster 4) is
  // launch + single-kernel wait, both fitted on traceable figures: 2.25 +
  // 20.6 = 22.85 us, 12 % under 26; with 4 threads the streams fetch side by
  // side and two 4-cluster kernels share the die's 8 clusters, so a thread's
  // round trip barely grows (22.9 us, 8 % under 25).
  KernelSpec add;
  add.elements = 5120;
  add.ncluster = 4;
  const auto run = [&](int threads) {
    topology::System sys(k200_config());
    K200 k(sys);
    return k.dispatch_test(threads, 100, add);
  };
  const auto one = run(1);
  CHECK(one.round_trip_us == Approx(26.0).epsilon(0.15));
  CHECK(one.round_trip_us == Approx(2.25 + 20.6).epsilon(0.002));  // launch + wait: nothing else on one stream
  CHECK(one.per_command_us == Approx(one.round_trip_us).epsilon(1e-9));
  const auto four = run(4);
  CHECK(four.round_trip_us == Approx(25.0).epsilon(0.15));
  CHECK(four.round_trip_us >= one.round_trip_us);  // threads only add contention
  CHECK(four.round_trip_us < 1.05 * one.round_trip_us);
  CHECK(four.per_command_us < one.per_command_us / 3.5);  // 4 streams overlap almost fully
  // Kernels that take every cluster cannot overlap: 4 threads at ncluster 8
  // queue for the clusters: one kernel's cluster time after another (8 x
  // 0.863 + 640 x 3.018 ns + 5120 x 0.568 ns = 11.74 us each).
  add.ncluster = 8;
  topology::System s8(k200_config());
  K200 k8(s8);
  const auto four8 = k8.dispatch_test(4, 50, add);
  CHECK(four8.per_command_us == Approx(8 * 0.863 + 640 * 3.018e-3 + 5120 * 0.568e-3).epsilon(0.01));
  REQUIRE_THROWS_WITH(k8.dispatch_test(0, 1, add), Catch::Contains("threads and commands must be >= 1"));
  REQUIRE_THROWS_WITH(k8.dispatch_test(65, 1, add), Catch::Contains("65 threads need a stream each"));
}

TEST_CASE("K200 streams: in order each, waits per stream, clusters shared", "[k200]") {
  // Stream 0 gets a long kernel (5120 elements, nc 4), stream 1 a short one
  // (128, nc 4): on disjoint clusters they run side by side, and a wait on
  // stream 1 returns when its kernel is done, not when the die is idle.
  topology::System sys(k200_config());
  K200 k(sys);
  sim::Simulation& sim = sys.sim();
  KernelSpec big, small;
  big.elements = 5120;
  big.ncluster = 4;
  small.elements = 128;
  small.ncluster = 4;
  Time short_done = 0, long_done = 0, die_done = 0;
  runtime::Chain ca, cb, cc;  // each thread's ops
  auto a = [&]() -> sim::Task<void> {
    co_await k.launch_task(ca, 0, {0, 0}, big, 0);
    co_await k.stream_wait_task(ca, 0, {0, 0}, 0);
    long_done = sim.now();
  };
  auto b = [&]() -> sim::Task<void> {
    co_await k.launch_task(cb, 1, {0, 0}, small, 1);
    co_await k.stream_wait_task(cb, 1, {0, 0}, 1);
    short_done = sim.now();
  };
  auto c = [&]() -> sim::Task<void> {
    co_await sim.delay(3 * sim::kMicrosecond);  // after both launches
    co_await k.wait_task(cc, 2, {0, 0});
    die_done = sim.now();
  };
  sim.spawn("a", top(a()));
  sim.spawn("b", top(b()));
  sim.spawn("c", top(c()));
  k.run_to_completion();
  // Launches: thread 0 first (2.25 us), thread 1 queues 0.6 us for the command queue.
  CHECK(sim::to_seconds(long_done) * 1e6 == Approx(2.25 + 20.601).epsilon(1e-3));
  CHECK(sim::to_seconds(short_done) * 1e6 == Approx(2.85 + 13.999).epsilon(1e-3));
  CHECK(die_done == long_done);  // the die-wide wait covers both streams
  // One stream is in order: two kernels back to back, the second fetched after the first finished.
  topology::System s2(k200_config());
  K200 k2(s2);
  const auto st = k2.launch_test(1, 2, 1, small);
  CHECK(st.wait_us == Approx(2 * (13.999 - 2.0) - 2.25 + 2.0).epsilon(1e-3));
  KernelSpec e = small;
  runtime::Chain cd;
  auto bad = [&]() -> sim::Task<void> { co_await k2.launch_task(cd, 0, {0, 0}, e, 64); };
  s2.sim().spawn("bad", top(bad()));
  REQUIRE_THROWS_WITH(k2.run_to_completion(), Catch::Contains("stream 64 is outside 0..63"));
}

TEST_CASE("K200 elementwise kernel: per-cluster and serial parts (closed form)", "[k200]") {
  // By bytes: 3 tensors of n elements x 4 B (FP32) = 12 B per element, each cluster its share at
  // 3.976143 GB/s (3.018 ns per element) and the whole at 21.12676 GB/s (0.568 ns per element):
  // wait = dispatch_base + nc x dispatch_per_cluster + ceil(n / nc) x 3.018 ns
  //        + n x 0.568 ns + wait_overhead; the speedup over clusters
  //        saturates at (3.018 + 0.568) / 0.568 = 6.3x for large n. FP16 moves half the bytes.
  const auto wait_us = [](std::int64_t n, int nc, topology::Precision p = topology::Precision::Fp32) {
    topology::System sys(k200_config());
    K200 k(sys);
    KernelSpec e;
    e.elements = n;
    e.ncluster = nc;
    e.precision = p;
    return k.launch_test(1, 1, 1, e).wait_us;
  };
  for (auto [n, nc] : {std::pair<std::int64_t, int>{1000, 3}, {1 << 20, 8}, {1 << 20, 1}}) {
    INFO(n << " elements, ncluster " << nc);
    const double data = static_cast<double>((n + nc - 1) / nc) * 3.018e-3 + n * 0.568e-3;
    const double expect = 8.378 + nc * 0.863 + data + 2;
    CHECK(wait_us(n, nc) == Approx(expect).epsilon(1e-6));
    CHECK(wait_us(n, nc, topology::Precision::Fp16) == Approx(expect - data / 2).epsilon(1e-6));
  }
  const double k1 = wait_us(1 << 24, 1), k8 = wait_us(1 << 24, 8);
  CHECK(k1 / k8 < (3.018 + 0.568) / (3.018 / 8 + 0.568));
  CHECK(k1 / k8 > 0.99 * (3.018 + 0.568) / (3.018 / 8 + 0.568));
}

TEST_CASE("K200 GEMM on a die against the reference", "[k200]") {
  const auto gflops = [](int m, int n, int kk, topology::Precision p, int nc) {
    topology::System sys(k200_config());
    K200 k(sys);
    KernelSpec g;
    g.kind = KernelSpec::Kind::Gemm;
    g.m = m;
    g.n = n;
    g.k = kk;
    g.precision = p;
    g.ncluster = nc;
    return k.gemm(g).gflops();
  };
  using topology::Precision;
  CHECK(gflops(2048, 2048, 2048, Precision::Fp16, 4) == Approx(20100).epsilon(0.05));
  CHECK(gflops(2048, 2048, 2048, Precision::Fp32, 0) == Approx(7800).epsilon(0.05));
  // Predictions: the FP32 square series and the K spill.
  CHECK(gflops(1024, 1024, 1024, Precision::Fp32, 0) == Approx(5800).epsilon(0.10));
  CHECK(gflops(8192, 8192, 8192, Precision::Fp32, 0) == Approx(4500).epsilon(0.10));
  CHECK(gflops(2048, 2048, 8192, Precision::Fp32, 0) < 0.7 * gflops(2048, 2048, 2048, Precision::Fp32, 0));
  CHECK(gflops(4096, 4096, 4096, Precision::Fp16, 4) == Approx(22600).epsilon(0.10));
  topology::System sys(k200_config());
  K200 k(sys);
  KernelSpec g;
  g.kind = KernelSpec::Kind::Gemm;
  g.m = g.n = g.k = 512;
  g.precision = Precision::Int8;
  REQUIRE_THROWS_AS(k.gemm(g), UsageError);
  REQUIRE_THROWS_WITH(k.gemm(g), Catch::Contains("no int8 GEMM kernel on KL1"));
  g.precision = Precision::Fp16;
  g.k = 0;
  REQUIRE_THROWS_WITH(k.gemm(g), Catch::Contains("must be > 0"));
  g.m = g.n = g.k = 40000;  // 3 x 40000^2 x 2 B = 8.9 GiB > 8 GiB
  REQUIRE_THROWS_AS(k.gemm(g), CapacityError);
  REQUIRE_THROWS_WITH(k.gemm(g), Catch::Contains("HBM holds 8 GiB"));
}

TEST_CASE("K200 GEMM mechanism: micro-tiles on cores, K steps, the operand scan", "[k200]") {
  using topology::Precision;
  topology::System sys(k200_config());
  K200 k(sys);
  const auto& c = k.config().compute;
  REQUIRE(c.core_tile_m == 16);
  REQUIRE(c.core_tile_n == 16);
  REQUIRE(c.core_tile_k == 32);
  REQUIRE(c.cores_per_cluster == 16);
  const auto spec = [](std::int64_t m, std::int64_t n, std::int64_t kk, Precision p) {
    KernelSpec g;
    g.kind = KernelSpec::Kind::Gemm;
    g.m = m;
    g.n = n;
    g.k = kk;
    g.precision = p;
    return g;
  };
  // M = 1 computes a whole 16-row micro-tile: the same wave time as M = 16, 1/16 of the useful work.
  const GemmPlan m1 = k.plan_gemm(spec(1, 2048, 2048, Precision::Fp32));
  const GemmPlan m16 = k.plan_gemm(spec(16, 2048, 2048, Precision::Fp32));
  CHECK(m1.compute_per_wave == m16.compute_per_wave);
  CHECK(m1.tile_utilization == Approx(m16.tile_utilization / 16));
  // K = 100 runs in steps of 32: it costs K = 128.
  const GemmPlan k100 = k.plan_gemm(spec(256, 256, 100, Precision::Fp32));
  const GemmPlan k128 = k.plan_gemm(spec(256, 256, 128, Precision::Fp32));
  CHECK(k100.k_padded == 128);
  CHECK(k100.compute_per_wave == k128.compute_per_wave);
  // 18 micro-tiles on 16 cores take 2 rounds, 16 take 1: N = 136 costs twice N = 128.
  const GemmPlan n136 = k.plan_gemm(spec(32, 136, 2048, Precision::Fp32));
  const GemmPlan n128 = k.plan_gemm(spec(32, 128, 2048, Precision::Fp32));
  CHECK(n136.core_tiles == 18);
  CHECK(n136.core_rounds == 2);
  CHECK(n128.core_rounds == 1);
  CHECK(n136.compute_per_wave == Approx(2.0 * static_cast<double>(n128.compute_per_wave)).margin(1));
  // The closed form of one wave: rounds x 2 tm tn Kp / (core peak x efficiency), up to the picosecond.
  const double core_peak = 2000.0 * 900e6 / 16;
  const double wave_s = 1 * 2.0 * 16 * 16 * 2048 / (core_peak * c.fp32_efficiency / 100.0);
  CHECK(static_cast<double>(n128.compute_per_wave) == Approx(wave_s * 1e12).margin(1));
  // The scan reads A and B once at operand_scan_bandwidth: bytes follow the element size.
  const GemmPlan f32 = k.plan_gemm(spec(32, 2048, 2048, Precision::Fp32));
  const GemmPlan f16 = k.plan_gemm(spec(32, 2048, 2048, Precision::Fp16));
  CHECK(f32.scan_bytes == (32 * 2048 + 2048 * 2048) * 4);
  CHECK(f32.scan_bytes == 2 * f16.scan_bytes);
  CHECK(f32.scan_time == sim::transfer_time(f32.scan_bytes, c.operand_scan_bandwidth));
  // In a run the scan is serial before the tiles: turning it off saves exactly its time
  // (its HBM reads, at the HBM link's rate, finish inside it).
  const auto elapsed = [&](const std::vector<topology::Override>& o) {
    topology::System s2(k200_config(o));
    K200 k2(s2);
    return k2.gemm(spec(32, 2048, 2048, Precision::Fp32)).elapsed();
  };
  const sim::Time with = elapsed({});
  const sim::Time without = elapsed({{"k200.compute.operand_scan_bandwidth", "0 B/s"}});
  CHECK(with - without == f32.scan_time);
  // A conv is its GEMM after the im2col: the lowering reads the input and writes the m x k matrix at
  // lowering_bandwidth (the HBM link is faster), serial before the GEMM; a 1x1 conv has none.
  {
    KernelSpec conv = spec(56 * 56, 64, 64 * 9, Precision::Fp32);
    conv.kind = KernelSpec::Kind::Conv;
    const auto run = [&](const KernelSpec& kk) {
      topology::System s2(k200_config());
      K200 k2(s2);
      return k2.gemm(kk).elapsed();
    };
    const sim::Time plain = run(conv);  // lowered_from = 0: exactly the GEMM
    CHECK(plain == run(spec(56 * 56, 64, 64 * 9, Precision::Fp32)));
    conv.lowered_from = 56 * 56 * 64;
    const sim::Bytes moved = (56 * 56 * 64 + 56 * 56 * 64 * 9) * 4;
    CHECK(run(conv) - plain == sim::transfer_time(moved, c.lowering_bandwidth));
  }
  // A small-M fc costs far more than its FLOPs at the square-GEMM rate.
  const double flops = 2.0 * 32 * 2048 * 2048;
  CHECK(static_cast<double>(with) * 1e-12 > 3.0 * flops / 7800e9);
}

TEST_CASE("K200 runs are bit-identical", "[k200]") {
  const auto run = [] {
    topology::System sys(k200_config());
    K200 k(sys);
    CopySpec s;
    s.kind = CopyKind::PeerSameCard;
    s.bytes = 8 * sim::kMiB;
    s.peer = {0, 1};
    const RunReport r = k.copy(s);
    return std::make_pair(r.elapsed(), sys.sim().op_log().end());
  };
  CHECK(run() == run());
}

TEST_CASE("K200 workloads: streams on two cards scale linearly, on one die they queue", "[k200]") {
  const auto mlp_stream = [](int card, int die, const std::string& name) {
    Stream s;
    s.name = name;
    s.iterations = 3;
    Step h2d;
    h2d.copy.kind = CopyKind::Pinned;
    h2d.copy.bytes = 256 * sim::kKiB;
    h2d.copy.die = {card, die};
    h2d.label = "h2d";
    s.steps.push_back(h2d);
    for (int l = 0; l < 4; ++l) {
      Step fc;
      fc.op = Step::Op::Launch;
      fc.kernel.kind = KernelSpec::Kind::Gemm;
      fc.kernel.m = 32;
      fc.kernel.n = fc.kernel.k = 2048;
      fc.kernel.precision = topology::Precision::Fp16;
      fc.kernel.ncluster = 4;
      fc.die = {card, die};
      fc.label = "fc";
      s.steps.push_back(fc);
    }
    Step d2h = h2d;
    d2h.copy.dir = Direction::D2H;
    d2h.label = "d2h";
    s.steps.push_back(d2h);
    Step w;
    w.op = Step::Op::Wait;
    w.die = {card, die};
    w.label = "wait";
    s.steps.push_back(w);
    return s;
  };
  const auto run = [&](std::vector<Stream> streams) {
    topology::System sys(k200_config({{"k200.host.copy_threads", "2"}}));
    K200 k(sys);
    return run_workload(k, streams);
  };
  const WorkloadResult one = run({mlp_stream(0, 0, "a")});
  const WorkloadResult two = run({mlp_stream(0, 0, "a"), mlp_stream(1, 0, "b")});
  REQUIRE(one.iteration_ends[0].size() == 3);
  CHECK(two.report.elapsed() == one.report.elapsed());  // nothing shared: exactly linear
  CHECK(two.report.bytes == 2 * one.report.bytes);
  // Two streams on one die share its queue and clusters: slower than alone.
  const WorkloadResult same = run({mlp_stream(0, 0, "a"), mlp_stream(0, 0, "b")});
  CHECK(same.report.elapsed() > one.report.elapsed());
  // The labels carry the time: fc kernels, copies, waits.
  bool has_fc = false;
  for (const OpTotal& t : one.by_label) has_fc |= t.kind == "fc" && t.time > 0;
  CHECK(has_fc);
  // A bad step is refused before anything runs, naming it.
  Stream bad = mlp_stream(0, 0, "bad");
  bad.steps[1].kernel.precision = topology::Precision::Int8;
  topology::System sys(k200_config());
  K200 k(sys);
  REQUIRE_THROWS_WITH(run_workload(k, {bad}), Catch::Contains("stream 'bad' step 1 (fc)") && Catch::Contains("int8"));
  CHECK(sys.sim().now() == 0);
}

TEST_CASE("K200 D2D completion is usleep_range-polled at the low or high end; page pinning refuses absurd sizes",
          "[k200]") {
  topology::System sys(k200_config());
  K200 k(sys);
  CopySpec s;
  s.kind = CopyKind::D2D;
  s.bytes = 4 * sim::kMiB;  // 4 MiB at 62 GiB/s = 63 us: seen at the 7th usleep_range(10, 1000) wake, 70 us
  CHECK(k.copy(s).elapsed() == 70 * sim::kMicrosecond);
  s.bytes = 64 * sim::kKiB;  // ~1 us of copying, still a 10 us sleep
  CHECK(k.copy(s).elapsed() == 10 * sim::kMicrosecond);
  // Large D2D approaches the configured bandwidth (at the low end a wake every 10 us).
  s.bytes = 64 * sim::kMiB;
  CHECK(k.copy(s).gib_per_s() == Approx(62).epsilon(0.01));
  s.bytes = sim::kGiB;
  CHECK(k.copy(s).gib_per_s() == Approx(62).epsilon(0.01));
  // At the high end every sleep lasts the range's 1 ms: a 4 MiB copy is seen at 1 ms, 64 MiB (1.008 ms) at 2.
  topology::System high_sys(k200_config({{"k200.d2d.wake", "high"}}));
  K200 high(high_sys);
  s.bytes = 4 * sim::kMiB;
  CHECK(high.copy(s).elapsed() == sim::kMillisecond);
  s.bytes = 64 * sim::kMiB;
  CHECK(high.copy(s).elapsed() == 2 * sim::kMillisecond);
  topology::System pin_sys(k200_config({{"k200.driver.kl1_pageable_pin", "1"}}));
  K200 pin(pin_sys);
  CopySpec p;
  p.kind = CopyKind::Pageable;
  p.bytes = 64 * sim::kGiB;
  REQUIRE_THROWS_WITH(pin.copy(p), Catch::Contains("one-page eDMAs"));
}
