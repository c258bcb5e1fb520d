// phold.cpp -- PHOLD on coroutines, on callbacks, and on a bare loop.
#include "sim/models/phold.hpp"

#include <chrono>
#include <queue>
#include <vector>

#include "sim/errors.hpp"
#include "sim/frame_pool.hpp"
#include "sim/process.hpp"

namespace kernbench::sim::models {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void check(const PholdParams& p) {
  if (p.lps == 0) throw ConfigError("phold: lps must be >= 1");
  if (p.events_per_lp == 0) throw ConfigError("phold: events_per_lp must be >= 1");
  if (p.mean_delay <= 0) throw ConfigError("phold: mean_delay must be > 0 ps");
}

// Every engine processes an event the same way: fold it into the trace
// hash, then draw the destination LP and the delay of the event it causes.
struct Step {
  std::uint32_t next_lp;
  Time delay;
};

inline void fold(std::uint64_t& hash, Time t, std::uint32_t lp) {
  constexpr std::uint64_t kPrime = 0x100000001b3ULL;
  hash = (hash ^ static_cast<std::uint64_t>(t)) * kPrime;
  hash = (hash ^ lp) * kPrime;
}

inline Time draw_delay(Rng& rng, double mean) { return static_cast<Time>(rng.exponential(mean) + 0.5); }

inline Step draw_step(Rng& rng, std::uint32_t lps, double mean) {
  const auto lp = static_cast<std::uint32_t>(rng.below(lps));
  return {lp, draw_delay(rng, mean)};
}

constexpr std::uint64_t kHashSeed = 0xcbf29ce484222325ULL;

// ---- (c) the bare reference loop -------------------------------------------

struct BareEvent {
  Time time;
  std::uint64_t seq;
  std::uint32_t lp;
  bool operator>(const BareEvent& o) const { return time > o.time || (time == o.time && seq > o.seq); }
};

// std::priority_queue with its container exposed, to measure its memory.
struct BareQueue : std::priority_queue<BareEvent, std::vector<BareEvent>, std::greater<>> {
  std::size_t reserved_bytes() const { return c.capacity() * sizeof(BareEvent); }
  void reserve(std::size_t n) { c.reserve(n); }
};

PholdResult run_bare(Simulation& sim, const PholdParams& p) {
  Rng rng(sim.seed());
  const auto mean = static_cast<double>(p.mean_delay);
  BareQueue q;
  q.reserve(static_cast<std::size_t>(p.lps) * p.events_per_lp);
  std::uint64_t seq = 0;
  for (std::uint32_t lp = 0; lp < p.lps; ++lp)
    for (std::uint32_t e = 0; e < p.events_per_lp; ++e) q.push({draw_delay(rng, mean), seq++, lp});

  PholdResult r;
  r.trace_hash = kHashSeed;
  const auto t0 = Clock::now();
  for (std::uint64_t i = 0; i < p.events; ++i) {
    const BareEvent ev = q.top();
    q.pop();
    fold(r.trace_hash, ev.time, ev.lp);
    const Step s = draw_step(rng, p.lps, mean);
    q.push({ev.time + s.delay, seq++, s.next_lp});
    r.end_time = ev.time;
  }
  r.wall_seconds = seconds_since(t0);
  r.events = p.events;
  r.pending = q.size();
  r.bytes_per_pending = static_cast<double>(q.reserved_bytes()) / static_cast<double>(r.pending);
  return r;
}

// ---- (b) plain callbacks ----------------------------------------------------

class PholdHandler final : public Handler {
 public:
  PholdHandler(Simulation& sim, const PholdParams& p) : sim_(sim), p_(p), mean_(static_cast<double>(p.mean_delay)) {}
  void on_event(std::uint64_t lp) override {
    fold(hash_, sim_.now(), static_cast<std::uint32_t>(lp));
    if (++processed_ == p_.events) sim_.stop();
    const Step s = draw_step(sim_.rng(), p_.lps, mean_);
    sim_.schedule(s.delay, *this, s.next_lp);
  }
  std::uint64_t hash_ = kHashSeed;
  std::uint64_t processed_ = 0;

