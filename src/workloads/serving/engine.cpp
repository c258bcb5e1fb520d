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
#include <algorithm>
#include <cmath>
#include <deque>

#include "sim/errors.hpp"
#include "sim/simulation.hpp"
#include "workloads/serving/serving.hpp"

namespace kernbench::serving {

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

namespace {

struct Seq {
  std::int64_t tokens = 0;    // prompt + generated
  std::int64_t computed = 0;  // of them, in the cache
  std::int64_t blocks = 0;    // held on the device
  bool scheduled = false;     // in the iteration being formed
  bool running = false;       // in running_
};

class Engine {
 public:
  Engine(const std::vector<RequestSpec>& reqs, const SchedulerConfig& cfg, IterationCost& cost, const SwapCost& swap)
      : reqs_(reqs), cfg_(cfg), cost_(cost), swap_(swap), free_(cfg.kv_blocks), on_arrival_(*this), on_end_(*this) {
    seqs_.resize(reqs.size());
    res_.requests.resize(reqs.size());
    res_.kv_blocks = cfg.kv_blocks;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      RequestRecord& r = res_.requests[i];
      r.arrival = reqs[i].arrival;
      r.prompt = reqs[i].prompt;
      r.output = reqs[i].output;
      seqs_[i].tokens = reqs[i].prompt;
    }
  }

  ServingResult run() {
    if (!reqs_.empty()) sim_.schedule(reqs_[0].arrival, sim::Target::call(on_arrival_), 0);
    sim_.run();
    res_.blocks_held = cfg_.kv_blocks - free_;
    res_.cost_lookups = cost_.lookups();
    res_.cost_simulated = cost_.simulated();
    res_.cost_reads = cost_.corner_reads();
    res_.events = sim_.events_processed();
    return std::move(res_);
  }

  void arrive(std::uint64_t i) {
    const RequestSpec& q = reqs_[i];
    const std::int64_t need = blocks_for(q.prompt + q.output);
    if (need > cfg_.kv_blocks) {
      res_.requests[i].rejected = "needs " + std::to_string(need) + " KV blocks for its " +
                                  std::to_string(q.prompt + q.output) + " tokens; the cache holds " +
                                  std::to_string(cfg_.kv_blocks);
    } else {
      waiting_.push_back(static_cast<int>(i));
    }
    if (i + 1 < reqs_.size()) sim_.schedule(reqs_[i + 1].arrival - sim_.now(), sim::Target::call(on_arrival_), i + 1);
    if (!busy_) start();
  }

  void end(std::uint64_t) {
    busy_ = false;
    const Time now = sim_.now();
    for (const auto& [i, n] : batch_) {
      Seq& s = seqs_[static_cast<std::size_t>(i)];
      RequestRecord& r = res_.requests[static_cast<std::size_t>(i)];
      s.scheduled = false;
      if (r.generated >= r.output) continue;  // static: a finished sequence padded along
      s.computed += n;
      if (s.computed < s.tokens) continue;
      ++r.generated;
      ++s.tokens;
      if (r.first_token < 0) r.first_token = now;
      if (r.generated == r.output) {
        r.finish = now;
        if (cfg_.policy != Policy::Static) retire(i);
      }
    }
    if (cfg_.policy == Policy::Static) {
      bool done = true;
      for (int i : running_) done = done && res_.requests[static_cast<std::size_t>(i)].generated >= reqs_[static_cast<std::size_t>(i)].output;
      if (done) {
        for (int i : running_) {
          free_blocks(i);
          seqs_[static_cast<std::size_t>(i)].running = false;
        }
        running_.clear();
      }
    }
    IterationRecord& it = res_.iterations.back();
    it.running = static_cast<int>(running_.size());
    it.waiting = static_cast<int>(waiting_.size() + swapped_.size());
    it.kv_used = cfg_.kv_blocks - free_;
    start();
  }

 private:
  std::int64_t blocks_for(std::int64_t tokens) const { return (tokens + cfg_.block_size - 1) / cfg_.block_size; }

  void grow(int i, std::int64_t tokens) {  // hold blocks for `tokens` tokens
    Seq& s = seqs_[static_cast<std::size_t>(i)];
    const std::int64_t more = std::max<std::int64_t>(0, blocks_for(tokens) - s.blocks);
    if (more > free_) throw InternalError("serving: allocating past the free blocks");
    free_ -= more;
    s.blocks += more;
    res_.blocks_allocated += more;
  }
  std::int64_t deficit(int i, std::int64_t tokens) const {
    return std::max<std::int64_t>(0, blocks_for(tokens) - seqs_[static_cast<std::size_t>(i)].blocks) - free_;
  }
  void free_blocks(int i) {
    Seq& s = seqs_[static_cast<std::size_t>(i)];
    free_ += s.blocks;
    res_.blocks_freed += s.blocks;
    s.blocks = 0;
  }
  void admit(int i) {
    running_.push_back(i);
    seqs_[static_cast<std::size_t>(i)].running = true;
  }
  void leave(int i) {
    running_.erase(std::find(running_.begin(), running_.end(), i));
    seqs_[static_cast<std::size_t>(i)].running = false;
  }
  void retire(int i) {
    free_blocks(i);
    leave(i);
  }

