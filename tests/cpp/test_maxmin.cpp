// test_maxmin.cpp -- the max-min solver: textbook cases, incrementality, optimality.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "sim/errors.hpp"
#include "solver/maxmin.hpp"

using kernbench::UsageError;
using kernbench::solver::MaxMinSolver;
using FlowId = MaxMinSolver::FlowId;
using ResourceId = MaxMinSolver::ResourceId;

namespace {

FlowId add(MaxMinSolver& s, std::vector<ResourceId> rs) { return s.add_flow(rs); }

// Checks the max-min optimality conditions on every active flow:
// feasibility (no resource over capacity) and, for each flow, a bottleneck:
// a saturated resource on its path where no flow gets more than it does.
void check_max_min(const MaxMinSolver& s, const std::vector<FlowId>& flows) {
  const double eps = 1e-9;
  std::vector<double> load(s.num_resources(), 0.0);
  std::vector<double> max_rate(s.num_resources(), 0.0);
  for (FlowId f : flows) {
    REQUIRE(s.rate(f) > 0.0);
    for (ResourceId r : s.resources_of(f)) {
      load[r] += s.rate(f);
      max_rate[r] = std::max(max_rate[r], s.rate(f));
    }
  }
  for (ResourceId r = 0; r < s.num_resources(); ++r) {
    INFO("resource " << r);
    CHECK(load[r] <= s.capacity(r) * (1 + eps));
  }
  for (FlowId f : flows) {
    bool has_bottleneck = false;
    for (ResourceId r : s.resources_of(f)) {
      const bool saturated = load[r] >= s.capacity(r) * (1 - eps);
      const bool largest = s.rate(f) >= max_rate[r] * (1 - eps);
      if (saturated && largest) has_bottleneck = true;
    }
    INFO("flow " << f << " rate " << s.rate(f));
    CHECK(has_bottleneck);
  }
}

}  // namespace

TEST_CASE("a flow alone gets its bottleneck's capacity", "[maxmin]") {
  MaxMinSolver s;
  const ResourceId a = s.add_resource(5.0), b = s.add_resource(2.0), c = s.add_resource(9.0);
  const FlowId f = add(s, {a, b, c});
  CHECK(s.rate(f) == 0.0);  // not solved yet
  s.solve();
  CHECK(s.rate(f) == 2.0);
  CHECK(s.changed() == std::vector<FlowId>{f});
}

TEST_CASE("two flows on one resource get half each", "[maxmin]") {
  MaxMinSolver s;
  const ResourceId r = s.add_resource(3.0);
  const FlowId f = add(s, {r}), g = add(s, {r});
  s.solve();
  CHECK(s.rate(f) == 1.5);
  CHECK(s.rate(g) == 1.5);
}

TEST_CASE("the textbook three-flow example: all get one half", "[maxmin]") {
  MaxMinSolver s;
  const ResourceId l1 = s.add_resource(1.0), l2 = s.add_resource(1.0);
  const FlowId a = add(s, {l1, l2}), b = add(s, {l1}), c = add(s, {l2});
  s.solve();
  CHECK(s.rate(a) == 0.5);
  CHECK(s.rate(b) == 0.5);
  CHECK(s.rate(c) == 0.5);
  check_max_min(s, {a, b, c});
}

TEST_CASE("asymmetric capacities: the unconstrained flow takes what is left", "[maxmin]") {
  MaxMinSolver s;
  const ResourceId l1 = s.add_resource(1.0), l2 = s.add_resource(2.0);
  const FlowId a = add(s, {l1, l2}), b = add(s, {l1}), c = add(s, {l2});
  s.solve();
  CHECK(s.rate(a) == 0.5);
  CHECK(s.rate(b) == 0.5);
  CHECK(s.rate(c) == 1.5);
  check_max_min(s, {a, b, c});
}

