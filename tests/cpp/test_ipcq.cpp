// test_ipcq.cpp -- the IPCQ engine: slot segments, slot reads, reductions,
// back-pressure, deadlock messages, the observer.
#include <catch2/catch.hpp>

#include <algorithm>

#include "machines.hpp"
#include "runtime/executor.hpp"
#include "sim/errors.hpp"

using namespace kernbench::testing;
using namespace kernbench::runtime;
using kernbench::sim::kKiB;
using kernbench::sim::kNanosecond;

namespace {

Config ipcq_config(int slots = 8, Bytes slot = 4 * kKiB) {
  Config c = system_config(1, 1, SipTopology::Ring, 2, 1);
  pe_config(c).clock_hz = 1'000'000'000;
  pe_config(c).dispatch = 20 * kNanosecond;
  pe_config(c).vector_bytes_per_cycle = 128;  // scratch port: 128 B/ns, slower than the 256 GB/s NoC
  pe_config(c).ipcq_slots = slots;
  pe_config(c).ipcq_slot = slot;
  pe_config(c).ipcq_bank_hop = 1 * kNanosecond;
  return c;
}

struct Fixture {
  explicit Fixture(Config c = ipcq_config()) : system(std::move(c)) {}
  System system;
  NodeId pe(int p, int cube = 0) const { return system.machine().pe(0, cube, p); }
};

// The op-log rows of one kind.
std::vector<std::size_t> rows(const RunResult& r, const std::string& kind) {
  std::vector<std::size_t> out;
  const auto& names = r.log.kind_names();
  const auto code = static_cast<std::int32_t>(std::find(names.begin(), names.end(), kind) - names.begin());
  for (std::size_t i = 0; i < r.log.size(); ++i)
    if (r.log.kind()[i] == code) out.push_back(i);
  return out;
}

}  // namespace

TEST_CASE("a consuming recv reads every slot: bank hop + bytes at the scratch width", "[ipcq]") {
  Fixture f;
  Program p("read");
  const OpId r = p.recv(f.pe(5, 1), f.pe(0), 1, {}, "recv");
  const OpId s = p.send(f.pe(0), f.pe(5, 1), 8 * kKiB, 1, {}, "send");
  const RunResult res = Executor(f.system).run(p);
  // Two 4 KiB segments; the reads (33 ns each) are slower than the link
  // (16 ns per segment), so the second waits for the first read:
  // end = first arrival + 2 x (1 ns + 4096 / 128 cycles).
  CHECK(res.ops[r].end == res.ops[r].start + 2 * 33 * kNanosecond);
  CHECK(res.ops[s].end < res.ops[r].end);
  CHECK(res.op_bytes.at("send") == 8 * kKiB);
}