  void preempt(int victim) {
    leave(victim);
    Seq& v = seqs_[static_cast<std::size_t>(victim)];
    ++res_.requests[static_cast<std::size_t>(victim)].preemptions;
    ++res_.preemptions;
    ++preempted_now_;
    if (cfg_.preemption == Preemption::Swap) {
      swap_bytes_ += v.blocks * cfg_.block_bytes;
      ++res_.swaps;
      free_blocks(victim);  // its blocks now live on the host
      swapped_.push_back(victim);
    } else {
      free_blocks(victim);  // recompute: its prompt and output so far are prefilled again
      v.computed = 0;
      waiting_.push_front(victim);
    }
  }

  // Schedules `n` tokens of running sequence i, preempting from the tail for
  // blocks (vllm, sarathi); false if i itself had to go.
  bool take(int i, std::int64_t n) {
    Seq& s = seqs_[static_cast<std::size_t>(i)];
    while (deficit(i, s.computed + n) > 0) {
      int victim = -1;
      for (auto it = running_.rbegin(); it != running_.rend(); ++it)
        if (!seqs_[static_cast<std::size_t>(*it)].scheduled) {
          victim = *it;
          break;
        }
      if (victim < 0) throw InternalError("serving: no sequence left to preempt");
      preempt(victim);
      if (victim == i) return false;
    }
    grow(i, s.computed + n);
    add(i, n);
    return true;
  }

  void add(int i, std::int64_t n) {
    Seq& s = seqs_[static_cast<std::size_t>(i)];
    s.scheduled = true;
    batch_.emplace_back(i, n);
    budget_ -= n;
    if (res_.requests[static_cast<std::size_t>(i)].scheduled < 0) res_.requests[static_cast<std::size_t>(i)].scheduled = sim_.now();
  }

  void form_paged() {
    const bool chunk = cfg_.policy != Policy::Orca;
    std::vector<int> order(running_);
    if (cfg_.policy == Policy::Sarathi)  // stall-free: every decode before any prefill chunk
      std::stable_partition(order.begin(), order.end(), [&](int i) {
        const Seq& s = seqs_[static_cast<std::size_t>(i)];
        return s.tokens - s.computed == 1 && s.computed > 0;
      });
    for (int i : order) {
      if (budget_ <= 0) break;
      if (!seqs_[static_cast<std::size_t>(i)].running) continue;  // preempted meanwhile
      const Seq& s = seqs_[static_cast<std::size_t>(i)];
      std::int64_t n = s.tokens - s.computed;
      if (chunk) n = std::min(n, budget_);
      else if (n > budget_ && !batch_.empty()) continue;
      if (cfg_.policy == Policy::Orca) {  // blocks reserved at admission
        add(i, n);
        continue;
      }
      if (!take(i, n)) break;
    }
    if (preempted_now_ > 0) return;  // vLLM: no admission in an iteration that preempted
    // Swapped sequences come back first (their blocks return from the host).
    while (!swapped_.empty() && budget_ > 0 && static_cast<int>(running_.size()) < cfg_.max_num_seqs) {
      const int i = swapped_.front();
      Seq& s = seqs_[static_cast<std::size_t>(i)];
      const std::int64_t n = std::min(s.tokens - s.computed, budget_);
      if (deficit(i, s.computed + n) > 0) return;
      swapped_.pop_front();
      swap_bytes_ += blocks_for(s.computed) * cfg_.block_bytes;
      grow(i, s.computed + n);
      admit(i);
      add(i, n);
    }
    while (!waiting_.empty() && budget_ > 0 && static_cast<int>(running_.size()) < cfg_.max_num_seqs) {
      const int i = waiting_.front();
      Seq& s = seqs_[static_cast<std::size_t>(i)];
      std::int64_t n = s.tokens - s.computed;
      if (chunk) n = std::min(n, budget_);
      else if (n > budget_ && !batch_.empty()) break;
      const RequestSpec& q = reqs_[static_cast<std::size_t>(i)];
      const std::int64_t hold = cfg_.policy == Policy::Orca ? q.prompt + q.output : s.computed + n;
      if (deficit(i, hold) > 0) break;  // FCFS: the head waits for blocks
      waiting_.pop_front();
      grow(i, hold);
      admit(i);
      add(i, n);
    }
  }

  void form_static() {
    if (!running_.empty()) {  // the batch decodes, finished sequences padded along
      for (int i : running_) add(i, 1);
      return;
    }
    while (!waiting_.empty() && static_cast<int>(running_.size()) < cfg_.max_num_seqs) {
      const int i = waiting_.front();
      const RequestSpec& q = reqs_[static_cast<std::size_t>(i)];
      if (deficit(i, q.prompt + q.output) > 0) break;
      waiting_.pop_front();
      grow(i, q.prompt + q.output);
      admit(i);
      add(i, seqs_[static_cast<std::size_t>(i)].tokens);
    }
  }

