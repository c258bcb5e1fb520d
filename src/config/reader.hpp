// reader.hpp -- the strict reader: one map of the YAML tree checked against
// one section of the schema.
//
// Construction refuses unknown keys (with a "did you mean") and missing
// required keys; each getter then types one key, refusing a key or a type
// the schema does not declare (a bug, an InternalError), and leaves `out`
// untouched when an optional key is absent (the struct's default). The
// bindings of section.hpp call these getters; hand-written hooks may too.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/quantity.hpp"
#include "config/schema.hpp"
#include "config/text.hpp"
#include "config/yaml_tree.hpp"
#include "sim/errors.hpp"
#include "sim/units.hpp"

namespace kernbench::config {

using sim::Bandwidth;
using sim::Bytes;
using sim::Time;

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

  /// A plain finite decimal number ("58", "58.5", "5.85e1"); no units.
  bool get_real(std::string_view name, double& out) const {
    const KeyDef& k = def(name, Type::Real);
    const Value* v = v_.find(name);
    if (!v) return false;
    const std::string what = k.bound == Bound::Positive      ? "a positive number"
                             : k.bound == Bound::NonNegative ? "a non-negative number"
                                                             : "a number";
    const std::string t = v->type == Value::Type::Scalar ? std::string(trim(v->text)) : std::string();
    char* end = nullptr;
    const double x = t.empty() || t.size() > 64 ? std::nan("") : std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(x))
      l_.fail(v->where, path_of(name), "expected " + what + ", got " + describe(*v));
    if ((k.bound == Bound::Positive && !(x > 0)) || (k.bound == Bound::NonNegative && x < 0))
      l_.fail(v->where, path_of(name), "expected " + what + ", got " + describe(*v));
    out = x;
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
  /// Fails at the key itself (its line), not at its value.
  [[noreturn]] void fail_key(std::string_view name, const std::string& msg) const {
    l_.fail(entry(name).key_where, path_of(name), msg);
  }
  const Loader& loader() const { return l_; }
  const SectionDef& section() const { return sec_; }

  /// Reads this map into `obj` by its section's bindings (SectionDef::read).
  template <typename T>
  void read(T& obj) const {
    sec_.read(*this, &obj);
  }

 private:
  // The schema entry for `name`; asking for a key or a type the table does
  // not declare is a bug in this file, caught the first time it runs.
  const KeyDef& def(std::string_view name, std::optional<Type> type = std::nullopt) const {
    const KeyDef* k = sec_.find(name);
    if (!k || (type && k->type != *type))
      throw InternalError("config loader: " + path_of(name) + " read as a " + (type ? type_name(*type) : "?") +
                          " but the schema says " + (k ? type_name(k->type) : "nothing"));
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

}  // namespace kernbench::config
