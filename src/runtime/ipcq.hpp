// ipcq.hpp (private to src/runtime) -- the IPCQ state of a run: per
// (sender, receiver) pair a queue of slot credits, and per (receiver,
// sender, key) the message a send and its recv share. ipcq.cpp runs the two
// sides (Executor::Impl::send / recv / segment_arrived): a send takes one
// slot credit per slot-sized segment and starts its transfer (it blocks
// while every slot is taken); a recv takes the segments in order, pays each
// slot read (or a reduction into its buffer), then gives the credit back.
// Each segment's slot life (SlotLife) is kept for the critical path: a wait
// for a slot or for a segment is blamed on what held it (blame.cpp).
#pragma once

#include <coroutine>
#include <cstdint>
#include <string>

#include "runtime/program.hpp"
#include "sim/server.hpp"

namespace kernbench::runtime {

// The IPCQ slots at PE `dst` for sender `src`: a counting credit, taken by
// the sender per segment and given back by the receiver's recv.
struct SlotQueue {
  SlotQueue(sim::Simulation& sim, const std::string& name, int slots) : credits(sim, name, slots) {}
  sim::Server credits;
  // On a GPU (NCCL's buffers): where this queue's buffer starts and the slot its next segment fills. NCCL gives
  // each channel and peer a buffer of its own, filled step by step as a ring over its slots, so two queues'
  // segments do not share addresses (which pick the lanes of a multi-connection link, and ECMP's hash).
  std::uint64_t base = 0;
  std::uint32_t next = 0;
};

// One segment's use of a slot, for the critical path (blame.cpp): when it
// entered the fabric, arrived, was taken and freed by the recv, and when its
// credit was usable by the sender again. The phases tile [inject, back).
struct SlotLife {
  Time inject = -1, arrive = -1, take = -1, freed = -1, back = -1;
  Time wait_from = -1;        // the sender waited for a credit from here until inject (-1: no wait)
  std::int32_t credit = -1;   // the slot life whose returned credit it then took
  std::uint32_t message = 0;  // its message (Executor::Impl::messages)
};

// One send/recv pair in flight, matched by (dst, src, key).
struct Message {
  std::uint32_t send = kNone;  // run-graph node of the send (kNone: not started)
  std::uint32_t recv = kNone;  // ... of the recv, once it waits
  std::uint32_t segments = 0;  // known when the send starts
  std::uint32_t arrived = 0;
  std::uint32_t taken = 0;  // slots the recv has freed
  Bytes bytes = 0;
  Bytes slot = 0;  // bytes per segment (the send's)
  SlotQueue* queue = nullptr;
  std::coroutine_handle<> receiver;  // the recv, waiting for segment `want`
  std::uint32_t want = 0;
  std::uint32_t life0 = 0;         // segment k's slot life is life0 + k (Executor::Impl::lives)
  std::coroutine_handle<> sender;  // the send, waiting for the last arrival
  static constexpr std::uint32_t kNone = 0xffffffffU;
};

// A message's key in the run's index: (receiver, sender, key).
struct MessageKey {
  NodeId to, from;
  std::int64_t key;
  bool operator==(const MessageKey&) const = default;
};

}  // namespace kernbench::runtime
