// yaml_tree.cpp -- see yaml_tree.hpp. The only file that includes yaml-cpp.
#include "config/yaml_tree.hpp"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <unordered_map>

#include "config/provenance.hpp"
#include "config/text.hpp"

namespace kernbench::config {
namespace {

namespace fs = std::filesystem;

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

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Reads a config file, refusing what is not a plain file or is too large
// before reading a byte of it (`include: /dev/zero` must not read forever).
std::string read_file(const std::string& path, std::string& text) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) return "cannot read the config file: no such file";
  if (ec) return "cannot read the config file (permission denied?)";
  if (fs::is_directory(st)) return "cannot read the config file: it is a directory";
  if (!fs::is_regular_file(st)) return "cannot read the config file: not a regular file (a device, a pipe or a socket)";
  const std::uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > kMaxFileBytes)
    return "cannot read the config file: it holds " + std::to_string(size) + " bytes, more than the " +
           mib(kMaxFileBytes) + " a config file may hold";
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot read the config file (permission denied?)";
  text.clear();
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxFileBytes)  // it grew while we read it
      return "cannot read the config file: it holds more than the " + mib(kMaxFileBytes) + " a config file may hold";
  }
  if (in.bad()) return "cannot read the config file: read error";
  return "";
}

// yaml-cpp refuses an implicit key longer than 1024 characters with
// "illegal map value" at the ':' after it. The length of the key that ends
// at `pos`: back to the line's start or a flow indicator, indentation and
// block indicators skipped (0 when there is nothing to measure).
std::size_t key_length_before(const std::string& text, int pos) {
  if (pos <= 0 || static_cast<std::size_t>(pos) > text.size()) return 0;
  const auto end = static_cast<std::size_t>(pos);
  const std::size_t stop = text.find_last_of("\n{[,", end - 1);
  std::size_t start = stop == std::string::npos ? 0 : stop + 1;
  while (start < end && (text[start] == ' ' || text[start] == '-' || text[start] == '?')) ++start;
  return end - start;
}

constexpr std::size_t kYamlCppKeyLimit = 1024;

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

template <typename F>
void for_each_include(const Loader& l, const Value& includes, F&& f) {
  const auto one = [&](const Value& item, const std::string& path) {
    if (item.type != Value::Type::Scalar || trim(item.text).empty())
      l.fail(item.where, path, "expected a file name, got " + describe(item));
    f(item, path);
  };
  if (includes.type == Value::Type::List) {
    for (std::size_t i = 0; i < includes.items.size(); ++i) one(includes.items[i], item_path("include", i));
  } else if (includes.type == Value::Type::Scalar) {
    one(includes, "include");
  } else {
    l.fail(includes.where, "include", "expected a file name or a list of file names, got " + describe(includes));
  }
}

}  // namespace

void merge_values(Value& base, Value&& top) { merge(base, std::move(top)); }

Value* Value::find(std::string_view key) {
  for (auto& e : entries)
    if (e.key == key) return &e.value;
  return nullptr;
}

/// "got ..." in messages.
std::string describe(const Value& v) {
  switch (v.type) {
    case Value::Type::Null: return "nothing (null)";
    case Value::Type::Scalar: return in_quotes(shortened(v.text));
    case Value::Type::Map: return "a map";
    case Value::Type::List: return "a list";
  }
  return "?";
}

std::string child_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}
std::string item_path(const std::string& parent, std::size_t i) { return parent + "[" + std::to_string(i) + "]"; }

/// Copies yaml-cpp nodes into Values: the only place yaml-cpp nodes are read.
/// Every limit is checked before the memory it guards is allocated.
struct YamlCopy {
  Loader& l;
  std::vector<YAML::Node> open;  ///< the maps and lists being copied, outermost first

  // Nodes are counted and scalar bytes charged as aliases expand them.
  void charge(std::size_t bytes, const Where& w, const std::string& path) {
    if (bytes > kMaxTreeBytes - l.tree_bytes_)
      l.fail(w, path,
             "the config is too large: more than " + mib(kMaxTreeBytes) +
                 " of keys and values once aliases are expanded (the limit; an alias bomb?)");
    l.tree_bytes_ += bytes;
  }

  // Entering a map or list: one level deeper, and never into itself (an
  // alias inside its own anchor: `x: &a [1, *a]` would recurse forever).
  void enter(const YAML::Node& n, const Where& w, int parent_line, const std::string& path) {
    for (const YAML::Node& o : open)
      if (o.is(n))
        l.fail({w.file, parent_line, -1}, path,
               "recursive alias: an alias to an anchor that contains it (the anchored node starts on line " +
                   std::to_string(w.line) + ")");
    if (open.size() >= kMaxDepth)
      l.fail(w, path, "nested deeper than " + std::to_string(kMaxDepth) + " levels of maps and lists, the limit");
    open.push_back(n);
  }

