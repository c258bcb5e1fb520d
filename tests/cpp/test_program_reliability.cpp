// test_program_reliability.cpp -- what the Program builder and the executor
// refuse (issue 22, round 2): scratch / HBM-slice / IPCQ-slot capacity,
// unmatched and doubly received sends, agents and dma endpoints of the wrong
// node kind, counts too large for the run graph. Each case checks the error
// class and a message naming the op, the node and the limit.
#include <catch2/catch.hpp>

#include <limits>

#include "machines.hpp"
#include "runtime/executor.hpp"
#include "sim/errors.hpp"

using namespace kernbench::testing;
using namespace kernbench::runtime;
using Catch::Contains;
using kernbench::sim::kGiB;
using kernbench::sim::kKiB;
using kernbench::sim::kMiB;

namespace {

struct Fixture {
  explicit Fixture(Config c = program_config(2, 1)) : system(std::move(c)) {}
  System system;
  const kernbench::topology::Machine& m() const { return system.machine(); }
  NodeId pe(int p) const { return m().pe(0, 0, p); }
  NodeId hbm(int p) const { return m().hbm_ctrl(0, 0, p); }
  NodeId router() const { return m().router(0, 0, 0, 0); }
  RunResult run(const Program& p) { return Executor(system).run(p); }
};

Pipeline one_load(NodeId src, NodeId dst, Bytes bytes, std::uint32_t tiles = 4, std::uint32_t buffers = 2) {
  Pipeline pipe;
  pipe.tiles = tiles;
  pipe.loads.push_back(Move{src, dst, bytes});
  pipe.flops = 1e3;
  pipe.buffers = buffers;
  return pipe;
}

}  // namespace

// ---- 1. capacity ----------------------------------------------------------------------------------

TEST_CASE("reliability: a composite's tile buffers must fit the PE's scratch", "[program][reliability]") {
  Fixture f;
  Program p("big tiles");
  p.composite(f.pe(0), one_load(f.hbm(0), f.pe(0), kGiB), {}, "huge load");
  CHECK_THROWS_AS(f.run(p), kernbench::CapacityError);
  CHECK_THROWS_WITH(f.run(p), Contains("op 0 'huge load' (composite) on sip0.cube0.pe0") &&
                                  Contains("need 2097152 KiB of scratch (2 buffers x 1048576 KiB of loads") &&
                                  Contains("budget pe.scratch = 1024 KiB"));
  // N-buffering counts: 3 x 400 KiB does not fit 1 MiB though one tile does.
  Program q("triple");
  q.composite(f.pe(0), one_load(f.hbm(0), f.pe(0), 400 * kKiB, 4, 3), {}, "triple");
  CHECK_THROWS_WITH(f.run(q), Contains("3 buffers x 400 KiB of loads"));
  // Stores out of scratch count too.
  Pipeline st = one_load(f.hbm(0), f.pe(0), 400 * kKiB);
  st.stores.push_back(Move{f.pe(0), f.hbm(0), 300 * kKiB});
  Program r("stores");
  r.composite(f.pe(0), st, {}, "with store");
  CHECK_THROWS_WITH(f.run(r), Contains("2 buffers x 400 KiB of loads + 300 KiB of stores"));
  // Fewer tiles than buffers: only the tiles are resident; this fits.
  Program ok("fits");
  ok.composite(f.pe(0), one_load(f.hbm(0), f.pe(0), 600 * kKiB, 1, 2), {}, "one tile");
  CHECK_NOTHROW(f.run(ok));
}

TEST_CASE("reliability: a dma larger than a scratch or past an HBM slice is a CapacityError",
          "[program][reliability]") {
  Fixture f;
  Program p("into scratch");
  p.dma(f.pe(0), Move{f.hbm(0), f.pe(0), 2 * kMiB}, {}, "too big");
  CHECK_THROWS_AS(f.run(p), kernbench::CapacityError);
  CHECK_THROWS_WITH(f.run(p), Contains("op 0 'too big' (dma) on sip0.cube0.pe0: dma destination 2048 KiB") &&
                                  Contains("scratch of sip0.cube0.pe0 exceed its budget pe.scratch = 1024 KiB"));
  Program q("out of scratch");
  q.dma(f.pe(0), Move{f.pe(1), f.hbm(0), 2 * kMiB}, {}, "read remote");
  CHECK_THROWS_WITH(f.run(q), Contains("dma source 2048 KiB in the scratch of sip0.cube0.pe1"));
  const Bytes cap = pe_config(f.system.config()).hbm.capacity;
  Program h("hbm");
  h.dma(f.pe(0), Move{f.pe(0), f.hbm(0), 4 * kKiB, static_cast<std::uint64_t>(cap) - kKiB}, {}, "past the end");
  CHECK_THROWS_AS(f.run(h), kernbench::CapacityError);
  CHECK_THROWS_WITH(f.run(h), Contains("'past the end' (dma)") && Contains("HBM slice sip0.cube0.hbm_ctrl.pe0") &&
                                  Contains("pe.hbm.capacity = 1048576 KiB"));
}

