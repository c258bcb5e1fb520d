// test_critical_path.cpp -- the chain of ops and waits that sets the
// makespan: known answers on hand-built programs, and the invariants (the
// steps tile [start, end]; every step is a real op or a wait with a real
// holder) on every run.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <set>

#include "ccl/ccl.hpp"
#include "kernels/gemm.hpp"
#include "machines.hpp"
#include "platforms/k200/k200.hpp"
#include "platforms/vgpu/workload.hpp"
#include "runtime/critical_path.hpp"
#include "runtime/recorder.hpp"
#include "kernbench.hpp"
#include "sim/errors.hpp"

using namespace kernbench::testing;
using namespace kernbench::runtime;
using kernbench::sim::kKiB;
using kernbench::sim::kNanosecond;

namespace {

Config cp_config() {
  Config c = program_config(2, 1);  // 2048 FLOP per cycle at 1 GHz
  pe_config(c).ipcq_slots = 2;
  pe_config(c).ipcq_slot = 4 * kKiB;
  pe_config(c).ipcq_bank_hop = 1 * kNanosecond;
  return c;
}

struct Fixture {
  System system{cp_config()};
  const Machine& m = system.machine();
  NodeId pe(int p, int cube = 0) const { return m.pe(0, cube, p); }
  NodeId hbm(int p, int cube = 0) const { return m.hbm_ctrl(0, cube, p); }
};

constexpr double kCycle = 2048.0;  // FLOPs per GEMM cycle (1 ns)

// The invariants every critical path keeps; returns the path.
CriticalPath checked(const RunResult& r) {
  const CriticalPath cp = critical_path(r);
  REQUIRE(!cp.steps.empty());
  CHECK(cp.length() == r.makespan());
  CHECK(cp.steps.front().start == r.start);
  CHECK(cp.steps.back().end == r.end);
  Time share = 0;
  for (const auto& [label, t] : cp.share) share += t;
  CHECK(share == r.makespan());
  for (std::size_t i = 0; i < cp.steps.size(); ++i) {
    const CriticalStep& s = cp.steps[i];
    INFO("step " << i << " " << to_string(s.kind) << " of '" << r.causes.at(static_cast<std::size_t>(s.node)).name
                 << "' on " << s.engine);
    CHECK(s.duration() > 0);
    if (i + 1 < cp.steps.size()) CHECK(s.end == cp.steps[i + 1].start);
    Time parts = 0;
    for (const auto& [label, t] : s.parts) parts += t;
    CHECK(parts == s.duration());
    const NodeCause& c = r.causes.at(static_cast<std::size_t>(s.node));
    // A real op (or wait): inside the node's own recorded lifetime.
    CHECK(s.start >= c.ready);
    CHECK(s.end <= c.end);
    if (s.kind == StepKind::Op) CHECK(s.start >= c.dispatch_start);
    // Each link names a real cause that let go exactly when this step began.
    if (i == 0) {
      CHECK(s.via == "start");
      CHECK(s.holder == -1);
      continue;
    }
    if (s.via == "op") {
      CHECK(cp.steps[i - 1].node == s.node);
      continue;
    }
    REQUIRE(s.holder >= 0);
    const NodeCause& h = r.causes.at(static_cast<std::size_t>(s.holder));
    if (s.via == "dependency") {
      CHECK(h.end == s.start);
      CHECK(s.waited == 0);
    } else if (s.via == "resource:pe_cpu") {
      CHECK(h.dispatch_end == s.start);
      CHECK(s.waited > 0);
    } else if (s.via.rfind("resource:", 0) == 0) {
      CHECK(h.end == s.start);  // engines are let go when the op ends
      CHECK(s.waited > 0);
      CHECK(s.via == "resource:" + s.engine);
    } else {
      CHECK(s.via == "message");
      CHECK(h.kind == OpKind::Send);
      CHECK(h.start <= s.start);
      CHECK(s.start <= h.end);
    }
  }
  return cp;
}

std::set<std::int32_t> path_nodes(const CriticalPath& cp) {
  std::set<std::int32_t> out;
  for (const auto& s : cp.steps) out.insert(s.node);
  return out;
}

}  // namespace

