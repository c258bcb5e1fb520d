// maxmin.hpp -- an incremental max-min fair bandwidth solver.
//
// Resources have a capacity; flows cross one or more resources. The solver
// gives every flow the max-min fair rate (progressive filling, as in
// SimGrid's lmm, written here): raise all rates together; when a resource
// saturates, the flows crossing it are frozen at its fair share; continue
// with the others. The allocation is feasible, and every flow has a
// bottleneck: a saturated resource on which no flow gets more than it does.
//
// It is kept apart from the fabric model that uses it (topology/fabric/flow/flow_fabric.hpp), so
// it knows nothing of channels, time or bytes: only ids and doubles.
//
// Incremental: adding or removing a flow marks its resources dirty, and
// solve() re-solves only the connected components (flows linked through
// shared resources) that contain a dirty resource. Rates elsewhere are left
// untouched, bit for bit, and not reported as changed. Everything iterates
// in id order or in call order, never in hash order, so the same calls give
// the same rates bit for bit. Storage (flow slots, per-resource user lists,
// work lists) is reused, so a steady stream of add/remove/solve does not
// allocate once the high-water mark is reached.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kernbench::solver {

class MaxMinSolver {
 public:
  using ResourceId = std::uint32_t;
  using FlowId = std::uint32_t;

  /// Adds a resource of `capacity` (any unit; > 0 and finite, UsageError
  /// otherwise). Ids are dense, 0, 1, 2... in call order.
  ResourceId add_resource(double capacity);

  /// Adds a flow crossing `resources` (non-empty, known, no repeats:
  /// UsageError otherwise). Its rate is 0 until the next solve(). Ids of
  /// removed flows are reused (most recently freed first).
  FlowId add_flow(std::span<const ResourceId> resources);
  /// The same with a weight per resource (weights.size() == resources.size(),
  /// each positive and finite: UsageError otherwise): the flow's rate x puts
  /// weight x x on that resource. Weighted max-min: a resource's fair share
  /// is its capacity left over the summed weights of its unfrozen flows. A
  /// coflow (a pipeline whose hops all move at one pace) is one such flow,
  /// crossing each link with the bytes it puts there per byte of progress.
  /// All weights 1.0 give exactly the unweighted rates.
  FlowId add_flow(std::span<const ResourceId> resources, std::span<const double> weights);

  /// Removes an active flow (UsageError if `flow` is not active); its
  /// bandwidth goes to the others at the next solve().
  void remove_flow(FlowId flow);

  /// Re-solves the components touched since the last solve. Cost:
  /// O(U log R) with U the number of (flow, resource) uses and R the number
  /// of resources in those components; nothing outside them is visited.
  void solve();

  /// Rate of an active flow as of the last solve() (0 if added since).
  double rate(FlowId flow) const;

  /// Flows whose rate the last solve() changed (bitwise), including flows
  /// added since the solve before it; increasing id order. Removed flows
  /// are never listed.
  const std::vector<FlowId>& changed() const { return changed_; }

  /// Flows the last solve() recomputed (the size of the dirty components):
  /// shows how much an incremental solve really touched.
  std::size_t last_solved() const { return last_solved_; }

  bool active(FlowId flow) const { return flow < flows_.size() && flows_[flow].active; }
  double capacity(ResourceId resource) const;
  /// The resources an active flow crosses, in the order given to add_flow.
  std::vector<ResourceId> resources_of(FlowId flow) const;
  std::size_t num_resources() const { return resources_.size(); }
  std::size_t num_flows() const { return active_flows_; }

 private:
  // A flow's use of a resource, and where the flow sits in that resource's
  // user list (so removal is O(1) per resource, by swap-and-pop).
  struct Use {
    ResourceId resource;
    std::uint32_t pos;
    double weight;
  };
  // A resource's user: the flow, and which of its uses points back here.
  struct User {
    FlowId flow;
    std::uint32_t use;
  };
  struct Flow {
    std::vector<Use> uses;  // capacity kept across reuse of the slot
    double rate = 0.0;
    std::uint32_t seen = 0;  // epoch of the last solve that visited it
    bool active = false;
    bool fresh = false;   // added since the last solve: always reported
    bool frozen = false;  // scratch for solve()
  };
  struct Resource {
    double capacity = 0.0;
    std::vector<User> users;
    std::uint32_t seen = 0;  // epoch of the last solve that visited it
    std::uint32_t mark = 0;  // add_flow's duplicate check
    bool dirty = false;
    // Scratch for solve(): capacity left and flows not yet frozen.
    double remaining = 0.0;
    std::uint32_t unfrozen = 0;
    double unfrozen_weight = 0.0;  // summed weights of the unfrozen users
  };
  struct HeapEntry {
    double key;
    ResourceId resource;
  };

  void check_flow(FlowId flow, const char* what) const;
  void mark_dirty(ResourceId resource);
  void collect(ResourceId seed);
  static double share(const Resource& r);
  void push(double key, ResourceId resource);

  std::vector<Resource> resources_;
  std::vector<Flow> flows_;
  std::vector<FlowId> free_;          // slots of removed flows, reused LIFO
  std::vector<ResourceId> dirty_;     // resources touched since the last solve
  std::vector<ResourceId> comp_res_;  // scratch: resources of the dirty components
  std::vector<FlowId> comp_flows_;    // scratch: their flows
  std::vector<HeapEntry> heap_;       // scratch: min-heap on (share, id), one entry per resource
  std::vector<double> old_rate_;      // scratch: rates before the solve, by comp_flows_ index
  std::vector<FlowId> changed_;
  std::uint32_t epoch_ = 0;
  std::uint32_t mark_epoch_ = 0;
  std::size_t active_flows_ = 0;
  std::size_t last_solved_ = 0;
};

}  // namespace kernbench::solver
