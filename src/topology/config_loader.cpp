// config_loader.cpp -- YAML -> Config, strictly, against one schema table.
//
// The YAML is first copied into a small tree of our own (Value) that keeps,
// for every node, the file and line it came from and the --set that made it.
// Includes are merged and overrides applied on that tree, and only then is
// it typed. yaml-cpp is therefore used in one place (parse_document and
// to_value), where every YAML::Exception becomes a ConfigError: typing can
// never hit a YAML::InvalidNode, and every message can name the right file
// and line even after a deep merge.
//
// The schema (class Schema) is the single description of sections and keys:
// the unknown-key and required-key checks, the typed getters (which refuse a
// key or a type the table does not declare) and config_schema_json() all
// read it, so they cannot drift apart. Defaults are not restated here: the
// table takes them from default-constructed structs of config.hpp.
#include "topology/config_loader.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "sim/errors.hpp"

namespace kernbench::topology {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;  // keeps the table's key order in the export
using u128 = unsigned __int128;

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Messages carry user text (keys, values, file names) and end up as Python
// str: keep valid UTF-8, escape control bytes and invalid UTF-8 as \xNN so
// the message stays one printable line and always converts.
std::string printable(std::string_view s) {
  std::string out;
  const auto escape = [&](unsigned char c) {
    static const char* hex = "0123456789abcdef";
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size() && !(len == 2 && c < 0xc2);
    for (std::size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (!ok) {
      escape(c);
      ++i;
    } else if (len == 1 && (c < 0x20 || c == 0x7f)) {
      escape(c);
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

[[noreturn]] void throw_config(const std::string& message) { throw ConfigError(printable(message)); }

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string_view trim(std::string_view s) {
  const auto not_space = [](char c) { return c != ' ' && c != '\t' && c != '\n' && c != '\r'; };
  while (!s.empty() && !not_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && !not_space(s.back())) s.remove_suffix(1);
  return s;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Levenshtein distance, for "did you mean" on unknown keys and node names.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// "; did you mean "x"?" when one candidate is within two edits, else "".
std::string suggestion(std::string_view name, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  std::size_t best_d = 3;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(name, c);
    if (d < best_d) best_d = d, best = &c;
  }
  return best ? "; did you mean " + in_quotes(*best) + "?" : "";
}

// ---- quantities ----------------------------------------------------------------

// value_in_base_unit = number * num / den (den 8 turns bits into bytes).
struct Unit {
  std::string_view name;
  std::int64_t num;
  std::int64_t den;
};

constexpr std::int64_t k1e3 = 1'000, k1e6 = 1'000'000, k1e9 = 1'000'000'000, k1e12 = 1'000'000'000'000;

constexpr Unit kTimeUnits[] = {{"ps", 1, 1}, {"ns", k1e3, 1}, {"us", k1e6, 1}, {"ms", k1e9, 1}, {"s", k1e12, 1}};
constexpr Unit kByteUnits[] = {{"B", 1, 1},          {"KB", k1e3, 1},     {"MB", k1e6, 1},     {"GB", k1e9, 1},
                               {"KiB", 1LL << 10, 1}, {"MiB", 1LL << 20, 1}, {"GiB", 1LL << 30, 1}};
constexpr Unit kBandwidthUnits[] = {
    {"B/s", 1, 1},       {"KB/s", k1e3, 1},     {"MB/s", k1e6, 1},     {"GB/s", k1e9, 1}, {"TB/s", k1e12, 1},
    {"KiB/s", 1LL << 10, 1}, {"MiB/s", 1LL << 20, 1}, {"GiB/s", 1LL << 30, 1},
    {"b/s", 1, 8},       {"Kb/s", k1e3, 8},     {"Mb/s", k1e6, 8},     {"Gb/s", k1e9, 8}, {"Tb/s", k1e12, 8},
    {"Gbps", k1e9, 8}};
constexpr Unit kFrequencyUnits[] = {{"Hz", 1, 1}, {"kHz", k1e3, 1}, {"MHz", k1e6, 1}, {"GHz", k1e9, 1}};

/// One family of quantities: how to name it in messages and how to round.
struct QuantityKind {
  std::string_view what;     ///< "a time"
  std::string_view noun;     ///< "time", used with a bound: "expected a time >= 0"
  std::string_view example;  ///< "5 ns"
  std::string_view base;     ///< unit of the integer result
  std::span<const Unit> units;
  bool whole;  ///< must come out integral (bytes) instead of rounding to nearest
};

constexpr QuantityKind kTime{"a time", "time", "5 ns", "ps", kTimeUnits, false};
constexpr QuantityKind kSize{"a size", "size", "4 KiB", "B", kByteUnits, true};
constexpr QuantityKind kRate{"a bandwidth", "bandwidth", "256 GB/s", "B/s", kBandwidthUnits, false};
constexpr QuantityKind kFrequency{"a frequency", "frequency", "900 MHz", "Hz", kFrequencyUnits, false};

std::vector<std::string> unit_names(const QuantityKind& k) {
  std::vector<std::string> out;
  for (const Unit& u : k.units) out.emplace_back(u.name);
  return out;
}

/// A decimal number kept exact: (-1)^negative * mantissa * 10^exp10.
struct Decimal {
  bool negative = false;
  std::uint64_t mantissa = 0;
  int exp10 = 0;
};

constexpr std::size_t kMaxDigits = 18;  // mantissa < 1e18, so mantissa * unit fits in 128 bits

enum class SplitResult { Ok, NoNumber, TooManyDigits };

// "<number>[ ]<unit>" with number = [+-]digits[.digits][e[+-]digits]. Parsing
// the decimal digits ourselves keeps "0.1 KB" exactly 100 B (a double would not).
SplitResult split_quantity(std::string_view text, Decimal& d, std::string_view& unit) {
  text = trim(text);
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) d.negative = text[i++] == '-';
  std::string digits;
  int frac = 0;
  bool dot = false, any = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (is_digit(c)) {
      digits += c;
      any = true;
      if (dot) ++frac;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!any) return SplitResult::NoNumber;
  long exp = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    std::size_t j = i + 1;
    bool neg_exp = false;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) neg_exp = text[j++] == '-';
    if (j < text.size() && is_digit(text[j])) {
      for (; j < text.size() && is_digit(text[j]); ++j) exp = std::min(exp * 10 + (text[j] - '0'), 100000L);
      if (neg_exp) exp = -exp;
      i = j;
    }  // else the 'e' belongs to the unit (and will be rejected there)
  }
  unit = trim(text.substr(i));
  long exp10 = exp - frac;
  const std::size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return SplitResult::Ok;  // zero
  digits.erase(0, first);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back(), ++exp10;
  if (digits.size() > kMaxDigits) return SplitResult::TooManyDigits;
  d.mantissa = std::stoull(digits);
  d.exp10 = static_cast<int>(exp10);
  return SplitResult::Ok;
}

enum class ScaleResult { Ok, TooLarge, NotWhole };

// number * unit in the base unit as an int64, exactly: rounded half away from
// zero, or required to be integral when `whole`.
ScaleResult scale(const Decimal& d, const Unit& u, bool whole, std::int64_t& out) {
  out = 0;
  if (d.mantissa == 0) return ScaleResult::Ok;
  const u128 limit = static_cast<u128>(std::numeric_limits<std::int64_t>::max());
  u128 n = static_cast<u128>(d.mantissa) * static_cast<u128>(u.num);
  u128 den = static_cast<u128>(u.den);
  if (d.exp10 >= 0) {
    for (int k = 0; k < d.exp10; ++k) {
      if (n > limit * den) return ScaleResult::TooLarge;
      n *= 10;
    }
  } else {
    // n < 1.2e30, so beyond 10^36 the value rounds to zero (and is not whole).
    if (-d.exp10 > 36) return whole ? ScaleResult::NotWhole : ScaleResult::Ok;
    for (int k = 0; k < -d.exp10; ++k) den *= 10;
  }
  u128 q = n / den;
  const u128 r = n % den;
  if (whole && r != 0) return ScaleResult::NotWhole;
  if (2 * r >= den) ++q;
  if (q > limit) return ScaleResult::TooLarge;
  out = d.negative ? -static_cast<std::int64_t>(q) : static_cast<std::int64_t>(q);
  return ScaleResult::Ok;
}

// `got` is what was given, already quoted or described ("a map").
std::string expected_quantity(const QuantityKind& k, const std::string& got, std::string_view unit) {
  std::string msg = "expected " + std::string(k.what) + " like " + in_quotes(k.example) + " (units: " +
                    join(unit_names(k), ", ") + "), got " + got;
  // The one confusion seen in practice: PCIe/UCIe datasheets quote GT/s.
  if (unit.size() >= 3 && unit.substr(unit.size() - 3) == "T/s")
    msg += "; " + in_quotes(unit) + " is a transfer rate, not a bandwidth";
  return msg;
}

// Parses `text` as a quantity of kind `k` into `out` (base units); returns
// the error message, empty on success.
std::string parse_quantity(std::string_view text, const QuantityKind& k, std::int64_t& out) {
  Decimal d;
  std::string_view unit;
  const SplitResult s = split_quantity(text, d, unit);
  if (s == SplitResult::NoNumber) return expected_quantity(k, in_quotes(text), "");
  if (s == SplitResult::TooManyDigits)
    return in_quotes(text) + " has too many significant digits (at most " + std::to_string(kMaxDigits) + ")";
  const auto it = std::find_if(k.units.begin(), k.units.end(), [&](const Unit& u) { return u.name == unit; });
  if (it == k.units.end()) return expected_quantity(k, in_quotes(text), unit);
  switch (scale(d, *it, k.whole, out)) {
    case ScaleResult::Ok: return "";
    case ScaleResult::TooLarge:
      return in_quotes(text) + " is too large (at most " + std::to_string(std::numeric_limits<std::int64_t>::max()) +
             " " + std::string(k.base) + ")";
    case ScaleResult::NotWhole: return in_quotes(text) + " is not a whole number of bytes";
  }
  return "";
}

std::int64_t parse_or_throw(const std::string& text, const QuantityKind& k, const std::string& where) {
  std::int64_t v = 0;
  const std::string err = parse_quantity(text, k, v);
  if (!err.empty()) throw_config(where.empty() ? err : where + ": " + err);
  return v;
}

// The largest unit of `units` (tried in order) that divides `v` exactly.
std::string format_with(std::int64_t v, std::initializer_list<Unit> units, std::string_view zero) {
  if (v == 0) return std::string(zero);
  for (const Unit& u : units)
    if (v % u.num == 0) return std::to_string(v / u.num) + " " + std::string(u.name);
  return std::to_string(v);  // not reached: the last unit is always 1
}

// ---- the YAML tree -------------------------------------------------------------

/// Where a node came from: a file (index into Loader::files_, 1-based line,
/// 0 when unknown) and/or an override (index into the overrides; -1: none).
struct Where {
  int file = -1;
  int line = 0;
  int set_by = -1;
};

struct Entry;

/// Our copy of a YAML node (see the header comment for why).
struct Value {
  enum class Type { Null, Scalar, Map, List };
  Type type = Type::Null;
  std::string text;            ///< Scalar
  std::vector<Entry> entries;  ///< Map, in file order
  std::vector<Value> items;    ///< List
  Where where;

  Value* find(std::string_view key);
  const Value* find(std::string_view key) const { return const_cast<Value*>(this)->find(key); }
};

struct Entry {
  std::string key;
  Where key_where;
  Value value;
};

Value* Value::find(std::string_view key) {
  for (auto& e : entries)
    if (e.key == key) return &e.value;
  return nullptr;
}

/// "got ..." in messages.
std::string describe(const Value& v) {
  switch (v.type) {
    case Value::Type::Null: return "nothing (null)";
    case Value::Type::Scalar: return in_quotes(v.text);
    case Value::Type::Map: return "a map";
    case Value::Type::List: return "a list";
  }
  return "?";
}

std::string child_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}
std::string item_path(const std::string& parent, std::size_t i) { return parent + "[" + std::to_string(i) + "]"; }

// Deep merge: maps merge key by key (top's keys win, base's order is kept);
// anything else is replaced by top.
void merge(Value& base, Value&& top) {
  if (base.type != Value::Type::Map || top.type != Value::Type::Map) {
    base = std::move(top);
    return;
  }
  base.where = top.where;
  // Index base's keys once: merging n keys stays O(n), not O(n^2).
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < base.entries.size(); ++i) index.emplace(base.entries[i].key, i);
  for (auto& e : top.entries) {
    if (const auto it = index.find(e.key); it != index.end()) {
      merge(base.entries[it->second].value, std::move(e.value));
    } else {
      index.emplace(e.key, base.entries.size());
      base.entries.push_back(std::move(e));
    }
  }
}

