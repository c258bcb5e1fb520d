// test_multipath.cpp -- equal-cost paths: the tie order, single / ecmp /
// spread on both fabric models, policies registered by name, pinned routes
// and their config errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "kernbench.hpp"
#include "sim/errors.hpp"
#include "sim/simulation.hpp"
#include "topology/fabric/fabric.hpp"
#include "topology/routing/multipath.hpp"

using namespace kernbench;
using namespace kernbench::topology;

namespace {

// 8 GPUs, each joined to 4 identical switches by one link per switch (the
// shape of an NVSwitch box). The edges are listed switch 3 first, so the
// tie order (by node ids: the order the nodes are listed) differs from the
// edge order. `connections` per switch, `extra` appended to the graph.
std::string box(const std::vector<int>& connections = {1, 1, 1, 1}, const std::string& extra = "",
                const std::string& fabric = "") {
  std::string y = "graph:\n  nodes:\n";
  for (int g = 0; g < 8; ++g) y += "    - {name: gpu" + std::to_string(g) + ", kind: pe, overhead: 0 ns}\n";
  for (int s = 0; s < 4; ++s) y += "    - {name: sw" + std::to_string(s) + ", kind: switch, overhead: 100 ns}\n";
  y += "  edges:\n";
  for (int s = 3; s >= 0; --s)
    for (int g = 0; g < 8; ++g)
      y += "    - {a: gpu" + std::to_string(g) + ", b: sw" + std::to_string(s) +
           ", class: nvlink, bandwidth: 25 GB/s, latency: 100 ns, connections: " +
           std::to_string(connections[static_cast<std::size_t>(s)]) + "}\n";
  y += extra;
  y += "fabric:\n  chunk: 64 KiB\n" + fabric;
  return y;
}

Config parse(const std::string& text) { return kernbench::parse_config(text, "box.yaml", {}); }

std::vector<std::string> names(const Machine& m, const Route& r) {
  std::vector<std::string> out;
  for (NodeId n : r.nodes) out.push_back(m.node(n).name);
  return out;
}

// Payload bytes that entered each switch (every GPU -> switch channel).
std::vector<double> bytes_per_switch(const Machine& m, const Fabric& f) {
  std::vector<double> out(4, 0.0);
  for (ChannelId c = 0; c < m.num_channels(); ++c) {
    const std::string& to = m.node(m.channel(c).to).name;
    if (to.rfind("sw", 0) == 0)
      out[static_cast<std::size_t>(to[2] - '0')] += static_cast<double>(f.channel_stats(c).bytes);
  }
  return out;
}

double max_rel_dev(const std::vector<double>& v) {
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double dev = 0;
  for (double x : v) dev = std::max(dev, std::abs(x / mean - 1));
  return dev;
}

// A uniform all-to-all: every ordered GPU pair moves `per_pair` transfers of `bytes` at t = 0.
void all_to_all(const Machine& m, Fabric& f, int per_pair, Bytes bytes) {
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      for (int k = 0; a != b && k < per_pair; ++k) {
        TransferSpec s;
        s.src = m.at("gpu" + std::to_string(a));
        s.dst = m.at("gpu" + std::to_string(b));
        s.bytes = bytes;
        s.address = static_cast<std::uint64_t>(k) * static_cast<std::uint64_t>(bytes);
        s.request = k;
        f.start(s);
      }
}

}  // namespace

