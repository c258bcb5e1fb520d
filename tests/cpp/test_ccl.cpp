// test_ccl.cpp -- collectives: every algorithm checked symbolically on
// several shapes, the ring against its alpha-beta closed form, the
// halving-doubling / ring crossover, buffers, errors.
#include <catch2/catch.hpp>

#include "ccl/algorithms/algorithm.hpp"
#include "ccl/logical/ring.hpp"
#include "ccl/ccl.hpp"
#include "ccl/verify.hpp"
#include "machines.hpp"
#include "sim/errors.hpp"

using namespace kernbench::testing;
using namespace kernbench::ccl;
using kernbench::sim::kKiB;
using kernbench::sim::kMiB;
using kernbench::sim::kNanosecond;

namespace {

// A generated machine: sips_w x sips_h SIPs of cubes_w x cubes_h cubes with
// `pes` PEs each (2x1 routers per cube).
Config grid_machine(int sips_w, int sips_h, SipTopology topo, int cubes_w, int cubes_h, int pes) {
  Config c = system_config(sips_w, sips_h, topo, cubes_w, cubes_h, 2, 1, pes);
  pe_config(c).clock_hz = 1'000'000'000;
  pe_config(c).dispatch = 20 * kNanosecond;
  return c;
}

// p PEs on an explicit ring of point-to-point links: every ring neighbour
// pair has its own link, so a ring collective is uncontended.
Config ring_machine(int p, double gbps, Time latency) {
  Config c;
  c.source = "test-ring";
  ExplicitGraphConfig g;
  for (int i = 0; i < p; ++i) g.nodes.push_back(ExplicitNode{"pe" + std::to_string(i), NodeKind::Pe, {0, true}});
  for (int i = 0; i < p; ++i)
    g.edges.push_back(
        ExplicitEdge{"pe" + std::to_string(i), "pe" + std::to_string((i + 1) % p), "ring", link(gbps, latency)});
  c.graph = g;
  pe_config(c).clock_hz = 1'000'000'000;
  pe_config(c).dispatch = 20 * kNanosecond;
  pe_config(c).vector_bytes_per_cycle = 128;  // reductions at 128 GB/s: faster than the links below
  pe_config(c).ipcq_bank_hop = 1 * kNanosecond;
  pe_config(c).scratch = 64 * kMiB;  // the buffers below stay in SRAM
  return c;
}

CollectiveResult run(const Config& c, CollectiveSpec spec) {
  System system(c);
  return run_collective(system, spec);
}

CollectiveSpec spec_of(const std::string& algorithm, Bytes bytes, Collective what = Collective::AllReduce) {
  CollectiveSpec s;
  s.algorithm = algorithm;
  s.bytes_per_pe = bytes;
  s.collective = what;
  s.verify = Verify::On;
  return s;
}

std::vector<NodeId> first_pes(const Config& c, int n) {
  System s(c);
  std::vector<NodeId> out;
  for (NodeId id = 0; id < s.machine().num_nodes() && static_cast<int>(out.size()) < n; ++id)
    if (s.machine().node(id).kind == NodeKind::Pe) out.push_back(id);
  return out;
}

}  // namespace