// ---- the schema table ----------------------------------------------------------

enum class Type { Int, String, Enum, Bool, Time, Bytes, Bandwidth, Frequency, Strings, Map, List };
enum class Bound { Any, Positive, NonNegative };

const char* type_name(Type t) {
  switch (t) {
    case Type::Int: return "int";
    case Type::String: return "string";
    case Type::Enum: return "enum";
    case Type::Bool: return "bool";
    case Type::Time: return "time";
    case Type::Bytes: return "bytes";
    case Type::Bandwidth: return "bandwidth";
    case Type::Frequency: return "frequency";
    case Type::Strings: return "list";
    case Type::Map: return "map";
    case Type::List: return "list";
  }
  return "?";
}

const QuantityKind* quantity_kind(Type t) {
  switch (t) {
    case Type::Time: return &kTime;
    case Type::Bytes: return &kSize;
    case Type::Bandwidth: return &kRate;
    case Type::Frequency: return &kFrequency;
    default: return nullptr;
  }
}

struct SectionDef;

/// One key of a section. Built with the chained setters below.
struct KeyDef {
  std::string name;
  Type type = Type::String;
  std::string doc;
  bool required = false;
  json default_value;  ///< null: none (required, or no meaningful default)
  Bound bound = Bound::Any;
  std::vector<std::string> values;      ///< Enum
  const SectionDef* section = nullptr;  ///< Map: its keys; List: each item's keys

  KeyDef& req() { return required = true, *this; }
  KeyDef& dflt(json v) { return default_value = std::move(v), *this; }
  KeyDef& min(Bound b) { return bound = b, *this; }
  KeyDef& of(const SectionDef& s) { return section = &s, *this; }
  KeyDef& one_of(std::vector<std::string> v) { return values = std::move(v), *this; }
};

KeyDef key(std::string name, Type type, std::string doc) {
  KeyDef k;
  k.name = std::move(name);
  k.type = type;
  k.doc = std::move(doc);
  return k;
}

struct SectionDef {
  std::string doc;
  std::vector<std::string> rules;  ///< cross-key rules the table cannot say, for the docs
  std::vector<KeyDef> keys;

  const KeyDef* find(std::string_view name) const {
    for (const auto& k : keys)
      if (k.name == name) return &k;
    return nullptr;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& k : keys) out.push_back(k.name);
    return out;
  }
};

