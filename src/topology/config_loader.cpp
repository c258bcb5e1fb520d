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
// Energy model (energy_config.hpp): energy per byte in aJ/B, per operation in
// aJ/flop (a MAC is 2 flops), power in uW.
constexpr Unit kEnergyPerByteUnits[] = {{"pJ/bit", 8 * k1e6, 1}, {"fJ/bit", 8 * k1e3, 1}, {"pJ/B", k1e6, 1},
                                        {"fJ/B", k1e3, 1},       {"aJ/B", 1, 1},          {"nJ/B", k1e9, 1}};
constexpr Unit kEnergyPerFlopUnits[] = {{"pJ/flop", k1e6, 1}, {"fJ/flop", k1e3, 1}, {"aJ/flop", 1, 1},
                                        {"pJ/MAC", k1e6, 2},  {"fJ/MAC", k1e3, 2},  {"nJ/flop", k1e9, 1}};
constexpr Unit kPowerUnits[] = {{"W", k1e6, 1}, {"mW", k1e3, 1}, {"uW", 1, 1}, {"kW", k1e9, 1}};

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
constexpr QuantityKind kEnergyPerByte{"an energy per byte", "energy per byte", "3.9 pJ/bit", "aJ/B",
                                      kEnergyPerByteUnits, false};
constexpr QuantityKind kEnergyPerFlop{"an energy per operation", "energy per operation", "1.5 pJ/MAC", "aJ/flop",
                                      kEnergyPerFlopUnits, false};
constexpr QuantityKind kPower{"a power", "power", "5 W", "uW", kPowerUnits, false};

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

// n / 10^6 as an exact decimal ("3.9", "0.15", "5").
std::string micro_decimal(std::int64_t n) {
  std::string out = n < 0 ? "-" : "";
  const std::uint64_t a = n < 0 ? 0 - static_cast<std::uint64_t>(n) : static_cast<std::uint64_t>(n);
  out += std::to_string(a / 1'000'000);
  std::string frac = std::to_string(a % 1'000'000);
  frac.insert(0, 6 - frac.size(), '0');
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return frac.empty() ? out : out + "." + frac;
}

// The energy model's defaults, written as they read in the YAML.
std::string format_energy_per_byte(std::int64_t aj_per_byte) {
  return aj_per_byte % 8 == 0 ? micro_decimal(aj_per_byte / 8) + " pJ/bit" : micro_decimal(aj_per_byte) + " pJ/B";
}
std::string format_energy_per_flop(std::int64_t aj_per_flop) { return micro_decimal(2 * aj_per_flop) + " pJ/MAC"; }
std::string format_power(std::int64_t uw) { return micro_decimal(uw) + " W"; }

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

enum class Type { Int, String, Enum, Bool, Time, Bytes, Bandwidth, Frequency, Strings, Map, List, EnergyPerByte,
                  EnergyPerFlop, Power };
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
    case Type::EnergyPerByte: return "energy/byte";
    case Type::EnergyPerFlop: return "energy/op";
    case Type::Power: return "power";
  }
  return "?";
}

