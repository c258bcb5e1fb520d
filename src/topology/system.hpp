// system.hpp -- a machine ready to run: config, graph, simulation, fabric.
//
// The unit that Python drives: build it from a Config, schedule transfers,
// DMA ops and traffic at absolute times, run, read the records. Later layers
// (the runtime's programs) run on the same System.
#pragma once

#include <memory>
#include <vector>

#include "sim/simulation.hpp"
#include "topology/dma.hpp"
#include "topology/fabric.hpp"
#include "topology/machine.hpp"
#include "topology/traffic.hpp"

namespace kernbench::topology {

enum class DmaKind { Read, Write };

/// One DMA op as scheduled and, once done, as it happened.
struct DmaOp {
  DmaKind kind = DmaKind::Read;
  NodeId issuer = 0;
  NodeId memory = 0;
  Bytes bytes = 0;
  Time at = 0;
  std::int32_t tag = 0;
  std::uint64_t address = 0;
  DmaResult result;
  bool done = false;
};

class System {
 public:
  explicit System(Config config, std::uint64_t seed = 1);

  const Config& config() const { return config_; }
  const Machine& machine() const { return *machine_; }
  sim::Simulation& sim() { return *sim_; }
  Fabric& fabric() { return *fabric_; }
  const Fabric& fabric() const { return *fabric_; }

  /// Starts a transfer at absolute time `at` (>= now); returns its request
  /// id (the `request` column of its record).
  std::int64_t transfer(NodeId src, NodeId dst, Bytes bytes, Time at, std::int32_t tag = 0,
                        std::uint64_t address = 0);
  /// Schedules a DMA op at `at`; returns its index in dma_ops().
  std::size_t dma(DmaKind kind, NodeId issuer, NodeId memory, Bytes bytes, Time at, std::int32_t tag = 0,
                  std::uint64_t address = 0);
  /// Starts a traffic generator now (its spec says when it injects).
  TrafficGenerator& traffic(TrafficSpec spec);

  void run() { sim_->run(); }
  void run(Time until) { sim_->run(until); }

  const std::vector<DmaOp>& dma_ops() const { return dma_ops_; }
  const std::vector<std::unique_ptr<TrafficGenerator>>& generators() const { return generators_; }

 private:
  void start_pending(std::uint64_t i) { fabric_->start(pending_[i]); }
  void check_time(Time at, const char* what) const;

  Config config_;
  std::unique_ptr<sim::Simulation> sim_;
  std::unique_ptr<Machine> machine_;
  std::unique_ptr<Fabric> fabric_;
  std::vector<TransferSpec> pending_;
  std::int64_t next_request_ = 0;
  std::vector<DmaOp> dma_ops_;
  std::vector<std::unique_ptr<TrafficGenerator>> generators_;
  sim::MemberHandler<System, &System::start_pending> starter_{*this};
};

}  // namespace kernbench::topology
