// frame_pool.hpp -- recycled memory for coroutine frames.
//
// Every Process and Task coroutine allocates its frame through here. Frames
// are recycled by size class, so a model that keeps calling sub-tasks (one
// per transfer, one per customer) stops touching the system allocator once
// it has warmed up. The pool is per thread: a cache of memory, not state
// that could change a result.
#pragma once

#include <cstddef>

namespace kernbench::sim::detail {

void* frame_alloc(std::size_t bytes);
void frame_free(void* p, std::size_t bytes) noexcept;

/// Bytes currently handed out to live frames on this thread (for the
/// memory-per-pending-event figure of the PHOLD bench).
std::size_t frame_bytes_in_use() noexcept;

}  // namespace kernbench::sim::detail