/// Every section of a config. Constructed in place (sections point at each
/// other), once, and never changed: a constant table, not mutable state.
class Schema {
 public:
  SectionDef root, system, sips, grid, pcie_attach, nodes, node, pcie_ep_node, links, link, graph, graph_node,
      graph_edge, fabric, pe, pe_gemm, pe_ipcq;

  Schema() {
    const SystemConfig sys{};
    const LinkParams lp{};
    const FabricConfig fab{};
    const ExplicitEdge edge{};
    const PcieAttach pa{};

    sips.doc = "The grid of SIPs and how they are connected.";
    sips.rules = {"give w and h, or count alone (a perfect square: w = h = sqrt(count))"};
    sips.keys = {
        key("w", Type::Int, "SIP grid width").min(Bound::Positive),
        key("h", Type::Int, "SIP grid height").min(Bound::Positive),
        key("count", Type::Int, "number of SIPs, a perfect square (instead of w and h)").min(Bound::Positive),
        key("topology", Type::Enum, "how the SIPs are linked over PCIe").req().one_of(sip_topology_names()),
    };

    grid.doc = "A w x h grid (columns x rows).";
    grid.keys = {
        key("w", Type::Int, "width (columns)").req().min(Bound::Positive),
        key("h", Type::Int, "height (rows)").req().min(Bound::Positive),
    };

    pcie_attach.doc = "Where each SIP's PCIe endpoint attaches inside the SIP.";
    pcie_attach.keys = {
        key("cube", Type::Int, "cube index, row-major in the cube grid").dflt(pa.cube).min(Bound::NonNegative),
        key("router", Type::String, "router r<row>c<col> inside that cube's router mesh")
            .dflt("r" + std::to_string(pa.row) + "c" + std::to_string(pa.col)),
    };

    system.doc = "The SIP -> CUBE -> PE machine generator.";
    system.keys = {
        key("name", Type::String, "name of the machine, for reports").dflt(sys.name),
        key("sips", Type::Map, "the SIP grid and its topology").req().of(sips),
        key("cubes", Type::Map, "the cube grid of each SIP (a mesh)").req().of(grid),
        key("routers", Type::Map, "the router mesh of each cube").req().of(grid),
        key("pes_per_cube", Type::Int, "PEs per cube; PE i attaches to router i mod (w*h), row-major")
            .req()
            .min(Bound::Positive),
        key("pcie_attach", Type::Map, "attachment of the SIP's PCIe endpoint").of(pcie_attach),
    };

    node.doc = "Parameters of one node kind.";
    node.keys = {
        key("overhead", Type::Time, "processing delay paid by every chunk passing the node")
            .req()
            .min(Bound::NonNegative),
        key("flit_aware", Type::Bool, "forwards chunk by chunk (cut-through); false: store-and-forward")
            .dflt(NodeParams{}.flit_aware),
    };
    pcie_ep_node = node;  // same keys, its own default: PCIe endpoints store and forward
    pcie_ep_node.keys[1].dflt(sys.nodes.pcie_ep.flit_aware);

    nodes.doc = "Per-kind node parameters of the generated machine (system configs only).";
    nodes.keys = {
        key("pe", Type::Map, "processing elements").req().of(node),
        key("router", Type::Map, "NoC routers").req().of(node),
        key("hbm_ctrl", Type::Map, "HBM controller slices").req().of(node),
        key("ucie", Type::Map, "UCIe adapters on cube sides").req().of(node),
        key("pcie_ep", Type::Map, "the SIP's PCIe endpoint").req().of(pcie_ep_node),
    };

    link.doc = "A link class: per-direction bandwidth per connection, wire latency, parallel connections.";
    link.keys = {
        key("bandwidth", Type::Bandwidth, "bandwidth per direction per connection").req().min(Bound::Positive),
        key("latency", Type::Time, "wire latency").req().min(Bound::NonNegative),
        key("connections", Type::Int, "parallel lanes, each its own server").dflt(lp.connections).min(Bound::Positive),
    };

    links.doc = "Link classes of the generated machine (system configs only).";
    links.keys = {
        key("pe", Type::Map, "PE <-> its router").req().of(link),
        key("noc", Type::Map, "router <-> router inside a cube").req().of(link),
        key("hbm", Type::Map, "router <-> the PE's HBM controller slice").req().of(link),
        key("ucie_port", Type::Map, "edge router <-> the cube side's UCIe adapter").req().of(link),
        key("ucie", Type::Map, "UCIe adapter <-> the neighbour cube's adapter").req().of(link),
        key("pcie_port", Type::Map, "attach router <-> the SIP's PCIe endpoint").req().of(link),
        key("pcie", Type::Map, "PCIe endpoint <-> the neighbour SIP's endpoint").req().of(link),
    };

    graph_node.doc = "One node of an explicit graph.";
    graph_node.keys = {
        key("name", Type::String, "unique, non-empty node name").req(),
        key("kind", Type::Enum, "what the node is").req().one_of(node_kind_names()),
        key("overhead", Type::Time, "processing delay paid by every chunk passing the node")
            .req()
            .min(Bound::NonNegative),
        key("flit_aware", Type::Bool, "forwards chunk by chunk (cut-through); false: store-and-forward")
            .dflt(ExplicitNode{}.params.flit_aware),
    };

    graph_edge.doc = "One link of an explicit graph (both directions, same parameters).";
    graph_edge.keys = {
        key("a", Type::String, "name of one end").req(),
        key("b", Type::String, "name of the other end").req(),
        key("class", Type::String, "link class, for reports").dflt(edge.link_class),
        key("bandwidth", Type::Bandwidth, "bandwidth per direction per connection").req().min(Bound::Positive),
        key("latency", Type::Time, "wire latency").req().min(Bound::NonNegative),
        key("connections", Type::Int, "parallel lanes, each its own server").dflt(lp.connections).min(Bound::Positive),
    };

    graph.doc = "An explicit node/edge graph (K200 host, vGPU path).";
    graph.rules = {"node names are unique", "edges join two different existing nodes",
                   "every node can be reached from the first one"};
    graph.keys = {
        key("nodes", Type::List, "the nodes (at least one)").req().of(graph_node),
        key("edges", Type::List, "the links").req().of(graph_edge),
    };

    fabric.doc = "How bytes move through the graph.";
    fabric.rules = {"chunk is a multiple of flit"};
    fabric.keys = {
        key("model", Type::Enum, "packet: chunks pipelined hop by hop; flow: max-min fair sharing")
            .dflt(to_string(fab.model))
            .one_of(fabric_model_names()),
        key("chunk", Type::Bytes, "packet model: transfers are cut into chunks of this size")
            .dflt(format_bytes(fab.chunk))
            .min(Bound::Positive),
        key("flit", Type::Bytes, "smallest unit on a link").dflt(format_bytes(fab.flit)).min(Bound::Positive),
        key("request", Type::Bytes, "size of a DMA read request packet")
            .dflt(format_bytes(fab.request))
            .min(Bound::Positive),
        key("stripe", Type::Bytes, "lane striping unit on multi-connection links (0: the chunk)")
            .dflt(format_bytes(fab.stripe))
            .min(Bound::NonNegative),
    };

    const PeConfig pec{};
    pe_gemm.doc = "GEMM engine throughput in multiply-accumulates per cycle, by precision (0: no such mode).";
    pe_gemm.keys = {
        key("fp32", Type::Int, "FP32 MACs per cycle").dflt(pec.gemm_macs_fp32).min(Bound::NonNegative),
        key("fp16", Type::Int, "FP16 MACs per cycle").dflt(pec.gemm_macs_fp16).min(Bound::NonNegative),
        key("bf16", Type::Int, "BF16 MACs per cycle").dflt(pec.gemm_macs_bf16).min(Bound::NonNegative),
        key("int8", Type::Int, "INT8 MACs per cycle").dflt(pec.gemm_macs_int8).min(Bound::NonNegative),
    };
    pe_ipcq.doc = "Inter-PE queues: slots of a fixed size at each PE.";
    pe_ipcq.keys = {
        key("slots", Type::Int, "slots per PE").dflt(pec.ipcq_slots).min(Bound::Positive),
        key("slot", Type::Bytes, "bytes per slot").dflt(format_bytes(pec.ipcq_slot)).min(Bound::Positive),
    };
    pe.doc = "The engines of every PE: PE_CPU (dispatch), DMA channels, GEMM, vector, IPCQ, and the scratch.";
    pe.keys = {
        key("clock", Type::Frequency, "engine clock").dflt(std::to_string(pec.clock_hz / 1'000'000) + " MHz")
            .min(Bound::Positive),
        key("dispatch", Type::Time, "PE_CPU cost of dispatching one command").dflt(format_time(pec.dispatch))
            .min(Bound::NonNegative),
        key("scratch", Type::Bytes, "per-PE SRAM budget").dflt(format_bytes(pec.scratch)).min(Bound::Positive),
        key("dma_channels", Type::Int, "DMA commands in flight per PE").dflt(pec.dma_channels).min(Bound::Positive),
        key("gemm", Type::Map, "GEMM engine MACs per cycle by precision").of(pe_gemm),
        key("vector_bytes_per_cycle", Type::Int, "vector engine throughput")
            .dflt(pec.vector_bytes_per_cycle)
            .min(Bound::Positive),
        key("ipcq", Type::Map, "inter-PE queues").of(pe_ipcq),
    };

    root.doc = "A kernbench machine configuration.";
    root.rules = {"exactly one of system and graph", "nodes and links are required with system, refused with graph",
                  "included files are merged first (maps deep-merged, this file's keys win); cycles are errors",
                  "--set PATH=VALUE overrides apply after includes; numeric path components index lists"};
    root.keys = {
        key("include", Type::Strings, "file or list of files merged under this one, relative to its folder"),
        key("system", Type::Map, "a generated SIP/CUBE/PE machine").of(system),
        key("nodes", Type::Map, "per-kind node parameters (with system)").of(nodes),
        key("links", Type::Map, "link classes (with system)").of(links),
        key("graph", Type::Map, "an explicit graph (instead of system)").of(graph),
        key("fabric", Type::Map, "the fabric model; every key has a default").of(fabric),
        key("pe", Type::Map, "the engines of every PE; every key has a default").of(pe),
    };
  }
  Schema(const Schema&) = delete;  // sections point at each other: never copy
  Schema& operator=(const Schema&) = delete;
};