TEST_CASE("every algorithm's all-reduce (pairwise: its alltoall) is verified on several shapes", "[ccl][verify]") {
  struct Shape {
    const char* name;
    Config config;
    int ranks;  // 0: every PE
  };
  const std::vector<Shape> shapes = {
      {"1 SIP, 2x2 cubes x 4 PEs", grid_machine(1, 1, SipTopology::Ring, 2, 2, 4), 0},
      {"2x3 SIP torus, 1x2 cubes x 2 PEs", grid_machine(2, 3, SipTopology::Torus, 2, 1, 2), 0},
      {"3x2 SIP mesh, 1x2 cubes x 2 PEs", grid_machine(3, 2, SipTopology::Mesh, 2, 1, 2), 0},
      {"3 SIP ring, 3x1 cubes x 2 PEs", grid_machine(3, 1, SipTopology::Ring, 3, 1, 2), 0},
      {"7 ranks (odd)", grid_machine(1, 1, SipTopology::Ring, 2, 2, 4), 7},
      {"5 ranks (odd)", grid_machine(1, 1, SipTopology::Ring, 2, 2, 4), 5},
  };
  for (const Shape& shape : shapes) {
    for (const Algorithm& a : registry()) {
      CollectiveSpec s = spec_of(a.name, 24 * kKiB + 12);  // not a multiple of the slices: uneven cut
      if (!a.all_reduce) s.collective = Collective::AllToAll;
      if (shape.ranks > 0) s.pes = first_pes(shape.config, shape.ranks);
      System probe(shape.config);
      const int n = shape.ranks > 0 ? shape.ranks : static_cast<int>(first_pes(shape.config, 1 << 20).size());
      const bool pow2 = (n & (n - 1)) == 0;
      INFO(shape.name << ": " << a.name);
      if (a.name == "halving_doubling" && !pow2) {
        CHECK_THROWS_WITH(run(shape.config, s),
                          Catch::Contains("power-of-two number of ranks, got " + std::to_string(n)));
        continue;
      }
      if (a.name == "nvls") {  // a generated machine has no switch node (tests/cpp/test_nvls.cpp)
        CHECK_THROWS_WITH(run(shape.config, s), Catch::Contains("nvls needs an in-network reducing switch"));
        continue;
      }
      if (a.name == "nvls_tree") {  // nor a NIC: it is one box (NVLS across boxes: test_cluster_nvls.py)
        CHECK_THROWS_WITH(run(shape.config, s), Catch::Contains("nvls_tree is NCCL's NVLS across boxes"));
        continue;
      }
      if (a.name == "lrab" && shape.ranks > 0) {
        CHECK_THROWS_WITH(run(shape.config, s), Catch::Contains("lrab needs every PE of each SIP"));
        continue;
      }
      const CollectiveResult r = run(shape.config, s);
      CHECK(r.verified);
      CHECK(r.ranks == n);
      CHECK(r.latency > 0);
    }
  }
}

TEST_CASE("reduce-scatter, all-gather and broadcast come from the same pieces, verified", "[ccl][verify]") {
  const Config c = grid_machine(2, 1, SipTopology::Ring, 2, 1, 4);  // 16 PEs
  for (const Algorithm& a : registry()) {
    INFO(a.name);
    if (a.reduce_scatter) CHECK(run(c, spec_of(a.name, 32 * kKiB, Collective::ReduceScatter)).verified);
    if (a.all_gather) CHECK(run(c, spec_of(a.name, 32 * kKiB, Collective::AllGather)).verified);
    if (a.broadcast) {
      CollectiveSpec s = spec_of(a.name, 32 * kKiB, Collective::Broadcast);
      s.root = 5;
      CHECK(run(c, s).verified);
    }
  }
  // Asking for what an algorithm does not have names the ones that do.
  CHECK_THROWS_WITH(run(c, spec_of("lrab", 4 * kKiB, Collective::AllGather)),
                    Catch::Contains("lrab has no all_gather (algorithms with one: ring, bidir_ring"));
}

