// test_energy.cpp -- the energy model (linear in the bytes, FLOPs and time it
// prices; by-op-kind attribution sums to the total; the `energy:` section's
// units) and the HBM slices (capacity errors at the exact size, striping over
// pseudo-channels against a byte-by-byte count, traffic of a GEMM).
#include <catch2/catch.hpp>

#include <functional>

#include "kernbench.hpp"
#include "kernels/gemm.hpp"
#include "kernels/gqa.hpp"
#include "machines.hpp"
#include "runtime/energy.hpp"
#include "runtime/executor.hpp"
#include "runtime/hbm.hpp"
#include "sim/errors.hpp"
#include "topology/config/loader.hpp"

using namespace kernbench::testing;
using namespace kernbench::runtime;
using kernbench::sim::kGiB;
using kernbench::sim::kKiB;
using kernbench::sim::kMiB;
using kernbench::sim::kNanosecond;

namespace {

Config energy_machine() {
  Config c = program_config(2, 1);
  // Distinct round prices (aJ/B, aJ/flop, uW), so each label is recognisable.
  energy_config(c).links.pe = 1'000'000;
  energy_config(c).links.hbm = 2'000'000;
  energy_config(c).links.noc = 3'000'000;
  energy_config(c).memory.hbm = 30'000'000;
  energy_config(c).memory.sram = 10'000'000;
  energy_config(c).compute.gemm_fp16 = 750'000;
  energy_config(c).compute.gemm_fp32 = 2'300'000;
  energy_config(c).compute.vector = 200'000;
  energy_config(c).static_power.pe = 500'000;
  return c;
}

double at(const std::map<std::string, double>& m, const std::string& k) {
  const auto it = m.find(k);
  return it == m.end() ? 0.0 : it->second;
}

// The energy of a one-program run on a fresh machine.
EnergyReport run_energy(const Config& c, const std::function<void(Program&, const Machine&)>& build) {
  System system(c);
  Program p("energy");
  build(p, system.machine());
  const RunResult r = Executor(system).run(p);
  return energy(system, p, r);
}

EnergyReport write_to_hbm(Bytes bytes) {
  return run_energy(energy_machine(), [&](Program& p, const Machine& m) {
    p.dma(m.pe(0, 0, 0), Move{m.pe(0, 0, 0), m.hbm_ctrl(0, 0, 0), bytes});  // a write: no request packet
  });
}

}  // namespace

TEST_CASE("energy: link and memory energy are bytes x the configured price, linear in the bytes", "[energy]") {
  const Bytes b = 256 * kKiB;
  const EnergyReport one = write_to_hbm(b), two = write_to_hbm(2 * b);
  // PE -> its router (pe link) -> its HBM slice (hbm link): one hop of each.
  CHECK(at(one.counts, "link:pe") == b);
  CHECK(at(one.counts, "link:hbm") == b);
  CHECK(at(one.counts, "memory:hbm") == b);
  CHECK(at(one.counts, "memory:sram") == b);
  CHECK(at(one.by, "dynamic:link:pe") == Approx(b * 1e6 * 1e-18).epsilon(1e-15));
  CHECK(at(one.by, "dynamic:link:hbm") == Approx(b * 2e6 * 1e-18).epsilon(1e-15));
  CHECK(at(one.by, "dynamic:memory:hbm") == Approx(b * 30e6 * 1e-18).epsilon(1e-15));
  CHECK(at(one.by, "dynamic:memory:sram") == Approx(b * 10e6 * 1e-18).epsilon(1e-15));
  for (const char* k : {"dynamic:link:pe", "dynamic:link:hbm", "dynamic:memory:hbm", "dynamic:memory:sram"})
    CHECK(at(two.by, k) == 2.0 * at(one.by, k));  // exactly: integer bytes x price
  CHECK(two.dynamic_j == 2.0 * one.dynamic_j);
  CHECK(at(one.by_op_kind, "dma") == Approx(one.dynamic_j).epsilon(1e-12));
  CHECK(one.by_op_kind.count("unattributed") == 0);
}

