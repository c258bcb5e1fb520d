// test_nccl.cpp -- collectives as NCCL runs them on a GPU machine (ccl/nccl.hpp):
// the tuner's choice on each side of every boundary of its table, a tiny
// ring against fixed cost + 2(n-1) protocol steps, a large ring against the
// alpha-beta closed form with the protocol's efficiency, NVLS against its
// GPU-side issue term, the symbolic check with channels and steps, and the
// SIP machine's chunked HBM collectives.
#include <catch2/catch.hpp>

#include <cmath>

#include "ccl/ccl.hpp"
#include "ccl/config_section.hpp"
#include "ccl/nccl.hpp"
#include "kernbench.hpp"
#include "machines.hpp"
#include "runtime/config_section.hpp"
#include "sim/errors.hpp"

using namespace kernbench::testing;
using namespace kernbench::ccl;
using kernbench::sim::kKiB;
using kernbench::sim::kMiB;
using kernbench::sim::kMicrosecond;
using kernbench::sim::kNanosecond;

namespace {

// n GPUs (pe.target: gpu) on one switch: each GPU's link `gbps`, no latency
// or overhead anywhere; each GPU's memory behind a link far faster than it.
Config gpu_star(int n, double gbps, double reduce_gbps = 0) {
  Config c;
  c.source = "test-gpu-star";
  ExplicitGraphConfig g;
  g.nodes.push_back(ExplicitNode{"sw", NodeKind::Switch, {0, true, Bandwidth::gb_per_s(reduce_gbps)}, {}});
  for (int i = 0; i < n; ++i) {
    const std::string gpu = "gpu" + std::to_string(i), mem = "hbm" + std::to_string(i);
    g.nodes.push_back(ExplicitNode{gpu, NodeKind::Pe, {0, true}, mem});
    g.nodes.push_back(ExplicitNode{mem, NodeKind::Memory, {0, true}, {}});
    g.edges.push_back(ExplicitEdge{gpu, "sw", "nvlink", link(gbps, 0)});
    g.edges.push_back(ExplicitEdge{gpu, mem, "hbm", link(1'000'000, 0)});
  }
  c.graph = g;
  c.fabric.model = FabricModel::Flow;
  nccl_gpus(c, 4);
  return c;
}

NcclConfig& nccl(Config& c) { return c.section<NcclConfig>(); }

CollectiveSpec spec(Bytes bytes, const std::string& algorithm, const std::string& protocol = "auto") {
  CollectiveSpec s;
  s.algorithm = algorithm;
  s.protocol = protocol;
  s.bytes_per_pe = bytes;
  s.buffer = Buffer::Hbm;
  return s;
}

CollectiveResult run(const Config& c, const CollectiveSpec& s) {
  System system(c);
  return run_collective(system, s);
}

TunerFacts facts(int n, bool nvls = false) {
  TunerFacts f;
  f.ranks = n;
  f.ring_bandwidth = 450e9;
  f.route_latency = 300 * kNanosecond;
  f.channels = 16;
  f.nvls = nvls;
  f.nvls_switch = nvls ? 4 * 1600e9 : 0;
  return f;
}

// Where rows a and b of the table cross: latency_a + S / bw_a = latency_b + S / bw_b.
double crossing(const TuneRow& a, const TuneRow& b) {
  return static_cast<double>(b.latency - a.latency) * 1e-12 / (1.0 / a.bandwidth - 1.0 / b.bandwidth);
}

const TuneRow& row(const std::vector<TuneRow>& rows, const std::string& alg, Protocol p) {
  for (const TuneRow& r : rows)
    if (r.algorithm == alg && r.protocol == p) return r;
  FAIL("no row " << alg << " " << to_string(p));
  return rows.front();
}

}  // namespace

