// queue_model.hpp -- M/M/c and M/D/c queues built on Server.
//
// Poisson arrivals, exponential or deterministic service, c identical
// servers behind one FIFO queue. The model exists to validate Server
// against queueing theory (mean wait within 2 % of the closed forms in the
// tests) and as the smallest complete example of a model on the core:
// callbacks for the customer flow, one OpRecord per customer.
#pragma once

#include <cstdint>
#include <string>

#include "sim/simulation.hpp"
#include "sim/units.hpp"

namespace kernbench::sim::models {

enum class ServiceDistribution { Exponential, Deterministic };

/// Parses "exponential" / "deterministic" (also "M" / "D").
ServiceDistribution service_from_name(const std::string& name);

struct QueueParams {
  Time mean_interarrival = kMicrosecond;  ///< 1 / lambda
  Time mean_service = 500 * kNanosecond;  ///< 1 / mu
  ServiceDistribution service = ServiceDistribution::Exponential;
  int servers = 1;                    ///< c
  std::uint64_t customers = 100'000;  ///< arrivals to generate
  bool record_ops = true;             ///< one op-log row per customer
};

struct QueueResult {
  std::uint64_t served = 0;
  Time end_time = 0;
  double mean_wait_ps = 0.0;       ///< time in queue, averaged over customers
  double mean_sojourn_ps = 0.0;    ///< time in system
  double mean_queue_length = 0.0;  ///< time-averaged number waiting
  double utilization = 0.0;        ///< busy fraction of the c servers
  double rho = 0.0;                ///< offered load lambda / (c mu)
  /// Closed-form mean wait: M/M/c (Erlang C) or M/D/1 (Pollaczek-Khinchine);
  /// NaN where no closed form exists (M/D/c, c > 1) or the queue is unstable.
  double theory_wait_ps = 0.0;
};

/// Closed-form mean queue wait for the parameters (see QueueResult).
double theoretical_mean_wait(const QueueParams& params);

/// Runs the queue on `sim` until every customer has left.
QueueResult run_queue(Simulation& sim, const QueueParams& params);

}  // namespace kernbench::sim::models
