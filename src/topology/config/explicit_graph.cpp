// explicit_graph.cpp -- graph.layout and graph.routes: the relations an explicit graph declares between its
// nodes (rank order, rank grid, group hierarchy; pinned paths), checked against its nodes and edges.
#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "topology/config/explicit_graph_detail.hpp"
#include "topology/config/loader.hpp"

namespace kernbench::topology::detail {

using config::in_quotes;
using config::item_path;
using config::MapReader;
using config::suggestion;
using config::Value;

namespace {

GridSize read_grid(const MapReader& r) {
  GridSize g;
  for (const char* k : {"w", "h"})
    if (!r.get(k)) r.fail(k, "required key is missing (give w and h)");
  r.get_int("w", g.w);
  r.get_int("h", g.h);
  return g;
}

}  // namespace

// graph.layout: the rank order, the rank grid and the group hierarchy.
void read_layout(const MapReader& r, ExplicitGraphConfig& g, const std::unordered_map<std::string, std::size_t>& index,
                 const std::vector<std::string>& names) {
  LayoutConfig& l = g.layout;
  if (const Value* v = r.get("ranks")) {
    if (v->type != Value::Type::List) r.fail("ranks", "expected a list of pe node names");
    std::unordered_map<std::string, std::size_t> seen;
    for (std::size_t i = 0; i < v->items.size(); ++i) {
      const std::string& name = v->items[i].text;
      const std::string at = item_path(r.path_of("ranks"), i);
      const auto it = index.find(name);
      if (v->items[i].type != Value::Type::Scalar || it == index.end())
        r.loader().fail(v->items[i].where, at, "no node named " + in_quotes(name) + suggestion(name, names));
      if (g.nodes[it->second].kind != NodeKind::Pe)
        r.loader().fail(v->items[i].where, at,
                        in_quotes(name) + " is a " + std::string(to_string(g.nodes[it->second].kind)) +
                            ", not a pe: only pe nodes are ranks");
      if (!seen.emplace(name, i).second)
        r.loader().fail(v->items[i].where, at, in_quotes(name) + " is listed twice among the ranks");
      l.ranks.push_back(name);
    }
  }
  std::size_t n = l.ranks.size();
  if (l.ranks.empty())
    for (const ExplicitNode& node : g.nodes) n += node.kind == NodeKind::Pe ? 1 : 0;
  if (n == 0) r.fail(r.get("ranks") ? "ranks" : "grid", "a layout needs ranks: the graph has no pe nodes");
  const std::string count = std::to_string(n) + " ranks";
  if (r.get("grid")) {
    l.grid = read_grid(r.child("grid"));
    // count() is 64-bit: a product past 2^31 no longer wraps onto the rank count.
    if (l.grid->count() != static_cast<std::int64_t>(n))
      r.fail("grid", "a " + std::to_string(l.grid->w) + "x" + std::to_string(l.grid->h) + " grid does not hold the " +
                         count + ": it has " + std::to_string(l.grid->count()) +
                         " cells (grid.w x grid.h must equal the ranks)");
  }
  const bool any = r.get("packages") || r.get("groups") || r.get("pes_per_group");
  if (!any) return;
  for (const char* k : {"packages", "groups", "pes_per_group"})
    if (!r.get(k))
      r.fail(k, "required key is missing: a group hierarchy gives packages, groups and pes_per_group together");
  const MapReader pk = r.child("packages");
  l.packages = read_grid(pk);
  pk.get_enum("topology", l.package_topology, sip_topology_from_string);
  l.groups = read_grid(r.child("groups"));
  r.get_int("pes_per_group", l.pes_per_group);
  // Each count is below 2^62, so packages x groups fits in 128 bits; times pes_per_group it may not (found by
  // fuzz_config), and such a product is reported as past 2^127 rather than overflowing.
  __int128 total = static_cast<__int128>(l.packages->count()) * l.groups->count();
  const bool past = __builtin_mul_overflow(total, static_cast<__int128>(l.pes_per_group), &total);
  if (past || total != static_cast<__int128>(n)) {
    const auto text = [past](__int128 v) {  // the exact product, also past 2^63
      if (past) return std::string("more than 2^127");
      const bool negative = v < 0;
      std::string s;
      do s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(negative ? -(v % 10) : v % 10))), v /= 10;
      while (v != 0);
      return negative ? "-" + s : s;
    };
    r.fail("pes_per_group", std::to_string(l.packages->w) + "x" + std::to_string(l.packages->h) + " = " +
                                std::to_string(l.packages->count()) + " packages x " + std::to_string(l.groups->w) +
                                "x" + std::to_string(l.groups->h) + " = " + std::to_string(l.groups->count()) +
                                " groups x " + std::to_string(l.pes_per_group) + " PEs = " + text(total) +
                                ", but the layout has " + count);
  }
}

// graph.routes: pinned paths, each a chain of existing edges from src to dst.
void read_routes(const MapReader& r, ExplicitGraphConfig& g, const std::unordered_map<std::string, std::size_t>& index,
                 const std::vector<std::string>& names, const std::vector<std::vector<std::size_t>>& adjacent) {
  std::unordered_map<std::string, std::size_t> pinned;  // "src\0dst" -> item index
  const std::vector<MapReader> items = r.list("routes");
  for (std::size_t i = 0; i < items.size(); ++i) {
    const MapReader& m = items[i];
    PinnedRoute p;
    m.get_string("src", p.src);
    m.get_string("dst", p.dst);
    const auto node = [&](const std::string& name, const char* key) {
      const auto it = index.find(name);
      if (it == index.end()) m.fail(key, "no node named " + in_quotes(name) + suggestion(name, names));
      return it->second;
    };
    std::vector<std::size_t> path{node(p.src, "src")};
    if (const Value* v = m.get("via")) {
      if (v->type != Value::Type::List) m.fail("via", "expected a list of node names");
      for (std::size_t k = 0; k < v->items.size(); ++k) {
        const std::string& name = v->items[k].text;
        const auto it = index.find(name);
        if (v->items[k].type != Value::Type::Scalar || it == index.end())
          r.loader().fail(v->items[k].where, item_path(m.path_of("via"), k),
                          "no node named " + in_quotes(name) + suggestion(name, names));
        p.via.push_back(name);
        path.push_back(it->second);
      }
    }
    path.push_back(node(p.dst, "dst"));
    if (p.src == p.dst) m.fail("dst", "a route from " + in_quotes(p.src) + " to itself");
    // A path: every node once, every step an edge of graph.edges.
    for (std::size_t k = 0; k < path.size(); ++k) {
      for (std::size_t j = 0; j < k; ++j)
        if (path[j] == path[k])
          m.fail("via", "the route visits " + in_quotes(g.nodes[path[k]].name) + " twice (a loop)");
      if (k == 0) continue;
      const std::vector<std::size_t>& adj = adjacent[path[k - 1]];
      if (std::find(adj.begin(), adj.end(), path[k]) == adj.end())
        m.fail(p.via.empty() ? "dst" : "via", "no edge joins " + in_quotes(g.nodes[path[k - 1]].name) + " and " +
                                                  in_quotes(g.nodes[path[k]].name) + " (a route follows " +
                                                  r.path_of("edges") + ")");
    }
    const std::string key = p.src + std::string(1, '\0') + p.dst;
    if (const auto [it, fresh] = pinned.emplace(key, i); !fresh)
      m.fail("src", "a second route from " + in_quotes(p.src) + " to " + in_quotes(p.dst) + " (the first is " +
                        item_path(r.path_of("routes"), it->second) + ")");
    g.routes.push_back(std::move(p));
  }
}

}  // namespace kernbench::topology::detail
