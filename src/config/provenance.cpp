// provenance.cpp -- see provenance.hpp.
#include "config/provenance.hpp"

#include <memory>
#include <string_view>

#include "config/text.hpp"

namespace kernbench::config {
namespace {

bool is_kind_key(std::string_view k) { return k == "datasheet" || k == "fitted" || k == "assumed"; }

std::string scalar_text(const Loader& l, const Value& v, const std::string& path, const char* what) {
  if (v.type != Value::Type::Scalar || trim(v.text).empty())
    l.fail(v.where, path, std::string("expected ") + what + ", got " + describe(v));
  return std::string(trim(v.text));
}

// `fitted: {data: FILE, rows: [ROW or GROUP, ...], by: COMMAND}`
void read_fitted(const Loader& l, const Value& v, const std::string& path, Provenance& p) {
  if (v.type != Value::Type::Map)
    l.fail(v.where, path,
           "expected a map {data: FILE, rows: [ROW or GROUP, ...], by: COMMAND} (what the value was fitted on), "
           "got " +
               describe(v));
  for (const Entry& e : v.entries) {
    const std::string at = child_path(path, e.key);
    if (e.key == "data") {
      p.data = scalar_text(l, e.value, at, "the measured-data file the rows are in");
    } else if (e.key == "by") {
      p.text = scalar_text(l, e.value, at, "the command that made the fit");
    } else if (e.key == "rows") {
      const auto one = [&](const Value& item, const std::string& ip) {
        p.rows.push_back(scalar_text(l, item, ip, "a row id or a group name"));
      };
      if (e.value.type == Value::Type::List) {
        for (std::size_t i = 0; i < e.value.items.size(); ++i) one(e.value.items[i], item_path(at, i));
      } else {
        one(e.value, at);
      }
      if (p.rows.empty()) l.fail(e.value.where, at, "expected at least one row id or group name, got an empty list");
    } else {
      l.fail(e.key_where, at, "unknown key in a fitted record (known: data, rows, by)");
    }
  }
  for (const char* need : {"data", "rows", "by"})
    if (!v.find(need))
      l.fail(v.where, path,
             std::string("a fitted record needs `") + need + "` (data, rows and by: which rows of " +
                 "which file, fitted by which command)");
}

void collect(const Loader& l, const Value& v, const std::string& path, std::vector<ProvenanceEntry>& out) {
  if (v.provenance) {
    const Where& w = v.provenance->where;
    out.push_back({path, v.type == Value::Type::Scalar ? v.text : describe(v), w.file >= 0 ? l.file_name(w.file) : "",
                   *v.provenance});
  }
  if (v.type == Value::Type::Map) {
    for (const Entry& e : v.entries) collect(l, e.value, child_path(path, e.key), out);
  } else if (v.type == Value::Type::List) {
    for (std::size_t i = 0; i < v.items.size(); ++i) collect(l, v.items[i], item_path(path, i), out);
  }
}

}  // namespace

const char* to_string(Provenance::Kind kind) {
  switch (kind) {
    case Provenance::Kind::Datasheet: return "datasheet";
    case Provenance::Kind::Fitted: return "fitted";
    case Provenance::Kind::Assumed: return "assumed";
  }
  return "?";
}

void unwrap_provenance(const Loader& l, Value& v, const std::string& path) {
  if (v.type != Value::Type::Map) return;
  const Entry* kind = nullptr;
  for (const Entry& e : v.entries)
    if (is_kind_key(e.key)) {
      if (kind)
        l.fail(e.key_where, child_path(path, e.key),
               "a value has one provenance: " + kind->key + " is given already (line " +
                   std::to_string(kind->key_where.line) + ")");
      kind = &e;
    }
  if (!kind) return;  // an ordinary map
  const Value* value = v.find("value");
  if (!value)
    l.fail(v.where, path,
           "a provenance record (" + kind->key + ") sits beside a value: expected {value: V, " + kind->key +
               ": ...}, found no `value`");
  auto p = std::make_shared<Provenance>();
  p->where = v.where;
  for (const Entry& e : v.entries) {
    const std::string at = child_path(path, e.key);
    if (e.key == "value") continue;
    if (e.key == "note") {
      p->note = scalar_text(l, e.value, at, "a note (text)");
    } else if (e.key == "datasheet") {
      p->kind = Provenance::Kind::Datasheet;
      p->text = scalar_text(l, e.value, at, "the datasheet or public source the value is read from");
    } else if (e.key == "assumed") {
      p->kind = Provenance::Kind::Assumed;
      p->text = scalar_text(l, e.value, at, "why the value is assumed");
    } else if (e.key == "fitted") {
      p->kind = Provenance::Kind::Fitted;
      read_fitted(l, e.value, at, *p);
    } else {
      l.fail(e.key_where, at,
             std::string("unknown key beside a value's provenance (known: value, ") + kProvenanceKeys + ")");
    }
  }
  Value inner = *value;
  inner.provenance = std::move(p);
  v = std::move(inner);
}

std::vector<ProvenanceEntry> collect_provenance(const Loader& l, const Value& root) {
  std::vector<ProvenanceEntry> out;
  collect(l, root, "", out);
  return out;
}

}  // namespace kernbench::config
