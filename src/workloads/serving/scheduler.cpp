// scheduler.cpp -- one instance's KV cache (blocks, shared prefixes, LRU
// eviction) and its scheduling policies (engine.cpp's comment says what each
// does); the iteration it forms, priced, and the progress applied at its end.
#include "workloads/serving/engine_impl.hpp"

namespace kernbench::workloads::serving::detail {

// ---- the cache -------------------------------------------------------------------------------------------
std::int64_t Instance::available() const {
  std::int64_t idle = 0;  // cached prefixes nobody uses: evicted when blocks run out
  for (const auto& [g, p] : prefixes)
    if (p.refs == 0) idle += p.blocks;
  return free + idle;
}

std::int64_t Instance::deficit(int i, std::int64_t tokens) const {
  const Seq& s = e->seqs[static_cast<std::size_t>(i)];
  const std::int64_t shared = s.prefix >= 0 ? prefixes.at(s.prefix).blocks : 0;
  return std::max<std::int64_t>(0, e->blocks_for(tokens) - shared - s.blocks) - available();
}

void Instance::grow(int i, std::int64_t tokens) {
  Seq& s = e->seqs[static_cast<std::size_t>(i)];
  const std::int64_t shared = s.prefix >= 0 ? prefixes.at(s.prefix).blocks : 0;
  const std::int64_t more = std::max<std::int64_t>(0, e->blocks_for(tokens) - shared - s.blocks);
  while (more > free) {  // evict the least recently used idle prefix
    auto victim = prefixes.end();
    for (auto it = prefixes.begin(); it != prefixes.end(); ++it)
      if (it->second.refs == 0 && (victim == prefixes.end() || it->second.last_use < victim->second.last_use ||
                                   (it->second.last_use == victim->second.last_use && it->first < victim->first)))
        victim = it;
    if (victim == prefixes.end()) throw InternalError("serving: allocating past the free blocks");
    free += victim->second.blocks;
    cached -= victim->second.blocks;
    e->res.blocks_freed += victim->second.blocks;
    prefixes.erase(victim);
  }
  free -= more;
  s.blocks += more;
  e->res.blocks_allocated += more;
}

// A new sequence here with a shared prefix: a ready cached copy saves its
// full blocks' compute; none cached: this one's become the cached copy.
void Instance::attach(int i) {
  const RequestSpec& q = e->reqs[static_cast<std::size_t>(i)];
  Seq& s = e->seqs[static_cast<std::size_t>(i)];
  if (!e->cfg.prefix_caching || q.prefix_group < 0 || s.computed > 0 || s.prefix >= 0) return;
  const std::int64_t full = std::min(q.prefix_tokens, s.tokens - 1) / e->cfg.block_size;
  if (full <= 0) return;
  auto it = prefixes.find(q.prefix_group);
  if (it == prefixes.end()) {
    if (free < full) return;  // no room to cache it: computed privately
    free -= full;
    cached += full;
    e->res.blocks_allocated += full;
    it = prefixes.emplace(q.prefix_group, Prefix{full, 0, false, e->now()}).first;
  } else if (!it->second.ready && it->second.refs == 0) {
    // its creator left before computing it: this one computes it instead
  } else if (it->second.ready) {
    s.computed = it->second.blocks * e->cfg.block_size;
    e->res.requests[static_cast<std::size_t>(i)].cached_tokens = s.computed;
    e->res.prefix_hit_tokens += s.computed;
  } else {
    return;  // being computed by another: not shared yet
  }
  ++it->second.refs;
  s.prefix = q.prefix_group;
}

// ---- the schedulers --------------------------------------------------------------------------------------
void Instance::add(int i, std::int64_t n) {
  Seq& s = e->seqs[static_cast<std::size_t>(i)];
  s.scheduled = true;
  batch.emplace_back(i, n);
  budget -= n;
  RequestRecord& r = e->res.requests[static_cast<std::size_t>(i)];
  if (r.scheduled < 0) r.scheduled = e->now();
}

void Instance::preempt(int victim) {
  running.erase(std::find(running.begin(), running.end(), victim));
  Seq& v = e->seqs[static_cast<std::size_t>(victim)];
  v.running = false;
  ++e->res.requests[static_cast<std::size_t>(victim)].preemptions;
  ++e->res.preemptions;
  ++preempted_now;
  if (e->cfg.preemption == Preemption::Swap) {
    swap_bytes += v.blocks * e->cfg.block_bytes;
    ++e->res.swaps;
    e->release(*this, victim);  // its blocks now live on the host
    swapped.push_back(victim);
  } else {
    e->release(*this, victim);  // recompute: its prompt and output so far are prefilled again
    v.computed = 0;
    waiting.push_front(victim);
  }
}

// Schedules n tokens of running sequence i, preempting from the tail for
// blocks (vllm, sarathi); false if i itself had to go.
bool Instance::take(int i, std::int64_t n) {
  Seq& s = e->seqs[static_cast<std::size_t>(i)];
  while (deficit(i, s.computed + n) > 0) {
    int victim = -1;
    for (auto it = running.rbegin(); it != running.rend(); ++it)
      if (!e->seqs[static_cast<std::size_t>(*it)].scheduled) {
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

void Instance::form_paged() {
  const SchedulerConfig& cfg = e->cfg;
  const bool chunk = cfg.policy != Policy::Orca;
  std::vector<int> order(running);
  if (cfg.policy == Policy::Sarathi)  // stall-free: every decode before any prefill chunk
    std::stable_partition(order.begin(), order.end(), [&](int i) {
      const Seq& s = e->seqs[static_cast<std::size_t>(i)];
      return s.tokens - s.computed == 1 && s.computed > 0;
    });
  for (int i : order) {
    if (budget <= 0) break;
    if (!e->seqs[static_cast<std::size_t>(i)].running) continue;  // preempted meanwhile
    const Seq& s = e->seqs[static_cast<std::size_t>(i)];
    std::int64_t n = s.tokens - s.computed;
    if (chunk)
      n = std::min(n, budget);
    else if (n > budget && !batch.empty())
      continue;
    if (cfg.policy == Policy::Orca) {  // blocks reserved at admission
      add(i, n);
      continue;
    }
    if (!take(i, n)) break;
  }
  if (preempted_now > 0) return;  // vLLM: no admission in an iteration that preempted
  const auto admit = [&](int i, std::int64_t n, std::int64_t hold) {
    grow(i, hold);
    running.push_back(i);
    e->seqs[static_cast<std::size_t>(i)].running = true;
    add(i, n);
  };
  // Swapped sequences come back first (their blocks return from the host).
  while (!swapped.empty() && budget > 0 && static_cast<int>(running.size()) < cfg.max_num_seqs) {
    const int i = swapped.front();
    Seq& s = e->seqs[static_cast<std::size_t>(i)];
    const std::int64_t n = std::min(s.tokens - s.computed, budget);
    if (deficit(i, s.computed + n) > 0) return;
    swapped.pop_front();
    swap_bytes += e->blocks_for(s.computed) * cfg.block_bytes;
    admit(i, n, s.computed + n);
  }
  while (!waiting.empty() && budget > 0 && static_cast<int>(running.size()) < cfg.max_num_seqs) {
    const int i = waiting.front();
    Seq& s = e->seqs[static_cast<std::size_t>(i)];
    attach(i);
    std::int64_t n = s.tokens - s.computed;
    if (chunk)
      n = std::min(n, budget);
    else if (n > budget && !batch.empty())
      break;
    const RequestSpec& q = e->reqs[static_cast<std::size_t>(i)];
    const std::int64_t hold =
        cfg.policy == Policy::Orca ? std::max(q.prompt + q.output, s.computed + n) : s.computed + n;
    if (deficit(i, hold) > 0) break;  // FCFS: the head waits for blocks (its prefix stays attached)
    waiting.pop_front();
    admit(i, n, hold);
  }
}

void Instance::form_static() {
  if (!running.empty()) {  // the batch decodes, finished sequences padded along
    for (int i : running) add(i, 1);
    return;
  }
  while (!waiting.empty() && static_cast<int>(running.size()) < e->cfg.max_num_seqs) {
    const int i = waiting.front();
    const RequestSpec& q = e->reqs[static_cast<std::size_t>(i)];
    if (deficit(i, q.prompt + q.output) > 0) break;
    waiting.pop_front();
    grow(i, q.prompt + q.output);
    running.push_back(i);
    e->seqs[static_cast<std::size_t>(i)].running = true;
    add(i, e->seqs[static_cast<std::size_t>(i)].tokens);
  }
}

void Instance::start() {
  batch.clear();
  budget = e->cfg.policy == Policy::Static ? INT64_MAX / 4 : e->cfg.max_batched_tokens;
  preempted_now = 0;
  swap_bytes = 0;
  if (e->cfg.policy == Policy::Static)
    form_static();
  else
    form_paged();
  if (batch.empty()) {
    // Nothing to run: idle until something arrives. Work left with an empty
    // batch would wait forever (every request fits the empty cache).
    if (!running.empty() || !waiting.empty() || !swapped.empty())
      throw InternalError("serving: instance " + std::to_string(index) +
                          ": requests wait but no iteration can be formed (" + std::to_string(waiting.size()) +
                          " waiting, " + std::to_string(running.size()) + " running, " + std::to_string(free) +
                          " free blocks)");
    return;
  }
  IterationShape shape;
  double pairs = 0, dkeys = 0;
  for (const auto& [i, n] : batch) {
    const Seq& s = e->seqs[static_cast<std::size_t>(i)];
    if (n == 1 && s.computed > 0) {
      ++shape.decode_seqs;
      dkeys += static_cast<double>(s.computed + 1);
    } else {
      shape.prefill_tokens += n;
      pairs += static_cast<double>(n) * static_cast<double>(s.computed) +
               0.5 * static_cast<double>(n) * static_cast<double>(n + 1);
    }
  }
  if (shape.prefill_tokens > 0) shape.prefill_keys = pairs / static_cast<double>(shape.prefill_tokens);
  if (shape.decode_seqs > 0) shape.decode_keys = dkeys / static_cast<double>(shape.decode_seqs);
  Time t = e->cost(shape);
  Time swap = 0;
  if (swap_bytes > 0) {
    if (!e->swap) throw UsageError("serving: preemption=swap on a machine without a host link to swap over");
    swap = static_cast<Time>(std::llround(e->swap(swap_bytes)));
    t += swap;
  }
  IterationRecord rec;
  rec.start = e->now();
  rec.end = e->now() + t;
  rec.shape = shape;
  rec.swap = swap;
  rec.instance = index;
  e->res.iterations.push_back(rec);
  iteration_ = e->res.iterations.size() - 1;
  busy = true;
  e->simulation().schedule(t, sim::Target::call(e->on_end()), static_cast<std::uint64_t>(index));
}

void Instance::end() {
  busy = false;
  const Time now = e->now();
  const bool is_static = e->cfg.policy == Policy::Static;
  std::vector<int> leaving;
  for (const auto& [i, n] : batch) {
    Seq& s = e->seqs[static_cast<std::size_t>(i)];
    RequestRecord& r = e->res.requests[static_cast<std::size_t>(i)];
    s.scheduled = false;
    if (r.generated >= r.output) continue;  // static: a finished sequence padded along
    s.computed += n;
    if (s.prefix >= 0 && s.computed >= prefixes.at(s.prefix).blocks * e->cfg.block_size)
      prefixes.at(s.prefix).ready = true;  // its creator has computed the shared blocks
    if (s.computed < s.tokens) continue;
    ++r.generated;
    ++s.tokens;
    if (r.first_token < 0) r.first_token = now;
    if (r.generated == r.output) {
      r.finish = now;
      if (!is_static) leaving.push_back(i);
    } else if (role == Role::Prefill) {
      leaving.push_back(-1 - i);  // its first token is out: off to a decoder
    }
  }
  for (int x : leaving) {
    const int i = x >= 0 ? x : -1 - x;
    running.erase(std::find(running.begin(), running.end(), i));
    e->seqs[static_cast<std::size_t>(i)].running = false;
    if (x >= 0) {
      e->release(*this, i);
      --load;
    } else {
      e->hand_off(*this, i);  // its blocks stay until the KV has moved
    }
  }
  if (is_static) {
    bool done = true;
    for (int i : running)
      done =
          done && e->res.requests[static_cast<std::size_t>(i)].generated >= e->reqs[static_cast<std::size_t>(i)].output;
    if (done) {
      for (int i : running) {
        e->release(*this, i);
        e->seqs[static_cast<std::size_t>(i)].running = false;
        --load;
      }
      running.clear();
    }
  }
  IterationRecord& it = e->res.iterations[iteration_];
  it.running = static_cast<int>(running.size());
  it.waiting = static_cast<int>(waiting.size() + swapped.size());
  it.kv_used = e->cfg.kv_blocks - free;
  start();
}

}  // namespace kernbench::workloads::serving::detail
