// event_queue.hpp -- the pending-event set.
//
// A 4-ary min-heap of Event values in one contiguous vector (shallower than a
// binary heap and friendlier to the cache), plus a FIFO lane for events due
// at the current time (zero-delay wake-ups: server hand-offs, spawned
// processes, channel puts), which skip the heap entirely. The queue is keyed
// by (time, seq), so the lane and the heap merge into one total order.
//
// The sift loops compare (time, seq) as one 128-bit key and pick the least
// child with conditional moves: which child is least is a coin toss the
// branch predictor loses half the time, and those mispredictions were most
// of the queue's cost in a cache-resident heap (PHOLD with 1024 LPs on
// callbacks: 11.1 -> 14.6 M events/s; the packet model on 128 PEs: 0.138 ->
// 0.098 s).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/event.hpp"
#include "sim/huge_pages.hpp"
#include "sim/ring_queue.hpp"

namespace kernbench::sim {

class EventQueue {
 public:
  bool empty() const { return heap_.empty() && now_lane_.empty(); }
  std::size_t size() const { return heap_.size() + now_lane_.size(); }
  /// Most events ever pending at once.
  std::size_t peak_size() const { return peak_; }

  /// Bytes held for pending events (capacity, not size): the memory cost
  /// per pending event that the PHOLD bench reports.
  std::size_t reserved_bytes() const { return heap_.capacity() * sizeof(Event) + now_lane_.capacity() * sizeof(Event); }

  void reserve(std::size_t n) { heap_.reserve(n); }

  /// Adds an event due after the current time.
  void push_heap(const Event& e) {
    std::size_t i = heap_.size();
    heap_.push_back(e);
    Event* h = heap_.data();
    const Key k = key(e);
    while (i > 0) {
      const std::size_t parent = (i - 1) / kArity;
      if (!(k < key(h[parent]))) break;
      h[i] = h[parent];
      i = parent;
    }
    h[i] = e;
    note_size();
  }

  /// Adds an event due at the current time: it goes behind every event
  /// already due now, which is exactly its (time, seq) place.
  void push_now(const Event& e) {
    now_lane_.push_back(e);
    note_size();
  }

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
  void note_size() { peak_ = std::max(peak_, size()); }
  using Key = unsigned __int128;
  // Times are never negative (the clock starts at 0 and delays are >= 0),
  // so the unsigned key orders exactly as (time, seq).
  static Key key(const Event& e) { return (static_cast<Key>(static_cast<std::uint64_t>(e.time)) << 64) | e.seq; }

  Event pop_heap() {
    Event top = heap_.front();
    const Event last = heap_.back();
    heap_.pop_back();
    const std::size_t n = heap_.size();
    if (n == 0) return top;
    Event* h = heap_.data();
    const Key last_key = key(last);
    std::size_t i = 0;
    for (;;) {
      const std::size_t first = kArity * i + 1;
      if (first >= n) break;
      const std::size_t end = first + kArity < n ? first + kArity : n;
      std::size_t best = first;
      Key best_key = key(h[first]);
      for (std::size_t c = first + 1; c < end; ++c) {  // branch-free: cmov
        const Key k = key(h[c]);
        const bool less = k < best_key;
        best = less ? c : best;
        best_key = less ? k : best_key;
      }
      if (!(best_key < last_key)) break;
      h[i] = h[best];
      i = best;
    }
    h[i] = last;
    return top;
  }

  HugeVector<Event> heap_;  // at scale, MBs touched at random: huge pages
  RingQueue<Event> now_lane_;
  std::size_t peak_ = 0;
};

}  // namespace kernbench::sim
