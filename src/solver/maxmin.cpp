// maxmin.cpp -- progressive filling over the dirty components.
#include "solver/maxmin.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/errors.hpp"

namespace kernbench::solver {
namespace {

// Min-heap order on (fair share, resource id): the id breaks ties, so the
// order in which equal bottlenecks are frozen never depends on history.
struct HeapAfter {
  template <class E>
  bool operator()(const E& a, const E& b) const {
    return a.key > b.key || (a.key == b.key && a.resource > b.resource);
  }
};

}  // namespace

MaxMinSolver::ResourceId MaxMinSolver::add_resource(double capacity) {
  if (!(capacity > 0.0) || !std::isfinite(capacity))
    throw UsageError("maxmin: resource capacity must be positive and finite, got " + std::to_string(capacity));
  Resource r;
  r.capacity = capacity;
  resources_.push_back(std::move(r));
  return static_cast<ResourceId>(resources_.size() - 1);
}

double MaxMinSolver::capacity(ResourceId resource) const {
  if (resource >= resources_.size()) throw UsageError("maxmin: unknown resource " + std::to_string(resource));
  return resources_[resource].capacity;
}

void MaxMinSolver::check_flow(FlowId flow, const char* what) const {
  if (!active(flow))
    throw UsageError(std::string("maxmin: ") + what + ": flow " + std::to_string(flow) + " is not active");
}

MaxMinSolver::FlowId MaxMinSolver::add_flow(std::span<const ResourceId> resources) { return add_flow(resources, {}); }

MaxMinSolver::FlowId MaxMinSolver::add_flow(std::span<const ResourceId> resources, std::span<const double> weights) {
  if (!weights.empty() && weights.size() != resources.size())
    throw UsageError("maxmin: add_flow: " + std::to_string(weights.size()) + " weights for " +
                     std::to_string(resources.size()) + " resources");
  for (double w : weights)
    if (!(w > 0.0) || !std::isfinite(w))
      throw UsageError("maxmin: add_flow: a weight must be positive and finite, got " + std::to_string(w));
  if (resources.empty()) throw UsageError("maxmin: a flow must cross at least one resource");
  // Validate everything before touching any state, so a bad call changes nothing.
  if (++mark_epoch_ == 0) {  // wrapped: forget every old mark
    for (Resource& r : resources_) r.mark = 0;
    mark_epoch_ = 1;
  }
  for (ResourceId r : resources) {
    if (r >= resources_.size()) throw UsageError("maxmin: add_flow: unknown resource " + std::to_string(r));
    if (resources_[r].mark == mark_epoch_)
      throw UsageError("maxmin: add_flow: resource " + std::to_string(r) + " appears twice in one flow");
    resources_[r].mark = mark_epoch_;
  }

  FlowId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  }
  Flow& f = flows_[id];
  f.uses.clear();  // keeps its capacity: no allocation once slots are warm
  f.rate = 0.0;
  f.active = true;
  f.fresh = true;
  f.frozen = false;
  for (std::size_t k = 0; k < resources.size(); ++k) {
    const ResourceId r = resources[k];
    Resource& res = resources_[r];
    f.uses.push_back(Use{r, static_cast<std::uint32_t>(res.users.size()), weights.empty() ? 1.0 : weights[k]});
    res.users.push_back(User{id, static_cast<std::uint32_t>(f.uses.size() - 1)});
    mark_dirty(r);
  }
  ++active_flows_;
  return id;
}

void MaxMinSolver::remove_flow(FlowId flow) {
  check_flow(flow, "remove_flow");
  Flow& f = flows_[flow];
  for (const Use& u : f.uses) {
    Resource& res = resources_[u.resource];
    // Swap-and-pop, then repoint the moved user's back-reference.
    const User moved = res.users.back();
    res.users[u.pos] = moved;
    flows_[moved.flow].uses[moved.use].pos = u.pos;
    res.users.pop_back();
    mark_dirty(u.resource);
  }
  f.active = false;
  f.fresh = false;
  f.rate = 0.0;
  free_.push_back(flow);
  --active_flows_;
}

double MaxMinSolver::rate(FlowId flow) const {
  check_flow(flow, "rate");
  return flows_[flow].rate;
}

std::vector<MaxMinSolver::ResourceId> MaxMinSolver::resources_of(FlowId flow) const {
  check_flow(flow, "resources_of");
  std::vector<ResourceId> out;
  out.reserve(flows_[flow].uses.size());
  for (const Use& u : flows_[flow].uses) out.push_back(u.resource);
  return out;
}

void MaxMinSolver::mark_dirty(ResourceId resource) {
  Resource& r = resources_[resource];
  if (r.dirty) return;
  r.dirty = true;
  dirty_.push_back(resource);
}

