// engine.cpp -- the request loop (serving.hpp): arrivals, iterations formed by
// the scheduling policy over a paged KV cache, progress applied at each
// iteration's end.
//
// A sequence knows `tokens` (its prompt and what it generated so far) and
// `computed` (those whose keys and values are in the cache). An iteration
// advances a sequence by n <= tokens - computed tokens; when computed
// reaches tokens the sequence samples its next token (so a prefill's last
// chunk, or a decode step, emits one). This is vLLM V1's uniform view: a
// decode is a step of one token, a chunked prefill a step of many, a
// recompute after preemption a prefill of prompt + generated tokens.
//
// The policies (docs/serving.md):
//   vllm     running sequences in admission order, each taking up to the
//            token budget left (chunked prefill); out of blocks, the last
//            running sequence is preempted (recompute or swap); waiting
//            requests are admitted FCFS only in an iteration that preempted
//            none, while the budget, max_num_seqs and the blocks allow;
//   sarathi  stall-free batching (Sarathi-Serve): every running decode
//            first, then the running prefills' chunks, then new requests,
//            in a budget of `max_batched_tokens` (its chunk size);
//   orca     iteration-level scheduling without chunking: a prompt is
//            prefilled whole in one iteration beside the others' decodes,
//            and a request reserves blocks for prompt + output on admission
//            (no paging, so no preemption);
//   static   a batch of up to max_num_seqs requests at a time
//            (FasterTransformer): one prefill of all prompts, then decode
//            steps of the whole batch (finished sequences padded) until the
//            longest is done; blocks reserved for prompt + output.
#include <cmath>

#include "workloads/serving/engine_impl.hpp"

namespace kernbench::workloads::serving {

const char* to_string(Policy p) {
  switch (p) {
    case Policy::Vllm: return "vllm";
    case Policy::Sarathi: return "sarathi";
    case Policy::Orca: return "orca";
    case Policy::Static: return "static";
  }
  return "?";
}

Policy policy_from_string(const std::string& name) {
  for (Policy p : {Policy::Vllm, Policy::Sarathi, Policy::Orca, Policy::Static})
    if (name == to_string(p)) return p;
  throw UsageError("serving: unknown scheduler '" + name + "' (known: vllm, sarathi, orca, static)");
}

Preemption preemption_from_string(const std::string& name) {
  if (name == "recompute") return Preemption::Recompute;
  if (name == "swap") return Preemption::Swap;
  throw UsageError("serving: unknown preemption '" + name + "' (known: recompute, swap)");
}

Routing routing_from_string(const std::string& name) {
  if (name == "round_robin") return Routing::RoundRobin;
  if (name == "least_loaded") return Routing::LeastLoaded;
  throw UsageError("serving: unknown router '" + name + "' (known: round_robin, least_loaded)");
}

ServingResult simulate(const std::vector<RequestSpec>& requests, const SchedulerConfig& cfg, IterationCost& cost,
                       const SwapCost& swap, const ClusterSpec& cluster) {
  if (cfg.max_num_seqs < 1)
    throw UsageError("serving: max_num_seqs must be >= 1, got " + std::to_string(cfg.max_num_seqs));
  if (cfg.max_batched_tokens < 1)
    throw UsageError("serving: max_batched_tokens must be >= 1, got " + std::to_string(cfg.max_batched_tokens));
  if (cfg.block_size < 1) throw UsageError("serving: block_size must be >= 1, got " + std::to_string(cfg.block_size));
  if (cfg.kv_blocks < 1)
    throw UsageError("serving: the KV cache holds " + std::to_string(cfg.kv_blocks) + " blocks: nothing can be served");
  if (cfg.preemption == Preemption::Swap && !swap)
    throw UsageError("serving: preemption=swap needs a host link to swap over; this machine has none (use recompute)");
  bool prefill = cluster.instances.empty(), decode = cluster.instances.empty();
  bool split = false;
  for (const InstanceSpec& in : cluster.instances) {
    prefill = prefill || in.role != Role::Decode;
    decode = decode || in.role != Role::Prefill;
    split = split || in.role != Role::Both;
  }
  if (!prefill || !decode)
    throw UsageError("serving: the instances need at least one that prefills and one that decodes");
  if (split && (cfg.policy == Policy::Static || !cluster.system || cluster.kv_bytes_per_token <= 0))
    throw UsageError(
        "serving: disaggregated prefill and decode need a paged scheduler (vllm, sarathi, orca), the "
        "machine and the KV bytes per token");
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const RequestSpec& q = requests[i];
    const std::string where = "serving: request " + std::to_string(i) + ": ";
    if (q.arrival < 0) throw UsageError(where + "arrival time " + std::to_string(q.arrival) + " ps is negative");
    if (i > 0 && q.arrival < requests[i - 1].arrival)
      throw UsageError(where + "arrives before request " + std::to_string(i - 1) + " (give them in arrival order)");
    if (q.prompt < 1) throw UsageError(where + "prompt of " + std::to_string(q.prompt) + " tokens (at least 1)");
    if (q.output < 1) throw UsageError(where + "output of " + std::to_string(q.output) + " tokens (at least 1)");
    if (q.prefix_tokens < 0 || q.prefix_tokens > q.prompt)
      throw UsageError(where + "shared prefix of " + std::to_string(q.prefix_tokens) + " tokens in a prompt of " +
                       std::to_string(q.prompt));
  }
  detail::Engine e(requests, cfg, cost, swap, cluster);
  return e.run();
}

}  // namespace kernbench::workloads::serving