TEST_CASE("the NCCL tuner: LL then LL128 then Simple as the size grows; each boundary where the table's times cross",
          "[nccl][tuner]") {
  const NcclConfig cfg;
  const TunerFacts f = facts(4);
  const auto rows = tune(NcclCollective::AllReduce, 1, f, cfg);
  const double ll_ll128 = crossing(row(rows, "ring", Protocol::LL), row(rows, "ring", Protocol::LL128));
  const double ll128_simple = crossing(row(rows, "ring", Protocol::LL128), row(rows, "ring", Protocol::Simple));
  REQUIRE(ll_ll128 > 0);
  REQUIRE(ll128_simple > ll_ll128);
  const auto pick = [&](double bytes) { return choose(NcclCollective::AllReduce, static_cast<Bytes>(bytes), f, cfg); };
  CHECK(pick(8).protocol == Protocol::LL);
  CHECK(pick(ll_ll128 * 0.99).protocol == Protocol::LL);
  CHECK(pick(ll_ll128 * 1.01).protocol == Protocol::LL128);
  CHECK(pick(ll128_simple * 0.99).protocol == Protocol::LL128);
  CHECK(pick(ll128_simple * 1.01).protocol == Protocol::Simple);
  // Inside one box the tree is priced as NCCL prices it (a chain, half the
  // bandwidth): it never wins, as in NCCL.
  for (double b : {8.0, 1e5, 1e7, 1e9}) CHECK(pick(b).algorithm == "ring");
}

TEST_CASE("the NCCL tuner: ring below the NVLS crossing and nvls above it; nvls is Simple only and all-reduce only",
          "[nccl][tuner]") {
  NcclConfig cfg;
  cfg.nvls_issue = Bandwidth::gb_per_s(300);
  const TunerFacts f = facts(8, true);
  const auto rows = tune(NcclCollective::AllReduce, 1, f, cfg);
  const TuneRow& nv = row(rows, "nvls", Protocol::Simple);
  // The ring row small sizes get (LL) against nvls: nvls's fixed cost is larger, its bandwidth too.
  const double x = crossing(row(rows, "ring", Protocol::LL), nv);
  REQUIRE(x > 0);
  const auto pick = [&](double bytes) { return choose(NcclCollective::AllReduce, static_cast<Bytes>(bytes), f, cfg); };
  CHECK(pick(x * 0.99).algorithm == "ring");
  CHECK(pick(x * 1.01).algorithm == "nvls");
  for (const TuneRow& r : tune(NcclCollective::AllGather, 1 << 30, f, cfg)) CHECK(r.algorithm == "ring");
  Protocol ll = Protocol::LL;
  CHECK_THROWS_WITH(choose(NcclCollective::AllReduce, 1 << 20, f, cfg, "nvls", &ll),
                    Catch::Contains("no nvls with protocol ll") && Catch::Contains("protocol simple"));
  CHECK_THROWS_WITH(choose(NcclCollective::AllReduce, 1 << 20, facts(8, false), cfg, "nvls"),
                    Catch::Contains("nvls needs an in-network reducing switch"));
  // NCCL's channel rule: fewer channels below channels x threads x threshold.
  CHECK(channels_for(8, Protocol::LL, 16, cfg) == 1);
  CHECK(channels_for(16 * 512 * 8, Protocol::LL, 16, cfg) == 16);
  CHECK(channels_for(16 * 512 * 8 - 1, Protocol::LL, 16, cfg) == 15);
  CHECK(channels_for(16 * 512 * 64 - 1, Protocol::Simple, 16, cfg) == 15);
}

TEST_CASE("a tiny ring all-reduce costs the launch, the protocol's fixed cost and 2(n-1) steps of its latency",
          "[nccl][closed-form]") {
  const int n = 4;
  Config c = gpu_star(n, 100);
  nccl(c).call_host = 5 * kMicrosecond;
  nccl(c).ll_base = 7 * kMicrosecond;
  nccl(c).ll_step = 1 * kMicrosecond;
  const CollectiveResult r = run(c, spec(8, "ring", "ll"));
  CHECK(r.model == "nccl");
  CHECK(r.protocol == "ll");
  CHECK(r.channels == 1);
  CHECK(r.verified);
  const Time expect = 5 * kMicrosecond + 7 * kMicrosecond + 2 * (n - 1) * kMicrosecond;
  // What is left: per step a few wire bytes at 100 GB/s (tens of ps) and
  // one vector-engine cycle (1 ns) for the reduce or the copy out of the slot.
  CHECK(r.latency >= expect);
  CHECK(r.latency - expect < 2 * (n - 1) * (kNanosecond + 100));
}