TEST_CASE("a chain: dispatch and work of every op, nothing else", "[critical-path]") {
  Fixture f;
  Program p("chain");
  const OpId a = p.gemm(f.pe(0), kCycle * 100, Precision::Fp16, {}, "a");
  const OpId b = p.gemm(f.pe(0), kCycle * 200, Precision::Fp16, {a}, "b");
  const OpId c = p.gemm(f.pe(0), kCycle * 300, Precision::Fp16, {b}, "c");
  const RunResult r = Executor(f.system).run(p);
  const CriticalPath cp = checked(r);
  REQUIRE(cp.steps.size() == 6);
  const OpId order[] = {a, a, b, b, c, c};
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(cp.steps[i].node == static_cast<std::int32_t>(order[i]));
    CHECK(cp.steps[i].kind == StepKind::Op);
    CHECK(cp.steps[i].engine == (i % 2 == 0 ? "pe_cpu" : "gemm"));
  }
  CHECK(cp.share.at("engine:gemm") == 600 * kNanosecond);
  CHECK(cp.share.at("engine:pe_cpu") == 3 * 20 * kNanosecond);
  CHECK(cp.share.size() == 2);
}

TEST_CASE("two independent branches: the longer one is the path", "[critical-path]") {
  Fixture f;
  Program p("branches");
  const OpId s1 = p.gemm(f.pe(0), kCycle * 500, Precision::Fp16, {}, "short");
  const OpId l1 = p.gemm(f.pe(1), kCycle * 300, Precision::Fp16, {}, "long 1");
  const OpId l2 = p.gemm(f.pe(1), kCycle * 300, Precision::Fp16, {l1}, "long 2");
  const RunResult r = Executor(f.system).run(p);
  const CriticalPath cp = checked(r);
  const auto nodes = path_nodes(cp);
  CHECK(nodes == std::set<std::int32_t>{static_cast<std::int32_t>(l1), static_cast<std::int32_t>(l2)});
  CHECK(nodes.count(static_cast<std::int32_t>(s1)) == 0);
  CHECK(cp.share.at("engine:gemm") == 600 * kNanosecond);
}

TEST_CASE("two ops contending for one GEMM engine: a resource wait blamed on the first", "[critical-path]") {
  Fixture f;
  Program p("contend");
  const OpId a = p.gemm(f.pe(0), kCycle * 1000, Precision::Fp16, {}, "first");
  const OpId b = p.gemm(f.pe(0), kCycle * 1000, Precision::Fp16, {}, "second");
  const RunResult r = Executor(f.system).run(p);
  const CriticalPath cp = checked(r);
  // first's dispatch and work, then second's work, which waited for the
  // GEMM engine that first held (second's own dispatch ran meanwhile).
  REQUIRE(cp.steps.size() == 3);
  CHECK(cp.steps[0].node == static_cast<std::int32_t>(a));
  CHECK(cp.steps[0].engine == "pe_cpu");
  CHECK(cp.steps[1].node == static_cast<std::int32_t>(a));
  CHECK(cp.steps[1].engine == "gemm");
  CHECK(cp.steps[2].node == static_cast<std::int32_t>(b));
  CHECK(cp.steps[2].via == "resource:gemm");
  CHECK(cp.steps[2].holder == static_cast<std::int32_t>(a));
  CHECK(cp.steps[2].waited == r.ops[a].end - 40 * kNanosecond);  // dispatched at 40 ns, granted at a's end
  CHECK(cp.share.at("engine:gemm") == 2 * 1000 * kNanosecond);
  CHECK(cp.share.at("engine:pe_cpu") == 20 * kNanosecond);
}

TEST_CASE("a DMA's fabric time goes to the link classes of its route", "[critical-path]") {
  Fixture f;
  Program p("dma");
  const OpId d = p.dma(f.pe(0), Move{f.hbm(5, 1), f.pe(0), 64 * kKiB}, {}, "far read");
  const RunResult r = Executor(f.system).run(p);
  const CriticalPath cp = checked(r);
  REQUIRE(cp.steps.size() == 2);
  const CriticalStep& s = cp.steps[1];
  CHECK(s.node == static_cast<std::int32_t>(d));
  CHECK(s.engine == "dma");
  // The route crosses PE, NoC, UCIe and HBM links; each class gets a share,
  // nothing is queued (the machine is otherwise idle).
  std::set<std::string> classes;
  for (const auto& [label, t] : s.parts) {
    CHECK(label.rfind("link:", 0) == 0);
    CHECK(t > 0);
    classes.insert(label.substr(5));
  }
  CHECK(classes.count("noc") == 1);
  CHECK(classes.count("hbm") == 1);
  CHECK(classes.count("ucie") == 1);
  CHECK(cp.share.count("engine:dma") == 0);
}

