// store.hpp -- a bounded channel between processes.
//
// `co_await store.put(v)` blocks while the store is full; `T v = co_await
// store.get()` blocks while it is empty. A put that finds a getter waiting
// hands the item over directly; a get that frees a slot admits the first
// blocked putter. Waiters are served FIFO and always woken from the event
// loop at the current time.
#pragma once

#include <coroutine>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "sim/errors.hpp"
#include "sim/ring_queue.hpp"
#include "sim/simulation.hpp"

namespace kernbench::sim {

template <typename T>
class Store {
 public:
  static constexpr std::size_t kUnbounded = std::numeric_limits<std::size_t>::max();

  Store(Simulation& sim, std::string name, std::size_t capacity = kUnbounded)
      : sim_(sim), name_(std::move(name)), capacity_(capacity) {
    if (capacity == 0) throw UsageError("store '" + name_ + "': capacity must be >= 1");
  }
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  struct GetAwaiter {
    Store& store;
    std::optional<T> item;
    bool await_ready() {
      if (store.items_.empty()) return false;
      item.emplace(store.take());
      return true;
    }
    void await_suspend(std::coroutine_handle<> h) { store.getters_.push_back(Getter{h, this}); }
    T await_resume() { return std::move(*item); }
  };

  struct PutAwaiter {
    Store& store;
    std::optional<T> item;
    bool await_ready() { return store.try_put_value(item); }
    void await_suspend(std::coroutine_handle<> h) { store.putters_.push_back(Putter{h, this}); }
    void await_resume() const noexcept {}
  };

  /// Awaitable: the next item (waits while empty).
  GetAwaiter get() { return GetAwaiter{*this, std::nullopt}; }
  /// Awaitable: stores `value` (waits while full).
  PutAwaiter put(T value) { return PutAwaiter{*this, std::optional<T>(std::move(value))}; }

  /// Non-blocking put; false (and nothing stored) when full.
  bool try_put(T value) {
    std::optional<T> v(std::move(value));
    return try_put_value(v);
  }
  /// Non-blocking get; nullopt when empty.
  std::optional<T> try_get() {
    if (items_.empty()) return std::nullopt;
    return take();
  }

  std::size_t size() const { return items_.size(); }
  std::size_t capacity() const { return capacity_; }
  std::size_t waiting_getters() const { return getters_.size(); }
  std::size_t waiting_putters() const { return putters_.size(); }
  const std::string& name() const { return name_; }

 private:
  struct Getter {
    std::coroutine_handle<> h;
    GetAwaiter* awaiter;  // lives in the suspended frame until it resumes
  };
  struct Putter {
    std::coroutine_handle<> h;
    PutAwaiter* awaiter;
  };

  // Places *value (consuming it) if possible: into a waiting getter's hands,
  // or into the buffer when it has room.
  bool try_put_value(std::optional<T>& value) {
    if (!getters_.empty()) {
      Getter g = getters_.pop_front();
      g.awaiter->item.emplace(std::move(*value));
      sim_.schedule(0, Target::resume(g.h));
      return true;
    }
    if (items_.size() >= capacity_) return false;
    items_.push_back(std::move(*value));
    return true;
  }

  // Removes the front item and lets the first blocked putter in.
  T take() {
    T item = items_.pop_front();
    if (!putters_.empty()) {
      Putter p = putters_.pop_front();
      items_.push_back(std::move(*p.awaiter->item));
      sim_.schedule(0, Target::resume(p.h));
    }
    return item;
  }

  Simulation& sim_;
  std::string name_;
  std::size_t capacity_;
  RingQueue<T> items_;
  RingQueue<Getter> getters_;
  RingQueue<Putter> putters_;
};

}  // namespace kernbench::sim
