// multipath.hpp -- multipath policies, registered by name: how a transfer
// uses the equal-cost paths of its pair (`fabric.multipath` names one).
//
// A policy sees one transfer (its flow key, its size, the flit) and its
// pair's paths in the tie order (routing.hpp), and either names the one path
// that carries it whole or cuts it into stripes, one per path, writing the
// bytes each path carries. The fabric then starts the stripes as transfers of
// their own (fabric/multipath.cpp), the same way for the packet and the flow
// model. Built in, in this order: single, ecmp, spread (docs/architecture.md
// "Routing and multipath"). A new policy is one function and one
// register_multipath_policy call; the config key accepts every registered
// name.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "topology/routing/routing.hpp"

namespace kernbench::topology {

/// What a switch's hash sees of a flow: its ends and the fields that tell its flows apart.
struct FlowKey {
  NodeId src = 0;
  NodeId dst = 0;
  std::uint64_t address = 0;
  std::int64_t request = -1;
  std::int32_t tag = 0;
};

/// splitmix64's finaliser folded over the key, field by field, so nearby keys land far apart; the same key always
/// hashes the same (same run, same seed or not).
std::uint64_t flow_hash(const FlowKey& key);

/// One transfer as a policy sees it (paths: at least two, in the tie order).
struct MultipathRequest {
  FlowKey key;
  Bytes bytes = 0;
  Bytes flit = 1;  ///< stripes are cut in whole flits
  std::span<const Route> paths;
};

/// A policy: returns the index of the path that carries the transfer whole, or -1 after writing into `share` (one
/// entry per path, zero on entry) the bytes of each path's stripe. Stripes sum to the transfer's bytes, and at
/// least two are non-zero.
using MultipathSplit = std::int32_t (*)(const MultipathRequest& request, std::span<Bytes> share);

struct MultipathPolicy {
  std::string name;
  std::string doc;  ///< one line, for the config reference
  MultipathSplit split = nullptr;
};

/// Adds a policy. A name already registered, an empty name or no function is a UsageError. Register before loading
/// the configs that name it.
void register_multipath_policy(std::string name, std::string doc, MultipathSplit split);
/// The policy of that name, or nullptr.
const MultipathPolicy* find_multipath_policy(std::string_view name);
/// Every registered name, built-ins first, then in registration order.
std::vector<std::string> multipath_policy_names();
/// The config key's doc: every policy with its one-line doc.
std::string multipath_doc();
/// The key's parse function: the name when a policy of that name is registered.
std::optional<std::string> multipath_policy_from_string(std::string_view name);

}  // namespace kernbench::topology