TEST_CASE("a large ring all-reduce is the alpha-beta closed form at the protocol's efficiency", "[nccl][closed-form]") {
  const int n = 4;
  for (const char* proto : {"simple", "ll128", "ll"}) {
    Config c = gpu_star(n, 100);
    nccl(c).link_efficiency = 0.8;
    const Bytes bytes = 256 * kMiB;
    const CollectiveResult r = run(c, spec(bytes, "ring", proto));
    const double fmt = protocol_format(protocol_from_string(proto), nccl(c).buffsize).efficiency;
    const double wire = 2.0 * (n - 1) / n * static_cast<double>(bytes) / (fmt * 0.8);
    const double expect_ps = wire / 100e9 * 1e12;
    INFO(proto << ": " << r.latency << " ps against " << expect_ps);
    CHECK(std::abs(static_cast<double>(r.latency) - expect_ps) / expect_ps < 0.01);
  }
}

TEST_CASE("NVLS: the GPUs' multimem issue sets its rate when slower than the links and the switch", "[nccl][nvls]") {
  const int n = 4;
  Config c = gpu_star(n, 100, 100000);
  nccl(c).nvls_issue = Bandwidth::gb_per_s(25);  // 2/n of the buffer per GPU at 25 GB/s: algbw 50 GB/s, links 100
  nccl(c).nvls_base = 10 * kMicrosecond;
  nccl(c).call_host = 1 * kMicrosecond;
  const Bytes bytes = 64 * kMiB;
  const CollectiveResult r = run(c, spec(bytes, "nvls"));
  CHECK(r.algorithm == "nvls");
  CHECK(r.protocol == "simple");
  CHECK(r.verified);
  // Issue-bound: 2 x bytes / n / issue, plus the launch and the fixed cost;
  // the last chunk's reduce and multicast after the last issue (one piece
  // of max_steps_per_transfer = 8 at the link rate) bounds the rest.
  const double issue_ps = 2.0 * static_cast<double>(bytes) / n / 25e9 * 1e12;
  const double fixed = 11e6;
  const double tail = static_cast<double>(bytes) / 8 / 100e9 * 1e12 +        // its multicast
                      n * static_cast<double>(bytes) / 8 / 100000e9 * 1e12;  // its reduction
  CHECK(static_cast<double>(r.latency) >= fixed + issue_ps);
  CHECK(static_cast<double>(r.latency) <= fixed + issue_ps + tail + 100);  // + the ps each step rounds up
  // Link-bound (issue unlimited): busbw never exceeds 2(n-1)/n x the GPU's link rate.
  nccl(c).nvls_issue = Bandwidth{0};
  const CollectiveResult fast = run(c, spec(bytes, "nvls"));
  const double busbw = static_cast<double>(bytes) / (static_cast<double>(fast.latency) * 1e-12) * 2.0 * (n - 1) / n;
  CHECK(busbw <= 2.0 * (n - 1) / n * 100e9);
  CHECK(fast.latency < r.latency);
}

TEST_CASE("GPU collectives verify with channels and steps: every algorithm and collective it has", "[nccl][verify]") {
  Config c = gpu_star(4, 100, 1000);
  for (const AlgorithmInfo& a : algorithms()) {
    for (const std::string& coll : a.collectives) {
      CollectiveSpec s = spec(3 * kMiB + 7, a.name);
      s.collective = collective_from_string(coll);
      s.verify = Verify::On;
      s.grid_w = 2, s.grid_h = 2;
      if (a.name == "lrab") continue;       // needs a SIP hierarchy
      if (a.name == "nvls_tree") continue;  // needs several boxes (tests/python/test_cluster_nvls.py)
      INFO(a.name << " " << coll);
      const CollectiveResult r = run(c, s);
      CHECK(r.verified);
      CHECK(r.model == "nccl");
      CHECK(r.step_bytes > 0);
    }
  }
}