const Schema& schema() {
  static const Schema s;
  return s;
}

// ---- loading: files, includes, overrides ---------------------------------------

constexpr std::size_t kMaxNodes = 1'000'000;  // guards against alias bombs

class Loader {
 public:
  Loader(std::string source, const std::vector<Override>& overrides)
      : source_(std::move(source)), overrides_(overrides) {}

  const std::string& source() const { return source_; }

  [[noreturn]] void fail(const Where& w, const std::string& path, const std::string& msg) const {
    std::string s = (w.file >= 0 ? files_[static_cast<std::size_t>(w.file)] : source_) + ": " +
                    (path.empty() ? "(top level)" : path);
    if (w.set_by >= 0) {
      const Override& o = overrides_[static_cast<std::size_t>(w.set_by)];
      s += " (set by --set " + o.path + "=" + o.value + ")";
    }
    s += ": " + msg;
    if (w.file >= 0 && w.line > 0) s += " (line " + std::to_string(w.line) + ")";
    throw_config(s);
  }

  /// The top-level file, its includes merged in.
  Value load_root_file(const std::string& path) {
    std::string text;
    if (std::string err = read_file(path, text); !err.empty()) throw_config(path + ": " + err);
    return load_text(text, path);
  }

  /// YAML text named `name` (messages, relative includes), its includes merged in.
  Value load_text(const std::string& text, const std::string& name) {
    const int file = static_cast<int>(files_.size());
    files_.push_back(name);
    std::error_code ec;
    stack_.push_back({fs::weakly_canonical(name, ec).string(), name});
    Value root = parse_document(text, file);
    if (root.type == Value::Type::Null) {  // an empty file is an empty map
      root.type = Value::Type::Map;
      root.where = {file, 1, -1};
    }
    if (root.type != Value::Type::Map)
      fail(root.where, "", "expected a map of sections (system or graph, fabric, ...), got " + describe(root));

    Value merged;
    merged.type = Value::Type::Map;
    merged.where = root.where;
    const auto inc =
        std::find_if(root.entries.begin(), root.entries.end(), [](const Entry& e) { return e.key == "include"; });
    if (inc != root.entries.end()) {
      const Value includes = std::move(inc->value);
      root.entries.erase(inc);
      const fs::path dir = fs::path(name).parent_path();
      for_each_include(includes, [&](const Value& item, const std::string& path) {
        merge(merged, load_include(dir, item, path));
      });
    }
    merge(merged, std::move(root));
    stack_.pop_back();
    return merged;
  }

  void apply_overrides(Value& root) const {
    for (std::size_t i = 0; i < overrides_.size(); ++i) apply_override(root, static_cast<int>(i));
  }

