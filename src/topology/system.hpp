// system.hpp -- a machine ready to run: config, graph, simulation, fabric.
//
// The unit that Python drives: build it from a Config, schedule transfers,
// DMA ops and traffic at absolute times, run, read the records. Later layers
// (the runtime's programs) run on the same System.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sim/simulation.hpp"
#include "topology/fabric/dma.hpp"
#include "topology/fabric/fabric.hpp"
#include "topology/graph/machine.hpp"
#include "topology/fabric/traffic.hpp"

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

/// Throws TopologyError if `issuer` cannot issue a DMA (a router, switch,
/// UCIe or PCIe endpoint, HBM controller or memory) or `memory` holds no
/// memory (a router, switch, UCIe or PCIe endpoint); `what` names the op.
void check_dma_nodes(const Machine& m, NodeId issuer, NodeId memory, const std::string& what);

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
  std::int64_t transfer(NodeId src, NodeId dst, Bytes bytes, Time at, std::int32_t tag = 0, std::uint64_t address = 0);
  /// Schedules a DMA op at `at`; returns its index in dma_ops().
  std::size_t dma(DmaKind kind, NodeId issuer, NodeId memory, Bytes bytes, Time at, std::int32_t tag = 0,
                  std::uint64_t address = 0);
  /// Starts a traffic generator now (its spec says when it injects).
  TrafficGenerator& traffic(TrafficSpec spec);

  void run() { sim_->run(); }
  void run(Time until) { sim_->run(until); }

  // ---- one user at a time ---------------------------------------------------
  // A System is not thread-safe: its simulation, fabric and records are
  // plain data. Every entry point that runs or mutates it (the Python
  // bindings: run, transfer, dma, traffic, program and collective runs, the
  // platform and workload runs) holds a Use for the whole call; a second
  // thread waits for the first to finish (calls are serialised, in the
  // order the lock grants them). A Use taken again by the thread that holds
  // one (a re-entrant call from a signal handler) is a UsageError, not a
  // deadlock.
  class Use {
   public:
    explicit Use(System& system);
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    /// Marks the System unusable: an exception escaped a run after events
    /// were processed, so its state is whatever the failed event left.
    void failed(const std::string& why);

   private:
    System& system_;
  };
  /// Throws UsageError if an earlier run failed part-way (the message names
  /// that failure): every later run or schedule on this System is refused,
  /// since its events and records are those of a half-processed event.
  void check_usable() const;
  /// The failure that made this System unusable; empty while it is usable.
  const std::string& failure() const { return failure_; }

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
  std::mutex mutex_;
  std::atomic<std::thread::id> owner_{};
  std::string failure_;
};

}  // namespace kernbench::topology
