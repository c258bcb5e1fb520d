// yaml_tree.hpp -- the YAML tree: our own copy of a config file's YAML, with
// includes merged and --set overrides applied, before anything is typed.
//
// Every node (Value) keeps the file and line it came from and the --set that
// made it, so every message can name the right place even after a deep
// merge. This is the only code of the project that includes yaml-cpp
// (yaml_tree.cpp): every YAML::Exception becomes a ConfigError there, so
// typing (reader.hpp) never meets a yaml-cpp node. Anchors and aliases are
// resolved by yaml-cpp while copying (bounded: kMaxNodes).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kernbench::config {

/// One `--set` override: a dotted YAML path (`system.sips.w`,
/// `graph.edges.3.latency` -- list items by index) and a YAML scalar value.
struct Override {
  std::string path;
  std::string value;
};

/// Where a node came from: a file (index into Loader's files, 1-based line,
/// 0 when unknown) and/or an override (index into the overrides; -1: none).
struct Where {
  int file = -1;
  int line = 0;
  int set_by = -1;
};

struct Entry;

/// Our copy of a YAML node.
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

/// "got ..." in messages: "nothing (null)", "\"text\"", "a map", "a list".
std::string describe(const Value& v);
/// "a.b" (or "b" at the top level) and "a[3]".
std::string child_path(const std::string& parent, std::string_view key);
std::string item_path(const std::string& parent, std::size_t i);

/// Reads config files into a Value tree and names places in messages.
class Loader {
 public:
  Loader(std::string source, const std::vector<Override>& overrides)
      : source_(std::move(source)), overrides_(overrides) {}

  const std::string& source() const { return source_; }

  /// Throws the ConfigError "<file>: <path> [(set by --set ...)]: <msg> [(line n)]".
  [[noreturn]] void fail(const Where& w, const std::string& path, const std::string& msg) const;

  /// The top-level file, its includes merged in.
  Value load_root_file(const std::string& path);
  /// YAML text named `name` (messages, relative includes), its includes merged in.
  Value load_text(const std::string& text, const std::string& name);
  /// Applies the overrides, in order, to the merged tree.
  void apply_overrides(Value& root) const;

 private:
  friend struct YamlCopy;
  Value parse_document(const std::string& text, int file);
  Value load_include(const std::filesystem::path& dir, const Value& item, const std::string& path);
  void apply_override(Value& root, int index) const;

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

}  // namespace kernbench::config