 private:
  static std::string read_file(const std::string& path, std::string& text) {
    std::error_code ec;
    if (!fs::exists(path, ec)) return "cannot read the config file: no such file";
    if (fs::is_directory(path, ec)) return "cannot read the config file: it is a directory";
    std::ifstream in(path, std::ios::binary);
    if (!in) return "cannot read the config file (permission denied?)";
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) return "cannot read the config file: read error";
    return "";
  }

  // Receives parser events only to see where each document starts.
  struct DocumentStarts : YAML::EventHandler {
    YAML::Mark start;
    void OnDocumentStart(const YAML::Mark& m) override { start = m; }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
  };

  Value parse_document(const std::string& text, int file) {
    const auto syntax_error = [&](const std::string& what, const YAML::Mark& m) {
      std::string msg = files_[static_cast<std::size_t>(file)] + ": invalid YAML: " + what;
      if (m.line >= 0) msg += " (line " + std::to_string(m.line + 1) + ", column " + std::to_string(m.column + 1) + ")";
      throw_config(msg);
    };
    YAML::Node doc;
    try {
      // Count the documents ourselves instead of YAML::LoadAll: yaml-cpp 0.7
      // loops forever, allocating, on a stray ',' (jbeder/yaml-cpp#1040,
      // fixed after 0.7). A parser that starts the next document where the
      // previous one started has consumed nothing: that is the bug, and the
      // character there is what it could not parse.
      std::istringstream in(text);
      YAML::Parser parser(in);
      DocumentStarts starts;
      int docs = 0;
      int previous = -1;
      while (docs < 2 && parser.HandleNextDocument(starts)) {
        if (starts.start.pos == previous) {
          const auto at = static_cast<std::size_t>(std::max(starts.start.pos, 0));
          syntax_error("unexpected " + (at < text.size() ? in_quotes(text.substr(at, 1)) : "end of input"),
                       starts.start);
        }
        previous = starts.start.pos;
        ++docs;
      }
      if (docs > 1)
        fail({file, starts.start.line + 1, -1}, "",
             "a config file holds one YAML document, found more (the second starts here)");
      if (docs == 0) return Value{};
      doc = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      syntax_error(e.msg, e.mark);
    }
    return to_value(doc, file, 1, "");
  }

  // The only place yaml-cpp nodes are read.
  Value to_value(const YAML::Node& n, int file, int parent_line, const std::string& path) {
    if (++node_count_ > kMaxNodes)
      fail({file, parent_line, -1}, path, "too many YAML nodes (more than " + std::to_string(kMaxNodes) + ")");
    Value v;
    try {
      const YAML::Mark m = n.Mark();
      v.where = {file, m.line >= 0 ? m.line + 1 : parent_line, -1};
      switch (n.Type()) {
        case YAML::NodeType::Undefined:
        case YAML::NodeType::Null: break;
        case YAML::NodeType::Scalar:
          v.type = Value::Type::Scalar;
          v.text = n.Scalar();
          break;
        case YAML::NodeType::Sequence:
          v.type = Value::Type::List;
          for (std::size_t i = 0; i < n.size(); ++i)
            v.items.push_back(to_value(n[i], file, v.where.line, item_path(path, i)));
          break;
        case YAML::NodeType::Map: {
          v.type = Value::Type::Map;
          std::unordered_map<std::string, std::size_t> seen;
          for (const auto& kv : n) {
            const YAML::Mark km = kv.first.Mark();
            const Where kw{file, km.line >= 0 ? km.line + 1 : v.where.line, -1};
            if (kv.first.Type() != YAML::NodeType::Scalar)
              fail(kw, path, "map keys must be plain names, got a " +
                                 std::string(kv.first.IsMap() ? "map" : kv.first.IsSequence() ? "list" : "null") +
                                 " as a key");
            const std::string name = kv.first.Scalar();
            // A hash of the keys seen so far: a map of n keys costs O(n), not O(n^2).
            if (const auto [it, fresh] = seen.emplace(name, v.entries.size()); !fresh)
              fail(kw, child_path(path, name),
                   "duplicate key (first given on line " + std::to_string(v.entries[it->second].key_where.line) + ")");
            v.entries.push_back({name, kw, to_value(kv.second, file, kw.line, child_path(path, name))});
          }
          break;
        }
      }
    } catch (const YAML::Exception& e) {
      Where w = v.where;
      if (e.mark.line >= 0) w.line = e.mark.line + 1;
      fail(w, path, std::string("unreadable YAML: ") + e.msg);
    }
    return v;
  }

  template <typename F>
  void for_each_include(const Value& includes, F&& f) {
    const auto one = [&](const Value& item, const std::string& path) {
      if (item.type != Value::Type::Scalar || trim(item.text).empty())
        fail(item.where, path, "expected a file name, got " + describe(item));
      f(item, path);
    };
    if (includes.type == Value::Type::List) {
      for (std::size_t i = 0; i < includes.items.size(); ++i) one(includes.items[i], item_path("include", i));
    } else if (includes.type == Value::Type::Scalar) {
      one(includes, "include");
    } else {
      fail(includes.where, "include", "expected a file name or a list of file names, got " + describe(includes));
    }
  }

  Value load_include(const fs::path& dir, const Value& item, const std::string& path) {
    const std::string name = (dir / std::string(trim(item.text))).lexically_normal().string();
    std::error_code ec;
    const std::string canon = fs::weakly_canonical(name, ec).string();
    for (std::size_t i = 0; i < stack_.size(); ++i) {
      if (stack_[i].canonical != canon) continue;
      std::vector<std::string> chain;
      for (std::size_t j = i; j < stack_.size(); ++j) chain.push_back(stack_[j].name);
      chain.push_back(name);
      fail(item.where, path, "include cycle: " + join(chain, " -> "));
    }
    std::string text;
    if (std::string err = read_file(name, text); !err.empty())
      fail(item.where, path, in_quotes(item.text) + " (" + name + "): " + err);
    return load_text(text, name);
  }

  void apply_override(Value& root, int index) const {
    const Override& o = overrides_[static_cast<std::size_t>(index)];
    const Where w{-1, 0, index};
    std::vector<std::string> parts;
    for (std::size_t start = 0;;) {
      const std::size_t dot = o.path.find('.', start);
      parts.push_back(o.path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    if (std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); }))
      fail(w, o.path, "expected a dotted path like system.sips.w or graph.edges.0.latency");
    if (parts[0] == "include") fail(w, "include", "includes cannot be set by --set (they are read before overrides)");

    Value value;
    try {
      const YAML::Node n = YAML::Load(o.value);
      if (n.IsMap() || n.IsSequence())
        fail(w, o.path, "a --set value is a single YAML scalar, got " + std::string(n.IsMap() ? "a map" : "a list"));
      if (n.IsScalar()) value.type = Value::Type::Scalar, value.text = n.Scalar();
    } catch (const YAML::Exception& e) {
      fail(w, o.path, "not a valid YAML scalar: " + e.msg);
    }
    value.where = w;

    Value* cur = &root;
    std::string path;
    for (const std::string& part : parts) {
      if (cur->type == Value::Type::Null) {  // `fabric:` left empty: the override fills it
        cur->type = Value::Type::Map;
        cur->where.set_by = index;
      }
      if (cur->type == Value::Type::Map) {
        Value* next = cur->find(part);
        if (!next) {
          Value fresh;
          fresh.where = w;
          cur->entries.push_back({part, w, std::move(fresh)});
          next = &cur->entries.back().value;
        }
        cur = next;
        path = child_path(path, part);
      } else if (cur->type == Value::Type::List) {
        if (!std::all_of(part.begin(), part.end(), is_digit))
          fail(w, path, "is a list: expected an item index, got " + in_quotes(part));
        const std::size_t i = part.size() > 9 ? SIZE_MAX : std::stoul(part);
        if (i >= cur->items.size())
          fail(w, path + "[" + part + "]",
               "index out of range: " + path + " has " + std::to_string(cur->items.size()) + " items");
        cur = &cur->items[i];
        path = item_path(path, i);
      } else {
        fail(w, path, "is a single value (" + describe(*cur) + "), it has no key " + in_quotes(part));
      }
    }
    *cur = std::move(value);
  }

  struct Loading {
    std::string canonical;
    std::string name;
  };

  std::string source_;
  const std::vector<Override>& overrides_;
  std::vector<std::string> files_;  ///< Where::file indexes this
  std::vector<Loading> stack_;      ///< files being loaded, outermost first (cycle check)
  std::size_t node_count_ = 0;
};

// ---- typing ----------------------------------------------------------------------

std::string bound_text(Bound b) { return b == Bound::Positive ? " > 0" : b == Bound::NonNegative ? " >= 0" : ""; }

/// A map node checked against its section: unknown and missing required keys
/// are refused at construction; the getters then type one key each and leave
/// `out` untouched when an optional key is absent (the struct's default).
class MapReader {
 public:
  MapReader(const Loader& l, const Value& v, std::string path, const SectionDef& sec)
      : l_(l), v_(v), path_(std::move(path)), sec_(sec) {
    if (v.type != Value::Type::Map)
      l.fail(v.where, path_, "expected a map (keys: " + join(sec.names(), ", ") + "), got " + describe(v));
    for (const Entry& e : v.entries) {
      if (sec.find(e.key)) continue;
      l.fail(e.key_where, child_path(path_, e.key),
             "unknown key; known keys of " + (path_.empty() ? std::string("the top level") : path_) + ": " +
                 join(sec.names(), ", ") + suggestion(e.key, sec.names()));
    }
    for (const KeyDef& k : sec.keys)
      if (k.required && !v.find(k.name))
        l.fail(v.where, child_path(path_, k.name), "required key is missing (" + k.doc + ")");
  }

  const Value& value() const { return v_; }
  const std::string& path() const { return path_; }
  std::string path_of(std::string_view name) const { return child_path(path_, name); }

