// event.hpp -- what sits in the event queue, and what it wakes.
//
// An Event is a 32-byte value: (time, seq) is its order key, `target` says
// what to wake and `arg` is handed to a callback. A target is either a
// coroutine to resume or a Handler to call: two typed cases packed into one
// word (the low bit tells them apart; coroutine frames and Handlers are both
// at least 8-byte aligned). No std::function, no heap allocation per event.
//
// Prefetch: while an event runs, the loop hands the *next* event's target
// and arg to prefetch(), so that a model whose state is far larger than the
// caches can start loading what that event will touch (the arg names it)
// under the current event's work. A hint only: the default does nothing,
// and the next event may still be overtaken by one the current event
// schedules.
#pragma once

#include <cassert>
#include <coroutine>
#include <cstdint>

#include "sim/units.hpp"

namespace kernbench::sim {

/// A plain callback target: the hot-path alternative to a coroutine.
/// `arg` is whatever the scheduler passed (an LP index, a slot, an op id).
class Handler {
 public:
  virtual void on_event(std::uint64_t arg) = 0;
  /// Called one event ahead of on_event(arg) (see above); must not change
  /// any state a run can observe.
  virtual void prefetch(std::uint64_t /*arg*/) {}

 protected:
  ~Handler() = default;
};

/// A Handler that calls a member function of its owner, and optionally a
/// const member as its prefetch:
///   sim::MemberHandler<Fabric, &Fabric::granted, &Fabric::warm> on_grant_{*this};
/// One per event kind, held by value: no std::function, no allocation.
template <typename T, void (T::*Method)(std::uint64_t), void (T::*Prefetch)(std::uint64_t) const = nullptr>
class MemberHandler final : public Handler {
 public:
  explicit MemberHandler(T& owner) : owner_(owner) {}
  void on_event(std::uint64_t arg) override { (owner_.*Method)(arg); }
  void prefetch(std::uint64_t arg) override {
    if constexpr (Prefetch != nullptr) (owner_.*Prefetch)(arg);
  }

 private:
  T& owner_;
};

/// What an event wakes: a suspended coroutine or a Handler.
class Target {
 public:
  Target() = default;
  static Target resume(std::coroutine_handle<> h) {
    const auto bits = reinterpret_cast<std::uintptr_t>(h.address());
    assert((bits & 1U) == 0 && "coroutine frames are at least 2-byte aligned");
    return Target(bits);
  }
  static Target call(Handler& h) { return Target(reinterpret_cast<std::uintptr_t>(&h) | 1U); }

  bool empty() const { return bits_ == 0; }
  bool is_handler() const { return (bits_ & 1U) != 0; }

  /// The handler's prefetch(arg); for a coroutine, its frame's first line.
  void prefetch(std::uint64_t arg) const {
    if (is_handler()) {
      reinterpret_cast<Handler*>(bits_ & ~std::uintptr_t{1})->prefetch(arg);
    } else {
      __builtin_prefetch(reinterpret_cast<const void*>(bits_));
    }
  }

  void fire(std::uint64_t arg) const {
    if (is_handler()) {
      reinterpret_cast<Handler*>(bits_ & ~std::uintptr_t{1})->on_event(arg);
    } else {
      std::coroutine_handle<>::from_address(reinterpret_cast<void*>(bits_)).resume();
    }
  }

 private:
  explicit Target(std::uintptr_t bits) : bits_(bits) {}
  std::uintptr_t bits_ = 0;
};

/// One scheduled wake-up. Ordered by (time, seq); seq grows with every
/// schedule() call, so equal-time events run in the order they were scheduled.
struct Event {
  Time time = 0;
  std::uint64_t seq = 0;
  Target target;
  std::uint64_t arg = 0;

  friend bool operator<(const Event& a, const Event& b) {
    return a.time < b.time || (a.time == b.time && a.seq < b.seq);
  }
};
static_assert(sizeof(Event) == 32, "events are kept small: four words");

}  // namespace kernbench::sim
