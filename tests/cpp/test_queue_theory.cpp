// test_queue_theory.cpp -- Server against the closed forms of queueing theory.
//
// Sample sizes are chosen so the standard error of the mean wait is well
// under the 2 % tolerance: at rho = 0.9 the M/M/1 waiting-time mean has an
// asymptotic variance of ~3.6e4 / mu^2 per customer, so 12 M customers give
// a standard error of ~0.6 % (3.4 sigma to the bound).
#include <catch2/catch.hpp>

#include <cmath>

#include "sim/models/queue_model.hpp"

using namespace kernbench::sim;
using namespace kernbench::sim::models;

namespace {

QueueResult run(double rho, ServiceDistribution dist, std::uint64_t customers, int servers = 1) {
  QueueParams p;
  p.mean_service = kMicrosecond;
  p.mean_interarrival = static_cast<Time>(std::llround(static_cast<double>(kMicrosecond) / (rho * servers)));
  p.service = dist;
  p.servers = servers;
  p.customers = customers;
  p.record_ops = false;
  Simulation sim(2024);
  return run_queue(sim, p);
}

}  // namespace

TEST_CASE("closed forms are what the textbooks say", "[queue]") {
  QueueParams p;
  p.mean_service = 1000;
  p.mean_interarrival = 2000;                         // rho 0.5
  CHECK(theoretical_mean_wait(p) == Approx(1000.0));  // rho / (mu - lambda)
  p.service = ServiceDistribution::Deterministic;
  CHECK(theoretical_mean_wait(p) == Approx(500.0));  // half of M/M/1 (P-K)
  p.service = ServiceDistribution::Exponential;
  p.servers = 2;
  p.mean_interarrival = 1000;  // a = 1 Erlang on 2 servers: C = 1/3, Wq = C / (2 mu - lambda)
  CHECK(theoretical_mean_wait(p) == Approx(1000.0 / 3.0));
  p.mean_interarrival = 400;  // rho > 1
  CHECK(std::isnan(theoretical_mean_wait(p)));
}

TEST_CASE("M/M/1 mean wait matches rho/(mu-lambda) within 2%", "[queue][slow]") {
  const auto r5 = run(0.5, ServiceDistribution::Exponential, 2'000'000);
  CHECK(r5.mean_wait_ps == Approx(r5.theory_wait_ps).epsilon(0.02));
  CHECK(r5.utilization == Approx(0.5).epsilon(0.01));
  const auto r9 = run(0.9, ServiceDistribution::Exponential, 12'000'000);
  CHECK(r9.mean_wait_ps == Approx(r9.theory_wait_ps).epsilon(0.02));
  CHECK(r9.theory_wait_ps == Approx(9.0 * kMicrosecond));
  CHECK(r9.utilization == Approx(0.9).epsilon(0.01));
  // Little's law on the measured queue: Lq = lambda * Wq.
  CHECK(r9.mean_queue_length == Approx(0.9 * r9.mean_wait_ps / kMicrosecond).epsilon(0.01));
}

TEST_CASE("M/D/1 mean wait matches Pollaczek-Khinchine within 2%", "[queue][slow]") {
  const auto r5 = run(0.5, ServiceDistribution::Deterministic, 1'000'000);
  CHECK(r5.mean_wait_ps == Approx(r5.theory_wait_ps).epsilon(0.02));
  const auto r9 = run(0.9, ServiceDistribution::Deterministic, 6'000'000);
  CHECK(r9.mean_wait_ps == Approx(r9.theory_wait_ps).epsilon(0.02));
  CHECK(r9.theory_wait_ps == Approx(4.5 * kMicrosecond));
}

TEST_CASE("M/M/2 mean wait matches Erlang C within 2%", "[queue][slow]") {
  const auto r = run(0.8, ServiceDistribution::Exponential, 4'000'000, 2);
  CHECK(r.mean_wait_ps == Approx(r.theory_wait_ps).epsilon(0.02));
}