  /// The value of key `name`, or nullptr when absent.
  const Value* get(std::string_view name) const {
    def(name);
    return v_.find(name);
  }
  const Entry& entry(std::string_view name) const {
    for (const Entry& e : v_.entries)
      if (e.key == name) return e;
    throw InternalError("config loader: no entry " + std::string(name) + " at " + path_);
  }

  /// A sub-section (a Map key), checked against its own section.
  MapReader child(std::string_view name) const {
    const KeyDef& k = def(name, Type::Map);
    const Value* v = v_.find(name);
    if (!v) throw InternalError("config loader: child " + path_of(name) + " read while absent");
    return MapReader(l_, *v, path_of(name), *k.section);
  }

  /// The items of a List key, each checked against the item section.
  std::vector<MapReader> list(std::string_view name) const {
    const KeyDef& k = def(name, Type::List);
    std::vector<MapReader> out;
    const Value* v = v_.find(name);
    if (!v) return out;
    if (v->type != Value::Type::List)
      l_.fail(v->where, path_of(name),
              "expected a list (- {" + join(k.section->names(), ", ") + "}), got " + describe(*v));
    for (std::size_t i = 0; i < v->items.size(); ++i)
      out.emplace_back(l_, v->items[i], item_path(path_of(name), i), *k.section);
    return out;
  }

  bool get_int(std::string_view name, int& out) const {
    const KeyDef& k = def(name, Type::Int);
    const Value* v = v_.find(name);
    if (!v) return false;
    const std::string what = k.bound == Bound::Positive      ? "a positive integer"
                             : k.bound == Bound::NonNegative ? "a non-negative integer"
                                                             : "an integer";
    // Plain decimal digits only: "2.0", "1e3" and "0x10" are not counts.
    std::string_view t = v->type == Value::Type::Scalar ? trim(v->text) : std::string_view{};
    const bool neg = !t.empty() && t[0] == '-';
    if (!t.empty() && (t[0] == '+' || t[0] == '-')) t.remove_prefix(1);
    if (t.empty() || !std::all_of(t.begin(), t.end(), is_digit))
      l_.fail(v->where, path_of(name), "expected " + what + ", got " + describe(*v));
    t.remove_prefix(std::min(t.find_first_not_of('0'), t.size()));
    const long long magnitude = t.empty() ? 0 : t.size() > 10 ? LLONG_MAX : std::stoll(std::string(t));
    if (magnitude > INT_MAX)
      l_.fail(v->where, path_of(name),
              "expected " + what + " of at most " + std::to_string(INT_MAX) + ", got " + describe(*v));
    const long long x = neg ? -magnitude : magnitude;
    if ((k.bound == Bound::Positive && x <= 0) || (k.bound == Bound::NonNegative && x < 0))
      l_.fail(v->where, path_of(name), "expected " + what + ", got " + describe(*v));
    out = static_cast<int>(x);
    return true;
  }

  bool get_string(std::string_view name, std::string& out) const {
    def(name, Type::String);
    const Value* v = v_.find(name);
    if (!v) return false;
    if (v->type != Value::Type::Scalar) l_.fail(v->where, path_of(name), "expected a string, got " + describe(*v));
    out = v->text;
    return true;
  }

  bool get_bool(std::string_view name, bool& out) const {
    def(name, Type::Bool);
    const Value* v = v_.find(name);
    if (!v) return false;
    const std::string t = v->type == Value::Type::Scalar ? v->text : "";
    if (t == "true" || t == "True" || t == "TRUE")
      out = true;
    else if (t == "false" || t == "False" || t == "FALSE")
      out = false;
    else
      l_.fail(v->where, path_of(name), "expected true or false, got " + describe(*v));
    return true;
  }

  template <typename E>
  bool get_enum(std::string_view name, E& out, std::optional<E> (*parse)(std::string_view)) const {
    const KeyDef& k = def(name, Type::Enum);
    const Value* v = v_.find(name);
    if (!v) return false;
    const std::optional<E> e = v->type == Value::Type::Scalar ? parse(v->text) : std::nullopt;
    if (!e)
      l_.fail(v->where, path_of(name),
              "expected one of " + join(k.values, ", ") + ", got " + describe(*v) +
                  (v->type == Value::Type::Scalar ? suggestion(v->text, k.values) : ""));
    out = *e;
    return true;
  }

  bool get_time(std::string_view name, Time& out) const { return get_quantity(name, Type::Time, out); }
  bool get_bytes(std::string_view name, Bytes& out) const { return get_quantity(name, Type::Bytes, out); }
  bool get_bandwidth(std::string_view name, Bandwidth& out) const {
    return get_quantity(name, Type::Bandwidth, out.bytes_per_s);
  }
  bool get_frequency(std::string_view name, std::int64_t& hz) const { return get_quantity(name, Type::Frequency, hz); }

  [[noreturn]] void fail(std::string_view name, const std::string& msg) const {
    const Value* v = v_.find(name);
    l_.fail(v ? v->where : v_.where, path_of(name), msg);
  }

 private:
  // The schema entry for `name`; asking for a key or a type the table does
  // not declare is a bug in this file, caught the first time it runs.
  const KeyDef& def(std::string_view name, std::optional<Type> type = std::nullopt) const {
    const KeyDef* k = sec_.find(name);
    if (!k || (type && k->type != *type))
      throw InternalError("config loader: " + path_of(name) + " read as a " +
                          (type ? type_name(*type) : "?") + " but the schema says " +
                          (k ? type_name(k->type) : "nothing"));
    return *k;
  }

  bool get_quantity(std::string_view name, Type type, std::int64_t& out) const {
    const KeyDef& k = def(name, type);
    const Value* v = v_.find(name);
    if (!v) return false;
    const QuantityKind& q = *quantity_kind(type);
    if (v->type != Value::Type::Scalar) l_.fail(v->where, path_of(name), expected_quantity(q, describe(*v), ""));
    std::int64_t x = 0;
    if (std::string err = parse_quantity(v->text, q, x); !err.empty()) l_.fail(v->where, path_of(name), err);
    if ((k.bound == Bound::Positive && x <= 0) || (k.bound == Bound::NonNegative && x < 0))
      l_.fail(v->where, path_of(name),
              "expected a " + std::string(q.noun) + bound_text(k.bound) + ", got " + describe(*v));
    out = x;
    return true;
  }

  const Loader& l_;
  const Value& v_;
  std::string path_;
  const SectionDef& sec_;
};

// The most square factorisation of n: a <= b, a * b = n.
std::pair<int, int> near_square(int n) {
  int a = static_cast<int>(std::sqrt(static_cast<double>(n)));
  while (a > 1 && n % a != 0) --a;
  return {a, n / a};
}

void read_sips(const MapReader& r, SystemConfig& s) {
  r.get_enum("topology", s.sip_topology, sip_topology_from_string);
  const bool has_w = r.get("w"), has_h = r.get("h");
  int count = 0;
  if (r.get_int("count", count)) {
    if (has_w || has_h) r.fail("count", "give either count or w and h, not both");
    int side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(count))));
    if (side * side != count) {
      const auto [a, b] = near_square(count);
      r.fail("count", std::to_string(count) + " SIPs is not a square grid: give " + r.path_of("w") + " and " +
                          r.path_of("h") + " (" + std::to_string(a) + "x" + std::to_string(b) + " or " +
                          std::to_string(b) + "x" + std::to_string(a) + ")");
    }
    s.sips = {side, side};
    return;
  }
  for (const char* k : {"w", "h"})
    if (!r.get(k))
      r.fail(k, "required key is missing (give " + r.path_of("w") + " and " + r.path_of("h") + ", or " +
                    r.path_of("count") + ")");
  r.get_int("w", s.sips.w);
  r.get_int("h", s.sips.h);
}

