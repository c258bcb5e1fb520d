// slot_pool.hpp -- recycled slots for per-transfer and per-chunk state.
//
// Models keep the state of things in flight (chunks, transfers, flows) in a
// vector addressed by a 32-bit slot that rides in event args. Freed slots are
// reused most-recently-freed first (warm in the cache), and a reused slot
// keeps the capacity of the vectors inside it, so a model in steady state
// allocates nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/huge_pages.hpp"

namespace kernbench::sim {

template <typename T>
class SlotPool {
 public:
  /// A free slot (its contents are whatever the last user left: reset them).
  std::uint32_t acquire() {
    if (!free_.empty()) {
      const std::uint32_t s = free_.back();
      free_.pop_back();
      return s;
    }
    items_.emplace_back();
    return static_cast<std::uint32_t>(items_.size() - 1);
  }
  void release(std::uint64_t slot) { free_.push_back(static_cast<std::uint32_t>(slot)); }

  T& operator[](std::uint64_t slot) { return items_[slot]; }
  const T& operator[](std::uint64_t slot) const { return items_[slot]; }
  /// Slots ever created (the high-water mark of things in flight).
  std::size_t capacity() const { return items_.size(); }
  std::size_t in_use() const { return items_.size() - free_.size(); }

 private:
  HugeVector<T> items_;  // at scale, MBs touched at random: huge pages
  std::vector<std::uint32_t> free_;
};

}  // namespace kernbench::sim
