// sections.hpp -- the typed sections of a loaded config, by type.
//
// A lower layer's Config cannot name the structs of the layers above it
// (topology cannot include runtime or platform headers), so those sections
// travel here: each owner stores its struct when the file is read and reads
// it back with a typed accessor (runtime::pe_config(cfg), ...).
#pragma once

#include <any>
#include <map>
#include <typeindex>
#include <utility>

namespace kernbench::config {

class Sections {
 public:
  /// The section of type T, or nullptr when the file did not give it.
  template <typename T>
  const T* find() const {
    const auto it = map_.find(std::type_index(typeid(T)));
    return it == map_.end() ? nullptr : std::any_cast<T>(&it->second);
  }
  /// The section of type T, or T's defaults when the file did not give it.
  template <typename T>
  const T& get() const {
    static const T defaults{};
    const T* t = find<T>();
    return t ? *t : defaults;
  }
  /// The section of type T, created with its defaults when absent.
  template <typename T>
  T& get() {
    auto [it, fresh] = map_.try_emplace(std::type_index(typeid(T)), std::in_place_type<T>);
    return *std::any_cast<T>(&it->second);
  }

 private:
  std::map<std::type_index, std::any> map_;
};

}  // namespace kernbench::config