void read_grid(const MapReader& r, GridSize& g) {
  r.get_int("w", g.w);
  r.get_int("h", g.h);
}

// "r<row>c<col>"
bool parse_router_name(std::string_view s, int& row, int& col) {
  if (s.size() < 4 || s[0] != 'r') return false;
  const std::size_t c = s.find('c');
  if (c == std::string_view::npos) return false;
  const std::string_view r = s.substr(1, c - 1), k = s.substr(c + 1);
  const auto digits = [](std::string_view d) {
    return !d.empty() && d.size() <= 9 && std::all_of(d.begin(), d.end(), is_digit);
  };
  if (!digits(r) || !digits(k)) return false;
  row = std::stoi(std::string(r));
  col = std::stoi(std::string(k));
  return true;
}

void read_pcie_attach(const MapReader& r, SystemConfig& s) {
  if (r.get_int("cube", s.pcie_attach.cube) && s.pcie_attach.cube >= s.cubes.count())
    r.fail("cube", "cube " + std::to_string(s.pcie_attach.cube) + " is outside the " + std::to_string(s.cubes.w) + "x" +
                       std::to_string(s.cubes.h) + " cube grid (cubes 0.." + std::to_string(s.cubes.count() - 1) + ")");
  std::string router;
  if (!r.get_string("router", router)) return;
  int row = 0, col = 0;
  if (!parse_router_name(router, row, col))
    r.fail("router", "expected a router name like \"r0c1\" (r<row>c<col>), got " + in_quotes(router));
  if (row >= s.routers.h || col >= s.routers.w)
    r.fail("router", "router " + in_quotes(router) + " is outside the " + std::to_string(s.routers.w) + "x" +
                         std::to_string(s.routers.h) + " router mesh (rows r0..r" + std::to_string(s.routers.h - 1) +
                         ", columns c0..c" + std::to_string(s.routers.w - 1) + ")");
  s.pcie_attach.row = row;
  s.pcie_attach.col = col;
}

void read_node(const MapReader& r, NodeParams& p) {
  r.get_time("overhead", p.overhead);
  r.get_bool("flit_aware", p.flit_aware);
}

void read_link(const MapReader& r, LinkParams& p) {
  r.get_bandwidth("bandwidth", p.bandwidth);
  r.get_time("latency", p.latency);
  r.get_int("connections", p.connections);
}

SystemConfig read_system(const MapReader& top) {
  const MapReader r = top.child("system");
  SystemConfig s;
  r.get_string("name", s.name);
  read_sips(r.child("sips"), s);
  read_grid(r.child("cubes"), s.cubes);
  read_grid(r.child("routers"), s.routers);
  r.get_int("pes_per_cube", s.pes_per_cube);
  // Node ids are ints downstream (and GridSize::count() multiplies ints):
  // refuse machines whose counts overflow them. Each factor is below 2^63
  // and we stop multiplying once past INT_MAX, so nothing overflows here.
  // Also a practical cap: every PE brings an HBM slice and routers their
  // links; past a few million nodes a machine no longer fits in memory.
  const auto cells = [](const GridSize& g) { return static_cast<__int128>(g.w) * g.h; };
  constexpr __int128 kMaxMachineNodes = 1 << 20;  // ~1 M nodes (~1 GB); the 512-PE default has ~1.6 K
  __int128 total = cells(s.sips);
  if (total <= kMaxMachineNodes) total *= cells(s.cubes);
  if (total <= kMaxMachineNodes) total *= 2 * static_cast<__int128>(s.pes_per_cube) + cells(s.routers);
  if (total > kMaxMachineNodes)
    top.fail("system", "the machine is too large: more than " + std::to_string(static_cast<long long>(kMaxMachineNodes)) +
                           " PEs, HBM slices and routers");
  if (r.get("pcie_attach")) read_pcie_attach(r.child("pcie_attach"), s);

  const MapReader n = top.child("nodes");
  read_node(n.child("pe"), s.nodes.pe);
  read_node(n.child("router"), s.nodes.router);
  read_node(n.child("hbm_ctrl"), s.nodes.hbm_ctrl);
  read_node(n.child("ucie"), s.nodes.ucie);
  read_node(n.child("pcie_ep"), s.nodes.pcie_ep);

  const MapReader k = top.child("links");
  read_link(k.child("pe"), s.links.pe);
  read_link(k.child("noc"), s.links.noc);
  read_link(k.child("hbm"), s.links.hbm);
  read_link(k.child("ucie_port"), s.links.ucie_port);
  read_link(k.child("ucie"), s.links.ucie);
  read_link(k.child("pcie_port"), s.links.pcie_port);
  read_link(k.child("pcie"), s.links.pcie);
  return s;
}

ExplicitGraphConfig read_graph(const MapReader& top) {
  const MapReader r = top.child("graph");
  ExplicitGraphConfig g;
  const std::vector<MapReader> nodes = r.list("nodes");
  if (nodes.empty()) r.fail("nodes", "expected at least one node, got an empty list");
  std::unordered_map<std::string, std::size_t> index;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const MapReader& m = nodes[i];
    ExplicitNode n;
    m.get_string("name", n.name);
    if (trim(n.name).empty()) m.fail("name", "a node name must not be empty");
    if (const auto it = index.find(n.name); it != index.end())
      m.fail("name", "duplicate node name " + in_quotes(n.name) + " (first defined at " +
                         item_path(r.path_of("nodes"), it->second) + ")");
    m.get_enum("kind", n.kind, node_kind_from_string);
    m.get_time("overhead", n.params.overhead);
    m.get_bool("flit_aware", n.params.flit_aware);
    index.emplace(n.name, i);
    names.push_back(n.name);
    g.nodes.push_back(std::move(n));
  }

  std::vector<std::vector<std::size_t>> adjacent(g.nodes.size());
  const std::vector<MapReader> edges = r.list("edges");
  for (const MapReader& m : edges) {
    ExplicitEdge e;
    m.get_string("a", e.a);
    m.get_string("b", e.b);
    std::size_t ends[2] = {0, 0};
    for (int side = 0; side < 2; ++side) {
      const std::string& name = side ? e.b : e.a;
      const auto it = index.find(name);
      if (it == index.end())
        m.fail(side ? "b" : "a",
               "no node named " + in_quotes(name) + " in " + r.path_of("nodes") + suggestion(name, names));
      ends[side] = it->second;
    }
    if (ends[0] == ends[1]) m.fail("b", "self-loop: both ends are " + in_quotes(e.a));
    m.get_string("class", e.link_class);
    read_link(m, e.link);
    adjacent[ends[0]].push_back(ends[1]);
    adjacent[ends[1]].push_back(ends[0]);
    g.edges.push_back(std::move(e));
  }

  // Every node must be reachable from the first (routing needs a connected graph).
  std::vector<bool> seen(g.nodes.size(), false);
  std::vector<std::size_t> todo{0};
  seen[0] = true;
  while (!todo.empty()) {
    const std::size_t u = todo.back();
    todo.pop_back();
    for (std::size_t v : adjacent[u])
      if (!seen[v]) seen[v] = true, todo.push_back(v);
  }
  for (std::size_t i = 0; i < seen.size(); ++i)
    if (!seen[i])
      nodes[i].fail("name", "the graph is disconnected: node " + in_quotes(g.nodes[i].name) +
                                " cannot be reached from " + in_quotes(g.nodes[0].name) + " (" +
                                item_path(r.path_of("nodes"), 0) + ")");
  return g;
}

