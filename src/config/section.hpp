// section.hpp -- typed section builders: each key is named once, bound to
// the struct member it fills.
//
//   config::Section<FabricConfig> f = root.map("fabric", &Config::fabric, "the fabric model");
//   f.doc("How bytes move through the graph.");
//   f.bytes("chunk", &FabricConfig::chunk, "packet model: transfers are cut into chunks").min(Bound::Positive);
//   f.rule([](const MapReader& r, FabricConfig& c) { ... });  // cross-key rules, after the keys above
//
// A binding both documents the key (type, default, bound, doc: the schema
// JSON) and reads it (MapReader's typed getter into the member). Defaults
// come from a default-constructed S, so they are stated once, in the struct.
// Required keys have no default (req()); keys a hook reads are declared with
// key() and read by a rule().
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/quantity.hpp"
#include "config/reader.hpp"
#include "config/schema.hpp"

namespace kernbench::config {

template <typename S>
class Section {
 public:
  Section(Schema& schema, SectionDef& def) : schema_(&schema), def_(&def) {}

  SectionDef& def() const { return *def_; }
  /// A key declared before (to mark a map key required, say).
  KeyDef& key_def(std::string_view name) const { return *def_->find(name); }
  Section& doc(std::string d) { return def_->doc = std::move(d), *this; }
  Section& rules(std::vector<std::string> r) { return def_->rules = std::move(r), *this; }

  /// A key read by a rule (or by the loader), documented only.
  KeyDef& key(std::string name, Type type, std::string doc) {
    KeyDef k;
    k.name = std::move(name);
    k.type = type;
    k.doc = std::move(doc);
    def_->keys.push_back(std::move(k));
    return def_->keys.back();
  }

  KeyDef& add(std::string name, int S::* m, std::string doc) {
    return bind(std::move(name), Type::Int, std::move(doc), defaults().*m,
                [m](const MapReader& r, const std::string& n, S& s) { r.get_int(n, s.*m); });
  }
  KeyDef& add(std::string name, double S::* m, std::string doc) {
    return bind(std::move(name), Type::Real, std::move(doc), defaults().*m,
                [m](const MapReader& r, const std::string& n, S& s) { r.get_real(n, s.*m); });
  }
  KeyDef& add(std::string name, std::string S::* m, std::string doc) {
    return bind(std::move(name), Type::String, std::move(doc), defaults().*m,
                [m](const MapReader& r, const std::string& n, S& s) { r.get_string(n, s.*m); });
  }
  KeyDef& add(std::string name, bool S::* m, std::string doc) {
    return bind(std::move(name), Type::Bool, std::move(doc), defaults().*m,
                [m](const MapReader& r, const std::string& n, S& s) { r.get_bool(n, s.*m); });
  }
  KeyDef& add(std::string name, sim::Bandwidth S::* m, std::string doc) {
    return bind(std::move(name), Type::Bandwidth, std::move(doc), format_bandwidth(defaults().*m),
                [m](const MapReader& r, const std::string& n, S& s) { r.get_bandwidth(n, s.*m); });
  }
  KeyDef& time(std::string name, sim::Time S::* m, std::string doc) {
    return bind(std::move(name), Type::Time, std::move(doc), format_time(defaults().*m),
                [m](const MapReader& r, const std::string& n, S& s) { r.get_time(n, s.*m); });
  }
  KeyDef& bytes(std::string name, sim::Bytes S::* m, std::string doc) {
    return bind(std::move(name), Type::Bytes, std::move(doc), format_bytes(defaults().*m),
                [m](const MapReader& r, const std::string& n, S& s) { r.get_bytes(n, s.*m); });
  }
  KeyDef& frequency(std::string name, std::int64_t S::* m, std::string doc) {
    return bind(std::move(name), Type::Frequency, std::move(doc), format_mhz(defaults().*m),
                [m](const MapReader& r, const std::string& n, S& s) { r.get_frequency(n, s.*m); });
  }
  KeyDef& energy_per_byte(std::string name, std::int64_t S::* m, std::string doc) {
    return bind(std::move(name), Type::EnergyPerByte, std::move(doc), format_energy_per_byte(defaults().*m),
                [m](const MapReader& r, const std::string& n, S& s) { r.get_energy_per_byte(n, s.*m); });
  }
  KeyDef& energy_per_flop(std::string name, std::int64_t S::* m, std::string doc) {
    return bind(std::move(name), Type::EnergyPerFlop, std::move(doc), format_energy_per_flop(defaults().*m),
                [m](const MapReader& r, const std::string& n, S& s) { r.get_energy_per_flop(n, s.*m); });
  }
  KeyDef& power(std::string name, std::int64_t S::* m, std::string doc) {
    return bind(std::move(name), Type::Power, std::move(doc), format_power(defaults().*m),
                [m](const MapReader& r, const std::string& n, S& s) { r.get_power(n, s.*m); });
  }
  /// An enum key: `names` are its values, `parse` the inverse of to_string(E).
  template <typename E>
  KeyDef& choice(std::string name, E S::* m, std::string doc, std::vector<std::string> names,
                 std::optional<E> (*parse)(std::string_view)) {
    return bind(std::move(name), Type::Enum, std::move(doc), std::string(to_string(defaults().*m)),
                [m, parse](const MapReader& r, const std::string& n, S& s) { r.get_enum(n, s.*m, parse); })
        .one_of(std::move(names));
  }