TEST_CASE("reliability: IPCQ slots larger than the receiver's scratch are refused", "[program][reliability]") {
  Config c = program_config(2, 1);
  pe_config(c).ipcq_slots = 512;
  pe_config(c).ipcq_slot = 4 * kKiB;  // 2 MiB of slots, 1 MiB of scratch
  Fixture f(c);
  Program p("slots");
  p.send(f.pe(0), f.pe(1), 64, 1, {}, "s");
  p.recv(f.pe(1), f.pe(0), 1, {}, "r");
  CHECK_THROWS_AS(f.run(p), kernbench::CapacityError);
  CHECK_THROWS_WITH(f.run(p), Contains("op 1 'r' (recv) on sip0.cube0.pe1: the IPCQ slots from sip0.cube0.pe0") &&
                                  Contains("ipcq_slots 512 x 4 KiB = 2048 KiB") &&
                                  Contains("budget pe.scratch = 1024 KiB"));
}

// ---- 2. send / recv pairing -----------------------------------------------------------------------

TEST_CASE("reliability: a send nobody receives is a DeadlockError naming it", "[program][reliability]") {
  Fixture f;
  Program p("orphan");
  p.send(f.pe(0), f.pe(1), 64, 9, {}, "lonely send");
  CHECK_THROWS_AS(f.run(p), kernbench::DeadlockError);
  CHECK_THROWS_WITH(f.run(p), Contains("op 0 'lonely send' (send on sip0.cube0.pe0) sent 64 B from sip0.cube0.pe0 "
                                       "to sip0.cube0.pe1 with key 9, but no recv"));
  // A recv with another key does not take it (and itself waits forever).
  Program q("other key");
  q.send(f.pe(0), f.pe(1), 64, 9, {}, "s");
  q.recv(f.pe(1), f.pe(0), 8, {}, "r");
  CHECK_THROWS_AS(f.run(q), kernbench::DeadlockError);
}

TEST_CASE("reliability: two recvs of one send are refused before the run", "[program][reliability]") {
  Fixture f;
  Program p("two takers");
  p.send(f.pe(0), f.pe(1), 64, 3, {}, "the send");
  p.recv(f.pe(1), f.pe(0), 3, {}, "first recv");
  p.recv(f.pe(1), f.pe(0), 3, {}, "second recv");
  CHECK_THROWS_AS(f.run(p), kernbench::UsageError);
  CHECK_THROWS_WITH(f.run(p), Contains("op 2 'second recv' (recv) on sip0.cube0.pe1 and op 1 'first recv'") &&
                                  Contains("both receive op 0 'the send'") && Contains("key 3"));
  // The send after its recvs: still named by sender and key.
  Program q("late send");
  q.recv(f.pe(1), f.pe(0), 3, {}, "a");
  q.recv(f.pe(1), f.pe(0), 3, {}, "b");
  q.send(f.pe(0), f.pe(1), 64, 3, {}, "s");
  CHECK_THROWS_WITH(f.run(q), Contains("the send from sip0.cube0.pe0 with key 3"));
  // Two sends of one message: refused before the run, naming both.
  Program d("dup");
  d.send(f.pe(0), f.pe(1), 64, 3, {}, "first");
  d.send(f.pe(0), f.pe(1), 64, 3, {}, "second");
  CHECK_THROWS_AS(f.run(d), kernbench::UsageError);
  CHECK_THROWS_WITH(f.run(d), Contains("op 1 'second' (send) on sip0.cube0.pe0 reuses key 3 of op 0 'first'"));
}

// ---- 3. node kinds ---------------------------------------------------------------------------------