TEST_CASE("contending DMAs: the wait for a channel and the queuing in the fabric", "[critical-path]") {
  Fixture f;
  Program p("dmas");
  std::vector<OpId> ids;
  for (int i = 0; i < 3; ++i)  // two channels: the third waits for one
    ids.push_back(p.dma(f.pe(0), Move{f.hbm(0), f.pe(0), 64 * kKiB}, {}, "read " + std::to_string(i)));
  const RunResult r = Executor(f.system).run(p);
  const CriticalPath cp = checked(r);
  bool channel_wait = false;
  for (const auto& s : cp.steps)
    if (s.via == "resource:dma") {
      channel_wait = true;
      CHECK((s.holder == static_cast<std::int32_t>(ids[0]) || s.holder == static_cast<std::int32_t>(ids[1])));
    }
  CHECK(channel_wait);
  // The first two share the links: the fabric measured queuing, so part of
  // the path is a wait on a link class.
  Time queued = 0;
  for (const auto& [label, t] : cp.share)
    if (label.rfind("wait:resource:", 0) == 0 && label != "wait:resource:dma" && label != "wait:resource:pe_cpu")
      queued += t;
  CHECK(queued > 0);
}

TEST_CASE("a recv waits for its send: a dependency wait on the sender", "[critical-path]") {
  Fixture f;
  Program p("ipcq");
  const OpId g = p.gemm(f.pe(0), kCycle * 1000, Precision::Fp16, {}, "produce");
  const OpId s = p.send(f.pe(0), f.pe(1), 8 * kKiB, 1, {g}, "send");
  const OpId v = p.recv(f.pe(1), f.pe(0), 1, {}, "recv");
  const RunResult r = Executor(f.system).run(p);
  const CriticalPath cp = checked(r);
  // produce -> send -> (message) -> recv: the recv's wait for its first
  // segment continues in the send that was delivering it.
  bool message = false;
  for (const auto& st : cp.steps)
    if (st.via == "message") {
      message = true;
      CHECK(st.node == static_cast<std::int32_t>(v));
      CHECK(st.holder == static_cast<std::int32_t>(s));
    }
  CHECK(message);
  CHECK(path_nodes(cp).count(static_cast<std::int32_t>(g)) == 1);
  CHECK(cp.share.at("engine:gemm") == 1000 * kNanosecond);
  Time links = 0;
  for (const auto& [label, t] : cp.share)
    if (label.rfind("link:", 0) == 0) links += t;
  CHECK(links > 0);
}

namespace {

// A node's work parts by label (the cause records the path is walked from).
std::map<std::string, Time> parts_of(const RunResult& r, OpId op) {
  std::map<std::string, Time> out;
  const NodeCause& c = r.causes.at(op);
  for (std::uint32_t p = c.parts_begin; p < c.parts_end; ++p)
    out[r.cause_labels.at(static_cast<std::size_t>(r.cause_parts[p].label))] += r.cause_parts[p].time;
  return out;
}

}  // namespace