TEST_CASE("a wrong schedule fails the symbolic check with the rank and slice", "[ccl][verify]") {
  const Config c = grid_machine(1, 1, SipTopology::Ring, 1, 1, 4);
  System system(c);
  const std::vector<NodeId> pes = first_pes(c, 4);
  SECTION("a missing step leaves a slice short of ranks") {
    Schedule s(system.machine(), pes, 4 * kKiB, 4, Buffer::Sram, "broken ring");
    const std::vector<int> ring = iota_ranks(4);
    ring_reduce_scatter(s, ring, Slices{0, 4});
    // No all-gather: rank 0 only holds its own slice 1 complete.
    SymbolicCheck check(s, "broken ring");
    for (int r = 0; r < 4; ++r) check.set_start(r, Slices{0, 4}, SymbolicCheck::Start::Own);
    kernbench::runtime::Executor(system).run(s.program(), &check);
    CHECK_NOTHROW(check.expect_complete(0, Slices{1, 2}));
    CHECK_THROWS_AS(check.expect_complete(0, Slices{0, 1}), kernbench::VerificationError);
    CHECK_THROWS_WITH(check.expect_complete(0, Slices{0, 1}),
                      Catch::Contains("rank 0 (sip0.cube0.pe0) slice 0 holds ranks {0} but lacks {1,2,3}"));
  }
  SECTION("alltoall: a block that lands in the wrong place is named, with the one that should be there") {
    // Out of place, 4 ranks: slices 0..3 the send buffer, 4..7 the receive
    // buffer; rank i's send slice j belongs in rank j's receive slice 4 + i.
    Schedule s(system.machine(), pes, 8 * kKiB, 8, Buffer::Sram, "crossed alltoall");
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        // rank 1's blocks for ranks 2 and 3 are swapped.
        const int block = i == 1 && j == 2 ? 3 : i == 1 && j == 3 ? 2 : j;
        if (i == j)
          s.local_copy(i, Slices{j, j + 1}, Slices{4 + i, 5 + i});
        else
          s.transfer(i, Slices{block, block + 1}, j, Slices{4 + i, 5 + i}, Combine::Copy);
      }
    SymbolicCheck check(s, "crossed alltoall");
    for (int r = 0; r < 4; ++r) {
      check.set_start(r, Slices{0, 4}, SymbolicCheck::Start::Own);
      check.set_start(r, Slices{4, 8}, SymbolicCheck::Start::Nothing);
    }
    kernbench::runtime::Executor(system).run(s.program(), &check);
    CHECK_NOTHROW(check.expect_copy(2, Slices{4, 5}, 0, Slices{2, 3}));
    CHECK_NOTHROW(check.expect_copy(1, Slices{5, 6}, 1, Slices{1, 2}));  // the local copy
    // Whose data it is (rank 1's) is right; which slice is not.
    CHECK_THROWS_WITH(check.expect_copy(2, Slices{5, 6}, 1, Slices{2, 3}),
                      Catch::Contains("rank 2 (sip0.cube0.pe2) slice 5 holds rank 1 (sip0.cube0.pe1) slice 3 "
                                      "instead of rank 1 (sip0.cube0.pe1) slice 2"));
    // Another rank's block where rank 3's was expected.
    CHECK_THROWS_WITH(check.expect_copy(0, Slices{6, 7}, 3, Slices{1, 2}),
                      Catch::Contains("holds rank 2 (sip0.cube0.pe2) slice 0 instead of rank 3"));
    // A receive slice nothing reached (a check that saw no run).
    SymbolicCheck idle(s, "idle");
    idle.set_start(0, Slices{4, 8}, SymbolicCheck::Start::Nothing);
    CHECK_THROWS_WITH(idle.expect_copy(0, Slices{4, 5}, 0, Slices{0, 1}),
                      Catch::Contains("rank 0 (sip0.cube0.pe0) slice 4 holds nothing instead of"));
  }
  SECTION("a slice reduced twice is caught when it happens") {
    Schedule s(system.machine(), pes, 4 * kKiB, 4, Buffer::Sram, "double count");
    s.transfer(0, 1, Slices{0, 4}, Combine::Reduce);
    s.transfer(1, 2, Slices{0, 4}, Combine::Reduce);
    s.transfer(0, 2, Slices{0, 4}, Combine::Reduce);  // rank 0's data reaches rank 2 twice
    SymbolicCheck check(s, "double count");
    for (int r = 0; r < 4; ++r) check.set_start(r, Slices{0, 4}, SymbolicCheck::Start::Own);
    CHECK_THROWS_WITH(kernbench::runtime::Executor(system).run(s.program(), &check),
                      Catch::Contains("wrong schedule: rank 2 (sip0.cube0.pe2) slice 0 would count ranks {0} twice"));
  }
}

TEST_CASE("ring all-reduce on an uncontended ring matches 2(p-1)(alpha + n/(p beta))", "[ccl][closed-form]") {
  const int p = 8;
  const double gbps = 64;  // links slower than the 128 GB/s reductions: beta is the link
  const Time latency = 10 * kNanosecond;
  const Config c = ring_machine(p, gbps, latency);
  // alpha per step: the send's dispatch, the wire latency, and the last
  // slot's reduction after it lands (1 ns bank hop + 4 KiB at 128 B/cycle).
  const double alpha = 20e3 + static_cast<double>(latency) + 33e3;
  for (Bytes n : {1 * kMiB, 4 * kMiB}) {
    const CollectiveResult r = run(c, spec_of("ring", n));
    const double beta = gbps * 1e9 / 1e12;  // bytes per ps
    const double closed = 2.0 * (p - 1) * (alpha + static_cast<double>(n) / (p * beta));
    INFO("n = " << n << ": model " << r.latency << " ps, closed form " << closed << " ps");
    CHECK(static_cast<double>(r.latency) == Approx(closed).epsilon(0.05));
    // Bytes are conserved: 2(p-1) blocks of n/p per rank cross one link each,
    // and every slot-sized segment's credit crosses it back (pe.ipcq.credit: fabric).
    CHECK(r.run.op_bytes.at("send") == 2 * (p - 1) * n);
    const auto& pe = pe_config(c);
    const Bytes segments = 2 * (p - 1) * n / pe.ipcq_slot;
    CHECK(r.link_bytes.at("ring") == 2 * (p - 1) * n + segments * pe.ipcq_credit_bytes);
  }
}