FabricConfig read_fabric(const MapReader& r) {
  FabricConfig f;
  r.get_enum("model", f.model, fabric_model_from_string);
  r.get_bytes("chunk", f.chunk);
  r.get_bytes("flit", f.flit);
  r.get_bytes("request", f.request);
  r.get_bytes("stripe", f.stripe);
  if (f.chunk % f.flit != 0)
    r.fail(r.get("chunk") ? "chunk" : "flit",
           "the chunk (" + format_bytes(f.chunk) + ") must be a multiple of the flit (" + format_bytes(f.flit) + ")");
  return f;
}

PeConfig read_pe(const MapReader& r) {
  PeConfig p;
  r.get_frequency("clock", p.clock_hz);
  r.get_time("dispatch", p.dispatch);
  r.get_bytes("scratch", p.scratch);
  r.get_int("dma_channels", p.dma_channels);
  if (r.get("gemm")) {
    const MapReader g = r.child("gemm");
    g.get_int("fp32", p.gemm_macs_fp32);
    g.get_int("fp16", p.gemm_macs_fp16);
    g.get_int("bf16", p.gemm_macs_bf16);
    g.get_int("int8", p.gemm_macs_int8);
  }
  r.get_int("vector_bytes_per_cycle", p.vector_bytes_per_cycle);
  if (r.get("ipcq")) {
    const MapReader q = r.child("ipcq");
    q.get_int("slots", p.ipcq_slots);
    q.get_bytes("slot", p.ipcq_slot);
  }
  return p;
}

Config type_config(const Loader& l, const Value& root) {
  const MapReader top(l, root, "", schema().root);
  Config c;
  c.source = l.source();
  const Value* sys = top.get("system");
  const Value* graph = top.get("graph");
  if (sys && graph) l.fail(top.entry("graph").key_where, "graph", "give either system or graph, not both");
  if (!sys && !graph)
    l.fail(root.where, "",
           "missing system or graph: a config describes either a generated machine (system) or an explicit "
           "graph (graph)");
  if (sys) {
    for (const char* k : {"nodes", "links"})
      if (!top.get(k))
        l.fail(root.where, k, std::string("required key is missing: a system config needs ") + k + " (" +
                                  join(schema().root.find(k)->section->names(), ", ") + ")");
    c.system = read_system(top);
  } else {
    for (const char* k : {"nodes", "links"})
      if (top.get(k))
        l.fail(top.entry(k).key_where, k,
               std::string(k) + " belongs to a system config; a graph config gives " +
                   (std::string(k) == "nodes" ? "node parameters in graph.nodes" : "link parameters in graph.edges"));
    c.graph = read_graph(top);
  }
  if (top.get("fabric")) c.fabric = read_fabric(top.child("fabric"));
  if (top.get("pe")) c.pe = read_pe(top.child("pe"));
  return c;
}

Config load(Loader& l, Value root) {
  l.apply_overrides(root);
  return type_config(l, root);
}

// ---- schema export -----------------------------------------------------------------

json section_json(const SectionDef& s);

json key_json(const KeyDef& k) {
  json j;
  j["type"] = type_name(k.type);
  j["required"] = k.required;
  if (!k.default_value.is_null()) j["default"] = k.default_value;
  if (k.bound != Bound::Any) j["constraint"] = bound_text(k.bound).substr(1);
  if (!k.values.empty()) j["values"] = k.values;
  if (const QuantityKind* q = quantity_kind(k.type)) {
    j["units"] = unit_names(*q);
    j["example"] = q->example;
  }
  j["doc"] = k.doc;
  if (k.type == Type::Strings) j["items"] = json{{"type", "string"}};
  if (k.type == Type::Map) {
    const json s = section_json(*k.section);
    for (const auto& [name, v] : s.items())
      if (name != "doc") j[name] = v;
  }
  if (k.type == Type::List) j["items"] = section_json(*k.section);
  return j;
}

json section_json(const SectionDef& s) {
  json j;
  j["type"] = "map";
  j["doc"] = s.doc;
  if (!s.rules.empty()) j["rules"] = s.rules;
  json keys = json::object();
  for (const KeyDef& k : s.keys) keys[k.name] = key_json(k);
  j["keys"] = std::move(keys);
  return j;
}

}  // namespace

Config load_config(const std::string& path, const std::vector<Override>& overrides) {
  Loader l(path, overrides);
  return load(l, l.load_root_file(path));
}

Config parse_config(const std::string& yaml_text, const std::string& source, const std::vector<Override>& overrides) {
  Loader l(source, overrides);
  return load(l, l.load_text(yaml_text, source));
}

Time parse_time(const std::string& text, const std::string& where) { return parse_or_throw(text, kTime, where); }
Bytes parse_bytes(const std::string& text, const std::string& where) { return parse_or_throw(text, kSize, where); }
Bandwidth parse_bandwidth(const std::string& text, const std::string& where) {
  return Bandwidth{parse_or_throw(text, kRate, where)};
}

double parse_frequency_hz(const std::string& text, const std::string& where) {
  // A frequency is a double (Hz): convert exactly as for the integer kinds,
  // then once to double, so "900 MHz" is exactly 9e8.
  Decimal d;
  std::string_view unit;
  const auto prefix = [&](const std::string& msg) { return where.empty() ? msg : where + ": " + msg; };
  const SplitResult s = split_quantity(text, d, unit);
  if (s == SplitResult::TooManyDigits)
    throw_config(
        prefix(in_quotes(text) + " has too many significant digits (at most " + std::to_string(kMaxDigits) + ")"));
  const auto it = std::find_if(std::begin(kFrequencyUnits), std::end(kFrequencyUnits),
                               [&](const Unit& u) { return u.name == unit; });
  if (s == SplitResult::NoNumber || it == std::end(kFrequencyUnits))
    throw_config(prefix(expected_quantity(kFrequency, in_quotes(text), unit)));
  const long double x = static_cast<long double>(d.mantissa) * std::pow(10.0L, d.exp10) * it->num;
  if (!std::isfinite(static_cast<double>(x))) throw_config(prefix(in_quotes(text) + " is too large"));
  return static_cast<double>(d.negative ? -x : x);
}

std::string format_time(Time t) {
  return format_with(t, {{"s", k1e12, 1}, {"ms", k1e9, 1}, {"us", k1e6, 1}, {"ns", k1e3, 1}, {"ps", 1, 1}}, "0 ns");
}

std::string format_bytes(Bytes b) {
  return format_with(b, {{"GiB", 1LL << 30, 1}, {"MiB", 1LL << 20, 1}, {"KiB", 1LL << 10, 1}, {"GB", k1e9, 1},
                         {"MB", k1e6, 1}, {"KB", k1e3, 1}, {"B", 1, 1}},
                     "0 B");
}

std::string format_bandwidth(Bandwidth bw) {
  return format_with(bw.bytes_per_s,
                     {{"TB/s", k1e12, 1}, {"GB/s", k1e9, 1}, {"MB/s", k1e6, 1}, {"KB/s", k1e3, 1}, {"B/s", 1, 1}},
                     "0 B/s");
}

std::string config_schema_json() {
  const Schema& s = schema();
  json j;
  j["schema"] = "kernbench machine config";
  j["version"] = 1;
  // Keyed like the key types ("bytes", not the messages' "size").
  json units;
  for (Type t : {Type::Time, Type::Bytes, Type::Bandwidth}) units[type_name(t)] = unit_names(*quantity_kind(t));
  units["frequency"] = unit_names(kFrequency);
  j["units"] = std::move(units);
  const json root = section_json(s.root);  // named: items() of a temporary would dangle
  for (const auto& [name, v] : root.items()) j[name] = v;
  return j.dump(2);
}

}  // namespace kernbench::topology
