// ring_queue.hpp -- a growable FIFO ring buffer.
//
// Used for the zero-delay event lane and for Server / Store wait queues.
// It grows geometrically and never shrinks, so a steady-state simulation
// allocates nothing per event (std::deque would allocate a block every few
// hundred pushes).
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

namespace kernbench::sim {

template <typename T>
class RingQueue {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "RingQueue storage uses plain new[]");

 public:
  RingQueue() = default;
  RingQueue(const RingQueue&) = delete;
  RingQueue& operator=(const RingQueue&) = delete;
  RingQueue(RingQueue&& other) noexcept { swap(other); }
  RingQueue& operator=(RingQueue&& other) noexcept {
    RingQueue tmp(std::move(other));
    swap(tmp);
    return *this;
  }
  ~RingQueue() { clear(); }

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }

  T& front() { return slot(head_); }
  const T& front() const { return slot(head_); }
  T& operator[](std::size_t i) { return slot((head_ + i) & (capacity_ - 1)); }

  void push_back(T value) {
    if (size_ == capacity_) grow();
    new (&slot((head_ + size_) & (capacity_ - 1))) T(std::move(value));
    ++size_;
  }

  T pop_front() {
    T value = std::move(slot(head_));
    slot(head_).~T();
    head_ = (head_ + 1) & (capacity_ - 1);
    --size_;
    return value;
  }

  void clear() {
    while (size_ > 0) pop_front();
  }

  void reserve(std::size_t n) {
    while (capacity_ < n) grow();
  }

 private:
  // Storage is raw bytes so T need not be default-constructible.
  T& slot(std::size_t i) { return reinterpret_cast<T*>(storage_.get())[i]; }
  const T& slot(std::size_t i) const { return reinterpret_cast<const T*>(storage_.get())[i]; }

  void grow() {
    const std::size_t new_capacity = capacity_ == 0 ? 16 : capacity_ * 2;
    std::unique_ptr<std::byte[]> fresh(new std::byte[new_capacity * sizeof(T)]);
    T* dst = reinterpret_cast<T*>(fresh.get());
    for (std::size_t i = 0; i < size_; ++i) {
      T& src = slot((head_ + i) & (capacity_ - 1));
      new (&dst[i]) T(std::move(src));
      src.~T();
    }
    storage_ = std::move(fresh);
    capacity_ = new_capacity;
    head_ = 0;
  }

  void swap(RingQueue& other) noexcept {
    std::swap(storage_, other.storage_);
    std::swap(capacity_, other.capacity_);
    std::swap(head_, other.head_);
    std::swap(size_, other.size_);
  }

  std::unique_ptr<std::byte[]> storage_;
  std::size_t capacity_ = 0;  // always 0 or a power of two
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace kernbench::sim