  Value to_value(const YAML::Node& n, int file, int parent_line, const std::string& path) {
    if (++l.node_count_ > kMaxNodes)
      l.fail({file, parent_line, -1}, path,
             "too many YAML nodes (more than " + std::to_string(kMaxNodes) + " once aliases are expanded)");
    Value v;
    try {
      const YAML::Mark m = n.Mark();
      v.where = {file, m.line >= 0 ? m.line + 1 : parent_line, -1};
      switch (n.Type()) {
        case YAML::NodeType::Undefined:
        case YAML::NodeType::Null: break;
        case YAML::NodeType::Scalar:
          charge(n.Scalar().size(), v.where, path);
          v.type = Value::Type::Scalar;
          v.text = n.Scalar();
          break;
        case YAML::NodeType::Sequence:
          enter(n, v.where, parent_line, path);
          v.type = Value::Type::List;
          for (std::size_t i = 0; i < n.size(); ++i)
            v.items.push_back(to_value(n[i], file, v.where.line, item_path(path, i)));
          open.pop_back();
          break;
        case YAML::NodeType::Map: {
          enter(n, v.where, parent_line, path);
          v.type = Value::Type::Map;
          std::unordered_map<std::string, std::size_t> seen;
          for (const auto& kv : n) {
            const YAML::Mark km = kv.first.Mark();
            const Where kw{file, km.line >= 0 ? km.line + 1 : v.where.line, -1};
            if (kv.first.Type() != YAML::NodeType::Scalar)
              l.fail(kw, path,
                     "map keys must be plain names, got a " +
                         std::string(kv.first.IsMap()        ? "map"
                                     : kv.first.IsSequence() ? "list"
                                                             : "null") +
                         " as a key");
            const std::string& key = kv.first.Scalar();
            if (key.size() > kMaxKeyBytes)
              l.fail(kw, path,
                     "map key too long: " + std::to_string(key.size()) + " bytes, more than the " +
                         std::to_string(kMaxKeyBytes) + " a key may have (" + in_quotes(shortened(key)) + ")");
            charge(key.size(), kw, child_path(path, key));
            // A hash of the keys seen so far: a map of n keys costs O(n), not O(n^2).
            if (const auto [it, fresh] = seen.emplace(key, v.entries.size()); !fresh)
              l.fail(
                  kw, child_path(path, key),
                  "duplicate key (first given on line " + std::to_string(v.entries[it->second].key_where.line) + ")");
            v.entries.push_back({key, kw, to_value(kv.second, file, kw.line, child_path(path, key))});
          }
          open.pop_back();
          unwrap_provenance(l, v, path);  // {value: V, fitted: ...} -> V carrying its record
          break;
        }
      }
    } catch (const YAML::Exception& e) {
      Where w = v.where;
      if (e.mark.line >= 0) w.line = e.mark.line + 1;
      l.fail(w, path, std::string("unreadable YAML: ") + e.msg);
    }
    return v;
  }
};

void Loader::fail(const Where& w, const std::string& path, const std::string& msg) const {
  // A path through 100 levels of long keys is shortened to its ends.
  constexpr std::size_t kPathShown = 300;
  const std::string shown_path =
      path.size() <= kPathShown ? path
                                : path.substr(0, kPathShown / 2) + "..." + path.substr(path.size() - kPathShown / 2);
  std::string s = (w.file >= 0 ? files_[static_cast<std::size_t>(w.file)] : source_) + ": " +
                  (path.empty() ? "(top level)" : shown_path);
  if (w.set_by >= 0) {
    const Override& o = overrides_[static_cast<std::size_t>(w.set_by)];
    s += " (set by --set " + o.path + "=" + o.value + ")";
  }
  s += ": " + msg;
  if (w.file >= 0 && w.line > 0) s += " (line " + std::to_string(w.line) + ")";
  throw_config(s);
}

Value Loader::load_root_file(const std::string& path) {
  std::string text;
  if (std::string err = read_file(path, text); !err.empty()) throw_config(path + ": " + err);
  return load_text(text, path);
}

Value Loader::load_text(const std::string& text, const std::string& name) {
  if (stack_.empty()) set_roots(name);
  if (text.size() > kMaxFileBytes)
    throw_config(name + ": the config text holds " + std::to_string(text.size()) + " bytes, more than the " +
                 mib(kMaxFileBytes) + " a config file may hold");
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
    for_each_include(*this, includes,
                     [&](const Value& item, const std::string& path) { merge(merged, load_include(dir, item, path)); });
  }
  merge(merged, std::move(root));
  stack_.pop_back();
  return merged;
}

void Loader::apply_overrides(Value& root) const {
  for (std::size_t i = 0; i < overrides_.size(); ++i) apply_override(root, static_cast<int>(i));
}

