// frame_pool.cpp -- size-class free lists for coroutine frames.
#include "sim/frame_pool.hpp"

#include <array>
#include <new>

namespace kernbench::sim::detail {
namespace {

constexpr std::size_t kGranule = 64;  // size classes are multiples of a cache line
constexpr std::size_t kClasses = 32;  // frames up to 2 KiB are pooled

struct FreeBlock {
  FreeBlock* next;
};

struct Pool {
  std::array<FreeBlock*, kClasses> heads{};
  std::size_t in_use = 0;
  ~Pool() {
    for (FreeBlock*& head : heads) {
      while (head != nullptr) {
        FreeBlock* next = head->next;
        ::operator delete(static_cast<void*>(head));
        head = next;
      }
    }
  }
};

Pool& pool() {
  thread_local Pool p;
  return p;
}

std::size_t class_of(std::size_t bytes) { return (bytes + kGranule - 1) / kGranule - 1; }

}  // namespace

void* frame_alloc(std::size_t bytes) {
  Pool& p = pool();
  p.in_use += bytes;
  const std::size_t c = class_of(bytes);
  if (c >= kClasses) return ::operator new(bytes);
  if (FreeBlock* block = p.heads[c]) {
    p.heads[c] = block->next;
    return block;
  }
  return ::operator new((c + 1) * kGranule);
}

void frame_free(void* ptr, std::size_t bytes) noexcept {
  Pool& p = pool();
  p.in_use -= bytes;
  const std::size_t c = class_of(bytes);
  if (c >= kClasses) {
    ::operator delete(ptr);
    return;
  }
  auto* block = static_cast<FreeBlock*>(ptr);
  block->next = p.heads[c];
  p.heads[c] = block;
}

std::size_t frame_bytes_in_use() noexcept { return pool().in_use; }

}  // namespace kernbench::sim::detail
