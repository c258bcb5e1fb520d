// system.cpp -- scheduling work on a machine at absolute times.
#include "topology/system.hpp"

#include "sim/errors.hpp"
#include "sim/process.hpp"

namespace kernbench::topology {
namespace {

sim::Process run_dma(System& system, std::vector<DmaOp>& ops, std::size_t i) {
  sim::Simulation& sim = system.sim();
  co_await sim.delay(ops[i].at - sim.now());
  const DmaOp op = ops[i];
  DmaResult r = op.kind == DmaKind::Read
                    ? co_await dma_read(system.fabric(), op.issuer, op.memory, op.bytes, op.address, op.tag)
                    : co_await dma_write(system.fabric(), op.issuer, op.memory, op.bytes, op.address, op.tag);
  ops[i].result = r;  // re-index: the vector may have grown meanwhile
  ops[i].done = true;
}

}  // namespace

System::System(Config config, std::uint64_t seed)
    : config_(std::move(config)),
      sim_(std::make_unique<sim::Simulation>(seed)),
      machine_(std::make_unique<Machine>(config_)),
      fabric_(make_fabric(*sim_, *machine_, config_.fabric)) {}

void System::check_time(Time at, const char* what) const {
  if (at < sim_->now())
    throw UsageError(std::string(what) + " at t=" + std::to_string(at) + " ps is in the past (now " +
                     std::to_string(sim_->now()) + " ps)");
}

std::int64_t System::transfer(NodeId src, NodeId dst, Bytes bytes, Time at, std::int32_t tag,
                              std::uint64_t address) {
  check_time(at, "transfer");
  if (src >= machine_->num_nodes() || dst >= machine_->num_nodes()) throw UsageError("transfer: node id out of range");
  check_transfer_size(bytes, "transfer " + machine_->node(src).name + " -> " + machine_->node(dst).name);
  const std::int64_t request = next_request_++;
  pending_.push_back(TransferSpec{src, dst, bytes, address, tag, -1, request});
  sim_->schedule(at - sim_->now(), starter_, pending_.size() - 1);
  return request;
}

std::size_t System::dma(DmaKind kind, NodeId issuer, NodeId memory, Bytes bytes, Time at, std::int32_t tag,
                        std::uint64_t address) {
  check_time(at, "dma");
  if (issuer >= machine_->num_nodes() || memory >= machine_->num_nodes()) throw UsageError("dma: node id out of range");
  check_transfer_size(bytes, std::string(kind == DmaKind::Read ? "dma read" : "dma write") + " by " +
                                 machine_->node(issuer).name);
  dma_ops_.push_back(DmaOp{kind, issuer, memory, bytes, at, tag, address, {}, false});
  const std::size_t i = dma_ops_.size() - 1;
  sim_->spawn((kind == DmaKind::Read ? "dma_read#" : "dma_write#") + std::to_string(i), run_dma(*this, dma_ops_, i));
  return i;
}

TrafficGenerator& System::traffic(TrafficSpec spec) {
  generators_.push_back(std::make_unique<TrafficGenerator>(*fabric_, std::move(spec)));
  return *generators_.back();
}

}  // namespace kernbench::topology
