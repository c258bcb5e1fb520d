// link_classes.cpp -- the keys of one link (read_link, for links.<class> and graph.edges[]) and an explicit
// graph's `links:` map: a class's values given once for every edge of that class.
//
// Precedence on an explicit graph (docs/concepts.md, "Link classes on explicit graphs"):
//   1. a --set of links.<class>.<key> overrides every edge of the class, including edges that state their own
//      value (an edge's own --set given later wins over it: overrides apply in order);
//   2. without an override, an edge's own value in the file wins over the file's links.<class> value.
// The class values are merged into the edges of the YAML tree before it is typed, so an edge is read by the
// one reader of graph.edges[] and a value keeps its file and line (or its --set) for messages.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "config/reader.hpp"
#include "config/schema.hpp"
#include "topology/config/explicit_graph_detail.hpp"
#include "topology/config/loader.hpp"
#include "topology/graph/machine.hpp"

namespace kernbench::topology::detail {

using config::child_path;
using config::describe;
using config::Entry;
using config::in_quotes;
using config::join;
using config::MapReader;
using config::Value;

namespace {

void check_connections(const MapReader& r, const LinkParams& p) {
  if (p.connections > kMaxConnections)
    r.fail("connections", "at most " + std::to_string(kMaxConnections) + " parallel lanes per link (the limit: " +
                              "each lane is a server with its own queue), got " + std::to_string(p.connections));
}

// links.<class>.buffer and .vcs (the packet model's finite buffers).
void read_buffer(const MapReader& r, LinkParams& p) {
  std::string text;
  if (r.get_string("buffer", text)) {
    std::string error;
    const std::optional<BufferSize> b = parse_buffer_size(config::trim(text), error);
    if (!b) r.fail("buffer", error);
    p.buffer = *b;
  }
  if (p.vcs > kMaxVcs)
    r.fail("vcs", "at most " + std::to_string(kMaxVcs) + " virtual channels per link, got " + std::to_string(p.vcs));
}

// The class an edge item names: its `class:`, else the default class.
std::string class_of(const Value& edge) {
  const Value* c = edge.find("class");
  return c && c->type == Value::Type::Scalar ? c->text : ExplicitEdge{}.link_class;
}

}  // namespace

void read_link(const MapReader& r, LinkParams& p) {
  r.get_bandwidth("bandwidth", p.bandwidth);
  r.get_time("latency", p.latency);
  r.get_int("connections", p.connections);
  check_connections(r, p);
  r.get_int("vcs", p.vcs);  // its bound (>= 1) is the key's, checked by get_int
  read_buffer(r, p);
}

void apply_link_classes(const config::Schema& schema, const config::Loader& l, Value& root,
                        const std::string& edges_name) {
  if (root.type != Value::Type::Map || root.find("system") || !root.find("graph")) return;  // the root's rules say
  const auto at =
      std::find_if(root.entries.begin(), root.entries.end(), [](const Entry& e) { return e.key == "links"; });
  if (at == root.entries.end()) return;
  const Value links = std::move(at->value);
  root.entries.erase(at);  // read here, not by the root's reader (there, links: is the generated machine's)
  if (links.type == Value::Type::Null) return;  // `links:` left empty
  // The section of one class: the placeholder key links.<class> (section.cpp declares it).
  const config::KeyDef* any = nullptr;
  for (const config::KeyDef& k : schema.root().find("links")->section->keys)
    if (!k.name.empty() && k.name.front() == '<') any = &k;
  if (!any) throw InternalError("config schema: links has no <class> key");
  if (links.type != Value::Type::Map)
    l.fail(links.where, "links",
           "expected a map of link classes (links.<class>.<key>, e.g. links.nvlink.bandwidth), got " + describe(links));

  Value& graph = *root.find("graph");
  Value* edges = graph.type == Value::Type::Map ? graph.find("edges") : nullptr;
  std::vector<std::string> classes;  // the graph's, in the order its edges first name them
  if (edges && edges->type == Value::Type::List)
    for (const Value& e : edges->items)
      if (e.type == Value::Type::Map)
        if (const std::string c = class_of(e); std::find(classes.begin(), classes.end(), c) == classes.end())
          classes.push_back(c);
  for (const Entry& c : links.entries) {
    const std::string path = child_path("links", c.key);
    const MapReader m(l, c.value, path, *any->section);  // a map of link keys, no other key
    LinkParams p;
    read_link(m, p);  // typed and bounded here, so a bad value is named links.<class>.<key>
    if (std::find(classes.begin(), classes.end(), c.key) == classes.end())
      l.fail(c.key_where, path,
             "no edge of class " + in_quotes(c.key) + " in " + edges_name +
                 " (its classes: " + (classes.empty() ? std::string("none") : join(classes, ", ")) + ")");
  }
  if (!edges || edges->type != Value::Type::List) return;  // graph.edges' own reader reports it

  for (Value& e : edges->items) {
    if (e.type != Value::Type::Map) continue;
    const Value* cls = links.find(class_of(e));
    if (!cls) continue;
    for (const Entry& k : cls->entries) {
      Value* own = e.find(k.key);
      if (!own)
        e.entries.push_back({k.key, k.key_where, k.value});  // rule 2: the class fills what the edge leaves out
      else if (k.value.where.set_by > own->where.set_by)
        *own = k.value;  // rule 1: a --set of the class beats the file's edge (and an earlier --set of the edge)
    }
  }
}

}  // namespace kernbench::topology::detail
