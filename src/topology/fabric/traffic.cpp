// traffic.cpp -- one self-rescheduling handler drives every source.
#include "topology/fabric/traffic.hpp"

#include <cmath>

#include "sim/errors.hpp"

namespace kernbench::topology {

TrafficPattern traffic_pattern_from_name(const std::string& name) {
  if (name == "uniform") return TrafficPattern::Uniform;
  if (name == "transpose") return TrafficPattern::Transpose;
  if (name == "bitcomplement" || name == "bit-complement" || name == "bit_complement")
    return TrafficPattern::BitComplement;
  if (name == "hotspot") return TrafficPattern::Hotspot;
  if (name == "neighbour" || name == "neighbor") return TrafficPattern::Neighbour;
  throw ConfigError("traffic: unknown pattern '" + name +
                    "' (known: uniform, transpose, bitcomplement, hotspot, neighbour)");
}

Injection injection_from_name(const std::string& name) {
  if (name == "poisson") return Injection::Poisson;
  if (name == "periodic") return Injection::Periodic;
  if (name == "bernoulli") return Injection::Bernoulli;
  throw ConfigError("traffic: unknown injection '" + name + "' (known: poisson, periodic, bernoulli)");
}

TrafficGenerator::TrafficGenerator(Fabric& fabric, TrafficSpec spec) : fabric_(fabric), spec_(std::move(spec)) {
  const std::size_t n = spec_.endpoints.size();
  if (n < 2) throw ConfigError("traffic: needs at least two endpoints, got " + std::to_string(n));
  if (spec_.packet <= 0) throw ConfigError("traffic: packet size must be > 0 B");
  if (spec_.offered.bytes_per_s <= 0) throw ConfigError("traffic: offered load must be > 0 B/s per source");
  if (spec_.stop <= spec_.start) throw ConfigError("traffic: stop must be after start");
  if (spec_.pattern == TrafficPattern::Transpose &&
      (spec_.grid_w < 1 || static_cast<std::size_t>(spec_.grid_w) * static_cast<std::size_t>(spec_.grid_w) != n))
    throw ConfigError("traffic: transpose needs a square grid of endpoints; " + std::to_string(n) +
                      " endpoints with grid_w " + std::to_string(spec_.grid_w));
  if (spec_.pattern == TrafficPattern::BitComplement && (n & (n - 1)) != 0)
    throw ConfigError("traffic: bitcomplement needs a power-of-two number of endpoints, got " + std::to_string(n));
  if (spec_.pattern == TrafficPattern::Neighbour && spec_.grid_w != 0 &&
      (spec_.grid_w < 1 || n % static_cast<std::size_t>(spec_.grid_w) != 0))
    throw ConfigError("traffic: neighbour with grid_w " + std::to_string(spec_.grid_w) + " needs whole rows; " +
                      std::to_string(n) + " endpoints");
  if (spec_.pattern == TrafficPattern::Hotspot && !(spec_.hotspot_fraction >= 0.0 && spec_.hotspot_fraction <= 1.0))
    throw ConfigError("traffic: hotspot_fraction must be within [0, 1]");
  check_transfer_size(spec_.packet, "traffic: packet");
  if (spec_.start < 0) throw ConfigError("traffic: start must be >= 0 ps, got " + std::to_string(spec_.start));
  if (spec_.stop > sim::kMaxTime)
    throw ConfigError("traffic: stop " + std::to_string(spec_.stop) +
                      " ps is past the simulator's time range (2^62 ps, ~53 days)");
  mean_gap_ps_ = static_cast<double>(spec_.packet) * 1e12 / static_cast<double>(spec_.offered.bytes_per_s);
  // One checked conversion: a gap past the time range is refused up front.
  (void)sim::ps_from_double(mean_gap_ps_, "traffic: packet / offered load (the mean injection gap)");
  if (spec_.injection == Injection::Bernoulli) {
    if (spec_.cycle <= 0) throw ConfigError("traffic: bernoulli injection needs a cycle > 0 ps");
    const double p = static_cast<double>(spec_.cycle) / mean_gap_ps_;  // packets per source per cycle
    if (p > 1.0 + 1e-12)
      throw ConfigError("traffic: bernoulli injection of " + std::to_string(p) +
                        " packets per source per cycle is over 1 (at most one packet starts per cycle; "
                        "lower the load or use poisson)");
    log_miss_ = p >= 1.0 ? 0.0 : std::log1p(-p);
  }
  sim::Simulation& sim = fabric_.sim();
  const Time now = sim.now();
  for (std::size_t s = 0; s < n; ++s) {
    // Poisson sources start at a random phase too, so they do not all fire
    // together; a Bernoulli source's first packet is at its first successful
    // cycle (cycle 0 included: the first gap counts trials from cycle 0).
    const Time phase = spec_.injection == Injection::Poisson     ? gap()
                       : spec_.injection == Injection::Bernoulli ? gap() - spec_.cycle
                                                                 : 0;
    const Time first = std::max(spec_.start, now) + phase;
    sim.schedule(first - now, *this, s);
  }
}

Time TrafficGenerator::gap() {
  if (spec_.injection == Injection::Periodic) return std::max<Time>(1, std::llround(mean_gap_ps_));
  if (spec_.injection == Injection::Bernoulli) {
    // Cycles up to and including the next success of a per-cycle Bernoulli(p)
    // trial: geometric, k = ceil(log(U) / log(1 - p)) for U uniform in (0, 1].
    if (log_miss_ == 0.0) return spec_.cycle;
    const double u = 1.0 - fabric_.sim().rng().uniform();  // (0, 1]
    const double k = std::max(1.0, std::ceil(std::log(u) / log_miss_));
    const double cap = static_cast<double>(sim::kMaxTime / spec_.cycle);
    return static_cast<Time>(std::min(k, cap)) * spec_.cycle;
  }
  // An exponential sample can land far past the mean: clamp it to the time
  // range before converting (a double past int64 has no integer value).
  const double g = std::min(fabric_.sim().rng().exponential(mean_gap_ps_), static_cast<double>(sim::kMaxTime));
  return std::max<Time>(1, std::llround(g));
}

NodeId TrafficGenerator::destination(std::size_t s) {
  const auto& ep = spec_.endpoints;
  const std::size_t n = ep.size();
  auto uniform_other = [&] {
    std::size_t d = fabric_.sim().rng().below(n - 1);
    if (d >= s) ++d;  // never itself
    return ep[d];
  };
  switch (spec_.pattern) {
    case TrafficPattern::Uniform: return uniform_other();
    case TrafficPattern::Transpose: {
      const auto w = static_cast<std::size_t>(spec_.grid_w);
      return ep[(s % w) * w + s / w];
    }
    case TrafficPattern::BitComplement: return ep[~s & (n - 1)];
    case TrafficPattern::Hotspot:
      return fabric_.sim().rng().uniform() < spec_.hotspot_fraction ? spec_.hotspot : uniform_other();
    case TrafficPattern::Neighbour: {
      if (spec_.grid_w <= 0) return ep[(s + 1) % n];
      const auto w = static_cast<std::size_t>(spec_.grid_w);
      return ep[(s / w) * w + (s % w + 1) % w];
    }
  }
  return ep[s];
}

void TrafficGenerator::on_event(std::uint64_t source) {
  sim::Simulation& sim = fabric_.sim();
  if (sim.now() >= spec_.stop) return;
  const auto s = static_cast<std::size_t>(source);
  const NodeId src = spec_.endpoints[s];
  const NodeId dst = destination(s);
  if (dst != src) {  // transpose maps the diagonal onto itself: nothing to send
    fabric_.start(TransferSpec{src, dst, spec_.packet, injected_ * static_cast<std::uint64_t>(spec_.packet), spec_.tag,
                               static_cast<std::int32_t>(s), static_cast<std::int64_t>(injected_)});
    ++injected_;
  }
  const Time g = gap();
  if (g > sim::kMaxTime - sim.now()) return;  // the next packet would be past the time range: never sent
  sim.schedule(g, *this, source);
}

}  // namespace kernbench::topology
