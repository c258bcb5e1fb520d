// test_serving.cpp -- the serving loop's pieces on the core (workloads/serving):
// the iteration-cost lattice is exact where the price is affine in a cell and
// at a step the target names; the loop against closed forms with a known price.
#include <catch2/catch.hpp>

#include <cmath>

#include "sim/errors.hpp"
#include "workloads/serving/serving.hpp"

using namespace kernbench::workloads::serving;

namespace {

// An affine price per part (ps), plus a step: decode keys from 512 on cost less
// (as a GPU's split-KV count doubling would).
double priced(const IterationShape& s, bool step) {
  double t = 0;
  if (s.prefill_tokens)
    t += 2e9 + 1e6 * static_cast<double>(s.prefill_tokens) +
         3e3 * s.prefill_keys * static_cast<double>(s.prefill_tokens);
  if (s.decode_seqs) {
    const double per_key = step && s.decode_keys >= 512 ? 2e5 : 4e5;
    t += 5e8 + 1e7 * static_cast<double>(s.decode_seqs) + per_key * s.decode_keys * static_cast<double>(s.decode_seqs);
  }
  return t;
}

}  // namespace

TEST_CASE("the iteration lattice interpolates an affine price exactly and simulates only the corners it needs",
          "[serving]") {
  int calls = 0;
  IterationCost cost(
      [&](const IterationShape& s) {
        ++calls;
        return priced(s, false);
      },
      2048, 256, 8192);
  // Decode only: affine in the keys at a fixed count; the count's axis holds every value up to 8.
  for (double keys : {17.0, 100.5, 700.0, 5000.25}) {
    IterationShape s{0, 0, 5, keys};
    CHECK(static_cast<double>(cost(s)) == Approx(priced(s, false)).epsilon(1e-9));
  }
  const std::uint64_t after_decodes = cost.simulated();
  CHECK(after_decodes <= 8);  // two key corners per lookup, one sequence count
  // A shape on the corners is the price itself, and a second lookup simulates nothing new.
  IterationShape on{64, 32, 0, 0};
  CHECK(cost(on) == static_cast<kernbench::sim::Time>(std::llround(priced(on, false))));
  const int before = calls;
  CHECK(cost(on) == cost(on));
  CHECK(calls == before);
  CHECK(cost.lookups() == 7);
}

TEST_CASE("a step the target names gets corners on both sides: no cell straddles it", "[serving]") {
  IterationCost blind([](const IterationShape& s) { return priced(s, true); }, 2048, 256, 8192);
  IterationCost told([](const IterationShape& s) { return priced(s, true); }, 2048, 256, 8192, {{}, {}, {}, {512.0}});
  IterationShape below{0, 0, 4, 500}, above{0, 0, 4, 600};
  // Without the break the cell [362, 512] mixes the two regimes: wrong below the step.
  CHECK(std::abs(static_cast<double>(blind(below)) / priced(below, true) - 1) > 0.05);
  CHECK(static_cast<double>(told(below)) == Approx(priced(below, true)).epsilon(1e-9));
  CHECK(static_cast<double>(told(above)) == Approx(priced(above, true)).epsilon(1e-9));
  const auto& keys = told.axis(3);
  CHECK(std::find(keys.begin(), keys.end(), 511.0) != keys.end());
  CHECK(std::find(keys.begin(), keys.end(), 512.0) != keys.end());
}

TEST_CASE("one request alone: its end to end time is its prefill and output - 1 decode steps", "[serving]") {
  IterationCost cost([](const IterationShape& s) { return priced(s, false); }, 2048, 256, 8192);
  SchedulerConfig cfg;
  cfg.kv_blocks = 100;
  const ServingResult r = simulate({RequestSpec{0, 100, 10}}, cfg, cost);
  REQUIRE(r.requests.size() == 1);
  REQUIRE(r.iterations.size() == 10);
  kernbench::sim::Time sum = 0;
  for (const IterationRecord& it : r.iterations) sum += it.end - it.start;
  CHECK(r.requests[0].finish - r.requests[0].arrival == sum);
  CHECK(r.requests[0].first_token == r.iterations[0].end);
  CHECK(r.iterations[0].shape.prefill_tokens == 100);
  CHECK(r.iterations[0].shape.prefill_keys == Approx(50.5));  // causal: (100 + 1) / 2 keys per query
  CHECK(r.iterations[9].shape.decode_keys == Approx(109));    // the cache of 108 tokens + its new one
  CHECK(r.blocks_allocated == r.blocks_freed);
}

TEST_CASE("bad requests and configurations are refused naming what is wrong", "[serving]") {
  IterationCost cost([](const IterationShape& s) { return priced(s, false); }, 2048, 256, 8192);
  SchedulerConfig cfg;
  cfg.kv_blocks = 100;
  CHECK_THROWS_WITH(simulate({RequestSpec{0, 10, 0}}, cfg, cost), Catch::Contains("request 0: output of 0 tokens"));
  CHECK_THROWS_WITH(simulate({RequestSpec{5, 10, 1}, RequestSpec{1, 10, 1}}, cfg, cost),
                    Catch::Contains("request 1: arrives before request 0"));
  cfg.kv_blocks = 0;
  CHECK_THROWS_WITH(simulate({RequestSpec{0, 10, 1}}, cfg, cost), Catch::Contains("the KV cache holds 0 blocks"));
  cfg.kv_blocks = 10;
  cfg.preemption = Preemption::Swap;
  CHECK_THROWS_WITH(simulate({RequestSpec{0, 10, 1}}, cfg, cost), Catch::Contains("preemption=swap needs a host link"));
  CHECK_THROWS_WITH(policy_from_string("fifo"), Catch::Contains("known: vllm, sarathi, orca, static"));
}