TEST_CASE("NCCL's p2p choice: channels per peer from the p2p channels and the ranks, LL up to the threshold",
          "[nccl][alltoall]") {
  const NcclConfig cfg;  // p2p_chunk 512 KiB, p2p_ll_threshold 16 KiB
  // 16 p2p channels over 8 peers: 2 each (halved while 8 x c > 16); a part
  // of at least p2p_chunk / 8 = 64 KiB per channel.
  CHECK(p2p_choice(8, 8, 16, cfg).channels == 1);
  CHECK(p2p_choice(64 * kKiB, 8, 16, cfg).channels == 1);
  CHECK(p2p_choice(64 * kKiB + 1, 8, 16, cfg).channels == 2);
  CHECK(p2p_choice(1 * kMiB, 4, 16, cfg).channels == 4);  // 4 peers: 4 each
  // Doubled while a part exceeds 32 chunks (16 MiB), up to every p2p channel.
  CHECK(p2p_choice(32 * kMiB, 8, 16, cfg).channels == 2);
  CHECK(p2p_choice(32 * kMiB + 2, 8, 16, cfg).channels == 4);
  CHECK(p2p_choice(1024 * kMiB, 8, 16, cfg).channels == 16);
  // p2p channels are a power of two (12 -> 16).
  CHECK(p2p_choice(1024 * kMiB, 8, 12, cfg).channels == 16);
  // LL while the peer's bytes are at most channels x 16 KiB.
  CHECK(p2p_choice(16 * kKiB, 8, 16, cfg).protocol == Protocol::LL);
  CHECK(p2p_choice(16 * kKiB + 1, 8, 16, cfg).protocol == Protocol::Simple);
  CHECK(p2p_choice(16 * kKiB, 8, 16, cfg).step_payload == 32 * kKiB);  // LL: half of a 64 KiB step
  CHECK(p2p_choice(1 * kMiB, 8, 16, cfg).step_payload == 512 * kKiB);
  const Protocol ll128 = Protocol::LL128;
  CHECK_THROWS_WITH(p2p_choice(1 * kMiB, 8, 16, cfg, &ll128), Catch::Contains("ll and simple (not ll128)"));
}

TEST_CASE(
    "alltoall on a switch: tiny is the launch, the fixed cost and one step; large is (n-1)/n of the buffer at "
    "the link's rate",
    "[nccl][alltoall][closed-form]") {
  const int n = 4;
  Config c = gpu_star(n, 100);
  nccl(c).call_host = 5 * kMicrosecond;
  nccl(c).ll_base = 7 * kMicrosecond;
  nccl(c).ll_step = 1 * kMicrosecond;
  CollectiveSpec s = spec(64, "auto");
  s.collective = Collective::AllToAll;
  const CollectiveResult tiny = run(c, s);
  CHECK(tiny.algorithm == "pairwise");
  CHECK(tiny.protocol == "ll");
  CHECK(tiny.verified);
  CHECK(tiny.predicted == 0);  // NCCL's tuner does not price p2p
  // Every pair's one step runs at once: one step latency, not n - 1.
  const Time expect = 5 * kMicrosecond + 7 * kMicrosecond + 1 * kMicrosecond;
  CHECK(tiny.latency >= expect);
  // What is left: a few wire bytes (ps), the receive's slot read (one 1 ns
  // cycle each, the n - 1 arrivals at a GPU taking turns on its receive port).
  CHECK(tiny.latency - expect <= (n - 1) * kNanosecond + 1000);
  // Large: each GPU sends (n-1)/n of its buffer over its link and receives as
  // much, both at the link's rate x link_efficiency.
  nccl(c).link_efficiency = 0.8;
  s.bytes_per_pe = 256 * kMiB;
  const CollectiveResult big = run(c, s);
  CHECK(big.protocol == "simple");
  const double expect_ps = (n - 1.0) / n * static_cast<double>(s.bytes_per_pe) / 0.8 / 100e9 * 1e12;
  INFO(big.latency << " ps against " << expect_ps);
  CHECK(std::abs(static_cast<double>(big.latency) - expect_ps) / expect_ps < 0.01);
  // Bytes are conserved: n(n-1) blocks of bytes/n cross the switch, each on
  // two links (in, out), at the wire's efficiency.
  const double payload = static_cast<double>(n) * (n - 1) * static_cast<double>(s.bytes_per_pe / n);
  CHECK(static_cast<double>(big.link_bytes.at("nvlink")) == Approx(2 * payload / 0.8).epsilon(1e-6));
  // Its receive buffer counts: twice the buffer must fit the HBM.
  pe_config(c).hbm.capacity = 300 * kMiB;
  CHECK_THROWS_WITH(run(c, s), Catch::Contains("buffer=hbm needs 512 MiB per PE"));
}

