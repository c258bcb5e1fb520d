// schema.hpp -- the schema: sections, keys, types, units, defaults, docs and
// how each key is read, as one table.
//
// A Schema is a value built by its owners: each layer adds its sections
// (topology: system, graph, fabric; runtime: pe, energy; platforms: k200,
// vgpu) through functions like topology::add_config_sections(Schema&), and
// the library's top (kernbench.hpp) composes them. No globals and no static
// self-registration. The unknown-key and required-key checks, the typed
// getters of MapReader (which refuse a key or a type the table does not
// declare), the generic section reader and schema_json() all read this one
// table, so they cannot drift apart. Keys are usually bound to a struct
// member through section.hpp, which also takes their defaults from the
// default-constructed struct.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/quantity.hpp"

namespace kernbench::config {

class MapReader;

enum class Type {
  Int,
  String,
  Enum,
  Bool,
  Time,
  Bytes,
  Bandwidth,
  Frequency,
  Strings,
  Map,
  List,
  EnergyPerByte,
  EnergyPerFlop,
  Power,
  Real
};
enum class Bound { Any, Positive, NonNegative };

/// The name in the schema JSON ("int", "bytes", "energy/byte", ...).
const char* type_name(Type t);
/// The quantity kind of a quantity type, nullptr for the others.
const QuantityKind* quantity_kind(Type t);
/// " > 0", " >= 0" or "".
std::string bound_text(Bound b);

struct SectionDef;

/// Reads one key (or a whole section) of the map `r` into the object at `obj`.
using ReadFn = std::function<void(const MapReader& r, void* obj)>;

/// One key of a section. Built with the chained setters below.
struct KeyDef {
  std::string name;
  Type type = Type::String;
  std::string doc;
  bool required = false;
  nlohmann::ordered_json default_value;  ///< null: none (required, or no meaningful default)
  Bound bound = Bound::Any;
  std::vector<std::string> values;      ///< Enum
  const SectionDef* section = nullptr;  ///< Map: its keys; List: each item's keys
  ReadFn read;                          ///< reads the key into its member; empty: read by a hook

  KeyDef& req() { return required = true, default_value = nullptr, *this; }
  KeyDef& dflt(nlohmann::ordered_json v) { return default_value = std::move(v), *this; }
  KeyDef& no_default() { return default_value = nullptr, *this; }
  KeyDef& min(Bound b) { return bound = b, *this; }
  KeyDef& of(const SectionDef& s) { return section = &s, *this; }
  KeyDef& one_of(std::vector<std::string> v) { return values = std::move(v), *this; }
};

struct SectionDef {
  std::string doc;
  std::vector<std::string> rules;  ///< cross-key rules the table cannot say, for the docs
  std::vector<KeyDef> keys;
  /// Post-read hooks: (n, f) runs f once the first n keys are read.
  std::vector<std::pair<std::size_t, ReadFn>> hooks;
  /// The order keys are listed in (messages, the schema JSON) when it is not
  /// the order they are read in; empty: the same. Set with list_keys().
  std::vector<std::string> listing;

  const KeyDef* find(std::string_view name) const;
  KeyDef* find(std::string_view name) { return const_cast<KeyDef*>(std::as_const(*this).find(name)); }
  /// The keys in listing order.
  std::vector<const KeyDef*> listed() const;
  std::vector<std::string> names() const;
  /// Lists the keys in this order (every key exactly once), reading them as declared.
  void list_keys(std::vector<std::string> order);
  /// Reads the map `r` (checked against this section) into `obj`: the bound
  /// keys in table order, each hook after the keys before it.
  void read(const MapReader& r, void* obj) const;
};

/// Every section of a config, the root first. Sections point at each other,
/// so they live on the heap: moving a Schema keeps them; copying is refused.
class Schema {
 public:
  Schema();
  Schema(Schema&&) = default;
  Schema& operator=(Schema&&) = default;
  Schema(const Schema&) = delete;
  Schema& operator=(const Schema&) = delete;

  SectionDef& root() { return *sections_.front(); }
  const SectionDef& root() const { return *sections_.front(); }
  /// A new, empty section (owned by the schema).
  SectionDef& add_section();

 private:
  std::vector<std::unique_ptr<SectionDef>> sections_;
};

/// The schema as JSON text (what `kernbench schema` prints).
std::string schema_json(const Schema& schema);

}  // namespace kernbench::config
