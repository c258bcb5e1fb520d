// dma.cpp -- read = request out + data back; write = data out.
#include "topology/fabric/dma.hpp"

namespace kernbench::topology {
namespace {

Breakdown operator+(const Breakdown& a, const Breakdown& b) {
  return {a.overhead + b.overhead, a.transmission + b.transmission, a.drain + b.drain, a.queuing + b.queuing};
}

void log_op(Fabric& fabric, const char* kind, NodeId issuer, NodeId memory, const DmaResult& r, std::int32_t tag) {
  sim::OpLog& log = fabric.sim().op_log();
  log.record(sim::OpRecord{static_cast<std::int64_t>(log.size()), static_cast<std::int32_t>(issuer),
                           static_cast<std::int32_t>(memory), log.kind_code(kind), tag, r.issue, r.issue, r.end,
                           r.bytes, 0.0});
}

}  // namespace

sim::Task<DmaResult> dma_move(Fabric& fabric, NodeId agent, NodeId src, NodeId dst, Bytes bytes, std::uint64_t address,
                              std::int32_t tag) {
  DmaResult r;
  r.issue = fabric.sim().now();
  r.end = r.issue;
  r.bytes = bytes;
  const MoveLegs legs = move_legs(agent, src, dst, bytes, fabric.config().request);
  bool paid = true;  // after a read's request, the source's processing is paid (on the request's arrival)
  for (int i = 0; i < legs.count; ++i) {
    const MoveLegs::Leg& l = legs.leg[i];
    TransferSpec spec{l.src, l.dst, l.bytes, address, tag, static_cast<std::int32_t>(agent)};
    if (!l.request) spec.charge_src_overhead = paid;
    const TransferRecord& t = co_await fabric.transfer(spec);
    if (l.request) {
      r.request_leg = t.id;
      paid = false;
    } else {
      r.data_leg = t.id;
    }
    r.parts = r.parts + t.parts;
    r.end = t.end;
  }
  if (legs.count == 1 && !legs.leg[0].request) r.request_leg = r.data_leg;  // a write: one leg
  co_return r;
}

sim::Task<DmaResult> dma_read(Fabric& fabric, NodeId issuer, NodeId memory, Bytes bytes, std::uint64_t address,
                              std::int32_t tag) {
  DmaResult r = co_await dma_move(fabric, issuer, memory, issuer, bytes, address, tag);
  log_op(fabric, "dma_read", issuer, memory, r, tag);
  co_return r;
}

sim::Task<DmaResult> dma_write(Fabric& fabric, NodeId issuer, NodeId memory, Bytes bytes, std::uint64_t address,
                               std::int32_t tag) {
  DmaResult r = co_await dma_move(fabric, issuer, issuer, memory, bytes, address, tag);
  log_op(fabric, "dma_write", issuer, memory, r, tag);
  co_return r;
}

}  // namespace kernbench::topology