TEST_CASE("reliability: dma agents must own engines, dma ends must be memories", "[program][reliability]") {
  Fixture f;
  Program p("router memory");
  p.dma(f.pe(0), Move{f.hbm(0), f.router(), 64}, {}, "to a router");
  CHECK_THROWS_AS(f.run(p), kernbench::UsageError);
  CHECK_THROWS_WITH(f.run(p), Contains("op 0 'to a router' (dma): dma destination sip0.cube0.r0c0 is a router, "
                                       "not a memory"));
  Program q("hbm agent");
  q.dma(f.hbm(0), Move{f.hbm(0), f.pe(0), 64}, {}, "issued by hbm");
  CHECK_THROWS_AS(f.run(q), kernbench::UsageError);
  CHECK_THROWS_WITH(f.run(q), Contains("op 0 'issued by hbm' (dma): agent sip0.cube0.hbm_ctrl.pe0 is a hbm_ctrl"));
  Program c("composite via a router");
  c.composite(f.pe(0), one_load(f.router(), f.pe(0), 64), {}, "tiles");
  CHECK_THROWS_WITH(f.run(c), Contains("load 0 source sip0.cube0.r0c0 is a router"));
  Program s("send to hbm");
  s.send(f.pe(0), f.hbm(1), 64, 1, {}, "s");
  CHECK_THROWS_WITH(f.run(s), Contains("receiver sip0.cube0.hbm_ctrl.pe1 is a hbm_ctrl, not a PE"));
  Program r("recv from a router");
  r.recv(f.pe(0), f.router(), 1, {}, "r");
  CHECK_THROWS_WITH(f.run(r), Contains("sender sip0.cube0.r0c0 is a router, not a PE"));
  // The ordinary cases still run: HBM <-> scratch, scratch -> remote scratch.
  Program ok("fine");
  const OpId a = ok.dma(f.pe(0), Move{f.hbm(0), f.pe(0), 64 * kKiB});
  ok.dma(f.pe(0), Move{f.pe(0), f.pe(1), 64 * kKiB}, {a});
  CHECK_NOTHROW(f.run(ok));
}

TEST_CASE("reliability: explicit graphs keep their own agents and memories", "[program][reliability]") {
  // A chain of "other" nodes (an explicit graph): agents and ends of any
  // memory-like kind are accepted, as the K200 and host graphs need.
  System s(chain_config({NodeParams{}, NodeParams{}, NodeParams{}}, {link(100, 10), link(100, 10)}));
  Program p("chain");
  p.dma(0, Move{2, 0, 4 * kKiB});
  CHECK_NOTHROW(Executor(s).run(p));
}

// ---- 4. huge counts ---------------------------------------------------------------------------------

TEST_CASE("reliability: counts too large for the run graph are refused up front", "[program][reliability]") {
  Fixture f;
  Program p("many tiles");
  CHECK_THROWS_AS(p.composite(f.pe(0), one_load(f.hbm(0), f.pe(0), 64, 2147483647U), {}, "endless"),
                  kernbench::UsageError);
  CHECK_THROWS_WITH(
      p.composite(f.pe(0), one_load(f.hbm(0), f.pe(0), 64, 2147483647U), {}, "endless"),
      Contains("composite 'endless': tiles = 2147483647 x 2 stages") && Contains("more than the limit of 16777216"));
  // Composites that fit one by one but not together.
  Program q("many composites");
  for (int i = 0; i < 2; ++i) q.composite(f.pe(0), one_load(f.hbm(0), f.pe(0), 64, 6000000U), {}, "c");
  CHECK_THROWS_AS(f.run(q), kernbench::UsageError);
  CHECK_THROWS_WITH(f.run(q), Contains("op 1 'c' (composite): the run graph would have 24000004 nodes") &&
                                  Contains("limit of 16777216"));
  // A 1 TiB send: 2^28 slot segments.
  Program t("tebibyte");
  t.send(f.pe(0), f.pe(1), Bytes{1} << 40, 1, {}, "big send");
  t.recv(f.pe(1), f.pe(0), 1, {}, "r");
  CHECK_THROWS_AS(f.run(t), kernbench::UsageError);
  CHECK_THROWS_WITH(f.run(t), Contains("op 0 'big send' (send) on sip0.cube0.pe0") &&
                                  Contains("268435456 segments, more than the limit of 4194304 per send"));
}

TEST_CASE("reliability: a composite's sizes and FLOPs are checked as it is added", "[program][reliability]") {
  Fixture f;
  Program p("bad pipeline");
  CHECK_THROWS_AS(p.composite(f.pe(0), one_load(f.hbm(0), f.pe(0), -1), {}, "neg"), kernbench::UsageError);
  CHECK_THROWS_WITH(p.composite(f.pe(0), one_load(f.hbm(0), f.pe(0), -1), {}, "neg"),
                    Contains("composite 'neg': load 0: negative size -1 B"));
  Pipeline nan = one_load(f.hbm(0), f.pe(0), 64);
  nan.flops = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(p.composite(f.pe(0), nan, {}, "nan"), Contains("composite 'nan': FLOPs per tile must be >= 0"));
  Pipeline vec = one_load(f.hbm(0), f.pe(0), 64);
  vec.compute = OpKind::Vector;
  vec.vector_bytes = -5;
  CHECK_THROWS_WITH(p.composite(f.pe(0), vec, {}, "vec"), Contains("composite 'vec': negative vector_bytes -5"));
  CHECK(p.size() == 0);
}