TEST_CASE("equal-cost paths come in the tie order of node ids, not edge order", "[multipath]") {
  const Machine m(parse(box()));
  Router router(m);
  const std::vector<Route>& p = router.paths(m.at("gpu0"), m.at("gpu5"));
  REQUIRE(p.size() == 4);
  for (int s = 0; s < 4; ++s)
    CHECK(names(m, p[static_cast<std::size_t>(s)]) ==
          std::vector<std::string>{"gpu0", "sw" + std::to_string(s), "gpu5"});
  // route() (and single) is the first: sw0, although sw3's edges come first.
  CHECK(names(m, router.route(m.at("gpu0"), m.at("gpu5")))[1] == "sw0");
  // The cap keeps the first ones of the order.
  const std::vector<Route> two = router.equal_cost_paths(m.at("gpu0"), m.at("gpu5"), 2);
  REQUIRE(two.size() == 2);
  CHECK(names(m, two[1])[1] == "sw1");
  CHECK(path_rate(p[0]) == 25'000'000'000);
}

TEST_CASE("spread puts equal traffic on 4 identical switches, on both models", "[multipath]") {
  for (const char* model : {"packet", "flow"}) {
    INFO(model);
    const Config c = parse(box({1, 1, 1, 1}, "", std::string("  multipath: spread\n  model: ") + model + "\n"));
    const Machine m(c);
    sim::Simulation sim;
    auto f = make_fabric(sim, m, c.fabric);
    all_to_all(m, *f, 1, 1 << 20);
    sim.run();
    CHECK(f->in_flight() == 0);
    const std::vector<double> per = bytes_per_switch(m, *f);
    CHECK(max_rel_dev(per) < 0.01);
    CHECK(std::accumulate(per.begin(), per.end(), 0.0) == Approx(56.0 * (1 << 20)));  // conservation
    std::size_t parents = 0;
    for (const TransferRecord& r : f->records()) {
      CHECK(r.done());
      if (r.parent == kNoTransfer) {
        ++parents;
        CHECK(r.stripes == 4);
        CHECK(r.parts.total() == r.latency());
      }
    }
    CHECK(parents == 56);
  }
}

TEST_CASE("spread: an uncontended transfer takes the time of its largest stripe alone", "[multipath]") {
  for (const char* model : {"packet", "flow"}) {
    INFO(model);
    const Config c = parse(box({1, 1, 1, 1}, "", std::string("  multipath: spread\n  model: ") + model + "\n"));
    const Machine m(c);
    const Bytes bytes = 4 << 20;
    sim::Simulation s1;
    auto spread = make_fabric(s1, m, c.fabric);
    TransferSpec t;
    t.src = m.at("gpu0");
    t.dst = m.at("gpu1");
    t.bytes = bytes;
    const TransferId id = spread->start(t);
    s1.run();
    // The same quarter on one named path of a fresh fabric.
    sim::Simulation s2;
    auto one = make_fabric(s2, m, c.fabric);
    TransferSpec q = t;
    q.bytes = bytes / 4;
    q.path = 2;
    const TransferId qid = one->start(q);
    s2.run();
    CHECK(spread->record(id).latency() == one->record(qid).latency());
    CHECK(one->record(qid).path == 2);
    // 4x the rate of one path: the stream part is a quarter of single's.
    sim::Simulation s3;
    FabricConfig single = c.fabric;
    single.multipath = "single";
    auto f3 = make_fabric(s3, m, single);
    const TransferId sid = f3->start(t);
    s3.run();
    CHECK(bytes_per_switch(m, *f3)[0] == bytes);
    CHECK(bytes_per_switch(m, *f3)[1] == 0);
    CHECK(f3->record(sid).latency() > 3 * spread->record(id).latency());
  }
}

TEST_CASE("spread weighs the stripes by path rate on uneven wiring", "[multipath]") {
  const Config c = parse(box({5, 4, 4, 5}, "", "  multipath: spread\n"));
  const Machine m(c);
  sim::Simulation sim;
  auto f = make_fabric(sim, m, c.fabric);
  TransferSpec t;
  t.src = m.at("gpu0");
  t.dst = m.at("gpu1");
  t.bytes = 18 << 20;
  f->start(t);
  sim.run();
  const std::vector<double> per = bytes_per_switch(m, *f);
  CHECK(per == std::vector<double>{5 << 20, 4 << 20, 4 << 20, 5 << 20});
  // The stripes end within a chunk's time on the slowest path of each other.
  Time first = sim::kMaxTime, last = 0;
  for (const TransferRecord& r : f->records())
    if (r.parent != kNoTransfer) first = std::min(first, r.end), last = std::max(last, r.end);
  CHECK(last - first <= sim::transfer_time(64 << 10, sim::Bandwidth::gb_per_s(100)));
}

TEST_CASE("ecmp hashes flows over 4 identical switches within 15 %, on both models", "[multipath]") {
  for (const char* model : {"packet", "flow"}) {
    INFO(model);
    const Config c = parse(box({1, 1, 1, 1}, "", std::string("  multipath: ecmp\n  model: ") + model + "\n"));
    const Machine m(c);
    sim::Simulation sim;
    auto f = make_fabric(sim, m, c.fabric);
    all_to_all(m, *f, 8, 64 << 10);
    sim.run();
    const std::vector<double> per = bytes_per_switch(m, *f);
    INFO(per[0] << " " << per[1] << " " << per[2] << " " << per[3]);
    CHECK(max_rel_dev(per) < 0.15);
    CHECK(std::all_of(per.begin(), per.end(), [](double x) { return x > 0; }));
    for (const TransferRecord& r : f->records()) CHECK(r.stripes == 0);  // one path each
    // Deterministic: a second run takes the same paths.
    sim::Simulation sim2;
    auto f2 = make_fabric(sim2, m, c.fabric);
    all_to_all(m, *f2, 8, 64 << 10);
    sim2.run();
    CHECK(bytes_per_switch(m, *f2) == per);
  }
}

TEST_CASE("single keeps one path per pair: the first of the tie order", "[multipath]") {
  const Config c = parse(box());
  REQUIRE(c.fabric.multipath == "single");  // the default
  const Machine m(c);
  sim::Simulation sim;
  auto f = make_fabric(sim, m, c.fabric);
  all_to_all(m, *f, 1, 4096);
  sim.run();
  CHECK(bytes_per_switch(m, *f) == std::vector<double>{56 * 4096.0, 0, 0, 0});
}

TEST_CASE("a pinned route is obeyed under every multipath mode", "[multipath]") {
  const std::string pin = "  routes:\n    - {src: gpu0, dst: gpu5, via: [sw2]}\n";
  for (const char* mode : {"single", "ecmp", "spread"}) {
    INFO(mode);
    const Config c = parse(box({1, 1, 1, 1}, pin, std::string("  multipath: ") + mode + "\n"));
    REQUIRE(c.graph->routes.size() == 1);
    const Machine m(c);
    sim::Simulation sim;
    auto f = make_fabric(sim, m, c.fabric);
    REQUIRE(f->router().paths(m.at("gpu0"), m.at("gpu5")).size() == 1);
    CHECK(names(m, f->router().route(m.at("gpu0"), m.at("gpu5"))) == std::vector<std::string>{"gpu0", "sw2", "gpu5"});
    for (int k = 0; k < 16; ++k) {
      TransferSpec t;
      t.src = m.at("gpu0");
      t.dst = m.at("gpu5");
      t.bytes = 1 << 20;
      t.address = static_cast<std::uint64_t>(k) << 20;
      f->start(t);
    }
    sim.run();
    CHECK(bytes_per_switch(m, *f) == std::vector<double>{0, 0, 16.0 * (1 << 20), 0});
    // The other direction is not pinned.
    CHECK(f->router().paths(m.at("gpu5"), m.at("gpu0")).size() == 4);
  }
}

TEST_CASE("pinned routes and multipath: bad input names the YAML path", "[multipath][config]") {
  const auto bad = [](const std::string& routes, const std::string& msg) {
    INFO(routes);
    REQUIRE_THROWS_WITH(parse(box({1, 1, 1, 1}, "  routes:\n" + routes)), Catch::Contains(msg));
  };
  bad("    - {src: gpu0, dst: gpu5, via: [sw9]}\n", "graph.routes[0].via[0]: no node named \"sw9\"");
  bad("    - {src: gpu0, dst: gpu5, via: [sw1, sw2]}\n", "graph.routes[0].via: no edge joins \"sw1\" and \"sw2\"");
  bad("    - {src: gpu0, dst: gpu5}\n", "graph.routes[0].dst: no edge joins \"gpu0\" and \"gpu5\"");
  bad("    - {src: gpu0, dst: gpu0, via: [sw1]}\n", "graph.routes[0].dst: a route from \"gpu0\" to itself");
  bad("    - {src: gpu0, dst: gpu5, via: [sw1, gpu0, sw2]}\n", "visits \"gpu0\" twice");
  bad("    - {src: gpux, dst: gpu5, via: [sw1]}\n", "graph.routes[0].src: no node named \"gpux\"");
  bad("    - {src: gpu0, dst: gpu5, via: [sw1]}\n    - {src: gpu0, dst: gpu5, via: [sw2]}\n",
      "graph.routes[1].src: a second route from \"gpu0\" to \"gpu5\" (the first is graph.routes[0])");
  bad("    - {src: gpu0, dst: gpu5, by: [sw1]}\n", "graph.routes[0]");
  REQUIRE_THROWS_WITH(parse(box({1, 1, 1, 1}, "", "  multipath: spray\n")),
                      Catch::Contains("fabric.multipath: expected one of single, ecmp, spread"));
}

TEST_CASE("a named path out of range is a usage error", "[multipath]") {
  const Config c = parse(box());
  const Machine m(c);
  sim::Simulation sim;
  auto f = make_fabric(sim, m, c.fabric);
  TransferSpec t;
  t.src = m.at("gpu0");
  t.dst = m.at("gpu1");
  t.bytes = 64;
  t.path = 4;
  REQUIRE_THROWS_WITH(f->start(t), Catch::Contains("path 4 out of range (the pair has 4 equal-cost paths)"));
}

namespace {

// A policy of the test's own: every transfer whole on the last path of the tie order.
std::int32_t last_path(const MultipathRequest& req, std::span<Bytes>) {
  return static_cast<std::int32_t>(req.paths.size() - 1);
}
// A policy that cuts badly: all bytes on one stripe (not a split).
std::int32_t one_stripe(const MultipathRequest& req, std::span<Bytes> share) {
  share[0] = req.bytes;
  return -1;
}
// Half on the first path, half on the second (the odd byte on the first).
std::int32_t halves(const MultipathRequest& req, std::span<Bytes> share) {
  share[1] = req.bytes / 2;
  share[0] = req.bytes - share[1];
  return -1;
}

void register_test_policies() {
  static const bool once = [] {
    register_multipath_policy("test-last", "the last path", last_path);
    register_multipath_policy("test-one-stripe", "a bad split", one_stripe);
    register_multipath_policy("test-halves", "two halves", halves);
    return true;
  }();
  (void)once;
}

}  // namespace

TEST_CASE("a registered multipath policy is named by fabric.multipath and obeyed", "[multipath][policy]") {
  register_test_policies();
  const auto names = multipath_policy_names();
  REQUIRE(names.size() >= 6);
  CHECK(std::vector<std::string>(names.begin(), names.begin() + 3) ==
        std::vector<std::string>{"single", "ecmp", "spread"});
  CHECK(std::find(names.begin(), names.end(), "test-last") != names.end());
  REQUIRE_THROWS_WITH(register_multipath_policy("ecmp", "again", last_path), Catch::Contains("'ecmp' is registered"));
  REQUIRE_THROWS_WITH(register_multipath_policy("", "no name", last_path), Catch::Contains("the name is empty"));
  REQUIRE_THROWS_WITH(register_multipath_policy("test-null", "none", nullptr), Catch::Contains("no split function"));

  // The config key takes the new name; the transfer goes whole over sw3, the last of the tie order.
  const Config c = parse(box({1, 1, 1, 1}, "", "  multipath: test-last\n"));
  REQUIRE(c.fabric.multipath == "test-last");
  const Machine m(c);
  sim::Simulation sim;
  auto f = make_fabric(sim, m, c.fabric);
  TransferSpec t;
  t.src = m.at("gpu0");
  t.dst = m.at("gpu1");
  t.bytes = 256 * 1024;
  const TransferId id = f->start(t);
  sim.run();
  CHECK(f->record(id).path == 3);
  CHECK(bytes_per_switch(m, *f) == std::vector<double>{0, 0, 0, 256.0 * 1024});

  // Two halves: two stripes on sw0 and sw1, bytes conserved.
  FabricConfig two = c.fabric;
  two.multipath = "test-halves";
  sim::Simulation s2;
  auto f2 = make_fabric(s2, m, two);
  t.bytes = 1001;
  const TransferId id2 = f2->start(t);
  s2.run();
  CHECK(f2->record(id2).stripes == 2);
  CHECK(bytes_per_switch(m, *f2) == std::vector<double>{501, 500, 0, 0});
}

TEST_CASE("a multipath policy that is unknown or cuts badly is an error naming it", "[multipath][policy]") {
  register_test_policies();
  const Config c = parse(box());
  const Machine m(c);
  FabricConfig bad = c.fabric;
  bad.multipath = "spray";  // set in C++, past the loader
  sim::Simulation sim;
  REQUIRE_THROWS_WITH(make_fabric(sim, m, bad), Catch::Contains("fabric.multipath: no policy named 'spray'") &&
                                                    Catch::Contains("single, ecmp, spread"));
  bad.multipath = "test-one-stripe";
  auto f = make_fabric(sim, m, bad);
  TransferSpec t;
  t.src = m.at("gpu0");
  t.dst = m.at("gpu1");
  t.bytes = 4096;
  REQUIRE_THROWS_WITH(f->start(t), Catch::Contains("policy 'test-one-stripe' cut a transfer of 4096 B"));
  CHECK(f->records().empty());  // nothing was started
}