const QuantityKind* quantity_kind(Type t) {
  switch (t) {
    case Type::Time: return &kTime;
    case Type::Bytes: return &kSize;
    case Type::Bandwidth: return &kRate;
    case Type::Frequency: return &kFrequency;
    case Type::EnergyPerByte: return &kEnergyPerByte;
    case Type::EnergyPerFlop: return &kEnergyPerFlop;
    case Type::Power: return &kPower;
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
  SectionDef vgpu, vgpu_dist, vgpu_roles, vgpu_poll, vgpu_rpc, vgpu_pde, vgpu_launch, vgpu_copy, vgpu_ops, vgpu_bare,
      vgpu_workload;  // the vgpu: section
  SectionDef k200, k200_pcie, k200_driver, k200_host, k200_edma, k200_d2d, k200_launch, k200_compute;
  SectionDef pe_hbm, energy, energy_links, energy_memory, energy_compute, energy_gemm, energy_static;  // issue 11

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
    pe_ipcq.doc = "Inter-PE queues: at each PE, a queue of slots of a fixed size per sending PE.";
    pe_ipcq.keys = {
        key("slots", Type::Int, "slots of the queue from each sender").dflt(pec.ipcq_slots).min(Bound::Positive),
        key("slot", Type::Bytes, "bytes per slot").dflt(format_bytes(pec.ipcq_slot)).min(Bound::Positive),
        key("channels", Type::Int, "sends in flight per PE").dflt(pec.ipcq_channels).min(Bound::Positive),
        key("bank_hop", Type::Time, "fixed cost of reading one slot out of scratch (one bank hop)")
            .dflt(format_time(pec.ipcq_bank_hop))
            .min(Bound::NonNegative),
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
        key("hbm", Type::Map, "the PE's HBM slice: capacity and pseudo-channel layout").of(pe_hbm),
    };
    pe_hbm.doc = "Each PE's HBM slice: what fits (CapacityError past it) and how addresses stripe over its "
                 "pseudo-channels.";
    pe_hbm.keys = {
        key("capacity", Type::Bytes, "HBM per PE slice").dflt(format_bytes(pec.hbm.capacity)).min(Bound::Positive),
        key("pseudo_channels", Type::Int, "pseudo-channels per slice").dflt(pec.hbm.pseudo_channels)
            .min(Bound::Positive),
        key("stripe", Type::Bytes, "address interleave unit over the pseudo-channels")
            .dflt(format_bytes(pec.hbm.stripe)).min(Bound::Positive),
    };
    define_energy();

    // The Kunlun K200 host (`k200:`, with an explicit graph): see k200_config.hpp.
    const K200Config kc{};
    const auto t = [](Time v) { return format_time(v); };
    const auto b = [](Bytes v) { return format_bytes(v); };
    k200_pcie.doc = "The host link of each card: raw rate and framing, from which the payload bandwidth is derived.";
    k200_pcie.rules = {"the graph's edges of class link_class must carry lanes x lane_rate x data/total bits"};
    k200_pcie.keys = {
        key("link_class", Type::String, "graph edge class of the card links").dflt(kc.pcie.link_class),
        key("lane_rate", Type::Bandwidth, "raw rate of one lane (16 GT/s = 16 Gb/s)")
            .dflt(format_bandwidth(kc.pcie.lane_rate)).min(Bound::Positive),
        key("lanes", Type::Int, "lanes per link").dflt(kc.pcie.lanes).min(Bound::Positive),
        key("encoding_data_bits", Type::Int, "line code data bits per block").dflt(kc.pcie.encoding_data_bits)
            .min(Bound::Positive),
        key("encoding_total_bits", Type::Int, "line code bits per block").dflt(kc.pcie.encoding_total_bits)
            .min(Bound::Positive),
        key("tlp_payload", Type::Bytes, "max payload per TLP (MPS)").dflt(b(kc.pcie.tlp_payload)).min(Bound::Positive),
        key("tlp_overhead", Type::Bytes, "framing + header + LCRC per TLP").dflt(b(kc.pcie.tlp_overhead))
            .min(Bound::NonNegative),
        key("read_latency", Type::Time, "extra round trip of an eDMA read (H2D) op").dflt(t(kc.pcie.read_latency))
            .min(Bound::NonNegative),
    };
    k200_driver.doc = "Driver knobs (0/1; kl1_bounce_d2h 1/2) and the costs of the driver's copy paths.";
    k200_driver.keys = {
        key("kl1_dma_direct", Type::Int, "1: pinned buffers go straight to the eDMA").dflt(kc.driver.kl1_dma_direct),
        key("kl1_bounce_pipe", Type::Int, "1: pageable copies use the overlapped bounce pipeline")
            .dflt(kc.driver.kl1_bounce_pipe),
        key("kl1_bounce_d2h", Type::Int, "D2H bounce mode: 1 single-issue, 2 dual-concurrent")
            .dflt(kc.driver.kl1_bounce_d2h),
        key("kl1_pageable_pin", Type::Int, "1: pin user pages, one eDMA per page").dflt(kc.driver.kl1_pageable_pin),
        key("kl1_p2p_stub", Type::Int, "1: peer copies take the user-space fallback").dflt(kc.driver.kl1_p2p_stub),
        key("call_overhead", Type::Time, "fixed cost of a pinned copy call").dflt(t(kc.driver.call_overhead))
            .min(Bound::NonNegative),
        key("pageable_call_overhead", Type::Time, "fixed cost of a pageable copy call")
            .dflt(t(kc.driver.pageable_call_overhead)).min(Bound::NonNegative),
        key("page", Type::Bytes, "host page size").dflt(b(kc.driver.page)).min(Bound::Positive),
        key("map_per_page", Type::Time, "map + unmap of one page of a pinned segment")
            .dflt(t(kc.driver.map_per_page)).min(Bound::NonNegative),
        key("segment_overhead", Type::Time, "fixed cost per pinned segment").dflt(t(kc.driver.segment_overhead))
            .min(Bound::NonNegative),
        key("edma_setup", Type::Time, "descriptor programming + doorbell per eDMA op").dflt(t(kc.driver.edma_setup))
            .min(Bound::NonNegative),
        key("poll_period", Type::Time, "completion polling period").dflt(t(kc.driver.poll_period))
            .min(Bound::Positive),
        key("poll_timeout", Type::Time, "completion timeout").dflt(t(kc.driver.poll_timeout)).min(Bound::Positive),
        key("hugepage", Type::Bytes, "pinned chunk and max segment").dflt(b(kc.driver.hugepage)).min(Bound::Positive),
        key("hugepage_pool", Type::Bytes, "pinned memory the driver can hand out").dflt(b(kc.driver.hugepage_pool))
            .min(Bound::NonNegative),
        key("bounce_buffer", Type::Bytes, "bounce buffer size").dflt(b(kc.driver.bounce_buffer)).min(Bound::Positive),
        key("bounce_h2d_buffers", Type::Int, "H2D bounce buffers").dflt(kc.driver.bounce_h2d_buffers)
            .min(Bound::Positive),
        key("bounce_d2h_buffers", Type::Int, "D2H bounce buffers").dflt(kc.driver.bounce_d2h_buffers)
            .min(Bound::Positive),
        key("pipe_threshold", Type::Bytes, "pageable copies up to this size take the serial path")
            .dflt(b(kc.driver.pipe_threshold)).min(Bound::NonNegative),
        key("pin_min", Type::Bytes, "page pinning applies from this size up").dflt(b(kc.driver.pin_min))
            .min(Bound::NonNegative),
        key("pin_batch", Type::Int, "pages pinned per batch").dflt(kc.driver.pin_batch).min(Bound::Positive),
        key("pin_per_page", Type::Time, "per-page cost of the pin path").dflt(t(kc.driver.pin_per_page))
            .min(Bound::NonNegative),
        key("pin_batch_overhead", Type::Time, "per-batch cost of the pin path").dflt(t(kc.driver.pin_batch_overhead))
            .min(Bound::NonNegative),
        key("p2p_chunk", Type::Bytes, "peer copy chunk").dflt(b(kc.driver.p2p_chunk)).min(Bound::Positive),
        key("p2p_buffers", Type::Int, "peer copy bounce buffers").dflt(kc.driver.p2p_buffers).min(Bound::Positive),
        key("p2p_handoff", Type::Time, "per-chunk hand-off between the dies").dflt(t(kc.driver.p2p_handoff))
            .min(Bound::NonNegative),
        key("stock_bounce", Type::Bytes, "stock driver's bounce chunk").dflt(b(kc.driver.stock_bounce))
            .min(Bound::Positive),
    };
    k200_host.doc = "Host CPU copy threads of the bounce path.";
    k200_host.keys = {
        key("copy_threads", Type::Int, "concurrent memcpy threads").dflt(kc.host.copy_threads).min(Bound::Positive),
        key("copy_from_user", Type::Bandwidth, "user -> bounce memcpy per thread")
            .dflt(format_bandwidth(kc.host.copy_from_user)).min(Bound::Positive),
        key("copy_to_user", Type::Bandwidth, "bounce -> user memcpy per thread")
            .dflt(format_bandwidth(kc.host.copy_to_user)).min(Bound::Positive),
    };
    k200_edma.doc = "The eDMA engine of a card.";
    k200_edma.keys = {
        key("channels_per_card", Type::Int, "channels per card").dflt(kc.edma.channels_per_card).min(Bound::Positive),
        key("channels_per_die", Type::Int, "channels a die may hold").dflt(kc.edma.channels_per_die)
            .min(Bound::Positive),
    };
    k200_d2d.doc = "Device-to-device copies inside one die.";
    k200_d2d.keys = {
        key("bandwidth", Type::Bandwidth, "copy bandwidth").dflt(format_bandwidth(kc.d2d.bandwidth)).min(Bound::Positive),
        key("sleep_min", Type::Time, "first sleep of the completion sleep-poll").dflt(t(kc.d2d.sleep_min))
            .min(Bound::Positive),
        key("sleep_max", Type::Time, "longest sleep (it doubles up to this)").dflt(t(kc.d2d.sleep_max))
            .min(Bound::Positive),
    };
    k200_launch.doc = "Kernel launch (host) and dispatch (device).";
    k200_launch.keys = {
        key("host_prep", Type::Time, "per launch, on the calling thread").dflt(t(kc.launch.host_prep))
            .min(Bound::NonNegative),
        key("queue_submit", Type::Time, "per launch, holding the device command queue")
            .dflt(t(kc.launch.queue_submit)).min(Bound::NonNegative),
        key("dispatch_base", Type::Time, "device dispatch per kernel: the stream's command fetch (streams overlap)").dflt(t(kc.launch.dispatch_base))
            .min(Bound::NonNegative),
        key("dispatch_per_cluster", Type::Time, "device dispatch per cluster used, holding the clusters")
            .dflt(t(kc.launch.dispatch_per_cluster)).min(Bound::NonNegative),
        key("wait_overhead", Type::Time, "host cost of noticing a finished kernel").dflt(t(kc.launch.wait_overhead))
            .min(Bound::NonNegative),
    };
    k200_compute.doc = "The compute of one die and the GEMM kernel's tiling.";
    k200_compute.keys = {
        key("clock", Type::Frequency, "cluster clock").dflt(std::to_string(kc.compute.clock_hz / 1'000'000) + " MHz")
            .min(Bound::Positive),
        key("clusters", Type::Int, "clusters per die").dflt(kc.compute.clusters).min(Bound::Positive),
        key("cores_per_cluster", Type::Int, "cores per cluster").dflt(kc.compute.cores_per_cluster)
            .min(Bound::Positive),
        key("fp32_flops_per_cycle", Type::Int, "FP32 FLOP per cycle per cluster").dflt(kc.compute.fp32_flops_per_cycle)
            .min(Bound::Positive),
        key("fp16_flops_per_cycle", Type::Int, "FP16 FLOP per cycle per cluster").dflt(kc.compute.fp16_flops_per_cycle)
            .min(Bound::Positive),
        key("default_ncluster", Type::Int, "clusters a kernel uses unless told").dflt(kc.compute.default_ncluster)
            .min(Bound::Positive),
        key("elementwise_element_time", Type::Time, "elementwise kernels: time per element per cluster")
            .dflt(t(kc.compute.elementwise_element_time)).min(Bound::Positive),
        key("elementwise_serial_element_time", Type::Time,
            "elementwise kernels: time per element that does not spread over clusters")
            .dflt(t(kc.compute.elementwise_serial_element_time)).min(Bound::NonNegative),
        key("gemm_block_bytes", Type::Bytes, "GEMM output block per cluster: side of this many bytes of elements")
            .dflt(b(kc.compute.gemm_block_bytes)).min(Bound::Positive),
        key("kpanel_capacity", Type::Bytes, "per core: K-panel bytes held without spilling")
            .dflt(b(kc.compute.kpanel_capacity)).min(Bound::Positive),
        key("fp32_efficiency", Type::Int, "% of cluster peak inside a block, FP32").dflt(kc.compute.fp32_efficiency)
            .min(Bound::Positive),
        key("fp16_efficiency", Type::Int, "% of cluster peak inside a block, FP16").dflt(kc.compute.fp16_efficiency)
            .min(Bound::Positive),
        key("spill_penalty", Type::Int, "% extra compute once the K panel spills")
            .dflt(kc.compute.spill_penalty).min(Bound::NonNegative),
        key("fc_overhead", Type::Time, "per xdnn fc call, besides launch/dispatch/wait").dflt(t(kc.compute.fc_overhead))
            .min(Bound::NonNegative),
        key("hbm_capacity", Type::Bytes, "HBM per die (a GEMM's A, B and C must fit)").dflt(b(kc.compute.hbm_capacity))
            .min(Bound::Positive),
    };
    k200.doc = "A Kunlun K200 host (with an explicit graph): driver, eDMA, host copies, launch, compute.";
    k200.keys = {
        key("pcie", Type::Map, "the card links").of(k200_pcie),
        key("driver", Type::Map, "driver knobs and path costs").of(k200_driver),
        key("host", Type::Map, "host copy threads").of(k200_host),
        key("edma", Type::Map, "eDMA channels").of(k200_edma),
        key("d2d", Type::Map, "device-to-device copies").of(k200_d2d),
        key("launch", Type::Map, "kernel launch and dispatch").of(k200_launch),
        key("compute", Type::Map, "die compute and GEMM tiling").of(k200_compute),
    };

    // ---- vgpu: the virtualised-GPU forwarding path (topology/vgpu_config.hpp) ----
    const VgpuConfig vg{};
    vgpu_dist.doc = "A seeded duration distribution: fixed (mean), uniform [min, max], normal (mean, sd) clamped "
                    "into [min, max] (max 0: no upper bound).";
    vgpu_dist.rules = {"uniform needs min <= max", "max, when not 0, is >= min"};
    vgpu_dist.keys = {
        key("kind", Type::Enum, "fixed, uniform or normal").dflt(to_string(vg.rpc.firmware.kind))
            .one_of(vgpu_dist_kind_names()),
        key("mean", Type::Time, "mean (fixed: the value)").dflt(format_time(vg.rpc.firmware.mean))
            .min(Bound::NonNegative),
        key("sd", Type::Time, "standard deviation (normal)").dflt(format_time(vg.rpc.firmware.sd))
            .min(Bound::NonNegative),
        key("min", Type::Time, "lower bound (uniform, normal clamp)").dflt(format_time(vg.rpc.firmware.min))
            .min(Bound::NonNegative),
        key("max", Type::Time, "upper bound (uniform; normal clamp, 0: none)").dflt(format_time(vg.rpc.firmware.max))
            .min(Bound::NonNegative),
    };
    vgpu_roles.doc = "Which graph nodes play which part of the vGPU path (names from graph.nodes).";
    vgpu_roles.keys = {
        key("guest", Type::String, "guest vCPU: guest driver ops start here; MMIO writes trap from here")
            .dflt(vg.roles.guest),
        key("guest_memory", Type::String, "guest RAM: H2D source, D2H sink").dflt(vg.roles.guest_memory),
        key("host", Type::String, "host backend worker").dflt(vg.roles.host),
        key("bounce", Type::String, "host bounce windows").dflt(vg.roles.bounce),
        key("gsp", Type::String, "GPU firmware processor").dflt(vg.roles.gsp),
        key("gr", Type::String, "compute engine").dflt(vg.roles.gr),
        key("ce", Type::String, "copy engine").dflt(vg.roles.ce),
        key("gpu_memory", Type::String, "GPU memory").dflt(vg.roles.gpu_memory),
    };
    vgpu_poll.doc = "How the host notices GSP replies: tick (a polled worker re-armed one quantum after each "
                    "event: a full quantum per wait), grid (free-running ticks), interrupt.";
    vgpu_poll.keys = {
        key("mode", Type::Enum, "tick, grid or interrupt").dflt(to_string(vg.poll.mode)).one_of(vgpu_poll_mode_names()),
        key("quantum", Type::Time, "poll quantum").dflt(format_time(vg.poll.quantum)).min(Bound::Positive),
        key("waits_per_round_trip", Type::Int, "poll waits one RPC round trip needs")
            .dflt(vg.poll.waits_per_round_trip)
            .min(Bound::Positive),
        key("interrupt_latency", Type::Time, "interrupt mode: cost of one wait")
            .dflt(format_time(vg.poll.interrupt_latency))
            .min(Bound::NonNegative),
        key("phase", Type::Time, "grid mode: time of the first tick").dflt(format_time(vg.poll.phase))
            .min(Bound::NonNegative),
    };
    vgpu_rpc.doc = "One RPC to the GSP (all guests share one FIFO queue).";
    vgpu_rpc.keys = {
        key("firmware", Type::Map, "GSP firmware service time of one RPC").of(vgpu_dist),
        key("host_cost", Type::Time, "backend CPU per RPC").dflt(format_time(vg.rpc.host_cost))
            .min(Bound::NonNegative),
        key("tx_bytes", Type::Bytes, "TX message size").dflt(format_bytes(vg.rpc.tx_bytes)).min(Bound::Positive),
        key("reply_bytes", Type::Bytes, "reply size").dflt(format_bytes(vg.rpc.reply_bytes)).min(Bound::Positive),
        key("batch_entry", Type::Time, "extra firmware time per extra window of a batched RPC")
            .dflt(format_time(vg.rpc.batch_entry))
            .min(Bound::NonNegative),
    };
    vgpu_pde.doc = "PDE_UPDATE forwards of a GR launch.";
    vgpu_pde.keys = {
        key("scratch_accepted", Type::Bool, "the scratch-window install (once per context) is accepted")
            .dflt(vg.pde.scratch_accepted),
        key("guest_windows", Type::Strings, "one entry per guest window attempted per launch: accept or refuse")
            .dflt(vg.pde.guest_windows),
        key("batching", Type::Bool, "what-if: all forwards of a launch in one RPC").dflt(vg.pde.batching),
        key("cache_accepted", Type::Bool, "what-if: accepted guest windows are not forwarded again")
            .dflt(vg.pde.cache_accepted),
    };
    const VgpuLaunchConfig vl{};
    vgpu_launch.doc = "The costs of one forwarded GR launch besides the RPCs.";
    vgpu_launch.keys = {
        key("guest_driver", Type::Time, "guest driver work before the doorbell write traps")
            .dflt(format_time(vl.guest_driver)).min(Bound::NonNegative),
        key("qmd_relocation", Type::Time, "QMD relocation / pre-write").dflt(format_time(vl.qmd_relocation))
            .min(Bound::NonNegative),
        key("param_shadow", Type::Bytes, "parameter shadow copy").dflt(format_bytes(vl.param_shadow))
            .min(Bound::NonNegative),
        key("program_shadow", Type::Bytes, "program shadow copy").dflt(format_bytes(vl.program_shadow))
            .min(Bound::NonNegative),
        key("shadow_cost", Type::Time, "backend CPU per shadow copy").dflt(format_time(vl.shadow_cost))
            .min(Bound::NonNegative),
        key("bounce_pages_in", Type::Int, "pages bounced in per launch").dflt(vl.bounce_pages_in)
            .min(Bound::NonNegative),
        key("bounce_pages_out", Type::Int, "pages bounced out per launch").dflt(vl.bounce_pages_out)
            .min(Bound::NonNegative),
        key("page", Type::Bytes, "page size").dflt(format_bytes(vl.page)).min(Bound::Positive),
        key("page_in_cost", Type::Time, "backend CPU per page in").dflt(format_time(vl.page_in_cost))
            .min(Bound::NonNegative),
        key("page_out_cost", Type::Time, "backend CPU per page out").dflt(format_time(vl.page_out_cost))
            .min(Bound::NonNegative),
        key("doorbell_bytes", Type::Bytes, "doorbell / GPFIFO publish write").dflt(format_bytes(vl.doorbell_bytes))
            .min(Bound::Positive),
        key("gr_first_setup", Type::Time, "GR channel/context bring-up on a context's first launch")
            .dflt(format_time(vl.gr_first_setup)).min(Bound::NonNegative),
        key("gr_setup", Type::Time, "GPFIFO fetch + channel switch, later launches").dflt(format_time(vl.gr_setup))
            .min(Bound::NonNegative),
        key("kernel", Type::Time, "the kernel's execution on GR").dflt(format_time(vl.kernel)).min(Bound::NonNegative),
        key("kernel_cycles", Type::Int, "clock64 cycles the kernel reports (P12)").dflt(vl.kernel_cycles)
            .min(Bound::NonNegative),
        key("completion_poll", Type::Time, "backend completion-poll interval").dflt(format_time(vl.completion_poll))
            .min(Bound::Positive),
        key("give_up", Type::Time, "completion poll gives up (timeout) after").dflt(format_time(vl.give_up))
            .min(Bound::Positive),
        key("msix", Type::Time, "MSI-X injection into the guest").dflt(format_time(vl.msix)).min(Bound::NonNegative),
    };
    const VgpuCopyConfig vc{};
    vgpu_copy.doc = "CE copies through the host bounce windows.";
    vgpu_copy.keys = {
        key("window", Type::Bytes, "bounce window cap (larger copies are split)").dflt(format_bytes(vc.window))
            .min(Bound::Positive),
        key("windows", Type::Int, "bounce windows in flight").dflt(vc.windows).min(Bound::Positive),
        key("setup", Type::Time, "backend CPU per copy").dflt(format_time(vc.setup)).min(Bound::NonNegative),
        key("page_cost", Type::Time, "backend CPU per page through a window").dflt(format_time(vc.page_cost))
            .min(Bound::NonNegative),
        key("ce_setup", Type::Time, "CE method push + doorbell per chunk").dflt(format_time(vc.ce_setup))
            .min(Bound::NonNegative),
    };
    const VgpuGuestOpsConfig vo{};
    vgpu_ops.doc = "Guest driver operations other than launches and copies.";
    vgpu_ops.keys = {
        key("init_rpcs", Type::Int, "RPCs of context creation").dflt(vo.init_rpcs).min(Bound::NonNegative),
        key("init_driver", Type::Time, "guest driver init (same code as bare metal)")
            .dflt(format_time(vo.init_driver)).min(Bound::NonNegative),
        key("malloc_first_rpcs", Type::Int, "RPCs of the first cudaMalloc").dflt(vo.malloc_first_rpcs)
            .min(Bound::NonNegative),
        key("malloc_rpc_every", Type::Int, "later mallocs forward one RPC every n-th call")
            .dflt(vo.malloc_rpc_every).min(Bound::Positive),
        key("malloc_driver", Type::Time, "guest driver work per malloc").dflt(format_time(vo.malloc_driver))
            .min(Bound::NonNegative),
    };
    const VgpuBareConfig vb{};
    vgpu_bare.doc = "Bare-metal costs of the same workload (no forwarding path), for the guest/bare ratios.";
    vgpu_bare.keys = {
        key("init", Type::Time, "process start -> device ready").dflt(format_time(vb.init)).min(Bound::NonNegative),
        key("malloc_first", Type::Time, "first cudaMalloc").dflt(format_time(vb.malloc_first)).min(Bound::NonNegative),
        key("malloc_steady", Type::Time, "later cudaMalloc").dflt(format_time(vb.malloc_steady))
            .min(Bound::NonNegative),
        key("launch", Type::Time, "driver launch path up to the doorbell").dflt(format_time(vb.launch))
            .min(Bound::NonNegative),
        key("gr_first_setup", Type::Time, "first launch of a context, native").dflt(format_time(vb.gr_first_setup))
            .min(Bound::NonNegative),
        key("interrupt", Type::Time, "completion interrupt").dflt(format_time(vb.interrupt)).min(Bound::NonNegative),
        key("copy_setup", Type::Time, "driver cost per copy call").dflt(format_time(vb.copy_setup))
            .min(Bound::NonNegative),
    };
    const VgpuWorkloadConfig vw{};
    vgpu_workload.doc = "The scripted perf workload (P1-P12).";
    vgpu_workload.rules = {"copy_min <= copy_max"};
    vgpu_workload.keys = {
        key("warm_launches", Type::Int, "warm launches, each synchronised (P4)").dflt(vw.warm_launches)
            .min(Bound::Positive),
        key("burst", Type::Int, "launches of the burst with one sync (P10)").dflt(vw.burst).min(Bound::Positive),
        key("mallocs", Type::Int, "cudaMalloc calls (P2)").dflt(vw.mallocs).min(Bound::Positive),
        key("copy_min", Type::Bytes, "smallest copy of the sweep").dflt(format_bytes(vw.copy_min)).min(Bound::Positive),
        key("copy_max", Type::Bytes, "largest copy of the sweep").dflt(format_bytes(vw.copy_max)).min(Bound::Positive),
        key("repetitions", Type::Int, "seeded repetitions for p50/p95 and P11").dflt(vw.repetitions)
            .min(Bound::Positive),
    };
    vgpu.doc = "The virtualised-GPU forwarding path (needs a graph with the nodes named in roles).";
    vgpu.keys = {
        key("guests", Type::Int, "guest VMs sharing the GPU (and its GSP queue)").dflt(vg.guests).min(Bound::Positive),
        key("jiffy", Type::Time, "host clock granularity of elapsed_ms").dflt(format_time(vg.jiffy)).min(Bound::Positive),
        key("roles", Type::Map, "graph nodes of the path").of(vgpu_roles),
        key("poll", Type::Map, "the host poller").of(vgpu_poll),
        key("rpc", Type::Map, "GSP RPCs").of(vgpu_rpc),
        key("pde", Type::Map, "PDE forwards of a launch").of(vgpu_pde),
        key("launch", Type::Map, "GR launch costs").of(vgpu_launch),
        key("copy", Type::Map, "CE copies through bounce windows").of(vgpu_copy),
        key("ops", Type::Map, "init and cudaMalloc").of(vgpu_ops),
        key("bare", Type::Map, "bare-metal costs").of(vgpu_bare),
        key("workload", Type::Map, "the scripted workload").of(vgpu_workload),
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
        key("vgpu", Type::Map, "the virtualised-GPU forwarding path (with graph)").of(vgpu),
        key("k200", Type::Map, "Kunlun K200 host parameters (with graph); every key has a default").of(k200),
        key("energy", Type::Map, "the energy model (docs/energy.md); every key has a default").of(energy),
    };
  }

  // The `energy:` section (energy_config.hpp).
  void define_energy() {
    const EnergyConfig e{};
    const auto epb = [](EnergyPerByte v) { return format_energy_per_byte(v); };
    const auto epf = [](EnergyPerFlop v) { return format_energy_per_flop(v); };
    const auto pw = [](Power v) { return format_power(v); };
    energy_links.doc = "Dynamic energy per byte for each hop over a link of each class.";
    energy_links.keys = {
        key("pe", Type::EnergyPerByte, "PE <-> its router").dflt(epb(e.links.pe)).min(Bound::NonNegative),
        key("noc", Type::EnergyPerByte, "router <-> router").dflt(epb(e.links.noc)).min(Bound::NonNegative),
        key("hbm", Type::EnergyPerByte, "router <-> HBM controller slice (the wire, not the DRAM)")
            .dflt(epb(e.links.hbm)).min(Bound::NonNegative),
        key("ucie_port", Type::EnergyPerByte, "edge router <-> UCIe adapter").dflt(epb(e.links.ucie_port))
            .min(Bound::NonNegative),
        key("ucie", Type::EnergyPerByte, "UCIe die-to-die link").dflt(epb(e.links.ucie)).min(Bound::NonNegative),
        key("pcie_port", Type::EnergyPerByte, "router <-> PCIe endpoint").dflt(epb(e.links.pcie_port))
            .min(Bound::NonNegative),
        key("pcie", Type::EnergyPerByte, "PCIe link between SIPs").dflt(epb(e.links.pcie)).min(Bound::NonNegative),
        key("other", Type::EnergyPerByte, "any other link class (explicit graphs)").dflt(epb(e.links.other))
            .min(Bound::NonNegative),
    };
    energy_memory.doc = "Dynamic energy per byte read from or written to a memory.";
    energy_memory.keys = {
        key("hbm", Type::EnergyPerByte, "per byte read from or written to an HBM slice").dflt(epb(e.memory.hbm))
            .min(Bound::NonNegative),
        key("sram", Type::EnergyPerByte, "per byte moved into or out of a PE's scratch").dflt(epb(e.memory.sram))
            .min(Bound::NonNegative),
    };
    energy_gemm.doc = "GEMM engine energy per operation, by precision (pJ/MAC = 2 flops).";
    energy_gemm.keys = {
        key("fp32", Type::EnergyPerFlop, "FP32").dflt(epf(e.compute.gemm_fp32)).min(Bound::NonNegative),
        key("fp16", Type::EnergyPerFlop, "FP16").dflt(epf(e.compute.gemm_fp16)).min(Bound::NonNegative),
        key("bf16", Type::EnergyPerFlop, "BF16").dflt(epf(e.compute.gemm_bf16)).min(Bound::NonNegative),
        key("int8", Type::EnergyPerFlop, "INT8").dflt(epf(e.compute.gemm_int8)).min(Bound::NonNegative),
    };
    energy_compute.doc = "Dynamic energy of the compute engines.";
    energy_compute.keys = {
        key("gemm", Type::Map, "GEMM engine, per operation by precision").of(energy_gemm),
        key("vector", Type::EnergyPerByte, "vector engine, per byte processed").dflt(epb(e.compute.vector))
            .min(Bound::NonNegative),
    };
    energy_static.doc = "Static power of every node of a kind, paid over the run's makespan.";
    energy_static.keys = {
        key("pe", Type::Power, "per PE").dflt(pw(e.static_power.pe)).min(Bound::NonNegative),
        key("router", Type::Power, "per router").dflt(pw(e.static_power.router)).min(Bound::NonNegative),
        key("hbm_ctrl", Type::Power, "per HBM controller slice").dflt(pw(e.static_power.hbm_ctrl))
            .min(Bound::NonNegative),
        key("ucie", Type::Power, "per UCIe adapter").dflt(pw(e.static_power.ucie)).min(Bound::NonNegative),
        key("pcie_ep", Type::Power, "per PCIe endpoint").dflt(pw(e.static_power.pcie_ep)).min(Bound::NonNegative),
        key("other", Type::Power, "per node of any other kind (explicit graphs)").dflt(pw(e.static_power.other))
            .min(Bound::NonNegative),
    };
    energy.doc = "The energy model: joules per byte per link class and memory, per operation per engine and "
                 "precision, static watts per node kind (docs/energy.md).";
    energy.keys = {
        key("links", Type::Map, "per byte per hop, by link class").of(energy_links),
        key("memory", Type::Map, "per byte, by memory").of(energy_memory),
        key("compute", Type::Map, "per operation, by engine").of(energy_compute),
        key("static", Type::Map, "static power, by node kind").of(energy_static),
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
  bool get_energy_per_byte(std::string_view name, std::int64_t& out) const {
    return get_quantity(name, Type::EnergyPerByte, out);
  }
  bool get_energy_per_flop(std::string_view name, std::int64_t& out) const {
    return get_quantity(name, Type::EnergyPerFlop, out);
  }
  bool get_power(std::string_view name, std::int64_t& out) const { return get_quantity(name, Type::Power, out); }

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
    q.get_int("channels", p.ipcq_channels);
    q.get_time("bank_hop", p.ipcq_bank_hop);
  }
  if (r.get("hbm")) {
    const MapReader h = r.child("hbm");
    h.get_bytes("capacity", p.hbm.capacity);
    h.get_int("pseudo_channels", p.hbm.pseudo_channels);
    h.get_bytes("stripe", p.hbm.stripe);
  }
  return p;
}

EnergyConfig read_energy(const MapReader& r) {
  EnergyConfig e;
  if (r.get("links")) {
    const MapReader l = r.child("links");
    l.get_energy_per_byte("pe", e.links.pe);
    l.get_energy_per_byte("noc", e.links.noc);
    l.get_energy_per_byte("hbm", e.links.hbm);
    l.get_energy_per_byte("ucie_port", e.links.ucie_port);
    l.get_energy_per_byte("ucie", e.links.ucie);
    l.get_energy_per_byte("pcie_port", e.links.pcie_port);
    l.get_energy_per_byte("pcie", e.links.pcie);
    l.get_energy_per_byte("other", e.links.other);
  }
  if (r.get("memory")) {
    const MapReader m = r.child("memory");
    m.get_energy_per_byte("hbm", e.memory.hbm);
    m.get_energy_per_byte("sram", e.memory.sram);
  }
  if (r.get("compute")) {
    const MapReader c = r.child("compute");
    if (c.get("gemm")) {
      const MapReader g = c.child("gemm");
      g.get_energy_per_flop("fp32", e.compute.gemm_fp32);
      g.get_energy_per_flop("fp16", e.compute.gemm_fp16);
      g.get_energy_per_flop("bf16", e.compute.gemm_bf16);
      g.get_energy_per_flop("int8", e.compute.gemm_int8);
    }
    c.get_energy_per_byte("vector", e.compute.vector);
  }
  if (r.get("static")) {
    const MapReader s = r.child("static");
    s.get_power("pe", e.static_power.pe);
    s.get_power("router", e.static_power.router);
    s.get_power("hbm_ctrl", e.static_power.hbm_ctrl);
    s.get_power("ucie", e.static_power.ucie);
    s.get_power("pcie_ep", e.static_power.pcie_ep);
    s.get_power("other", e.static_power.other);
  }
  return e;
}

// 0 or 1 (or the values in `allowed`): the driver's knobs are module parameters.
void read_knob(const MapReader& r, std::string_view name, int& out, std::initializer_list<int> allowed = {0, 1}) {
  if (!r.get_int(name, out)) return;
  if (std::find(allowed.begin(), allowed.end(), out) == allowed.end()) {
    std::vector<std::string> v;
    for (int a : allowed) v.push_back(std::to_string(a));
    r.fail(name, "expected one of " + join(v, ", ") + ", got " + std::to_string(out));
  }
}

K200Config read_k200(const MapReader& r) {
  K200Config c;
  if (r.get("pcie")) {
    const MapReader p = r.child("pcie");
    p.get_string("link_class", c.pcie.link_class);
    p.get_bandwidth("lane_rate", c.pcie.lane_rate);
    p.get_int("lanes", c.pcie.lanes);
    p.get_int("encoding_data_bits", c.pcie.encoding_data_bits);
    p.get_int("encoding_total_bits", c.pcie.encoding_total_bits);
    if (c.pcie.encoding_data_bits > c.pcie.encoding_total_bits)
      p.fail("encoding_data_bits", "the data bits (" + std::to_string(c.pcie.encoding_data_bits) +
                                       ") exceed the block's total bits (" +
                                       std::to_string(c.pcie.encoding_total_bits) + ")");
    p.get_bytes("tlp_payload", c.pcie.tlp_payload);
    p.get_bytes("tlp_overhead", c.pcie.tlp_overhead);
    p.get_time("read_latency", c.pcie.read_latency);
  }
  if (r.get("driver")) {
    const MapReader d = r.child("driver");
    K200DriverConfig& v = c.driver;
    read_knob(d, "kl1_dma_direct", v.kl1_dma_direct);
    read_knob(d, "kl1_bounce_pipe", v.kl1_bounce_pipe);
    read_knob(d, "kl1_bounce_d2h", v.kl1_bounce_d2h, {1, 2});
    read_knob(d, "kl1_pageable_pin", v.kl1_pageable_pin);
    read_knob(d, "kl1_p2p_stub", v.kl1_p2p_stub);
    d.get_time("call_overhead", v.call_overhead);
    d.get_time("pageable_call_overhead", v.pageable_call_overhead);
    d.get_bytes("page", v.page);
    d.get_time("map_per_page", v.map_per_page);
    d.get_time("segment_overhead", v.segment_overhead);
    d.get_time("edma_setup", v.edma_setup);
    d.get_time("poll_period", v.poll_period);
    d.get_time("poll_timeout", v.poll_timeout);
    d.get_bytes("hugepage", v.hugepage);
    d.get_bytes("hugepage_pool", v.hugepage_pool);
    d.get_bytes("bounce_buffer", v.bounce_buffer);
    d.get_int("bounce_h2d_buffers", v.bounce_h2d_buffers);
    d.get_int("bounce_d2h_buffers", v.bounce_d2h_buffers);
    d.get_bytes("pipe_threshold", v.pipe_threshold);
    d.get_bytes("pin_min", v.pin_min);
    d.get_int("pin_batch", v.pin_batch);
    d.get_time("pin_per_page", v.pin_per_page);
    d.get_time("pin_batch_overhead", v.pin_batch_overhead);
    d.get_bytes("p2p_chunk", v.p2p_chunk);
    d.get_int("p2p_buffers", v.p2p_buffers);
    d.get_time("p2p_handoff", v.p2p_handoff);
    d.get_bytes("stock_bounce", v.stock_bounce);
    if (v.hugepage % v.page != 0)
      d.fail("hugepage", "the hugepage (" + format_bytes(v.hugepage) + ") must be a multiple of the page (" +
                             format_bytes(v.page) + ")");
  }
  if (r.get("host")) {
    const MapReader h = r.child("host");
    h.get_int("copy_threads", c.host.copy_threads);
    h.get_bandwidth("copy_from_user", c.host.copy_from_user);
    h.get_bandwidth("copy_to_user", c.host.copy_to_user);
  }
  if (r.get("edma")) {
    const MapReader e = r.child("edma");
    e.get_int("channels_per_card", c.edma.channels_per_card);
    e.get_int("channels_per_die", c.edma.channels_per_die);
    if (c.edma.channels_per_die > c.edma.channels_per_card)
      e.fail("channels_per_die", "a die cannot hold more channels (" + std::to_string(c.edma.channels_per_die) +
                                     ") than its card has (" + std::to_string(c.edma.channels_per_card) + ")");
  }
  if (r.get("d2d")) {
    const MapReader d = r.child("d2d");
    d.get_bandwidth("bandwidth", c.d2d.bandwidth);
    d.get_time("sleep_min", c.d2d.sleep_min);
    d.get_time("sleep_max", c.d2d.sleep_max);
    if (c.d2d.sleep_max < c.d2d.sleep_min)
      d.fail("sleep_max", "sleep_max (" + format_time(c.d2d.sleep_max) + ") is below sleep_min (" +
                              format_time(c.d2d.sleep_min) + ")");
  }
  if (r.get("launch")) {
    const MapReader l = r.child("launch");
    l.get_time("host_prep", c.launch.host_prep);
    l.get_time("queue_submit", c.launch.queue_submit);
    l.get_time("dispatch_base", c.launch.dispatch_base);
    l.get_time("dispatch_per_cluster", c.launch.dispatch_per_cluster);
    l.get_time("wait_overhead", c.launch.wait_overhead);
  }
  if (r.get("compute")) {
    const MapReader k = r.child("compute");
    K200ComputeConfig& v = c.compute;
    k.get_frequency("clock", v.clock_hz);
    k.get_int("clusters", v.clusters);
    k.get_int("cores_per_cluster", v.cores_per_cluster);
    k.get_int("fp32_flops_per_cycle", v.fp32_flops_per_cycle);
    k.get_int("fp16_flops_per_cycle", v.fp16_flops_per_cycle);
    k.get_int("default_ncluster", v.default_ncluster);
    k.get_time("elementwise_element_time", v.elementwise_element_time);
    k.get_time("elementwise_serial_element_time", v.elementwise_serial_element_time);
    k.get_bytes("gemm_block_bytes", v.gemm_block_bytes);
    k.get_bytes("kpanel_capacity", v.kpanel_capacity);
    k.get_int("fp32_efficiency", v.fp32_efficiency);
    k.get_int("fp16_efficiency", v.fp16_efficiency);
    k.get_int("spill_penalty", v.spill_penalty);
    k.get_time("fc_overhead", v.fc_overhead);
    k.get_bytes("hbm_capacity", v.hbm_capacity);
    if (v.default_ncluster > v.clusters)
      k.fail("default_ncluster", "default_ncluster (" + std::to_string(v.default_ncluster) + ") exceeds clusters (" +
                                     std::to_string(v.clusters) + ")");
    for (const char* e : {"fp32_efficiency", "fp16_efficiency"}) {
      const int x = std::string(e) == "fp32_efficiency" ? v.fp32_efficiency : v.fp16_efficiency;
      if (x > 100) k.fail(e, "an efficiency is a percentage of peak: expected 1..100, got " + std::to_string(x));
    }
  }
  return c;
}

// ---- vgpu ----------------------------------------------------------------------

void read_vgpu_dist(const MapReader& r, VgpuDistribution& d) {
  r.get_enum("kind", d.kind, vgpu_dist_kind_from_string);
  r.get_time("mean", d.mean);
  r.get_time("sd", d.sd);
  r.get_time("min", d.min);
  r.get_time("max", d.max);
  if (d.kind == VgpuDistKind::Uniform && d.min > d.max)
    r.fail("max", "uniform needs min <= max (min " + format_time(d.min) + ", max " + format_time(d.max) + ")");
  if (d.kind == VgpuDistKind::Normal && d.max != 0 && d.max < d.min)
    r.fail("max", "max (" + format_time(d.max) + ") is below min (" + format_time(d.min) + "); 0 means no bound");
}

VgpuConfig read_vgpu(const MapReader& r) {
  VgpuConfig v;
  if (r.get_int("guests", v.guests) && v.guests > 1024)
    r.fail("guests", "at most 1024 guests share one GPU in this model, got " + std::to_string(v.guests));
  r.get_time("jiffy", v.jiffy);
  if (r.get("roles")) {
    const MapReader m = r.child("roles");
    m.get_string("guest", v.roles.guest);
    m.get_string("guest_memory", v.roles.guest_memory);
    m.get_string("host", v.roles.host);
    m.get_string("bounce", v.roles.bounce);
    m.get_string("gsp", v.roles.gsp);
    m.get_string("gr", v.roles.gr);
    m.get_string("ce", v.roles.ce);
    m.get_string("gpu_memory", v.roles.gpu_memory);
  }
  if (r.get("poll")) {
    const MapReader m = r.child("poll");
    m.get_enum("mode", v.poll.mode, vgpu_poll_mode_from_string);
    m.get_time("quantum", v.poll.quantum);
    m.get_int("waits_per_round_trip", v.poll.waits_per_round_trip);
    m.get_time("interrupt_latency", v.poll.interrupt_latency);
    m.get_time("phase", v.poll.phase);
  }
  if (r.get("rpc")) {
    const MapReader m = r.child("rpc");
    if (m.get("firmware")) read_vgpu_dist(m.child("firmware"), v.rpc.firmware);
    m.get_time("host_cost", v.rpc.host_cost);
    m.get_bytes("tx_bytes", v.rpc.tx_bytes);
    m.get_bytes("reply_bytes", v.rpc.reply_bytes);
    m.get_time("batch_entry", v.rpc.batch_entry);
  }
  if (r.get("pde")) {
    const MapReader m = r.child("pde");
    m.get_bool("scratch_accepted", v.pde.scratch_accepted);
    if (const Value* w = m.get("guest_windows")) {
      if (w->type != Value::Type::List)
        m.fail("guest_windows", "expected a list of accept/refuse, got " + describe(*w));
      v.pde.guest_windows.clear();
      for (std::size_t i = 0; i < w->items.size(); ++i) {
        const Value& item = w->items[i];
        if (item.type != Value::Type::Scalar || (item.text != "accept" && item.text != "refuse"))
          m.fail("guest_windows", "item " + std::to_string(i) + ": expected accept or refuse, got " + describe(item));
        v.pde.guest_windows.push_back(item.text);
      }
    }
    m.get_bool("batching", v.pde.batching);
    m.get_bool("cache_accepted", v.pde.cache_accepted);
  }
  if (r.get("launch")) {
    const MapReader m = r.child("launch");
    VgpuLaunchConfig& l = v.launch;
    m.get_time("guest_driver", l.guest_driver);
    m.get_time("qmd_relocation", l.qmd_relocation);
    m.get_bytes("param_shadow", l.param_shadow);
    m.get_bytes("program_shadow", l.program_shadow);
    m.get_time("shadow_cost", l.shadow_cost);
    m.get_int("bounce_pages_in", l.bounce_pages_in);
    m.get_int("bounce_pages_out", l.bounce_pages_out);
    m.get_bytes("page", l.page);
    m.get_time("page_in_cost", l.page_in_cost);
    m.get_time("page_out_cost", l.page_out_cost);
    m.get_bytes("doorbell_bytes", l.doorbell_bytes);
    m.get_time("gr_first_setup", l.gr_first_setup);
    m.get_time("gr_setup", l.gr_setup);
    m.get_time("kernel", l.kernel);
    m.get_int("kernel_cycles", l.kernel_cycles);
    m.get_time("completion_poll", l.completion_poll);
    m.get_time("give_up", l.give_up);
    m.get_time("msix", l.msix);
  }
  if (r.get("copy")) {
    const MapReader m = r.child("copy");
    m.get_bytes("window", v.copy.window);
    m.get_int("windows", v.copy.windows);
    m.get_time("setup", v.copy.setup);
    m.get_time("page_cost", v.copy.page_cost);
    m.get_time("ce_setup", v.copy.ce_setup);
  }
  if (r.get("ops")) {
    const MapReader m = r.child("ops");
    m.get_int("init_rpcs", v.ops.init_rpcs);
    m.get_time("init_driver", v.ops.init_driver);
    m.get_int("malloc_first_rpcs", v.ops.malloc_first_rpcs);
    m.get_int("malloc_rpc_every", v.ops.malloc_rpc_every);
    m.get_time("malloc_driver", v.ops.malloc_driver);
  }
  if (r.get("bare")) {
    const MapReader m = r.child("bare");
    m.get_time("init", v.bare.init);
    m.get_time("malloc_first", v.bare.malloc_first);
    m.get_time("malloc_steady", v.bare.malloc_steady);
    m.get_time("launch", v.bare.launch);
    m.get_time("gr_first_setup", v.bare.gr_first_setup);
    m.get_time("interrupt", v.bare.interrupt);
    m.get_time("copy_setup", v.bare.copy_setup);
  }
  if (r.get("workload")) {
    const MapReader m = r.child("workload");
    m.get_int("warm_launches", v.workload.warm_launches);
    m.get_int("burst", v.workload.burst);
    m.get_int("mallocs", v.workload.mallocs);
    m.get_bytes("copy_min", v.workload.copy_min);
    m.get_bytes("copy_max", v.workload.copy_max);
    m.get_int("repetitions", v.workload.repetitions);
    if (v.workload.copy_min > v.workload.copy_max)
      m.fail("copy_max", "copy_max (" + format_bytes(v.workload.copy_max) + ") is below copy_min (" +
                             format_bytes(v.workload.copy_min) + ")");
  }
  return v;
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
  if (top.get("energy")) c.energy = read_energy(top.child("energy"));
  if (top.get("vgpu")) {
    if (sys)
      l.fail(top.entry("vgpu").key_where, "vgpu",
             "the vgpu path runs on an explicit graph, not a system (start from configs/vgpu.yaml, e.g. --config "
             "vgpu.yaml)");
    c.vgpu = read_vgpu(top.child("vgpu"));
  }
  if (top.get("k200")) {
    if (!c.graph) l.fail(top.entry("k200").key_where, "k200", "the K200 host is an explicit graph: give graph, not system");
    c.k200 = read_k200(top.child("k200"));
  }
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
  for (Type t : {Type::EnergyPerByte, Type::EnergyPerFlop, Type::Power}) units[type_name(t)] = unit_names(*quantity_kind(t));
  j["units"] = std::move(units);
  const json root = section_json(s.root);  // named: items() of a temporary would dangle
  for (const auto& [name, v] : root.items()) j[name] = v;
  return j.dump(2);
}

}  // namespace kernbench::topology