TEST_CASE("a slot wait is blamed on what held the slot, never left as a slot wait", "[critical-path][blame]") {
  Fixture f;  // 2 slots of 4 KiB
  SECTION("a receiver that reduces: its vector engine, and the credits' way back") {
    Program p("reduce");
    const OpId s = p.send(f.pe(0), f.pe(1), 64 * kKiB, 1, {}, "send");
    const OpId v = p.recv(f.pe(1), f.pe(0), 1, {}, "recv", 0, RecvMode::Reduce);
    const RunResult r = Executor(f.system).run(p);
    const CriticalPath cp = checked(r);
    const auto parts = parts_of(r, s);
    CHECK(parts.count("wait:resource:ipcq_slots") == 0);
    CHECK(parts.count("engine:vector") == 1);
    Time sum = 0;
    for (const auto& [label, t] : parts) sum += t;
    CHECK(sum == r.causes.at(s).end - r.causes.at(s).start);
    CHECK(parts_of(r, v).count("wait:dependency") == 0);  // its later segments were in flight or held back
    // Link time names its channels, and they add up to the label.
    for (const auto& [label, chans] : cp.channels) {
      Time t = 0;
      for (const auto& [name, ps] : chans) t += ps;
      CHECK(t == cp.share.at(label));
    }
  }
  SECTION("a receiver not posted yet: its dependency") {
    Program p("late");
    const OpId s = p.send(f.pe(0), f.pe(1), 64 * kKiB, 1, {}, "send");
    const OpId g = p.gemm(f.pe(1), kCycle * 2000, Precision::Fp16, {}, "before the recv");
    p.recv(f.pe(1), f.pe(0), 1, {g}, "recv");
    const RunResult r = Executor(f.system).run(p);
    checked(r);
    const auto parts = parts_of(r, s);
    CHECK(parts.count("wait:resource:ipcq_slots") == 0);
    // The sender filled both slots at once and waited about the GEMM's 2 us for the recv to be posted.
    REQUIRE(parts.count("wait:dependency") == 1);
    CHECK(parts.at("wait:dependency") > 1800 * kNanosecond);
    CHECK(parts.at("wait:dependency") < 2100 * kNanosecond);
  }
}

TEST_CASE("a tile pipeline: stages on the path, steps tile the makespan", "[critical-path]") {
  Fixture f;
  Program p("pipe");
  Pipeline pl;
  pl.tiles = 4;
  pl.loads = {Move{f.hbm(0), f.pe(0), 16 * kKiB}};
  pl.flops = kCycle * 2000;  // compute bound
  pl.stores = {Move{f.pe(0), f.hbm(0), 4 * kKiB}};
  const OpId c = p.composite(f.pe(0), pl, {}, "pipe");
  const OpId after = p.gemm(f.pe(0), kCycle * 10, Precision::Fp16, {c}, "epilogue");
  const RunResult r = Executor(f.system).run(p);
  const CriticalPath cp = checked(r);
  CHECK(cp.steps.back().node == static_cast<std::int32_t>(after));
  // Compute bound: the four tiles' 2 us computes are all on the path (each
  // handed the GEMM engine to the next); stages are named after their composite.
  CHECK(cp.share.at("engine:gemm") == 4 * 2000 * kNanosecond + 10 * kNanosecond);
  int stages = 0;
  for (const auto& s : cp.steps) {
    const NodeCause& n = r.causes.at(static_cast<std::size_t>(s.node));
    if (n.composite == static_cast<std::int64_t>(c)) {
      ++stages;
      CHECK(n.name.rfind("pipe: ", 0) == 0);
    }
  }
  CHECK(stages >= 4);
}

TEST_CASE("a second run on the same system: the path starts at the run's start", "[critical-path]") {
  Fixture f;
  Program p("again");
  p.gemm(f.pe(0), kCycle * 100, Precision::Fp16, {}, "g");
  const RunResult r1 = Executor(f.system).run(p);
  const RunResult r2 = Executor(f.system).run(p);
  CHECK(r2.start == r1.end);
  const CriticalPath cp = checked(r2);
  CHECK(cp.steps.front().start == r1.end);
  CHECK(cp.length() == 120 * kNanosecond);
}

TEST_CASE("causes are bit-identical across reruns", "[critical-path]") {
  auto once = [] {
    Fixture f;
    Program p("rerun");
    for (int i = 0; i < 4; ++i) p.dma(f.pe(i % 2), Move{f.hbm(0), f.pe(i % 2), 32 * kKiB}, {}, "r");
    const RunResult r = Executor(f.system).run(p);
    const CriticalPath cp = critical_path(r);
    std::vector<Time> out;
    for (const auto& s : cp.steps) out.insert(out.end(), {s.start, s.end, Time{s.holder}, Time{s.node}, s.waited});
    for (const auto& [l, t] : cp.share) out.push_back(t);
    return out;
  };
  CHECK(once() == once());
}

