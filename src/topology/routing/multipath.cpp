// multipath.cpp -- the registry of multipath policies and the three built in:
// single (the first path), ecmp (one path by flow hash), spread (stripes over
// every path in proportion to the path rates).
#include "topology/routing/multipath.hpp"

#include <algorithm>
#include <deque>
#include <mutex>
#include <numeric>

#include "sim/errors.hpp"
#include "sim/rng.hpp"

namespace kernbench::topology {
namespace {

std::int32_t single(const MultipathRequest&, std::span<Bytes>) { return 0; }

std::int32_t ecmp(const MultipathRequest& req, std::span<Bytes>) {
  return static_cast<std::int32_t>(flow_hash(req.key) % req.paths.size());
}

// Stripes in whole flits, in proportion to the paths' rates (path_rate: the slowest hop's bandwidth x connections),
// so that uncontended stripes end together: equal rates give sizes within one flit of each other. Largest remainder
// rounding; ties go to the lower path index. The flits left over by a partial last flit come off the largest stripe.
// A transfer too small for two stripes goes whole on the path of the largest share.
std::int32_t spread(const MultipathRequest& req, std::span<Bytes> share) {
  const std::size_t k = req.paths.size();
  const Bytes unit = req.flit;
  const Bytes units = (req.bytes + unit - 1) / unit;
  std::vector<__int128> weight(k);
  __int128 total = 0;
  for (std::size_t i = 0; i < k; ++i) total += weight[i] = std::max<std::int64_t>(path_rate(req.paths[i]), 1);
  std::vector<Bytes> n(k);
  std::vector<__int128> rem(k);
  Bytes given = 0;
  for (std::size_t i = 0; i < k; ++i) {
    n[i] = static_cast<Bytes>(units * weight[i] / total);
    rem[i] = units * weight[i] % total;
    given += n[i];
  }
  std::vector<std::size_t> order(k);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rem[a] > rem[b]; });
  for (std::size_t j = 0; given < units; ++j, ++given) ++n[order[j]];
  for (std::size_t i = 0; i < k; ++i) share[i] = n[i] * unit;
  const std::size_t biggest = static_cast<std::size_t>(std::max_element(n.begin(), n.end()) - n.begin());
  share[biggest] -= units * unit - req.bytes;
  const auto used = std::count_if(share.begin(), share.end(), [](Bytes b) { return b > 0; });
  if (used >= 2) return -1;
  const auto first = std::find_if(share.begin(), share.end(), [](Bytes b) { return b > 0; });
  return first == share.end() ? 0 : static_cast<std::int32_t>(first - share.begin());
}

struct Registry {
  std::mutex lock;
  std::deque<MultipathPolicy> policies;  // a deque: pointers handed out stay valid as it grows
  Registry() {
    policies.push_back({"single", "the first in tie order", single});
    policies.push_back({"ecmp", "one per transfer by flow hash", ecmp});
    policies.push_back({"spread", "every transfer striped over all, by path rate", spread});
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::uint64_t flow_hash(const FlowKey& key) {
  std::uint64_t h = sim::mix64((static_cast<std::uint64_t>(key.src) << 32) | key.dst);
  h = sim::mix64(h ^ key.address);
  h = sim::mix64(h ^ static_cast<std::uint64_t>(key.request));
  h = sim::mix64(h ^ static_cast<std::uint32_t>(key.tag));
  return h;
}

void register_multipath_policy(std::string name, std::string doc, MultipathSplit split) {
  if (name.empty()) throw UsageError("register_multipath_policy: the name is empty");
  if (!split) throw UsageError("register_multipath_policy: policy '" + name + "' has no split function");
  Registry& r = registry();
  const std::lock_guard<std::mutex> hold(r.lock);
  for (const MultipathPolicy& p : r.policies)
    if (p.name == name) throw UsageError("register_multipath_policy: a policy named '" + name + "' is registered");
  r.policies.push_back({std::move(name), std::move(doc), split});
}

const MultipathPolicy* find_multipath_policy(std::string_view name) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> hold(r.lock);
  for (const MultipathPolicy& p : r.policies)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> multipath_policy_names() {
  Registry& r = registry();
  const std::lock_guard<std::mutex> hold(r.lock);
  std::vector<std::string> out;
  for (const MultipathPolicy& p : r.policies) out.push_back(p.name);
  return out;
}

std::string multipath_doc() {
  Registry& r = registry();
  const std::lock_guard<std::mutex> hold(r.lock);
  std::string out = "equal-cost paths: ";
  for (std::size_t i = 0; i < r.policies.size(); ++i)
    out += (i ? ", " : "") + r.policies[i].name + " (" + r.policies[i].doc + ")";
  return out;
}

std::optional<std::string> multipath_policy_from_string(std::string_view name) {
  if (find_multipath_policy(name)) return std::string(name);
  return std::nullopt;
}

}  // namespace kernbench::topology