 private:
  Simulation& sim_;
  const PholdParams& p_;
  double mean_;
};

PholdResult run_callbacks(Simulation& sim, const PholdParams& p) {
  PholdHandler handler(sim, p);
  const auto mean = static_cast<double>(p.mean_delay);
  sim.queue().reserve(static_cast<std::size_t>(p.lps) * p.events_per_lp + 1);
  for (std::uint32_t lp = 0; lp < p.lps; ++lp)
    for (std::uint32_t e = 0; e < p.events_per_lp; ++e) sim.schedule(draw_delay(sim.rng(), mean), handler, lp);

  PholdResult r;
  const auto t0 = Clock::now();
  if (p.events > 0) sim.run();
  r.wall_seconds = seconds_since(t0);
  r.events = handler.processed_;
  r.trace_hash = handler.hash_;
  r.end_time = sim.now();
  r.pending = sim.pending_events();
  r.bytes_per_pending = static_cast<double>(sim.queue().reserved_bytes()) / static_cast<double>(r.pending);
  return r;
}

// ---- (a) coroutine processes ------------------------------------------------
// Each initially pending event is a token process that hops from LP to LP:
// "process the event at lp, then wait for the delay of the next one".

struct CoroutineState {
  std::uint64_t hash = kHashSeed;
  std::uint64_t processed = 0;
};

Process token(Simulation& sim, const PholdParams& p, CoroutineState& st, std::uint32_t lp) {
  const auto mean = static_cast<double>(p.mean_delay);
  co_await sim.delay(draw_delay(sim.rng(), mean));
  for (;;) {
    fold(st.hash, sim.now(), lp);
    if (++st.processed == p.events) sim.stop();
    const Step s = draw_step(sim.rng(), p.lps, mean);
    lp = s.next_lp;
    co_await sim.delay(s.delay);
  }
}

PholdResult run_coroutines(Simulation& sim, const PholdParams& p) {
  CoroutineState st;
  const std::size_t pending = static_cast<std::size_t>(p.lps) * p.events_per_lp;
  sim.queue().reserve(pending + 1);
  const std::size_t frames_before = detail::frame_bytes_in_use();
  for (std::uint32_t lp = 0; lp < p.lps; ++lp)
    for (std::uint32_t e = 0; e < p.events_per_lp; ++e) sim.spawn("phold-token", token(sim, p, st, lp));
  // Let every token draw its first delay (all due at t=0) before timing.
  sim.run(1);
  const std::size_t frame_bytes = detail::frame_bytes_in_use() - frames_before;

  PholdResult r;
  const auto t0 = Clock::now();
  if (p.events > 0) sim.run();
  r.wall_seconds = seconds_since(t0);
  r.events = st.processed;
  r.trace_hash = st.hash;
  r.end_time = sim.now();
  r.pending = sim.pending_events();
  r.bytes_per_pending =
      static_cast<double>(sim.queue().reserved_bytes() + frame_bytes) / static_cast<double>(r.pending);
  return r;
}

}  // namespace

PholdEngine phold_engine_from_name(const std::string& name) {
  if (name == "coroutines") return PholdEngine::Coroutines;
  if (name == "callbacks") return PholdEngine::Callbacks;
  if (name == "bare") return PholdEngine::Bare;
  throw ConfigError("phold: unknown engine '" + name + "' (known: bare, callbacks, coroutines)");
}

std::string phold_engine_name(PholdEngine engine) {
  switch (engine) {
    case PholdEngine::Coroutines: return "coroutines";
    case PholdEngine::Callbacks: return "callbacks";
    case PholdEngine::Bare: return "bare";
  }
  return "?";
}

PholdResult run_phold(Simulation& sim, PholdEngine engine, const PholdParams& params) {
  check(params);
  switch (engine) {
    case PholdEngine::Coroutines: return run_coroutines(sim, params);
    case PholdEngine::Callbacks: return run_callbacks(sim, params);
    case PholdEngine::Bare: return run_bare(sim, params);
  }
  throw InternalError("phold: unhandled engine");
}

}  // namespace kernbench::sim::models