  void start() {
    batch_.clear();
    budget_ = cfg_.policy == Policy::Static ? INT64_MAX / 4 : cfg_.max_batched_tokens;
    preempted_now_ = 0;
    swap_bytes_ = 0;
    if (cfg_.policy == Policy::Static) form_static();
    else form_paged();
    if (batch_.empty()) {
      // Nothing to run: idle until the next arrival. Work left with an
      // empty batch would wait forever (every request fits the empty cache).
      if (!running_.empty() || !waiting_.empty() || !swapped_.empty())
        throw InternalError("serving: requests wait but no iteration can be formed (" +
                            std::to_string(waiting_.size()) + " waiting, " + std::to_string(running_.size()) +
                            " running, " + std::to_string(free_) + " free blocks)");
      return;
    }
    IterationShape shape;
    double pairs = 0, dkeys = 0;
    for (const auto& [i, n] : batch_) {
      const Seq& s = seqs_[static_cast<std::size_t>(i)];
      if (n == 1 && s.computed > 0) {
        ++shape.decode_seqs;
        dkeys += static_cast<double>(s.computed + 1);
      } else {
        shape.prefill_tokens += n;
        pairs += static_cast<double>(n) * static_cast<double>(s.computed) + 0.5 * static_cast<double>(n) * static_cast<double>(n + 1);
      }
    }
    if (shape.prefill_tokens > 0) shape.prefill_keys = pairs / static_cast<double>(shape.prefill_tokens);
    if (shape.decode_seqs > 0) shape.decode_keys = dkeys / static_cast<double>(shape.decode_seqs);
    Time t = cost_(shape);
    Time swap = 0;
    if (swap_bytes_ > 0) {
      if (!swap_) throw UsageError("serving: preemption=swap on a machine without a host link to swap over");
      swap = static_cast<Time>(std::llround(swap_(swap_bytes_)));
      t += swap;
    }
    IterationRecord rec;
    rec.start = sim_.now();
    rec.end = sim_.now() + t;
    rec.shape = shape;
    rec.swap = swap;
    res_.iterations.push_back(rec);
    busy_ = true;
    sim_.schedule(t, sim::Target::call(on_end_), 0);
  }

  const std::vector<RequestSpec>& reqs_;
  const SchedulerConfig& cfg_;
  IterationCost& cost_;
  const SwapCost& swap_;
  std::vector<Seq> seqs_;
  std::deque<int> waiting_, swapped_;
  std::vector<int> running_;
  std::vector<std::pair<int, std::int64_t>> batch_;
  std::int64_t free_ = 0, budget_ = 0, swap_bytes_ = 0;
  int preempted_now_ = 0;
  bool busy_ = false;
  sim::Simulation sim_;
  ServingResult res_;
  sim::MemberHandler<Engine, &Engine::arrive> on_arrival_;
  sim::MemberHandler<Engine, &Engine::end> on_end_;
};

}  // namespace

ServingResult simulate(const std::vector<RequestSpec>& requests, const SchedulerConfig& cfg, IterationCost& cost,
                       const SwapCost& swap) {
  if (cfg.max_num_seqs < 1) throw UsageError("serving: max_num_seqs must be >= 1, got " + std::to_string(cfg.max_num_seqs));
  if (cfg.max_batched_tokens < 1)
    throw UsageError("serving: max_batched_tokens must be >= 1, got " + std::to_string(cfg.max_batched_tokens));
  if (cfg.block_size < 1) throw UsageError("serving: block_size must be >= 1, got " + std::to_string(cfg.block_size));
  if (cfg.kv_blocks < 1)
    throw UsageError("serving: the KV cache holds " + std::to_string(cfg.kv_blocks) + " blocks: nothing can be served");
  if (cfg.preemption == Preemption::Swap && !swap)
    throw UsageError("serving: preemption=swap needs a host link to swap over; this machine has none (use recompute)");
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const RequestSpec& q = requests[i];
    const std::string where = "serving: request " + std::to_string(i) + ": ";
    if (q.arrival < 0) throw UsageError(where + "arrival time " + std::to_string(q.arrival) + " ps is negative");
    if (i > 0 && q.arrival < requests[i - 1].arrival) throw UsageError(where + "arrives before request " + std::to_string(i - 1) + " (give them in arrival order)");
    if (q.prompt < 1) throw UsageError(where + "prompt of " + std::to_string(q.prompt) + " tokens (at least 1)");
    if (q.output < 1) throw UsageError(where + "output of " + std::to_string(q.output) + " tokens (at least 1)");
  }
  Engine e(requests, cfg, cost, swap);
  return e.run();
}

}  // namespace kernbench::serving