Value Loader::parse_document(const std::string& text, int file) {
  const auto syntax_error = [&](const std::string& what, const YAML::Mark& m) {
    std::string msg = files_[static_cast<std::size_t>(file)] + ": " + what;
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
        syntax_error("invalid YAML: unexpected " + (at < text.size() ? in_quotes(text.substr(at, 1)) : "end of input"),
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
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own guard, past our kMaxDepth (its depth counts parser calls, not levels).
    syntax_error("nested deeper than " + std::to_string(kMaxDepth) + " levels of maps and lists, the limit", e.mark);
  } catch (const YAML::Exception& e) {
    if (const std::size_t key = key_length_before(text, e.mark.pos);
        e.msg == YAML::ErrorMsg::MAP_VALUE && key > kYamlCppKeyLimit)
      syntax_error("map key too long: " + std::to_string(key) + " bytes, more than the " +
                       std::to_string(kMaxKeyBytes) + " a key may have",
                   e.mark);
    syntax_error("invalid YAML: " + e.msg, e.mark);
  }
  return YamlCopy{*this, {}}.to_value(doc, file, 1, "");
}

void Loader::set_roots(const std::string& top) {
  // The top-level file's folder (the current folder for text without one),
  // then the allowed folders, all with symlinks resolved.
  roots_.clear();
  std::error_code ec;
  fs::path dir = fs::path(top).parent_path();
  if (dir.empty()) dir = fs::current_path(ec);
  if (fs::path c = fs::weakly_canonical(dir, ec); !ec) roots_.push_back(std::move(c));
  for (const std::string& d : include_dirs_) {
    std::error_code e;
    if (d.empty() || !fs::is_directory(d, e)) continue;
    if (fs::path c = fs::canonical(d, e); !e) roots_.push_back(std::move(c));
  }
}

bool Loader::allowed(const fs::path& canonical) const {
  return std::any_of(roots_.begin(), roots_.end(), [&](const fs::path& root) {
    return std::mismatch(root.begin(), root.end(), canonical.begin(), canonical.end()).first == root.end();
  });
}

Value Loader::load_include(const fs::path& dir, const Value& item, const std::string& path) {
  const std::string name = (dir / std::string(trim(item.text))).lexically_normal().string();
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(name, ec);
  // Confined before anything is read: a refused file is named, never opened.
  if (ec || !allowed(resolved)) {
    std::vector<std::string> roots;
    for (const fs::path& r : roots_) roots.push_back(r.string());
    fail(item.where, path,
         in_quotes(item.text) + " (" + (ec ? name : resolved.string()) +
             ") is outside the folders includes may read (" + join(roots, ", ") +
             "); allow its folder with --include-dir DIR, KERNBENCH_INCLUDE_PATH or include_dirs=");
  }
  const std::string canon = resolved.string();
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

Value Loader::load_named_file(const Value& item, const std::string& path) {
  if (item.type != Value::Type::Scalar || trim(item.text).empty())
    fail(item.where, path, "expected a file name or a preset name, got " + describe(item));
  const std::string text(trim(item.text));
  const std::string& from = item.where.file >= 0 ? files_[static_cast<std::size_t>(item.where.file)] : source_;
  const fs::path dir = fs::path(from).parent_path();
  const bool bare = text.find('/') == std::string::npos && !(text.size() > 5 && text.ends_with(".yaml"));
  std::vector<fs::path> candidates;
  if (bare) {
    candidates.push_back(dir / (text + ".yaml"));
    for (const std::string& d : include_dirs_) {
      if (d.empty()) continue;
      candidates.push_back(fs::path(d) / "machines" / (text + ".yaml"));
      candidates.push_back(fs::path(d) / (text + ".yaml"));
    }
  } else {
    candidates.push_back(dir / text);
  }
  fs::path chosen = candidates.front();
  std::error_code ec;
  for (const fs::path& c : candidates)
    if (fs::is_regular_file(c, ec)) {
      chosen = c;
      break;
    }
  if (bare && !fs::is_regular_file(chosen, ec)) {
    std::vector<std::string> tried;
    for (const fs::path& c : candidates) tried.push_back(c.lexically_normal().string());
    fail(item.where, path, "no file for the preset " + in_quotes(text) + " (looked for " + join(tried, ", ") + ")");
  }
  Value named = item;
  named.text = chosen.lexically_normal().string();
  // The top-level file stays on the stack: its roots are kept and naming it is a cycle.
  stack_.push_back({fs::weakly_canonical(source_, ec).string(), source_});
  Value v = load_include(fs::path(), named, path);
  stack_.pop_back();
  return v;
}

void Loader::apply_override(Value& root, int index) const {
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

}  // namespace kernbench::config
