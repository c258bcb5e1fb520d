// huge_pages.hpp -- the big per-run arrays on 2 MiB pages.
//
// At thousands of PEs a packet-model run touches tens of MB of state in
// no particular order (lanes, chunk records, the event heap). On 4 KiB
// pages nearly every such access also misses the TLB, and the page walk
// costs as much as the cache miss. HugePageAllocator gives an array of
// 2 MiB or more its own 2 MiB-aligned block and asks the kernel for
// transparent huge pages there (madvise(MADV_HUGEPAGE): advice only -- with
// THP off, or off Linux, the block simply keeps small pages). Smaller
// arrays come from operator new as usual.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kernbench::sim {

inline constexpr std::size_t kHugePage = std::size_t{2} << 20;

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) return static_cast<T*>(::operator new(bytes, std::align_val_t{alignof(T)}));
    const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (p == nullptr) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
    ::madvise(p, rounded, MADV_HUGEPAGE);  // advice: a refusal leaves small pages
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < kHugePage) {
      ::operator delete(p, std::align_val_t{alignof(T)});
    } else {
      std::free(p);
    }
  }
  friend bool operator==(const HugePageAllocator&, const HugePageAllocator&) { return true; }
};

/// A std::vector whose storage goes on huge pages once it is 2 MiB or more.
template <typename T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace kernbench::sim
