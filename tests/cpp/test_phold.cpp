// test_phold.cpp -- the three PHOLD engines process the very same events.
#include <catch2/catch.hpp>

#include "sim/models/phold.hpp"

using namespace kernbench::sim;
using namespace kernbench::sim::models;

namespace {
PholdResult run(PholdEngine engine, std::uint64_t seed, std::uint32_t per_lp = 4) {
  PholdParams p;
  p.lps = 64;
  p.events_per_lp = per_lp;
  p.events = 200'000;
  Simulation sim(seed);
  return run_phold(sim, engine, p);
}
}  // namespace

TEST_CASE("bare, callback and coroutine PHOLD give identical traces", "[phold][determinism]") {
  const auto bare = run(PholdEngine::Bare, 9);
  const auto cb = run(PholdEngine::Callbacks, 9);
  const auto co = run(PholdEngine::Coroutines, 9);
  CHECK(bare.events == 200'000);
  CHECK(cb.events == 200'000);
  CHECK(co.events == 200'000);
  CHECK(cb.trace_hash == bare.trace_hash);
  CHECK(co.trace_hash == bare.trace_hash);
  CHECK(cb.end_time == bare.end_time);
  CHECK(co.end_time == bare.end_time);
  CHECK(bare.pending == 64 * 4);
  CHECK(cb.pending == 64 * 4);
  CHECK(co.pending == 64 * 4);
}

TEST_CASE("PHOLD is reproducible and seed-sensitive", "[phold][determinism]") {
  CHECK(run(PholdEngine::Callbacks, 5).trace_hash == run(PholdEngine::Callbacks, 5).trace_hash);
  CHECK(run(PholdEngine::Callbacks, 5).trace_hash != run(PholdEngine::Callbacks, 6).trace_hash);
}

TEST_CASE("PHOLD simulated time follows the mean delay", "[phold]") {
  // Each token advances by one mean delay per event it processes: after
  // 200k events spread over 256 tokens, simulated time ~ 781 mean delays.
  const auto r = run(PholdEngine::Callbacks, 3);
  const double per_token = 200'000.0 / 256.0;
  CHECK(static_cast<double>(r.end_time) / kMicrosecond == Approx(per_token).epsilon(0.1));
}

TEST_CASE("PHOLD parameters are checked", "[phold]") {
  Simulation sim;
  PholdParams p;
  p.lps = 0;
  CHECK_THROWS_WITH(run_phold(sim, PholdEngine::Bare, p), Catch::Contains("lps must be >= 1"));
  CHECK_THROWS_WITH(phold_engine_from_name("fast"), Catch::Contains("known: bare, callbacks, coroutines"));
}
