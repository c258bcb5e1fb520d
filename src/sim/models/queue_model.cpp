// queue_model.cpp -- customers as three callbacks around one Server.
#include "sim/models/queue_model.hpp"

#include <cmath>
#include <limits>

#include "sim/errors.hpp"
#include "sim/server.hpp"

namespace kernbench::sim::models {
namespace {

constexpr std::int32_t kServiceKind = 0;

void check(const QueueParams& p) {
  if (p.mean_interarrival <= 0) throw ConfigError("queue: mean_interarrival must be > 0 ps");
  if (p.mean_service <= 0) throw ConfigError("queue: mean_service must be > 0 ps");
  if (p.servers < 1) throw ConfigError("queue: servers must be >= 1, got " + std::to_string(p.servers));
}

// The event args carry each customer's arrival time, so the model keeps no
// per-customer table: arrival -> (queue) -> service start -> departure.
class QueueModel {
 public:
  QueueModel(Simulation& sim, const QueueParams& p) : sim_(sim), p_(p), server_(sim, "queue", p.servers) {}

  QueueResult run() {
    if (p_.record_ops) {
      sim_.op_log().reserve(sim_.op_log().size() + p_.customers);
      if (sim_.op_log().kind_names().empty()) sim_.op_log().kind_names().push_back("service");
    }
    const Time t_start = sim_.now();
    if (p_.customers > 0) sim_.schedule(interarrival(), arrive_);
    sim_.run();
    QueueResult r;
    r.served = served_;
    r.end_time = sim_.now();
    const double n = served_ ? static_cast<double>(served_) : 1.0;
    r.mean_wait_ps = wait_sum_ / n;
    r.mean_sojourn_ps = sojourn_sum_ / n;
    const ServerStats s = server_.stats();
    const double span = static_cast<double>(sim_.now() - t_start);
    r.mean_queue_length = span > 0 ? s.queue_area / span : 0.0;
    r.utilization = server_.utilization();
    r.rho = static_cast<double>(p_.mean_service) / (static_cast<double>(p_.mean_interarrival) * p_.servers);
    r.theory_wait_ps = theoretical_mean_wait(p_);
    return r;
  }

 private:
  Time interarrival() {
    return static_cast<Time>(sim_.rng().exponential(static_cast<double>(p_.mean_interarrival)) + 0.5);
  }
  Time service() {
    if (p_.service == ServiceDistribution::Deterministic) return p_.mean_service;
    return static_cast<Time>(sim_.rng().exponential(static_cast<double>(p_.mean_service)) + 0.5);
  }

  // Event entry points; the arg carries the customer's arrival time.
  void on_arrival(std::uint64_t) {
    const Time now = sim_.now();
    if (++arrived_ < p_.customers) sim_.schedule(interarrival(), arrive_);
    if (server_.request(grant_, static_cast<std::uint64_t>(now))) start_service(now);
  }

  void granted(std::uint64_t arrived) { start_service(static_cast<Time>(arrived)); }

  void start_service(Time arrived) {
    const Time now = sim_.now();
    const Time duration = service();
    wait_sum_ += static_cast<double>(now - arrived);
    if (p_.record_ops) {
      sim_.op_log().record(OpRecord{static_cast<std::int64_t>(started_), 0, 0, kServiceKind, 0, arrived, now,
                                    now + duration, 0, static_cast<double>(duration)});
    }
    ++started_;
    sim_.schedule(duration, depart_, static_cast<std::uint64_t>(arrived));
  }

  void on_departure(std::uint64_t arrived) {
    sojourn_sum_ += static_cast<double>(sim_.now() - static_cast<Time>(arrived));
    ++served_;
    server_.release();
  }

  Simulation& sim_;
  const QueueParams& p_;
  Server server_;
  MemberHandler<QueueModel, &QueueModel::on_arrival> arrive_{*this};
  MemberHandler<QueueModel, &QueueModel::granted> grant_{*this};
  MemberHandler<QueueModel, &QueueModel::on_departure> depart_{*this};
  std::uint64_t arrived_ = 0;
  std::uint64_t started_ = 0;
  std::uint64_t served_ = 0;
  double wait_sum_ = 0.0;
  double sojourn_sum_ = 0.0;
};

}  // namespace

ServiceDistribution service_from_name(const std::string& name) {
  if (name == "exponential" || name == "M") return ServiceDistribution::Exponential;
  if (name == "deterministic" || name == "D") return ServiceDistribution::Deterministic;
  throw ConfigError("queue: unknown service distribution '" + name + "' (known: exponential, deterministic)");
}

double theoretical_mean_wait(const QueueParams& p) {
  const double lambda = 1.0 / static_cast<double>(p.mean_interarrival);
  const double mu = 1.0 / static_cast<double>(p.mean_service);
  const int c = p.servers;
  const double rho = lambda / (c * mu);
  if (rho >= 1.0) return std::numeric_limits<double>::quiet_NaN();
  if (p.service == ServiceDistribution::Deterministic) {
    if (c != 1) return std::numeric_limits<double>::quiet_NaN();
    return rho / (2.0 * mu * (1.0 - rho));  // Pollaczek-Khinchine with Var[S] = 0
  }
  // Erlang C: probability of waiting, then Wq = C / (c mu - lambda).
  const double a = lambda / mu;  // offered load in Erlangs
  double term = 1.0, sum = 1.0;  // sum_{k<c} a^k / k!
  for (int k = 1; k < c; ++k) {
    term *= a / k;
    sum += term;
  }
  const double last = term * a / c / (1.0 - rho);  // a^c / c! / (1 - rho)
  const double erlang_c = last / (sum + last);
  return erlang_c / (c * mu - lambda);
}

QueueResult run_queue(Simulation& sim, const QueueParams& params) {
  check(params);
  QueueModel model(sim, params);
  return model.run();
}

}  // namespace kernbench::sim::models