TEST_CASE("halving-doubling beats the ring on small messages, the ring wins on large ones", "[ccl]") {
  // 16 PEs in two cubes, one PE per router: ring neighbours are mesh
  // neighbours, while halving-doubling's partners are up to a cube away.
  Config c = system_config(1, 1, SipTopology::Ring, 2, 1, 4, 2, 8);
  pe_config(c).dispatch = 20 * kNanosecond;
  const auto t = [&](const char* alg, Bytes n) { return run(c, spec_of(alg, n)).latency; };
  CHECK(t("halving_doubling", 1 * kKiB) < t("ring", 1 * kKiB));
  CHECK(t("ring", 1 * kMiB) < t("halving_doubling", 1 * kMiB));
}

TEST_CASE("HBM buffers add HBM traffic and time; SRAM buffers must fit the scratch", "[ccl]") {
  const Config c = grid_machine(1, 1, SipTopology::Ring, 2, 1, 4);
  CollectiveSpec s = spec_of("ring", 256 * kKiB);
  const CollectiveResult sram = run(c, s);
  s.buffer = Buffer::Hbm;
  const CollectiveResult hbm = run(c, s);
  CHECK(hbm.verified);
  CHECK(hbm.latency > sram.latency);
  CHECK(sram.link_bytes.count("hbm") == 0);
  CHECK(hbm.link_bytes.at("hbm") > 0);
  s.buffer = Buffer::Sram;
  s.bytes_per_pe = 2 * kMiB;
  CHECK_THROWS_AS(run(c, s), kernbench::CapacityError);
  CHECK_THROWS_WITH(run(c, s), Catch::Contains("buffer=sram needs 2 MiB per PE but the scratch is 1 MiB (pe.scratch)"));
}

TEST_CASE("collective requests are checked", "[ccl]") {
  const Config c = grid_machine(1, 1, SipTopology::Ring, 2, 1, 4);
  CHECK_THROWS_WITH(run(c, spec_of("rign", kKiB)),
                    Catch::Contains("unknown collective algorithm 'rign' (known: ring, bidir_ring, torus2d"));
  CollectiveSpec s = spec_of("torus2d", kKiB);
  s.grid_w = 3;
  s.grid_h = 3;
  CHECK_THROWS_WITH(run(c, s), Catch::Contains("grid 3x3 does not hold the 8 ranks"));
  s = spec_of("ring", 0);
  CHECK_THROWS_WITH(run(c, s), Catch::Contains("bytes per PE must be positive"));
  s = spec_of("ring", kKiB);
  s.pes = first_pes(c, 1);
  CHECK_THROWS_WITH(run(c, s), Catch::Contains("needs at least 2 ranks"));
  s.pes = {first_pes(c, 1)[0], first_pes(c, 1)[0]};
  CHECK_THROWS_WITH(run(c, s), Catch::Contains("appears twice"));
}

TEST_CASE("a collective run is deterministic", "[ccl][determinism]") {
  const Config c = grid_machine(2, 2, SipTopology::Torus, 2, 1, 2);
  const CollectiveResult a = run(c, spec_of("lrab", 64 * kKiB)), b = run(c, spec_of("lrab", 64 * kKiB));
  CHECK(a.latency == b.latency);
  CHECK(a.run.log.end() == b.run.log.end());
  CHECK(a.link_bytes == b.link_bytes);
}

TEST_CASE("an algorithm that leaves out check, slices or owned gets safe defaults, never a null call", "[ccl]") {
  // Only a name and an all-reduce (ring's), as a newcomer's first algorithm might be written.
  Algorithm bare;
  bare.name = "bare";
  bare.all_reduce = ring_algorithm().all_reduce;
  const Algorithm a = complete(bare);
  REQUIRE(a.check);
  REQUIRE(a.slices);
  REQUIRE(a.owned);
  Plan p;
  p.world.ranks = {0, 1, 2, 3};
  p.world.w = 4;
  p.slices = 4;
  CHECK(a.slices(p) == 4);  // one slice per rank
  REQUIRE_NOTHROW(a.check(p));
  const auto owned = a.owned(p);
  REQUIRE(owned.size() == 4);
  for (int r = 0; r < 4; ++r) CHECK(owned[static_cast<std::size_t>(r)].second.lo == r);
  Algorithm none;
  none.name = "none";
  CHECK_THROWS_WITH(complete(none), Catch::Contains("'none' implements no collective"));
  CHECK_THROWS_WITH(complete(Algorithm{}), Catch::Contains("needs a name"));
  // Every registered algorithm is complete, and only nvls and nvls_tree reduce in the network.
  for (const Algorithm& r : registry()) {
    INFO(r.name);
    CHECK((r.check && r.slices && r.owned));
    CHECK(r.in_network == (r.name == "nvls" || r.name == "nvls_tree"));
  }
}
