// event_queue.hpp -- the pending-event set.
//
// A 4-ary min-heap of Event values in one contiguous vector (shallower than a
// binary heap and friendlier to the cache), plus a FIFO lane for events due
// at the current time (zero-delay wake-ups: server hand-offs, spawned
// processes, channel puts), which skip the heap entirely. The queue is keyed
// by (time, seq), so the lane and the heap merge into one total order.
#pragma once

#include <cstddef>
#include <vector>

#include "sim/event.hpp"
#include "sim/huge_pages.hpp"
#include "sim/ring_queue.hpp"

namespace kernbench::sim {

class EventQueue {
 public:
  bool empty() const { return heap_.empty() && now_lane_.empty(); }
  std::size_t size() const { return heap_.size() + now_lane_.size(); }

  /// Bytes held for pending events (capacity, not size): the memory cost
  /// per pending event that the PHOLD bench reports.
  std::size_t reserved_bytes() const {
    return heap_.capacity() * sizeof(Event) + now_lane_.capacity() * sizeof(Event);
  }

  void reserve(std::size_t n) { heap_.reserve(n); }

  /// Adds an event due after the current time.
  void push_heap(const Event& e) {
    std::size_t i = heap_.size();
    heap_.push_back(e);
    Event* h = heap_.data();
    while (i > 0) {
      const std::size_t parent = (i - 1) / kArity;
      if (!(e < h[parent])) break;
      h[i] = h[parent];
      i = parent;
    }
    h[i] = e;
  }

  /// Adds an event due at the current time: it goes behind every event
  /// already due now, which is exactly its (time, seq) place.
  void push_now(const Event& e) { now_lane_.push_back(e); }

  /// The earliest event; the queue must not be empty.
  const Event& top() const {
    if (now_lane_.empty()) return heap_.front();
    if (heap_.empty() || now_lane_.front() < heap_.front()) return now_lane_.front();
    return heap_.front();
  }

  /// Removes and returns the earliest event; the queue must not be empty.
  Event pop() {
    if (!now_lane_.empty() && (heap_.empty() || now_lane_.front() < heap_.front())) {
      return now_lane_.pop_front();
    }
    return pop_heap();
  }

 private:
  static constexpr std::size_t kArity = 4;

  Event pop_heap() {
    Event top = heap_.front();
    const Event last = heap_.back();
    heap_.pop_back();
    const std::size_t n = heap_.size();
    if (n == 0) return top;
    Event* h = heap_.data();
    std::size_t i = 0;
    for (;;) {
      const std::size_t first = kArity * i + 1;
      if (first >= n) break;
      const std::size_t end = first + kArity < n ? first + kArity : n;
      std::size_t best = first;
      for (std::size_t c = first + 1; c < end; ++c) {
        if (h[c] < h[best]) best = c;
      }
      if (!(h[best] < last)) break;
      h[i] = h[best];
      i = best;
    }
    h[i] = last;
    return top;
  }

  HugeVector<Event> heap_;  // at scale, MBs touched at random: huge pages
  RingQueue<Event> now_lane_;
};

}  // namespace kernbench::sim