TEST_CASE("back-to-back calls: the steady-state time per call is the slower of the host and the GPU", "[nccl]") {
  Config c = gpu_star(4, 100);
  nccl(c).call_host = 20 * kMicrosecond;  // per rank's launch
  CollectiveSpec s = spec(8, "ring", "ll");
  s.calls = 5;
  s.host_threads = 1;  // one thread launches 4 ranks: 80 us per call
  const CollectiveResult host_bound = run(c, s);
  CHECK(host_bound.latency == 4 * 20 * kMicrosecond);
  // One thread per rank: a launch per call each, 20 us, still longer than the
  // GPU side (LL: 6.6 us + 6 steps of 0.6 us).
  s.host_threads = 0;
  const CollectiveResult per_rank = run(c, s);
  CHECK(per_rank.latency == 20 * kMicrosecond);
  s.verify = Verify::On;
  CHECK_THROWS_WITH(run(c, s), Catch::Contains("verify=on checks one call"));
}

TEST_CASE("SIP machines: an HBM collective whose transfers exceed the scratch steps through chunks of the IPCQ queue",
          "[ccl][buffers]") {
  Config c = system_config();
  pe_config(c).scratch = 256 * kKiB;
  System system(c);
  CollectiveSpec s;
  s.algorithm = "halving_doubling";
  s.bytes_per_pe = 4 * kMiB;  // the first step moves half of it: 2 MiB > 256 KiB
  s.buffer = Buffer::Hbm;
  s.verify = Verify::On;
  const CollectiveResult r = run_collective(system, s);
  CHECK(r.verified);
  CHECK(r.step_bytes == static_cast<Bytes>(pe_config(c).ipcq_slots) * pe_config(c).ipcq_slot);
  // Every algorithm of the machine verifies through the finer cut (a
  // buffer of 1 MiB x the ranks: every algorithm's transfers of it exceed 256 KiB).
  const auto ranks = static_cast<Bytes>(system.machine().pes().size());
  for (const AlgorithmInfo& a : algorithms()) {
    if (a.in_network) continue;  // no reducing switch on the SIP machine
    for (const std::string& coll : a.collectives) {
      CollectiveSpec each = s;
      each.bytes_per_pe = ranks * kMiB;
      each.algorithm = a.name;
      each.collective = collective_from_string(coll);
      INFO(a.name << " " << coll);
      const CollectiveResult c = run_collective(system, each);
      CHECK(c.verified);
      CHECK(c.step_bytes > 0);
    }
  }
  // A collective that fits keeps whole transfers.
  s.bytes_per_pe = 64 * kKiB;
  CHECK(run_collective(system, s).step_bytes == 0);
  // Protocols are a GPU notion.
  s.protocol = "ll";
  CHECK_THROWS_WITH(run_collective(system, s), Catch::Contains("protocol=ll is for GPU machines"));
}