TEST_CASE("every all-reduce algorithm and a GEMM kernel: the path tiles the makespan", "[critical-path]") {
  Config c = system_config(2, 1, SipTopology::Ring, 2, 1, 2, 1, 4);  // 2 SIPs x 2 cubes x 4 PEs
  pe_config(c).clock_hz = 1'000'000'000;
  pe_config(c).dispatch = 20 * kNanosecond;
  for (const auto& a : kernbench::ccl::algorithms()) {
    if (std::find(a.collectives.begin(), a.collectives.end(), "all_reduce") == a.collectives.end()) continue;
    // nvls needs a reducing switch (its path is checked in test_nvls.cpp), nvls_tree several boxes.
    if (a.name == "nvls" || a.name == "nvls_tree") continue;
    DYNAMIC_SECTION(a.name) {
      System system(c);
      kernbench::ccl::CollectiveSpec spec;
      spec.algorithm = a.name;
      spec.bytes_per_pe = 32 * kKiB;
      spec.verify = kernbench::ccl::Verify::Off;
      const auto r = kernbench::ccl::run_collective(system, spec);
      const CriticalPath cp = checked(r.run);
      // A collective's path moves data: some of it is on links.
      Time links = 0;
      for (const auto& [label, t] : cp.share)
        if (label.rfind("link:", 0) == 0) links += t;
      CHECK(links > 0);
    }
  }
  SECTION("gemm") {
    System system(c);
    kernbench::kernels::GemmSpec g;
    g.m = g.n = g.k = 256;
    for (NodeId id = 0; id < system.machine().num_nodes() && g.pes.size() < 4; ++id)
      if (system.machine().node(id).kind == NodeKind::Pe) g.pes.push_back(id);
    const Program p = kernbench::kernels::gemm_program(system, g);
    const RunResult r = Executor(system).run(p);
    const CriticalPath cp = checked(r);
    CHECK(cp.share.at("engine:gemm") > r.makespan() / 2);  // compute bound at this size
  }
}

TEST_CASE("an uncontended DMA's link shares follow each hop's service time", "[critical-path]") {
  Fixture f;
  Program p("apportion");
  const Move mv{f.hbm(2), f.pe(0), 32 * kKiB};
  p.dma(f.pe(0), mv, {}, "read");
  const RunResult r = Executor(f.system).run(p);
  const CriticalPath cp = checked(r);
  const CriticalStep& s = cp.steps.back();
  REQUIRE(s.engine == "dma");
  // Closed form of the apportioning: request leg (agent -> src, request
  // bytes) and data leg (src -> dst), per hop latency + serialisation +
  // next node's overhead, grouped by link class; nothing queued.
  auto& fabric = f.system.fabric();
  std::map<std::string, double> w;
  double total = 0.0;
  auto add = [&](NodeId a, NodeId b, Bytes bytes) {
    for (const auto& h : fabric.router().route(a, b).hop) {
      const double t =
          static_cast<double>(h.latency + kernbench::sim::transfer_time(bytes, h.bandwidth) + h.next_overhead);
      w["link:" + f.m.channel(h.channel).link_class] += t;
      total += t;
    }
  };
  add(f.pe(0), mv.src, fabric.config().request);
  add(mv.src, mv.dst, mv.bytes);
  REQUIRE(s.parts.size() == w.size());
  for (const auto& [label, weight] : w) {
    INFO(label);
    CHECK(static_cast<double>(s.parts.at(label)) ==
          Approx(static_cast<double>(s.duration()) * weight / total)
              .margin(2.0 * static_cast<double>(w.size())));  // floors + remainder
  }
}

TEST_CASE("a run that took no time has an empty path; a result without causes is refused", "[critical-path]") {
  Fixture f;
  Program p("instant");
  const OpId a = p.alloc(f.pe(0), 1024);
  p.free(a);
  RunResult r = Executor(f.system).run(p);
  // Alloc and free still pay their dispatch: the path is those dispatches.
  const CriticalPath cp = checked(r);
  CHECK(cp.share.at("engine:pe_cpu") == r.makespan());
  Program empty("empty");
  const CriticalPath none = critical_path(Executor(f.system).run(empty));
  CHECK(none.steps.empty());
  CHECK(none.length() == 0);
  r.causes.clear();  // not a run of the executor
  CHECK_THROWS_AS(critical_path(r), kernbench::UsageError);
  CHECK_THROWS_WITH(critical_path(r), Catch::Contains("recorded no causes"));
}

