// yaml_tree.hpp -- the YAML tree: our own copy of a config file's YAML, with
// includes merged and --set overrides applied, before anything is typed.
//
// Every node (Value) keeps the file and line it came from and the --set that
// made it, so every message can name the right place even after a deep
// merge. This is the only code of the project that includes yaml-cpp
// (yaml_tree.cpp): every YAML::Exception becomes a ConfigError there, so
// typing (reader.hpp) never meets a yaml-cpp node. Anchors and aliases are
// resolved by yaml-cpp and expanded while copying.
//
// Every resource a file can make the loader spend is bounded before it is
// spent, and each limit is named in its message with the file, the line and
// the YAML path: the bytes read per file (kMaxFileBytes; devices, pipes and
// folders are refused before reading), the nesting depth (kMaxDepth; an alias
// to its own anchor is refused as recursive), the nodes and the scalar bytes
// after alias expansion (kMaxNodes, kMaxTreeBytes) and the length of a key
// (kMaxKeyBytes).
//
// Includes are confined: an include must resolve (symlinks followed) inside
// the top-level file's folder tree or one of the folders the caller allows
// (`include_dirs`: the packaged configs, --include-dir,
// KERNBENCH_INCLUDE_PATH). A refused include is named by its path only; the
// loader never reads it, so no message can quote it.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kernbench::config {

/// Bytes a config file (top-level or included) may hold.
inline constexpr std::size_t kMaxFileBytes = std::size_t{16} << 20;
/// Levels of maps and lists a file may nest (real configs use fewer than 10).
inline constexpr std::size_t kMaxDepth = 100;
/// YAML nodes after alias expansion (guards against alias bombs).
inline constexpr std::size_t kMaxNodes = 1'000'000;
/// Bytes of scalars and keys after alias expansion: four times the largest
/// file, so only aliases can reach it.
inline constexpr std::size_t kMaxTreeBytes = std::size_t{64} << 20;
/// Bytes of one map key (keys are names; yaml-cpp refuses implicit keys past 1024).
inline constexpr std::size_t kMaxKeyBytes = 256;

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
struct Provenance;  // config/provenance.hpp

/// Our copy of a YAML node.
struct Value {
  enum class Type { Null, Scalar, Map, List };
  Type type = Type::Null;
  std::string text;            ///< Scalar
  std::vector<Entry> entries;  ///< Map, in file order
  std::vector<Value> items;    ///< List
  Where where;
  /// What the value rests on, when its file declared it beside the value ({value: V, fitted: ...}:
  /// config/provenance.hpp); it travels with the value through merges and is dropped when a file or a
  /// --set replaces the value.
  std::shared_ptr<const Provenance> provenance;

  Value* find(std::string_view key);
  const Value* find(std::string_view key) const { return const_cast<Value*>(this)->find(key); }
};

struct Entry {
  std::string key;
  Where key_where;
  Value value;
};

/// Deep merge: maps merge key by key (top's keys win, base's order is kept); anything else is replaced by top.
void merge_values(Value& base, Value&& top);

/// "got ..." in messages: "nothing (null)", "\"text\"", "a map", "a list".
std::string describe(const Value& v);
/// "a.b" (or "b" at the top level) and "a[3]".
std::string child_path(const std::string& parent, std::string_view key);
std::string item_path(const std::string& parent, std::size_t i);

/// Reads config files into a Value tree and names places in messages.
class Loader {
 public:
  /// `include_dirs`: folders includes may read besides the top-level file's
  /// folder tree (those that do not exist are skipped).
  Loader(std::string source, const std::vector<Override>& overrides, std::vector<std::string> include_dirs = {})
      : source_(std::move(source)), overrides_(overrides), include_dirs_(std::move(include_dirs)) {}

  const std::string& source() const { return source_; }
  /// The file a Where::file indexes.
  const std::string& file_name(int index) const { return files_.at(static_cast<std::size_t>(index)); }

  /// Throws the ConfigError "<file>: <path> [(set by --set ...)]: <msg> [(line n)]".
  [[noreturn]] void fail(const Where& w, const std::string& path, const std::string& msg) const;

  /// The top-level file, its includes merged in.
  Value load_root_file(const std::string& path);
  /// YAML text named `name` (messages, relative includes), its includes merged in.
  Value load_text(const std::string& text, const std::string& name);
  /// Applies the overrides, in order, to the merged tree.
  void apply_overrides(Value& root) const;
  /// The file a key names (`cluster.box`), its includes merged in, resolved and confined as an include is:
  /// relative to the folder of the file the key was written in (the top-level file's for a --set). A bare
  /// name (no '/', not ending in .yaml) is a preset: <folder>/<name>.yaml, else machines/<name>.yaml or
  /// <name>.yaml under each include dir, the first that exists.
  Value load_named_file(const Value& item, const std::string& path);

 private:
  friend struct YamlCopy;
  Value parse_document(const std::string& text, int file);
  Value load_include(const std::filesystem::path& dir, const Value& item, const std::string& path);
  void set_roots(const std::string& top);
  bool allowed(const std::filesystem::path& canonical) const;
  void apply_override(Value& root, int index) const;

  struct Loading {
    std::string canonical;
    std::string name;
  };

  std::string source_;
  const std::vector<Override>& overrides_;
  std::vector<std::string> files_;  ///< Where::file indexes this
  std::vector<Loading> stack_;      ///< files being loaded, outermost first (cycle check)
  std::vector<std::string> include_dirs_;
  std::vector<std::filesystem::path> roots_;  ///< where includes may resolve (canonical)
  std::size_t node_count_ = 0;
  std::size_t tree_bytes_ = 0;
};

}  // namespace kernbench::config