  /// A key naming one entry of a registry (a multipath policy): `names` for the docs and the error, `parse` the
  /// registry's lookup (the name when it is registered).
  KeyDef& choice(std::string name, std::string S::* m, std::string doc, std::vector<std::string> names,
                 std::optional<std::string> (*parse)(std::string_view)) {
    return bind(std::move(name), Type::Enum, std::move(doc), defaults().*m,
                [m, parse](const MapReader& r, const std::string& n, S& s) { r.get_enum(n, s.*m, parse); })
        .one_of(std::move(names));
  }

  /// A sub-section read into `proj(s)` when the key is given (a member
  /// pointer, or a function returning the target: the same struct for keys
  /// grouped in YAML but flat in C++).
  template <typename Sub, typename Proj>
  Section<Sub> map(std::string name, Proj proj, std::string doc) {
    SectionDef& sub = schema_->add_section();
    KeyDef& k = key(name, Type::Map, std::move(doc)).of(sub);
    k.read = [name, proj](const MapReader& r, void* obj) {
      if (!r.get(name)) return;
      r.child(name).read(target(proj, *static_cast<S*>(obj)));
    };
    return Section<Sub>(*schema_, sub);
  }
  /// A sub-section (Map) or item section (List) read by a hook.
  template <typename Sub>
  Section<Sub> section(std::string name, Type type, std::string doc) {
    SectionDef& sub = schema_->add_section();
    key(std::move(name), type, std::move(doc)).of(sub);
    return Section<Sub>(*schema_, sub);
  }

  /// A hand-written step (cross-key rules, derived values), run once the
  /// keys declared so far are read.
  Section& rule(std::function<void(const MapReader&, S&)> f) {
    def_->hooks.emplace_back(def_->keys.size(),
                             [f = std::move(f)](const MapReader& r, void* obj) { f(r, *static_cast<S*>(obj)); });
    return *this;
  }

 private:
  static const S& defaults() {
    static const S d{};
    return d;
  }
  template <typename Proj>
  static auto& target(const Proj& proj, S& s) {
    if constexpr (std::is_member_object_pointer_v<Proj>)
      return s.*proj;
    else
      return proj(s);
  }
  template <typename F>
  KeyDef& bind(std::string name, Type type, std::string doc, nlohmann::ordered_json dflt, F read_member) {
    KeyDef& k = key(name, type, std::move(doc)).dflt(std::move(dflt));
    k.read = [name, read_member](const MapReader& r, void* obj) { read_member(r, name, *static_cast<S*>(obj)); };
    return k;
  }

  Schema* schema_;
  SectionDef* def_;
};

}  // namespace kernbench::config
