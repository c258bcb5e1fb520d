// test_dma_path.cpp -- one DMA path: System::dma (pe-dma-perf, calibrate's
// fabric.dma) and a Program's dma op (the executor's DMA engine) take the
// same legs through topology::dma_move, so their figures agree to the
// picosecond: a lone read, a write, a multi-chunk transfer, transfers
// contending on one link, and an address that an ECMP hash would read.
#include <catch2/catch.hpp>

#include <vector>

#include "machines.hpp"
#include "runtime/executor.hpp"
#include "topology/system.hpp"

using namespace kernbench::testing;
using kernbench::runtime::Executor;
using kernbench::runtime::Move;
using kernbench::runtime::Program;
using kernbench::sim::kKiB;

namespace {

struct Dma {
  DmaKind kind;
  int pe;   // issuer: sip0.cube0.pe<pe>
  int hbm;  // memory: the HBM slice of sip0.cube0.pe<hbm>
  kernbench::sim::Bytes bytes;
  std::uint64_t address = 0;
};

Config machine() {
  Config c = program_config(1, 1);
  pe_config(c).dispatch = 0;  // System::dma has no PE_CPU: compare the moves alone
  pe_config(c).dma_channels = 4;
  return c;
}

// End times through System::dma, every DMA issued at t = 0.
std::vector<Time> through_system(const std::vector<Dma>& dmas) {
  System s(machine());
  const Machine& m = s.machine();
  for (const Dma& d : dmas) s.dma(d.kind, m.pe(0, 0, d.pe), m.hbm_ctrl(0, 0, d.hbm), d.bytes, 0, 0, d.address);
  s.sim().run();
  std::vector<Time> out;
  for (const auto& op : s.dma_ops()) out.push_back(op.result.end);
  return out;
}

// End times through a Program: one dma op per DMA, no dependencies.
std::vector<Time> through_program(const std::vector<Dma>& dmas) {
  System s(machine());
  const Machine& m = s.machine();
  Program p("dmas");
  for (const Dma& d : dmas) {
    const NodeId pe = m.pe(0, 0, d.pe), hbm = m.hbm_ctrl(0, 0, d.hbm);
    Move mv = d.kind == DmaKind::Read ? Move{hbm, pe, d.bytes, d.address} : Move{pe, hbm, d.bytes, d.address};
    p.dma(pe, mv);
  }
  Executor ex(s);
  const auto r = ex.run(p);
  std::vector<Time> out;
  for (const auto& t : r.ops) out.push_back(t.end);
  return out;
}

void same(const std::vector<Dma>& dmas) {
  const auto a = through_system(dmas), b = through_program(dmas);
  REQUIRE(a.size() == dmas.size());
  CHECK(a == b);
  for (Time t : a) CHECK(t > 0);
}

}  // namespace

TEST_CASE("one DMA path: a read, a write and a multi-chunk transfer cost the same through both entries", "[dma]") {
  same({{DmaKind::Read, 0, 0, 2 * kKiB}});
  same({{DmaKind::Write, 0, 0, 2 * kKiB}});
  same({{DmaKind::Read, 0, 3, 64 * kKiB}});  // 16 chunks of 4 KiB, to a remote slice
  same({{DmaKind::Write, 2, 5, 64 * kKiB}});
}

TEST_CASE("one DMA path: transfers contending on one link queue the same through both entries", "[dma]") {
  // Three PEs read the same slice at once (its link is shared), then a mix of reads and writes.
  same({{DmaKind::Read, 0, 4, 32 * kKiB}, {DmaKind::Read, 1, 4, 32 * kKiB}, {DmaKind::Read, 2, 4, 32 * kKiB}});
  same({{DmaKind::Read, 0, 4, 16 * kKiB}, {DmaKind::Write, 1, 4, 16 * kKiB}, {DmaKind::Read, 4, 0, 8 * kKiB}});
  // Contention makes the second and third later than a lone read of the same size.
  const auto lone = through_system({{DmaKind::Read, 2, 4, 32 * kKiB}});
  const auto three = through_system(
      {{DmaKind::Read, 0, 4, 32 * kKiB}, {DmaKind::Read, 1, 4, 32 * kKiB}, {DmaKind::Read, 2, 4, 32 * kKiB}});
  CHECK(*std::max_element(three.begin(), three.end()) > lone[0]);
}

TEST_CASE("one DMA path: the address reaches the fabric through both entries (ECMP hashes it)", "[dma]") {
  same({{DmaKind::Read, 0, 7, 16 * kKiB, 0x1000}, {DmaKind::Read, 0, 7, 16 * kKiB, 0x2000}});
}
