// dma.cpp -- read = request out + data back; write = data out.
#include "topology/dma.hpp"

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

sim::Task<DmaResult> dma_read(Fabric& fabric, NodeId issuer, NodeId memory, Bytes bytes, std::uint64_t address,
                              std::int32_t tag) {
  DmaResult r;
  r.issue = fabric.sim().now();
  r.bytes = bytes;
  const auto agent = static_cast<std::int32_t>(issuer);
  const TransferRecord& req =
      co_await fabric.transfer(TransferSpec{issuer, memory, fabric.config().request, address, tag, agent});
  r.request_leg = req.id;
  const Breakdown req_parts = req.parts;
  TransferSpec back{memory, issuer, bytes, address, tag, agent};
  back.charge_src_overhead = false;  // the access was paid when the request arrived
  const TransferRecord& data = co_await fabric.transfer(back);
  r.data_leg = data.id;
  r.parts = req_parts + data.parts;
  r.end = data.end;
  log_op(fabric, "dma_read", issuer, memory, r, tag);
  co_return r;
}

sim::Task<DmaResult> dma_write(Fabric& fabric, NodeId issuer, NodeId memory, Bytes bytes, std::uint64_t address,
                               std::int32_t tag) {
  DmaResult r;
  r.issue = fabric.sim().now();
  r.bytes = bytes;
  const TransferRecord& data = co_await fabric.transfer(
      TransferSpec{issuer, memory, bytes, address, tag, static_cast<std::int32_t>(issuer)});
  r.data_leg = r.request_leg = data.id;
  r.parts = data.parts;
  r.end = data.end;
  log_op(fabric, "dma_write", issuer, memory, r, tag);
  co_return r;
}

}  // namespace kernbench::topology