TEST_CASE("energy: a read also pays its request packet on every hop", "[energy]") {
  const Bytes b = 64 * kKiB;
  const EnergyReport e = run_energy(energy_machine(), [&](Program& p, const Machine& m) {
    p.dma(m.pe(0, 0, 0), Move{m.hbm_ctrl(0, 0, 0), m.pe(0, 0, 0), b});
  });
  const Bytes request = energy_machine().fabric.request;
  CHECK(at(e.counts, "link:pe") == b + request);
  CHECK(at(e.counts, "link:hbm") == b + request);
  CHECK(at(e.counts, "memory:hbm") == b);  // the request is not a memory access
  CHECK(e.by_op_kind.count("unattributed") == 0);
}

TEST_CASE("energy: compute energy is FLOPs x the price of the precision", "[energy]") {
  const double f = 2.0 * 128 * 128 * 128;
  const auto gemm = [&](double flops, Precision prec) {
    return run_energy(energy_machine(), [&](Program& p, const Machine& m) { p.gemm(m.pe(0, 0, 0), flops, prec); });
  };
  const EnergyReport one = gemm(f, Precision::Fp16), two = gemm(2 * f, Precision::Fp16);
  CHECK(at(one.by, "dynamic:compute:gemm:fp16") == Approx(f * 750'000 * 1e-18).epsilon(1e-15));
  CHECK(at(two.by, "dynamic:compute:gemm:fp16") == 2.0 * at(one.by, "dynamic:compute:gemm:fp16"));
  CHECK(one.by.count("dynamic:compute:gemm:fp32") == 0);
  const EnergyReport f32 = gemm(f, Precision::Fp32);
  CHECK(at(f32.by, "dynamic:compute:gemm:fp32") == Approx(f * 2'300'000 * 1e-18).epsilon(1e-15));
  const EnergyReport vec =
      run_energy(energy_machine(), [&](Program& p, const Machine& m) { p.vector(m.pe(0, 0, 0), 4096); });
  CHECK(at(vec.by, "dynamic:compute:vector:any") == Approx(4096 * 200'000 * 1e-18).epsilon(1e-15));
  CHECK(one.dynamic_j == Approx(at(one.by, "dynamic:compute:gemm:fp16")).epsilon(1e-15));  // nothing moved
}

TEST_CASE("energy: static energy is nodes x power x makespan", "[energy]") {
  const EnergyReport e = run_energy(
      energy_machine(), [&](Program& p, const Machine& m) { p.gemm(m.pe(0, 0, 0), 2048.0 * 1000, Precision::Fp16); });
  const double pes = at(e.counts, "nodes:pe");
  CHECK(pes == 16);  // 2 cubes x 8 PEs
  CHECK(at(e.by, "static:pe") == Approx(pes * 0.5 * kernbench::sim::to_seconds(e.makespan)).epsilon(1e-12));
  CHECK(e.makespan == 20 * kNanosecond + 1000 * kNanosecond);
  double statics = 0.0;
  for (const auto& [k, v] : e.by)
    if (k.rfind("static:", 0) == 0) statics += v;
  CHECK(e.static_j == Approx(statics).epsilon(1e-12));
  CHECK(e.total_j == Approx(e.dynamic_j + e.static_j).epsilon(1e-15));
}

TEST_CASE("energy: a GEMM's energy by op kind sums to its dynamic energy; labels sum to the total", "[energy]") {
  System system(energy_machine());
  kernbench::kernels::GemmSpec s;
  s.m = s.n = s.k = 256;
  s.pes = {system.machine().pe(0, 0, 0), system.machine().pe(0, 1, 3)};
  const Program p = kernbench::kernels::gemm_program(system, s);
  const RunResult r = Executor(system).run(p);
  const EnergyReport e = energy(system, p, r);
  double kinds = 0.0, labels = 0.0;
  for (const auto& [k, v] : e.by_op_kind) kinds += v;
  for (const auto& [k, v] : e.by) labels += v;
  CHECK(e.by_op_kind.count("unattributed") == 0);
  CHECK(kinds == Approx(e.dynamic_j).epsilon(1e-12));
  CHECK(labels == Approx(e.total_j).epsilon(1e-12));
  CHECK(at(e.counts, "compute:gemm:fp16") == 2.0 * 256 * 256 * 256);
  CHECK(at(e.counts, "memory:hbm") == Approx(static_cast<double>(kernbench::kernels::plan_gemm(system, s).hbm_bytes)));
}

TEST_CASE("energy: the YAML section parses its units exactly and refuses bad ones", "[energy]") {
  const std::string base = kernbench::testing::kOnePeSystemYaml;
  const Config c = kernbench::parse_config(base + R"(energy:
  links: {ucie: 0.25 pJ/bit, pcie: 40 pJ/B}
  memory: {hbm: 3.9 pJ/bit}
  compute: {gemm: {fp16: 1.5 pJ/MAC, int8: 115 fJ/flop}, vector: 0.2 pJ/B}
  static: {pe: 5 W, router: 50 mW}
pe:
  hbm: {capacity: 3 GiB, pseudo_channels: 16, stripe: 512 B}
)",
                                           "energy.yaml");
  CHECK(energy_config(c).links.ucie == 2'000'000);
  CHECK(energy_config(c).links.pcie == 40'000'000);
  CHECK(energy_config(c).links.noc == kernbench::runtime::EnergyLinks{}.noc);  // untouched keys keep their defaults
  CHECK(energy_config(c).memory.hbm == 31'200'000);
  CHECK(energy_config(c).compute.gemm_fp16 == 750'000);
  CHECK(energy_config(c).compute.gemm_int8 == 115'000);
  CHECK(energy_config(c).compute.vector == 200'000);
  CHECK(energy_config(c).static_power.pe == 5'000'000);
  CHECK(energy_config(c).static_power.router == 50'000);
  CHECK(pe_config(c).hbm.capacity == 3 * kGiB);
  CHECK(pe_config(c).hbm.pseudo_channels == 16);
  CHECK(pe_config(c).hbm.stripe == 512);
  const auto msg = [&](const std::string& extra) {
    try {
      kernbench::parse_config(base + extra, "bad.yaml");
    } catch (const kernbench::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(msg("energy: {memory: {hbm: 3.9 pJ}}\n"),
             Catch::Contains("energy.memory.hbm") && Catch::Contains("pJ/bit"));
  CHECK_THAT(msg("energy: {static: {pe: -1 W}}\n"), Catch::Contains("energy.static.pe") && Catch::Contains(">= 0"));
  CHECK_THAT(msg("energy: {links: {nocc: 1 pJ/bit}}\n"), Catch::Contains("did you mean \"noc\""));
  CHECK_THAT(msg("pe: {hbm: {pseudo_channels: 0}}\n"), Catch::Contains("pe.hbm.pseudo_channels"));
}

TEST_CASE("hbm: striping matches a byte-by-byte count and costs O(pseudo-channels)", "[hbm]") {
  kernbench::runtime::HbmConfig h;
  h.pseudo_channels = 2;
  h.stripe = 256;
  std::vector<Bytes> pc;
  stripe_bytes(100, 1000, h, pc);
  CHECK(pc == std::vector<Bytes>{156 + 256 + 76, 256 + 256});
  for (int pcs : {1, 3, 8})
    for (std::uint64_t a : {0ULL, 1ULL, 255ULL, 256ULL, 1000ULL, 4097ULL})
      for (Bytes n : {Bytes{0}, Bytes{1}, Bytes{255}, Bytes{256}, Bytes{257}, Bytes{5000}, Bytes{12345}}) {
        h.pseudo_channels = pcs;
        std::vector<Bytes> fast, slow(static_cast<std::size_t>(pcs), 0);
        stripe_bytes(a, n, h, fast);
        for (Bytes i = 0; i < n; ++i)
          ++slow[((a + static_cast<std::uint64_t>(i)) / 256) % static_cast<std::uint64_t>(pcs)];
        INFO("pcs " << pcs << " address " << a << " bytes " << n);
        CHECK(fast == slow);
      }
  h.pseudo_channels = 8;
  std::vector<Bytes> big;
  stripe_bytes(0, Bytes{1} << 40, h, big);  // 1 TiB: closed form, instant
  CHECK(big == std::vector<Bytes>(8, (Bytes{1} << 40) / 8));
}

TEST_CASE("hbm: the allocator fills a slice to the byte and names the numbers past it", "[hbm]") {
  Config c = energy_machine();
  pe_config(c).hbm.capacity = kMiB;
  System system(c);
  const Machine& m = system.machine();
  HbmAllocator a(m, pe_config(c).hbm);
  const NodeId slice = m.hbm_ctrl(0, 1, 3);
  CHECK(a.alloc(slice, 1000, "weights").address == 0);
  CHECK(a.alloc(slice, 100, "bias").address == 1024);  // aligned to the 256 B stripe
  CHECK(a.used(slice) == 1124);
  CHECK(a.alloc(slice, kMiB - 1280, "rest").address == 1280);
  CHECK(a.free(slice) == 0);
  try {
    a.alloc(slice, 1, "one byte more");
    FAIL("no CapacityError");
  } catch (const kernbench::CapacityError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("one byte more needs 1 B on sip0.cube1.pe3's HBM slice") &&
                                          Catch::Contains("holds 1 MiB (pe.hbm.capacity)") &&
                                          Catch::Contains("weights 1000 B") && Catch::Contains("0 B free"));
  }
  CHECK(a.alloc(m.hbm_ctrl(0, 1, 4), kMiB, "another slice").address == 0);
  CHECK_THROWS_AS(a.alloc(m.pe(0, 0, 0), 1, "scratch"), kernbench::UsageError);
}

TEST_CASE("hbm: a GEMM whose operands do not fit its slice is a CapacityError at the exact size", "[hbm]") {
  Config c = energy_machine();
  kernbench::kernels::GemmSpec s;
  s.m = s.n = s.k = 2048;  // fp16 on one PE: A, B, C 8 MiB each
  pe_config(c).hbm.capacity = 24 * kMiB;
  {
    System system(c);
    CHECK_NOTHROW(kernbench::kernels::plan_gemm(system, s));
  }
  pe_config(c).hbm.capacity = 24 * kMiB - 1;
  System system(c);
  CHECK_THROWS_WITH(kernbench::kernels::plan_gemm(system, s),
                    Catch::Contains("C block 2048 x 2048 of GEMM 2048x2048x2048") &&
                        Catch::Contains("needs 8 MiB on sip0.cube0.pe0's HBM slice") &&
                        Catch::Contains("16 MiB already taken"));
}

TEST_CASE("hbm: GQA decode at 128k tokens on one cube needs its KV cache in 8 slices, to the byte", "[hbm]") {
  using namespace kernbench::kernels;
  Config c = system_config(1, 1, SipTopology::Ring, 4, 2);
  pe_config(c).scratch = kMiB;
  GqaSpec s;
  s.phase = GqaPhase::Decode;
  s.gqa_case = 2;  // the whole K/V of the group striped over one cube's 8 slices
  s.t_q = 1;
  s.s_kv = 131072;
  // K and V: 131072 tokens x 128 x 2 B each, over 8 slices = 8 MiB per slice;
  // plus the PE's Q and O rows (stripe-aligned) in its own slice.
  const Bytes kv = 2 * (131072 / 8) * 128 * 2;
  System probe(c);
  const GqaPlan plan = plan_gqa(probe, s);
  const Bytes rows = (plan.rows_per_pe * 128 * 2 + 255) / 256 * 256;
  pe_config(c).hbm.capacity = kv + 2 * rows;
  {
    System fits(c);
    CHECK_NOTHROW(plan_gqa(fits, s));
  }
  pe_config(c).hbm.capacity = kv + 2 * rows - 1;
  System tight(c);
  CHECK_THROWS_AS(plan_gqa(tight, s), kernbench::CapacityError);
  pe_config(c).hbm.capacity = kv - 1;
  System small(c);
  CHECK_THROWS_WITH(plan_gqa(small, s), Catch::Contains("V of the KV cache of GQA case 2 decode") &&
                                            Catch::Contains("S_kv = 131072") && Catch::Contains("16384 tokens here"));
}

TEST_CASE("hbm: a GEMM's traffic per pseudo-channel adds up to its HBM bytes and spreads over every channel", "[hbm]") {
  Config c = energy_machine();
  pe_config(c).hbm.pseudo_channels = 8;
  System system(c);
  kernbench::kernels::GemmSpec s;
  s.m = s.n = s.k = 256;
  kernbench::kernels::GemmPlan plan;
  const Program p = kernbench::kernels::gemm_program(system, s, &plan);
  const auto t = hbm_traffic(p, system.machine(), pe_config(c).hbm);
  REQUIRE(t.size() == 1);
  Bytes total = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    CHECK(t[0].read[i] > 0);
    CHECK(t[0].written[i] > 0);
    total += t[0].read[i] + t[0].written[i];
  }
  CHECK(total == plan.hbm_bytes);
}
