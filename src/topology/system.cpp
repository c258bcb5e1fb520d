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

void check_dma_nodes(const Machine& m, NodeId issuer, NodeId memory, const std::string& what) {
  const NodeInfo& i = m.node(issuer);
  if (forwards_only(i.kind) || i.kind == NodeKind::HbmCtrl || i.kind == NodeKind::Memory)
    throw TopologyError(what + ": the issuer " + i.name + " is a " + to_string(i.kind) +
                        ", which has no DMA engine (issue from a PE or another agent)");
  const NodeInfo& mem = m.node(memory);
  if (forwards_only(mem.kind))
    throw TopologyError(what + ": the memory " + mem.name + " is a " + to_string(mem.kind) +
                        ", which holds no memory (read or write an HBM controller, a memory or a PE)");
}

System::System(Config config, std::uint64_t seed)
    : config_(std::move(config)),
      sim_(std::make_unique<sim::Simulation>(seed)),
      machine_(std::make_unique<Machine>(config_)),
      fabric_(make_fabric(*sim_, *machine_, config_.fabric)) {}

System::Use::Use(System& system) : system_(system) {
  if (system.owner_.load() == std::this_thread::get_id())
    throw UsageError("System: re-entrant use -- this thread is already running this System");
  system.mutex_.lock();
  system.owner_.store(std::this_thread::get_id());
}

System::Use::~Use() {
  system_.owner_.store(std::thread::id{});
  system_.mutex_.unlock();
}

void System::Use::failed(const std::string& why) {
  if (system_.failure_.empty()) system_.failure_ = why;
}

void System::check_usable() const {
  if (!failure_.empty())
    throw UsageError("this System can no longer be used: an earlier run failed part-way (" + failure_ +
                     "); build a new System");
}

void System::check_time(Time at, const char* what) const {
  check_usable();
  if (at > sim::kMaxTime)
    throw UsageError(std::string(what) + " at t=" + std::to_string(at) +
                     " ps is past the simulator's time range (2^62 ps, ~53 days)");
  if (at < sim_->now())
    throw UsageError(std::string(what) + " at t=" + std::to_string(at) + " ps is in the past (now " +
                     std::to_string(sim_->now()) + " ps)");
}

std::int64_t System::transfer(NodeId src, NodeId dst, Bytes bytes, Time at, std::int32_t tag, std::uint64_t address) {
  check_time(at, "transfer");
  if (src >= machine_->num_nodes() || dst >= machine_->num_nodes()) throw UsageError("transfer: node id out of range");
  check_transfer_size(bytes, "transfer " + machine_->node(src).name + " -> " + machine_->node(dst).name);
  fabric_->check_transfer_time(TransferSpec{src, dst, bytes, address, tag, -1, -1},
                               at);  // up front: nothing scheduled yet
  const std::int64_t request = next_request_++;
  pending_.push_back(TransferSpec{src, dst, bytes, address, tag, -1, request});
  sim_->schedule(at - sim_->now(), starter_, pending_.size() - 1);
  return request;
}

std::size_t System::dma(DmaKind kind, NodeId issuer, NodeId memory, Bytes bytes, Time at, std::int32_t tag,
                        std::uint64_t address) {
  check_time(at, "dma");
  if (issuer >= machine_->num_nodes() || memory >= machine_->num_nodes()) throw UsageError("dma: node id out of range");
  const std::string what =
      std::string(kind == DmaKind::Read ? "dma read" : "dma write") + " by " + machine_->node(issuer).name;
  check_transfer_size(bytes, what);
  check_dma_nodes(*machine_, issuer, memory, what);
  // Both legs, up front (the data leg of a read from when its request could
  // arrive at the earliest: checking it from `at` is the safe side).
  if (kind == DmaKind::Read) {
    fabric_->check_transfer_time(TransferSpec{issuer, memory, fabric_->config().request}, at);
    TransferSpec back{memory, issuer, bytes};
    back.charge_src_overhead = false;
    fabric_->check_transfer_time(back, at);
  } else {
    fabric_->check_transfer_time(TransferSpec{issuer, memory, bytes}, at);
  }
  dma_ops_.push_back(DmaOp{kind, issuer, memory, bytes, at, tag, address, {}, false});
  const std::size_t i = dma_ops_.size() - 1;
  sim_->spawn((kind == DmaKind::Read ? "dma_read#" : "dma_write#") + std::to_string(i), run_dma(*this, dma_ops_, i));
  return i;
}

TrafficGenerator& System::traffic(TrafficSpec spec) {
  check_usable();
  generators_.push_back(std::make_unique<TrafficGenerator>(*fabric_, std::move(spec)));
  return *generators_.back();
}

}  // namespace kernbench::topology
