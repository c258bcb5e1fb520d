// schema.cpp -- see schema.hpp: the table's types, the generic section
// reader and the JSON export.
#include "config/schema.hpp"

#include <algorithm>
#include <limits>

#include "config/reader.hpp"

namespace kernbench::config {

using json = nlohmann::ordered_json;  // keeps the table's key order in the export

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
    case Type::Real: return "number";
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

std::string bound_text(Bound b) { return b == Bound::Positive ? " > 0" : b == Bound::NonNegative ? " >= 0" : ""; }

// A key named <...> (links.<class>) is a placeholder: it stands for names an owner reads itself, so it matches
// no key of a file (find) and is no key to suggest (names); the schema JSON lists it.
namespace {

bool is_placeholder(std::string_view name) { return !name.empty() && name.front() == '<'; }

const KeyDef* lookup(const std::vector<KeyDef>& keys, std::string_view name) {
  for (const auto& k : keys)
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace

const KeyDef* SectionDef::find(std::string_view name) const {
  return is_placeholder(name) ? nullptr : lookup(keys, name);
}

std::vector<const KeyDef*> SectionDef::listed() const {
  std::vector<const KeyDef*> out;
  if (listing.empty()) {
    for (const auto& k : keys) out.push_back(&k);
  } else {
    for (const auto& name : listing) out.push_back(lookup(keys, name));
  }
  return out;
}

std::vector<std::string> SectionDef::names() const {
  std::vector<std::string> out;
  for (const KeyDef* k : listed())
    if (!is_placeholder(k->name)) out.push_back(k->name);
  return out;
}

void SectionDef::list_keys(std::vector<std::string> order) {
  bool ok = order.size() == keys.size();
  for (std::size_t i = 0; ok && i < order.size(); ++i)
    ok = lookup(keys, order[i]) && std::count(order.begin(), order.end(), order[i]) == 1;
  if (!ok) throw InternalError("config schema: list_keys needs every key of the section exactly once");
  listing = std::move(order);
}

void SectionDef::read(const MapReader& r, void* obj) const {
  std::size_t h = 0;
  const auto hooks_upto = [&](std::size_t n) {
    for (; h < hooks.size() && hooks[h].first <= n; ++h) hooks[h].second(r, obj);
  };
  hooks_upto(0);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].read) keys[i].read(r, obj);
    hooks_upto(i + 1);
  }
  hooks_upto(std::numeric_limits<std::size_t>::max());
}

Schema::Schema() { sections_.push_back(std::make_unique<SectionDef>()); }

SectionDef& Schema::add_section() { return *sections_.emplace_back(std::make_unique<SectionDef>()); }

namespace {

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
  for (const KeyDef* k : s.listed()) keys[k->name] = key_json(*k);
  j["keys"] = std::move(keys);
  return j;
}

}  // namespace

std::string schema_json(const Schema& schema) {
  json j;
  j["schema"] = "kernbench machine config";
  j["version"] = 1;
  // Keyed like the key types ("bytes", not the messages' "size").
  json units;
  for (Type t : {Type::Time, Type::Bytes, Type::Bandwidth}) units[type_name(t)] = unit_names(*quantity_kind(t));
  units["frequency"] = unit_names(kFrequency);
  for (Type t : {Type::EnergyPerByte, Type::EnergyPerFlop, Type::Power})
    units[type_name(t)] = unit_names(*quantity_kind(t));
  j["units"] = std::move(units);
  const json root = section_json(schema.root());  // named: items() of a temporary would dangle
  for (const auto& [name, v] : root.items()) j[name] = v;
  return j.dump(2);
}

}  // namespace kernbench::config