// ---- the other models: the K200 and vGPU record their causes through a Recorder ----

namespace {

std::string config_path(const char* name) {
  return (std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "configs" / name).lexically_normal().string();
}

// The invariants of a path from a Recorder: steps tile [start, end], links are real.
void tiles(const CriticalPath& cp) {
  REQUIRE(!cp.steps.empty());
  CHECK(cp.steps.front().start == cp.start);
  CHECK(cp.steps.back().end == cp.end);
  for (std::size_t i = 1; i < cp.steps.size(); ++i) CHECK(cp.steps[i].start == cp.steps[i - 1].end);
  CHECK(cp.length() == cp.end - cp.start);
  for (const CriticalStep& s : cp.steps) {
    Time parts = 0;
    for (const auto& [label, t] : s.parts) parts += t;
    CHECK(parts == s.duration());
  }
}

std::vector<std::string> kinds(const CriticalPath& cp) {
  std::vector<std::string> out;
  for (const CriticalStep& s : cp.steps) out.push_back(s.op_kind);
  return out;
}

}  // namespace

TEST_CASE("recorder: a chain, a hand-over and a fork/join, walked exactly", "[critical-path][recorder]") {
  kernbench::sim::Simulation sim(1);
  Recorder rec(sim);
  const auto res = rec.add_resource("engine");
  kernbench::sim::Server engine(sim, "engine");
  Chain a, b;
  // a: op x [0, 10) holds the engine; b asks at 0, gets it at 10 (handed over by x), runs [10, 15).
  auto x = [&]() -> kernbench::sim::Task<void> {
    std::int32_t h = -1;
    co_await engine.acquire_handed(h);
    co_await sim.delay(10);
    engine.release(rec.step(a, {rec.kind("x"), res, -1, 0, 0, 0, 10}));
  };
  auto y = [&]() -> kernbench::sim::Task<void> {
    std::int32_t h = -1;
    co_await engine.acquire_handed(h);
    const Time t0 = sim.now();
    co_await sim.delay(5);
    Recorder::Op op{rec.kind("y"), res, -1, 0, 0, t0, sim.now()};
    op.holder = h;
    engine.release(rec.step(b, op));
  };
  kernbench::sim::Join j(sim);
  j.spawn("x", x(), &a.last);
  j.spawn("y", y(), &b.last);
  CHECK(j.running() == 2);  // it counts the children it spawned
  sim.run();
  CHECK(j.running() == 0);
  CHECK(j.last() == b.last);
  const CriticalPath cp = critical_path(rec.graph("toy", 0, 15, 0, rec.size()));
  tiles(cp);
  REQUIRE(cp.steps.size() == 2);
  CHECK(cp.steps[0].op_kind == "x");
  CHECK(cp.steps[1].op_kind == "y");
  CHECK(cp.steps[1].via == "resource:engine");
  CHECK(cp.steps[1].holder_name == "x");
  CHECK(cp.steps[1].waited == 10);
  CHECK(cp.share.at("engine:x") == 10);
  CHECK(cp.share.at("engine:y") == 5);
  // A lost gap is refused as it is recorded.
  Chain c{a.last};
  CHECK_THROWS_AS(rec.step(c, {rec.kind("z"), res, -1, 0, 11, 11, 12}), kernbench::InternalError);
}

TEST_CASE("K200: a one-segment pinned copy's path is call, map, eDMA, poll, unmap", "[critical-path][k200]") {
  using namespace kernbench::platforms::k200;
  kernbench::topology::System sys(kernbench::load_config(config_path("k200.yaml")));
  K200 k(sys);
  const auto& drv = k.config().driver;
  const RunReport r = k.copy({CopyKind::Pinned, Direction::H2D, 1 * kernbench::sim::kMiB, {0, 0}, {0, 1}});
  const CriticalPath cp = k.critical_path(r);
  tiles(cp);
  CHECK(kinds(cp) == std::vector<std::string>{"call", "map", "edma", "poll", "unmap"});
  const Time half = (drv.segment_overhead + 256 * drv.map_per_page) / 2;
  CHECK(cp.steps[0].duration() == drv.call_overhead);
  CHECK(cp.steps[1].duration() == half);
  CHECK(cp.steps[4].duration() == half);
  CHECK(cp.steps[3].end % drv.poll_period == 0);  // seen at a poll tick
  for (std::size_t i = 1; i < cp.steps.size(); ++i) {
    CHECK(cp.steps[i].via == "dependency");
    CHECK(cp.steps[i].holder_name == cp.steps[i - 1].op_kind);
  }
  CHECK(cp.end - cp.start == r.elapsed());
}

