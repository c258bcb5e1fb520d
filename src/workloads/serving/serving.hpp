// serving.hpp -- serving under load: requests arrive, queue, are batched into
// iterations by a scheduler over a paged KV cache, and leave.
//
// The request loop is a discrete-event simulation on the core (sim::Simulation):
// an arrival event puts a request in the waiting queue; an idle instance
// forms an iteration (scheduler.cpp: which sequences advance by how many
// tokens, what the KV cache allocates or preempts), prices it
// (IterationCost: the hardware model's time for that iteration's shape,
// memoised on a lattice and interpolated), and an iteration-end event
// applies its progress: sequences whose prompt is processed emit a token,
// finished ones free their blocks and leave. Python configures it and reads
// the records (python/kernbench/serving.py, docs/serving.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/units.hpp"
#include "topology/system.hpp"

namespace kernbench::workloads::serving {

using sim::Time;
using topology::NodeId;

/// One request of the workload.
struct RequestSpec {
  Time arrival = 0;
  std::int64_t prompt = 0;  ///< prompt tokens (> 0)
  std::int64_t output = 0;  ///< output tokens to generate (> 0)
  /// Its prompt starts with the shared prefix of this group (-1: none) of
  /// `prefix_tokens` tokens (prefix caching reuses the group's full blocks).
  std::int64_t prefix_group = -1;
  std::int64_t prefix_tokens = 0;
};

enum class Policy { Vllm, Sarathi, Orca, Static };
const char* to_string(Policy p);
Policy policy_from_string(const std::string& name);  // UsageError listing them

enum class Preemption { Recompute, Swap };
Preemption preemption_from_string(const std::string& name);

/// What the scheduler may do per iteration and what the cache holds.
struct SchedulerConfig {
  Policy policy = Policy::Vllm;
  int max_num_seqs = 256;                  ///< sequences running at once (static: the batch)
  std::int64_t max_batched_tokens = 2048;  ///< tokens per iteration (sarathi: its chunk budget)
  std::int64_t block_size = 16;            ///< tokens per KV block
  std::int64_t kv_blocks = 0;              ///< blocks the cache holds (> 0)
  Preemption preemption = Preemption::Recompute;
  std::int64_t block_bytes = 0;  ///< bytes of one block (swap traffic)
  bool prefix_caching = false;   ///< reuse the full blocks of a cached shared prefix
};

enum class Role { Both, Prefill, Decode };
enum class Routing { RoundRobin, LeastLoaded };
Routing routing_from_string(const std::string& name);

/// One instance: what it does and its devices in tensor-parallel shard
/// order (disaggregation moves shard s's KV to shard s of the decoder).
struct InstanceSpec {
  Role role = Role::Both;
  std::vector<NodeId> devices;
};

/// The instances behind the router (empty: one instance that does both).
struct ClusterSpec {
  std::vector<InstanceSpec> instances;
  Routing routing = Routing::RoundRobin;
  /// Disaggregated: KV bytes per token per shard, and the machine whose
  /// fabric carries them (the loop then runs on its simulation).
  std::int64_t kv_bytes_per_token = 0;
  topology::System* system = nullptr;
};

/// What an iteration computes, as the hardware model is asked it: the
/// prefill tokens (of every chunk scheduled) and the mean keys each of
/// their queries attends; the decoding sequences and the mean keys each
/// reads from its cache.
struct IterationShape {
  std::int64_t prefill_tokens = 0;
  double prefill_keys = 0;  ///< mean keys per prefill query (sum of query-key pairs / prefill tokens)
  std::int64_t decode_seqs = 0;
  double decode_keys = 0;  ///< mean keys per decoding sequence (cache + its new token)
};

/// The time of an iteration of any shape: the hardware model's, simulated
/// at the corners of a lattice over (prefill tokens, prefill keys, decode
/// sequences, decode keys) as they are first needed, memoised, and
/// interpolated multilinearly inside a cell (docs/serving.md).
class IterationCost {
 public:
  /// `simulate`: ps of one iteration of exactly this shape (the hardware model).
  using Simulate = std::function<double(const IterationShape&)>;
  /// `breaks`: per axis, points where the machine's time steps (the target
  /// names them: a GPU's split-KV thresholds); each becomes a corner with one
  /// just below it, so no cell straddles a step.
  IterationCost(Simulate simulate, std::int64_t max_tokens, std::int64_t max_seqs, std::int64_t max_keys,
                const std::vector<std::vector<double>>& breaks = {});

  Time operator()(const IterationShape& s);
  /// The lattice's points on each axis.
  const std::vector<double>& axis(int a) const { return axes_[static_cast<std::size_t>(a)]; }
  std::uint64_t lookups() const { return lookups_; }
  std::uint64_t simulated() const { return static_cast<std::uint64_t>(memo_.size()); }
  std::uint64_t corner_reads() const { return corner_reads_; }

 private:
  double corner(const std::int64_t idx[4]);
  Simulate simulate_;
  std::vector<double> axes_[4];
  std::unordered_map<std::uint64_t, double> memo_;
  std::uint64_t lookups_ = 0, corner_reads_ = 0;
};

/// A swap's time for `bytes` moved between the device and the host (the
/// machine's host link, simulated); empty: the machine has none.
using SwapCost = std::function<double(std::int64_t bytes)>;

/// What happened to one request.
struct RequestRecord {
  Time arrival = 0;
  Time scheduled = -1;  ///< its first iteration's start (-1: never)
  Time first_token = -1;
  Time finish = -1;
  std::int64_t prompt = 0, output = 0;
  std::int64_t generated = 0;
  int preemptions = 0;
  std::string rejected;             ///< why it was refused (empty: served)
  int instance = -1;                ///< where it was (prefill) served
  int decoder = -1;                 ///< disaggregated: the decode instance
  Time kv_start = -1, kv_end = -1;  ///< disaggregated: its KV's transfer
  std::int64_t kv_bytes = 0;        ///< of it, summed over the shards
  std::int64_t cached_tokens = 0;   ///< prompt tokens a cached prefix saved
};

/// One iteration: when, its shape, and the state after it.
struct IterationRecord {
  Time start = 0, end = 0;
  IterationShape shape;
  Time swap = 0;  ///< of end - start: the swaps' transfers
  int instance = 0;
  int running = 0;           ///< sequences in the cache after it
  int waiting = 0;           ///< queued (not yet admitted, or preempted)
  std::int64_t kv_used = 0;  ///< blocks held after it
};

struct ServingResult {
  std::vector<RequestRecord> requests;
  std::vector<IterationRecord> iterations;
  std::int64_t kv_blocks = 0;                                            ///< per instance
  std::int64_t blocks_allocated = 0, blocks_freed = 0, blocks_held = 0;  ///< over all instances
  std::int64_t prefix_hit_tokens = 0, prompt_tokens = 0;
  std::uint64_t preemptions = 0, swaps = 0;
  std::uint64_t cost_lookups = 0, cost_simulated = 0, cost_reads = 0;  // reads: corners read (memo or simulated)
  std::uint64_t events = 0;
};

/// Runs the workload through one instance. `requests` in arrival order.
ServingResult simulate(const std::vector<RequestSpec>& requests, const SchedulerConfig& cfg, IterationCost& cost,
                       const SwapCost& swap = {}, const ClusterSpec& cluster = {});

}  // namespace kernbench::workloads::serving