TEST_CASE("parking lot: the long flow is held to its tightest link", "[maxmin]") {
  // Links of capacity 1, 2, 3; one flow crosses all three, one short flow
  // per link. The long flow shares link 0 equally (1/2); the short flows on
  // the wider links take the rest: 3/2 and 5/2.
  MaxMinSolver s;
  const ResourceId l0 = s.add_resource(1.0), l1 = s.add_resource(2.0), l2 = s.add_resource(3.0);
  const FlowId lng = add(s, {l0, l1, l2});
  const FlowId s0 = add(s, {l0}), s1 = add(s, {l1}), s2 = add(s, {l2});
  s.solve();
  CHECK(s.rate(lng) == 0.5);
  CHECK(s.rate(s0) == 0.5);
  CHECK(s.rate(s1) == 1.5);
  CHECK(s.rate(s2) == 2.5);
  check_max_min(s, {lng, s0, s1, s2});

  SECTION("equal links: everyone gets one half") {
    MaxMinSolver e;
    std::vector<ResourceId> links;
    for (int i = 0; i < 5; ++i) links.push_back(e.add_resource(1.0));
    std::vector<FlowId> flows{e.add_flow(links)};
    for (ResourceId l : links) flows.push_back(add(e, {l}));
    e.solve();
    for (FlowId f : flows) CHECK(e.rate(f) == 0.5);
  }
}

TEST_CASE("removing a flow frees its bandwidth for the others", "[maxmin]") {
  MaxMinSolver s;
  const ResourceId l1 = s.add_resource(1.0), l2 = s.add_resource(2.0);
  const FlowId a = add(s, {l1, l2}), b = add(s, {l1}), c = add(s, {l2});
  s.solve();
  s.remove_flow(b);
  CHECK_FALSE(s.active(b));
  s.solve();
  CHECK(s.rate(a) == 1.0);
  CHECK(s.rate(c) == 1.0);
  CHECK(s.changed() == std::vector<FlowId>{a, c});
  CHECK(s.num_flows() == 2);
  // The freed slot is reused.
  const FlowId d = add(s, {l2});
  CHECK(d == b);
  s.solve();
  CHECK(s.rate(a) == Approx(2.0 / 3));  // l2 is now the tighter share
  CHECK(s.rate(c) == Approx(2.0 / 3));
  CHECK(s.rate(d) == Approx(2.0 / 3));
  std::vector<FlowId> expected{a, c, d};
  std::sort(expected.begin(), expected.end());  // changed() is in id order
  CHECK(s.changed() == expected);
}

TEST_CASE("an incremental solve leaves unrelated components alone", "[maxmin]") {
  MaxMinSolver s;
  // Component 1: resources 0-1; component 2: resources 2-3.
  const ResourceId r0 = s.add_resource(1.0), r1 = s.add_resource(4.0);
  const ResourceId r2 = s.add_resource(3.0), r3 = s.add_resource(6.0);
  const FlowId a = add(s, {r0, r1}), b = add(s, {r1});
  const FlowId c = add(s, {r2, r3}), d = add(s, {r3}), e = add(s, {r2});
  s.solve();
  CHECK(s.last_solved() == 5);
  const double rc = s.rate(c), rd = s.rate(d), re = s.rate(e);
  CHECK(rc == 1.5);
  CHECK(rd == 4.5);
  CHECK(re == 1.5);

  const FlowId f = add(s, {r1});  // touches component 1 only
  s.solve();
  CHECK(s.last_solved() == 3);  // a, b, f: component 2 was not even visited
  CHECK(s.rate(a) == 1.0);
  CHECK(s.rate(b) == 1.5);
  CHECK(s.rate(f) == 1.5);
  CHECK(s.changed() == std::vector<FlowId>{b, f});
  CHECK(s.rate(c) == rc);
  CHECK(s.rate(d) == rd);
  CHECK(s.rate(e) == re);

  s.solve();  // nothing touched: nothing solved, nothing changed
  CHECK(s.last_solved() == 0);
  CHECK(s.changed().empty());
}

TEST_CASE("a removal that splits a component re-solves both halves", "[maxmin]") {
  MaxMinSolver s;
  const ResourceId r0 = s.add_resource(1.0), r1 = s.add_resource(1.0);
  const FlowId x = add(s, {r0}), bridge = add(s, {r0, r1}), y = add(s, {r1}), z = add(s, {r1});
  s.solve();
  CHECK(s.rate(x) == Approx(2.0 / 3));
  CHECK(s.rate(y) == Approx(1.0 / 3));
  s.remove_flow(bridge);
  s.solve();
  CHECK(s.last_solved() == 3);
  CHECK(s.rate(x) == 1.0);
  CHECK(s.rate(y) == 0.5);
  CHECK(s.rate(z) == 0.5);
}

