// engine_impl.hpp -- the request loop (the Engine: arrivals, the router,
// disaggregation's KV transfers) and its instances (scheduler.cpp: each one's cache and policies).
#pragma once

#include <algorithm>
#include <deque>
#include <memory>
#include <unordered_map>

#include "sim/errors.hpp"
#include "sim/simulation.hpp"
#include "workloads/serving/serving.hpp"

namespace kernbench::workloads::serving::detail {

struct Seq {
  std::int64_t tokens = 0;    // prompt + generated
  std::int64_t computed = 0;  // of them, in the cache
  std::int64_t blocks = 0;    // held on the device, its own (a shared prefix's apart)
  std::int64_t prefix = -1;   // the cached prefix group it uses (-1: none)
  int at = -1;                // the instance it is in
  bool scheduled = false;     // in the iteration being formed
  bool running = false;       // in its instance's running list
};

struct Prefix {  // a shared prefix's full blocks, cached in one instance
  std::int64_t blocks = 0;
  int refs = 0;        // sequences using them now
  bool ready = false;  // its creator has computed them
  Time last_use = 0;
};

class Engine;

/// One instance: its queues, its share of the cache, its iteration.
struct Instance {
  Engine* e = nullptr;
  int index = 0;
  Role role = Role::Both;
  std::vector<NodeId> memories;  // per shard: where its KV lives
  std::deque<int> waiting, swapped;
  std::vector<int> running;
  std::vector<std::pair<int, std::int64_t>> batch;
  std::unordered_map<std::int64_t, Prefix> prefixes;
  std::int64_t free = 0, cached = 0;  // free blocks; blocks of cached prefixes
  std::int64_t budget = 0, swap_bytes = 0;
  int preempted_now = 0;
  std::int64_t load = 0;  // requests routed here and not gone (the router's measure)
  bool busy = false;
  std::size_t iteration_ = 0;  // its record in the result

  void start();
  void end();

 private:
  void form_paged();
  void form_static();
  bool take(int i, std::int64_t n);
  void add(int i, std::int64_t n);
  void preempt(int victim);
  std::int64_t available() const;
  std::int64_t deficit(int i, std::int64_t tokens) const;
  void grow(int i, std::int64_t tokens);
  void attach(int i);
};

class Engine {
 public:
  Engine(const std::vector<RequestSpec>& reqs, const SchedulerConfig& cfg, IterationCost& cost, const SwapCost& swap,
         const ClusterSpec& cluster)
      : reqs(reqs),
        cfg(cfg),
        cost(cost),
        swap(swap),
        cluster(cluster),
        on_arrival_(*this),
        on_end_(*this),
        on_kv_(*this) {
    if (cluster.system) {
      sim_ = &cluster.system->sim();
    } else {
      own_ = std::make_unique<sim::Simulation>();
      sim_ = own_.get();
    }
    t0 = sim_->now();
    seqs.resize(reqs.size());
    res.requests.resize(reqs.size());
    res.kv_blocks = cfg.kv_blocks;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      RequestRecord& r = res.requests[i];
      r.arrival = reqs[i].arrival;
      r.prompt = reqs[i].prompt;
      r.output = reqs[i].output;
      seqs[i].tokens = reqs[i].prompt;
      res.prompt_tokens += reqs[i].prompt;
    }
    std::vector<InstanceSpec> specs = cluster.instances;
    if (specs.empty()) specs.push_back(InstanceSpec{});
    instances.resize(specs.size());
    for (std::size_t k = 0; k < specs.size(); ++k) {
      Instance& in = instances[k];
      in.e = this;
      in.index = static_cast<int>(k);
      in.role = specs[k].role;
      in.free = cfg.kv_blocks;
      if (cluster.system)
        for (NodeId d : specs[k].devices)
          in.memories.push_back(cluster.system->machine().memory(d, "serving KV cache"));
    }
  }

  ServingResult run() {
    if (!reqs.empty()) sim_->schedule(reqs[0].arrival, sim::Target::call(on_arrival_), 0);
    sim_->run();
    for (const Instance& in : instances) res.blocks_held += cfg.kv_blocks - in.free;
    res.cost_lookups = cost.lookups();
    res.cost_simulated = cost.simulated();
    res.cost_reads = cost.corner_reads();
    res.events = sim_->events_processed();
    for (auto& it : res.iterations) it.start -= t0, it.end -= t0;
    for (auto& r : res.requests)
      for (Time* t : {&r.scheduled, &r.first_token, &r.finish, &r.kv_start, &r.kv_end})
        if (*t >= 0) *t -= t0;
    return std::move(res);
  }

  Time now() const { return sim_->now(); }
  std::int64_t blocks_for(std::int64_t tokens) const { return (tokens + cfg.block_size - 1) / cfg.block_size; }