// Breadth-first over the bipartite resource/flow graph from `seed`, adding
// every resource and flow of its component to the work lists.
void MaxMinSolver::collect(ResourceId seed) {
  if (resources_[seed].seen == epoch_) return;
  resources_[seed].seen = epoch_;
  std::size_t head = comp_res_.size();
  comp_res_.push_back(seed);
  while (head < comp_res_.size()) {
    const Resource& r = resources_[comp_res_[head++]];
    for (const User& u : r.users) {
      Flow& f = flows_[u.flow];
      if (f.seen == epoch_) continue;
      f.seen = epoch_;
      comp_flows_.push_back(u.flow);
      for (const Use& use : f.uses) {
        Resource& q = resources_[use.resource];
        if (q.seen == epoch_) continue;
        q.seen = epoch_;
        comp_res_.push_back(use.resource);
      }
    }
  }
}

double MaxMinSolver::share(const Resource& r) {
  // remaining can dip a rounding error below zero once every flow on r is
  // frozen; a negative share would be meaningless.
  return std::max(r.remaining, 0.0) / r.unfrozen_weight;
}

void MaxMinSolver::push(double key, ResourceId resource) {
  heap_.push_back(HeapEntry{key, resource});
  std::push_heap(heap_.begin(), heap_.end(), HeapAfter{});
}

void MaxMinSolver::solve() {
  changed_.clear();
  comp_res_.clear();
  comp_flows_.clear();
  last_solved_ = 0;
  if (dirty_.empty()) return;
  if (++epoch_ == 0) {  // wrapped: forget every old visit
    for (Resource& r : resources_) r.seen = 0;
    for (Flow& f : flows_) f.seen = 0;
    epoch_ = 1;
  }
  for (ResourceId r : dirty_) {
    resources_[r].dirty = false;
    collect(r);
  }
  dirty_.clear();
  last_solved_ = comp_flows_.size();

  // Progressive filling. Every user of a collected resource is a collected
  // flow (components are closed), so the counts below are exact.
  old_rate_.clear();
  for (FlowId id : comp_flows_) {
    Flow& f = flows_[id];
    old_rate_.push_back(f.rate);
    f.frozen = false;
  }
  heap_.clear();
  for (ResourceId id : comp_res_) {
    Resource& r = resources_[id];
    r.remaining = r.capacity;
    r.unfrozen = static_cast<std::uint32_t>(r.users.size());
    r.unfrozen_weight = 0.0;
    for (const User& u : r.users) r.unfrozen_weight += flows_[u.flow].uses[u.use].weight;
    if (r.unfrozen > 0) heap_.push_back(HeapEntry{share(r), id});
  }
  std::make_heap(heap_.begin(), heap_.end(), HeapAfter{});
  // Pop the resource with the smallest fair share; freeze its unfrozen
  // flows at that share and charge it to the other resources they cross.
  // Each resource has exactly one heap entry, keyed by its share when it was
  // pushed. Freezing a flow elsewhere never lowers a resource's share (in
  // exact arithmetic the flow took at most that share), so an entry's key
  // is a lower bound: if it is stale, re-push the resource at its current
  // share instead of processing it. Updates between two pops of a resource
  // thus cost nothing, and the heap never holds more than R entries.
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), HeapAfter{});
    const HeapEntry e = heap_.back();
    heap_.pop_back();
    Resource& r = resources_[e.resource];
    if (r.unfrozen == 0) continue;  // every flow on it was frozen elsewhere
    const double level = share(r);
    if (level != e.key) {
      push(level, e.resource);
      continue;
    }
    for (const User& u : r.users) {
      Flow& f = flows_[u.flow];
      if (f.frozen) continue;
      f.frozen = true;
      f.rate = level;
      for (const Use& use : f.uses) {
        Resource& q = resources_[use.resource];
        q.remaining -= level * use.weight;
        q.unfrozen_weight -= use.weight;
        --q.unfrozen;
      }
    }
  }

  // Invariant, always on: no resource carries more than its capacity (up to
  // rounding). Rates are constant between solves, so this covers every window.
  for (ResourceId id : comp_res_) {
    const Resource& r = resources_[id];
    if (r.remaining < -1e-9 * r.capacity)
      throw InternalError("max-min invariant broken: resource " + std::to_string(id) + " carries " +
                          std::to_string(r.capacity - r.remaining) + " > its capacity " + std::to_string(r.capacity));
  }

  for (std::size_t i = 0; i < comp_flows_.size(); ++i) {
    Flow& f = flows_[comp_flows_[i]];
    if (f.fresh || f.rate != old_rate_[i]) changed_.push_back(comp_flows_[i]);
    f.fresh = false;
  }
  std::sort(changed_.begin(), changed_.end());
}

}  // namespace kernbench::solver