TEST_CASE("bad calls are usage errors and change nothing", "[maxmin]") {
  MaxMinSolver s;
  REQUIRE_THROWS_AS(s.add_resource(0.0), UsageError);
  REQUIRE_THROWS_AS(s.add_resource(-1.0), UsageError);
  REQUIRE_THROWS_AS(s.add_resource(std::numeric_limits<double>::infinity()), UsageError);
  REQUIRE_THROWS_AS(s.add_resource(std::numeric_limits<double>::quiet_NaN()), UsageError);
  const ResourceId r = s.add_resource(1.0);
  REQUIRE_THROWS_AS(add(s, {}), UsageError);
  REQUIRE_THROWS_AS(add(s, {r, 7}), UsageError);
  REQUIRE_THROWS_AS(add(s, {r, r}), UsageError);
  CHECK(s.num_flows() == 0);
  REQUIRE_THROWS_AS(s.remove_flow(0), UsageError);
  REQUIRE_THROWS_AS(s.rate(3), UsageError);
  REQUIRE_THROWS_AS(s.capacity(9), UsageError);
  const FlowId f = add(s, {r});
  s.remove_flow(f);
  REQUIRE_THROWS_AS(s.remove_flow(f), UsageError);
  s.solve();
  CHECK(s.changed().empty());
}

TEST_CASE("random flows satisfy the max-min conditions through adds and removes", "[maxmin]") {
  std::mt19937_64 rng(12345);
  MaxMinSolver s;
  const int n_res = 50;
  std::uniform_real_distribution<double> cap(1.0, 10.0);
  for (int i = 0; i < n_res; ++i) s.add_resource(cap(rng));
  std::uniform_int_distribution<int> pick(0, n_res - 1), len(1, 5);
  auto random_path = [&] {
    std::vector<ResourceId> path;
    const int n = len(rng);
    while (static_cast<int>(path.size()) < n) {
      const auto r = static_cast<ResourceId>(pick(rng));
      if (std::find(path.begin(), path.end(), r) == path.end()) path.push_back(r);
    }
    return path;
  };
  std::vector<FlowId> flows;
  std::map<FlowId, std::vector<ResourceId>> paths;
  for (int i = 0; i < 200; ++i) {
    auto p = random_path();
    const FlowId f = s.add_flow(p);
    flows.push_back(f);
    paths[f] = p;
  }
  s.solve();
  CHECK(s.changed().size() == 200);
  check_max_min(s, flows);

  for (int round = 0; round < 20; ++round) {
    // Remember every rate, churn a few flows, re-solve incrementally.
    std::map<FlowId, double> before;
    for (FlowId f : flows) before[f] = s.rate(f);
    for (int k = 0; k < 5; ++k) {
      const std::size_t victim = std::uniform_int_distribution<std::size_t>(0, flows.size() - 1)(rng);
      s.remove_flow(flows[victim]);
      paths.erase(flows[victim]);
      flows.erase(flows.begin() + static_cast<std::ptrdiff_t>(victim));
    }
    for (int k = 0; k < 5; ++k) {
      auto p = random_path();
      const FlowId f = s.add_flow(p);
      flows.push_back(f);
      paths[f] = p;
      before.erase(f);  // a reused id is a new flow
    }
    s.solve();
    check_max_min(s, flows);
    // Anything not reported as changed kept its rate bit for bit.
    const auto& changed = s.changed();
    CHECK(std::is_sorted(changed.begin(), changed.end()));
    for (FlowId f : flows) {
      const bool reported = std::binary_search(changed.begin(), changed.end(), f);
      if (!before.count(f)) {
        CHECK(reported);
      } else if (!reported) {
        CHECK(s.rate(f) == before[f]);
      }
    }
  }

  // The incremental result equals a solve from scratch of the same flows.
  MaxMinSolver fresh;
  for (ResourceId r = 0; r < s.num_resources(); ++r) fresh.add_resource(s.capacity(r));
  std::vector<std::pair<FlowId, FlowId>> pairs;
  for (FlowId f : flows) pairs.emplace_back(f, fresh.add_flow(paths[f]));
  fresh.solve();
  for (auto [f, g] : pairs) CHECK(fresh.rate(g) == Approx(s.rate(f)).epsilon(1e-12));
}