TEST_CASE("K200: a die's fourth concurrent eDMA waits for a channel a poll hands over", "[critical-path][k200]") {
  using namespace kernbench::platforms::k200;
  kernbench::topology::System sys(kernbench::load_config(config_path("k200.yaml")));
  K200 k(sys);
  const int n = k.config().edma.channels_per_die + 1;
  std::vector<CopySpec> specs(static_cast<std::size_t>(n),
                              CopySpec{CopyKind::Pinned, Direction::H2D, 1 * kernbench::sim::kMiB, {0, 0}, {0, 1}});
  const RunReport r = k.copies(specs);
  const CriticalPath cp = k.critical_path(r);
  tiles(cp);
  bool handed = false;
  for (const CriticalStep& s : cp.steps)
    if (s.via == "resource:card0.die0.edma_channels") {
      handed = true;
      CHECK(s.holder_name == "poll");
      CHECK(s.waited > 0);
    }
  CHECK(handed);
  // Kernels and GEMMs: the wait follows the kernel that finished, the path tiles the elapsed time.
  const RunReport g = k.gemm({KernelSpec::Kind::Gemm, 0, 1024, 1024, 1024});
  const CriticalPath gp = k.critical_path(g);
  tiles(gp);
  CHECK(gp.steps.front().op_kind == "host_prep");
  CHECK(gp.steps.back().op_kind == "wait");
  CHECK(gp.steps.back().holder_name == "hbm");  // the last C store released the wait
}

TEST_CASE("vGPU: one launch's path is the guest's chain through the GR job", "[critical-path][vgpu]") {
  using namespace kernbench::platforms::vgpu;
  kernbench::topology::System sys(kernbench::load_config(config_path("vgpu.yaml")), 1);
  const LaunchRun run = run_launches(sys, 1, 1, {}, false);
  const CriticalPath& cp = run.critical;
  tiles(cp);
  const LaunchResult& l = run.launches.at(0);
  CHECK(cp.end == l.guest_done);
  Time rpc = 0, poll = 0;
  std::size_t gr = cp.steps.size();
  for (std::size_t i = 0; i < cp.steps.size(); ++i) {
    const CriticalStep& s = cp.steps[i];
    if (s.op_kind == "rpc") rpc += s.duration();
    if (s.op_kind == "poll_wait") poll += s.duration();
    if (s.op_kind == "gr_exec") gr = i;
  }
  CHECK(rpc == l.firmware);  // one guest: no GSP queue, every RPC on the path
  CHECK(poll == l.poll_wait);
  CHECK(cp.steps.front().op_kind == "guest_driver");
  REQUIRE(gr + 1 < cp.steps.size());
  CHECK(cp.steps[gr].duration() == l.kernel);
  CHECK(cp.steps[gr].holder_name == "doorbell");
  // The completion poll that saw the job follows it (a zero-length poll, seen at the job's end, is
  // passed through: the next step then names it as its dependency).
  const CriticalStep& seen = cp.steps[gr + 1];
  CHECK(((seen.op_kind == "completion_poll" && seen.holder_name == "gr_exec") ||
         (seen.op_kind == "bounce_out" && seen.holder_name == "completion_poll")));
  CHECK(cp.steps.back().op_kind == "msix");
  // Two guests: the later one queues at the GSP behind the other's RPC.
  kernbench::topology::System two(kernbench::load_config(config_path("vgpu.yaml"), {{"vgpu.guests", "2"}}), 1);
  const LaunchRun run2 = run_launches(two, 1, 2, {}, false);
  tiles(run2.critical);
  bool gsp = false;
  for (const CriticalStep& s : run2.critical.steps)
    if (s.via == "resource:gsp") gsp = s.holder_name == "rpc" && s.waited > 0;
  CHECK(gsp);
}