  void arrive(std::uint64_t i) {
    const RequestSpec& q = reqs[i];
    const std::int64_t need = blocks_for(q.prompt + q.output);
    if (need > cfg.kv_blocks) {
      res.requests[i].rejected = "needs " + std::to_string(need) + " KV blocks for its " +
                                 std::to_string(q.prompt + q.output) + " tokens; the cache holds " +
                                 std::to_string(cfg.kv_blocks);
    } else {
      Instance& in = route(false);
      res.requests[i].instance = in.index;
      enter(in, static_cast<int>(i));
    }
    if (i + 1 < reqs.size())
      sim_->schedule(reqs[i + 1].arrival + t0 - sim_->now(), sim::Target::call(on_arrival_), i + 1);
  }

  void enter(Instance& in, int i) {
    seqs[static_cast<std::size_t>(i)].at = in.index;
    ++in.load;
    in.waiting.push_back(i);
    if (!in.busy) in.start();
  }

  // The instance a new request (or, decode, a request's KV) goes to.
  Instance& route(bool decode) {
    const auto eligible = [&](const Instance& in) {
      return decode ? in.role == Role::Decode : in.role != Role::Decode;
    };
    std::size_t& next = decode ? next_decode_ : next_prefill_;
    Instance* best = nullptr;
    for (std::size_t k = 0; k < instances.size(); ++k) {
      Instance& in = instances[(next + k) % instances.size()];
      if (!eligible(in)) continue;
      if (!best) best = &in;
      if (cluster.routing == Routing::RoundRobin) break;
      if (in.load < best->load) best = &in;
    }
    if (!best) throw InternalError("serving: no instance to route to");
    if (cluster.routing == Routing::RoundRobin) next = static_cast<std::size_t>(best->index) + 1;
    return *best;
  }

  void iteration_end(std::uint64_t k) { instances[k].end(); }

  // Prefill done on a prefill instance: the KV moves to a decoder, shard by shard.
  void hand_off(Instance& from, int i) {
    Instance& to = route(true);
    Seq& s = seqs[static_cast<std::size_t>(i)];
    RequestRecord& r = res.requests[static_cast<std::size_t>(i)];
    r.decoder = to.index;
    r.kv_start = now();
    const std::int64_t per_shard = s.computed * cluster.kv_bytes_per_token;
    const std::size_t shards = from.memories.size();
    if (!cluster.system || shards == 0 || shards != to.memories.size())
      throw InternalError("serving: disaggregation needs the machine and equal shard counts");
    pending_kv_[i] = {static_cast<int>(shards), to.index};
    for (std::size_t sh = 0; sh < shards; ++sh) {
      topology::TransferSpec spec{
          from.memories[sh],           to.memories[sh], per_shard, static_cast<std::uint64_t>(i) << 20, 0, -1,
          static_cast<std::int64_t>(i)};
      const topology::TransferId id = cluster.system->fabric().start(spec, sim::Target::call(on_kv_));
      kv_of_[id] = i;
      r.kv_bytes += per_shard;
    }
  }

  void kv_arrived(std::uint64_t transfer) {
    const int i = kv_of_.at(transfer);
    kv_of_.erase(transfer);
    auto& [left, dest] = pending_kv_.at(i);
    if (--left > 0) return;
    const int to = dest;
    pending_kv_.erase(i);
    Seq& s = seqs[static_cast<std::size_t>(i)];
    Instance& from = instances[static_cast<std::size_t>(s.at)];
    release(from, i);
    --from.load;
    res.requests[static_cast<std::size_t>(i)].kv_end = now();
    enter(instances[static_cast<std::size_t>(to)], i);
    if (!from.busy) from.start();
  }

  // Gives back what sequence i holds in `in` (its blocks; its use of a prefix).
  void release(Instance& in, int i) {
    Seq& s = seqs[static_cast<std::size_t>(i)];
    in.free += s.blocks;
    res.blocks_freed += s.blocks;
    s.blocks = 0;
    if (s.prefix >= 0) {
      Prefix& p = in.prefixes.at(s.prefix);
      --p.refs;
      p.last_use = now();
      s.prefix = -1;
    }
  }

  const std::vector<RequestSpec>& reqs;
  const SchedulerConfig& cfg;
  IterationCost& cost;
  const SwapCost& swap;
  const ClusterSpec& cluster;
  std::vector<Seq> seqs;
  std::vector<Instance> instances;
  ServingResult res;
  Time t0 = 0;
  sim::MemberHandler<Engine, &Engine::iteration_end>& on_end() { return on_end_; }
  sim::Simulation& simulation() { return *sim_; }

 private:
  std::unique_ptr<sim::Simulation> own_;
  sim::Simulation* sim_ = nullptr;
  std::size_t next_prefill_ = 0, next_decode_ = 0;
  std::unordered_map<int, std::pair<int, int>> pending_kv_;  // request -> (shards left, decoder)
  std::unordered_map<std::uint64_t, int> kv_of_;             // transfer -> request
  sim::MemberHandler<Engine, &Engine::arrive> on_arrival_;
  sim::MemberHandler<Engine, &Engine::iteration_end> on_end_;
  sim::MemberHandler<Engine, &Engine::kv_arrived> on_kv_;
};

}  // namespace kernbench::workloads::serving::detail