TEST_CASE("the same calls give the same rates bit for bit", "[maxmin]") {
  auto run = [] {
    std::mt19937_64 rng(7);
    MaxMinSolver s;
    for (int i = 0; i < 30; ++i) s.add_resource(1.0 + static_cast<double>(rng() % 1000) / 100.0);
    std::vector<FlowId> flows;
    std::vector<double> trace;
    for (int step = 0; step < 300; ++step) {
      if (!flows.empty() && rng() % 3 == 0) {
        const std::size_t i = rng() % flows.size();
        s.remove_flow(flows[i]);
        flows.erase(flows.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        std::vector<ResourceId> p;
        for (ResourceId r = 0; r < 30; ++r)
          if (rng() % 8 == 0) p.push_back(r);
        if (p.empty()) p.push_back(static_cast<ResourceId>(rng() % 30));
        flows.push_back(s.add_flow(p));
      }
      if (step % 4 == 0) {
        s.solve();
        for (FlowId f : flows) trace.push_back(s.rate(f));
      }
    }
    return trace;
  };
  const std::vector<double> a = run(), b = run();
  REQUIRE(a.size() == b.size());
  CHECK(std::equal(a.begin(), a.end(), b.begin()));  // bitwise, not approximately
}

TEST_CASE("thousands of flows in small components solve incrementally", "[maxmin]") {
  // 1000 independent pairs of links, 4 flows each: a change in one pair
  // re-solves that pair's 4 flows, not the 4000.
  MaxMinSolver s;
  std::vector<FlowId> flows;
  for (int i = 0; i < 1000; ++i) {
    const ResourceId x = s.add_resource(1.0), y = s.add_resource(2.0);
    flows.push_back(add(s, {x, y}));
    flows.push_back(add(s, {x}));
    flows.push_back(add(s, {y}));
    flows.push_back(add(s, {y}));
  }
  s.solve();
  CHECK(s.last_solved() == 4000);
  for (int i = 0; i < 1000; ++i) {
    CHECK(s.rate(flows[static_cast<std::size_t>(4 * i)]) == 0.5);
    CHECK(s.rate(flows[static_cast<std::size_t>(4 * i + 2)]) == 0.75);
  }
  s.remove_flow(flows[4 * 500 + 1]);
  s.solve();
  CHECK(s.last_solved() == 3);
  CHECK(s.rate(flows[4 * 500]) == Approx(2.0 / 3));
}

TEST_CASE("weighted uses: a flow counts its weight on each resource", "[maxmin]") {
  MaxMinSolver s;
  const ResourceId r = s.add_resource(6.0), q = s.add_resource(10.0);
  // f crosses r twice over (weight 2) and q once; g crosses r once.
  const std::vector<ResourceId> fr{r, q};
  const std::vector<double> fw{2.0, 1.0};
  const FlowId f = s.add_flow(fr, fw);
  const FlowId g = add(s, {r});
  s.solve();
  // r: 2 x + x = 6 at the common level -> x = 2 each; f puts 4 on r, 2 on q.
  CHECK(s.rate(f) == 2.0);
  CHECK(s.rate(g) == 2.0);
  s.remove_flow(g);
  s.solve();
  CHECK(s.rate(f) == 3.0);  // r alone: 6 / 2
}

TEST_CASE("weighted uses: weights of 1 give the unweighted rates bit for bit", "[maxmin]") {
  std::mt19937_64 rng(7);
  MaxMinSolver a, b;
  std::uniform_real_distribution<double> cap(0.5, 9.0);
  for (int i = 0; i < 12; ++i) {
    const double c = cap(rng);
    a.add_resource(c);
    b.add_resource(c);
  }
  std::vector<FlowId> fa, fb;
  for (int i = 0; i < 40; ++i) {
    std::vector<ResourceId> rs;
    for (ResourceId r = 0; r < 12; ++r)
      if (rng() % 4 == 0) rs.push_back(r);
    if (rs.empty()) rs.push_back(static_cast<ResourceId>(rng() % 12));
    const std::vector<double> ones(rs.size(), 1.0);
    fa.push_back(a.add_flow(rs));
    fb.push_back(b.add_flow(rs, ones));
  }
  a.solve();
  b.solve();
  for (std::size_t i = 0; i < fa.size(); ++i) CHECK(a.rate(fa[i]) == b.rate(fb[i]));
}

TEST_CASE("weighted uses: bad weights are usage errors and change nothing", "[maxmin]") {
  MaxMinSolver s;
  const ResourceId r = s.add_resource(1.0), q = s.add_resource(1.0);
  const std::vector<ResourceId> rs{r, q};
  const std::vector<double> one{1.0}, zero{1.0, 0.0}, inf{1.0, std::numeric_limits<double>::infinity()};
  CHECK_THROWS_AS(s.add_flow(rs, one), UsageError);
  CHECK_THROWS_AS(s.add_flow(rs, zero), UsageError);
  CHECK_THROWS_AS(s.add_flow(rs, inf), UsageError);
  CHECK(s.num_flows() == 0);
}