TEST_CASE("a reducing recv pays the vector engine per slot; no-consume pays nothing", "[ipcq]") {
  Fixture f;
  Program p("modes");
  const OpId r1 = p.recv(f.pe(1), f.pe(0), 1, {}, "reduce", 0, RecvMode::Reduce);
  p.send(f.pe(0), f.pe(1), 4 * kKiB, 1, {}, "s1");
  const OpId r2 = p.recv(f.pe(3), f.pe(2), 2, {}, "look", 0, RecvMode::NoConsume);
  const OpId s2 = p.send(f.pe(2), f.pe(3), 4 * kKiB, 2, {}, "s2");
  const RunResult res = Executor(f.system).run(p);
  CHECK(res.ops[r1].end - res.ops[r1].start == 33 * kNanosecond);  // one slot: hop + 32 cycles
  CHECK(res.ops[r2].end == res.ops[s2].end);
  // The reduction ran on the vector engine of pe1, the read-free recv on none.
  double vector_busy = 0;
  for (const EngineUse& u : res.engines)
    if (u.pe == f.pe(1) && u.engine == Engine::Vector) vector_busy = u.busy;
  CHECK(vector_busy == Approx(33'000.0));
}

TEST_CASE("a sender blocks while the receiver's slots are full, and the wait is in the op log", "[ipcq]") {
  Fixture f(ipcq_config(/*slots=*/2));
  Program p("backpressure");
  // The receiver is busy for 2 us before it posts the recv.
  const OpId busy = p.gemm(f.pe(1), 2048.0 * 2000, Precision::Fp16, {}, "busy");
  const OpId r = p.recv(f.pe(1), f.pe(0), 9, {busy}, "late recv");
  const OpId s = p.send(f.pe(0), f.pe(1), 32 * kKiB, 9, {}, "big send");  // 8 segments, 2 slots
  const RunResult res = Executor(f.system).run(p);
  const auto waits = rows(res, "slot_wait");
  REQUIRE(!waits.empty());
  // The first wait starts once two segments are in flight and ends only
  // after the recv has freed a slot.
  const std::size_t w = waits.front();
  CHECK(res.log.start()[w] < res.ops[busy].end);
  CHECK(res.log.end()[w] > res.ops[busy].end);
  CHECK(res.log.end()[w] - res.log.start()[w] > 1'900 * kNanosecond);
  CHECK(res.log_names[w] == "big send: slot_wait");
  CHECK(res.ops[s].end > res.ops[busy].end);
  CHECK(res.ops[r].end >= res.ops[s].end);

  // With enough slots the same send finishes long before the recv is posted.
  Fixture g(ipcq_config(/*slots=*/8));
  const RunResult free = Executor(g.system).run(p);
  CHECK(rows(free, "slot_wait").empty());
  CHECK(free.ops[s].end < free.ops[busy].end);
}

TEST_CASE("a send that fills the slots with no recv is a deadlock naming both PEs", "[ipcq]") {
  Fixture f(ipcq_config(/*slots=*/2));
  Program p("no taker");
  p.send(f.pe(0), f.pe(1), 32 * kKiB, 4, {}, "orphan send");
  CHECK_THROWS_AS(Executor(f.system).run(p), kernbench::DeadlockError);
  Fixture g(ipcq_config(/*slots=*/2));
  CHECK_THROWS_WITH(Executor(g.system).run(p),
                    Catch::Contains("'orphan send' (send on sip0.cube0.pe0) is blocked: 2 of 8 segments delivered") &&
                        Catch::Contains("sip0.cube0.pe1's queue from sip0.cube0.pe0 are full and no recv for key 4"));
  // A send that fits in the slots is not received either: once the run is
  // over, a DeadlockError names it, its sender, its receiver and its key.
  Fixture h(ipcq_config(/*slots=*/8));
  Program q("fits");
  q.send(h.pe(0), h.pe(1), 32 * kKiB, 4, {}, "fits");
  CHECK_THROWS_AS(Executor(h.system).run(q), kernbench::DeadlockError);
  Fixture k(ipcq_config(/*slots=*/8));
  CHECK_THROWS_WITH(Executor(k.system).run(q),
                    Catch::Contains("'fits' (send on sip0.cube0.pe0) sent 32 KiB from sip0.cube0.pe0 to sip0.cube0.pe1 "
                                    "with key 4, but no recv on sip0.cube0.pe1"));
}

TEST_CASE("two sends with one key to one receiver, and sends to oneself, are refused", "[ipcq]") {
  Fixture f;
  Program p("dup");
  p.send(f.pe(0), f.pe(1), 64, 3, {}, "first");
  p.send(f.pe(0), f.pe(1), 64, 3, {}, "second");
  p.recv(f.pe(1), f.pe(0), 3, {}, "r");
  CHECK_THROWS_WITH(Executor(f.system).run(p), Catch::Contains("reuses key 3"));
  CHECK_THROWS_WITH(p.send(f.pe(0), f.pe(0), 64, 5), Catch::Contains("cannot send to itself"));
}

TEST_CASE("the observer sees a send start before its recv ends", "[ipcq]") {
  struct Order : Executor::Observer {
    std::vector<std::pair<char, OpId>> seen;
    void on_start(OpId op) override { seen.push_back({'s', op}); }
    void on_end(OpId op) override { seen.push_back({'e', op}); }
  } order;
  Fixture f;
  Program p("obs");
  const OpId r = p.recv(f.pe(1), f.pe(0), 1, {}, "r");
  const OpId s = p.send(f.pe(0), f.pe(1), 4 * kKiB, 1, {}, "s");
  Executor(f.system).run(p, &order);
  const auto at = [&](char what, OpId op) {
    return std::find(order.seen.begin(), order.seen.end(), std::make_pair(what, op)) - order.seen.begin();
  };
  CHECK(at('s', s) < at('e', s));
  CHECK(at('s', s) < at('e', r));
  CHECK(at('e', r) < static_cast<long>(order.seen.size()));
}

TEST_CASE("with one slot, each credit's trip back over the reverse route adds exactly its latency", "[ipcq]") {
  // A 16 KiB send into a 1-slot queue: four 4 KiB segments, each sent only
  // once the previous one's slot is free again. The recv frees a slot the
  // moment it arrives (no-consume), so with instant credits the send takes
  // 4 segment latencies; with fabric credits each of the three waits also
  // pays one credit message (64 B) from the receiver back to the sender.
  // The route crosses a UCIe link made 500 ns long, so the round trip shows.
  const auto run = [](IpcqCredit mode) {
    Config c = ipcq_config(/*slots=*/1);
    c.system->links.ucie.latency = 500 * kNanosecond;
    pe_config(c).ipcq_credit = mode;
    Fixture f(std::move(c));
    Program p("pingpong");
    p.recv(f.pe(5, 1), f.pe(0), 1, {}, "r", 0, RecvMode::NoConsume);
    const OpId s = p.send(f.pe(0), f.pe(5, 1), 16 * kKiB, 1, {}, "s");
    const RunResult res = Executor(f.system).run(p);
    return res.ops[s].end - res.ops[s].start;
  };
  // The reverse route's latency for one credit: a lone 64 B transfer
  // pe5 (cube 1) -> pe0 (cube 0) on an idle machine of the same config.
  Config c = ipcq_config(1);
  c.system->links.ucie.latency = 500 * kNanosecond;
  Fixture probe(std::move(c));
  const auto id = probe.system.fabric().start(kernbench::topology::TransferSpec{
      probe.pe(5, 1), probe.pe(0), pe_config(probe.system.config()).ipcq_credit_bytes});
  probe.system.run();
  const auto credit = probe.system.fabric().record(id).latency();
  REQUIRE(credit > 500 * kNanosecond);  // it does cross the long link
  const auto instant = run(IpcqCredit::Instant), fabric = run(IpcqCredit::Fabric);
  CHECK(fabric - instant == 3 * credit);
  CHECK(kernbench::runtime::PeConfig{}.ipcq_credit == IpcqCredit::Fabric);  // the default pays the round trip
  CHECK(kernbench::runtime::PeConfig{}.ipcq_credit_bytes == 64);

  // With enough slots for the whole message no credit is waited for: both modes agree.
  const auto wide = [](IpcqCredit mode) {
    Config c = ipcq_config(/*slots=*/8);
    c.system->links.ucie.latency = 500 * kNanosecond;
    pe_config(c).ipcq_credit = mode;
    Fixture f(std::move(c));
    Program p("wide");
    p.recv(f.pe(5, 1), f.pe(0), 1, {}, "r", 0, RecvMode::NoConsume);
    const OpId s = p.send(f.pe(0), f.pe(5, 1), 16 * kKiB, 1, {}, "s");
    const RunResult res = Executor(f.system).run(p);
    return res.ops[s].end - res.ops[s].start;
  };
  CHECK(wide(IpcqCredit::Fabric) == wide(IpcqCredit::Instant));
}

TEST_CASE("a proxy send holds no IPCQ unit: a send queued behind it starts at once", "[ipcq]") {
  // One IPCQ unit on pe0. Two sends of 64 KiB from pe0 issued together: as
  // plain sends the second waits for the unit until the first has arrived;
  // with the first marked proxy (NCCL's network transport, driven by the
  // host's proxy thread) both start together and, sharing nothing but the
  // sender's links, the proxy send costs pe0's engine nothing.
  for (const bool proxy : {false, true}) {
    Config c = ipcq_config();
    pe_config(c).ipcq_channels = 1;
    Fixture f(std::move(c));
    Program p("proxy");
    const OpId a = p.send(f.pe(0), f.pe(1), 64 * kKiB, 1, {}, "a");
    if (proxy) p.set_proxy(a);
    const OpId b = p.send(f.pe(0), f.pe(5, 1), 64 * kKiB, 2, {}, "b");
    p.set_latency(a, 0);  // no PE_CPU dispatch (a GPU's collective steps): both are ready at 0
    p.set_latency(b, 0);
    p.recv(f.pe(1), f.pe(0), 1, {}, "ra", 0, RecvMode::NoConsume);
    p.recv(f.pe(5, 1), f.pe(0), 2, {}, "rb", 0, RecvMode::NoConsume);
    const RunResult res = Executor(f.system).run(p);
    INFO("proxy " << proxy);
    if (proxy) {
      CHECK(res.ops[b].start == res.ops[a].start);
    } else {
      CHECK(res.ops[b].start >= res.ops[a].end);
    }
    double ipcq_busy = 0;
    for (const EngineUse& u : res.engines)
      if (u.pe == f.pe(0) && u.engine == Engine::Ipcq) ipcq_busy = u.busy;
    // The unit is busy for b alone when a is a proxy send, for both otherwise.
    const double b_time = static_cast<double>(res.ops[b].end - res.ops[b].start);
    const double a_time = static_cast<double>(res.ops[a].end - res.ops[a].start);
    CHECK(ipcq_busy == Approx(proxy ? b_time : a_time + b_time));
  }
}

TEST_CASE("set_proxy is refused on an op that is not a send", "[ipcq]") {
  Fixture f;
  Program p("proxy");
  const OpId r = p.recv(f.pe(1), f.pe(0), 1, {}, "r");
  CHECK_THROWS_WITH(p.set_proxy(r), Catch::Contains("set_proxy: op 0 is not a send"));
}
