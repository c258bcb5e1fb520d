// pe_engines.hpp (private to src/runtime) -- one PE's engines for the
// duration of a run: PE_CPU, DMA channels, GEMM, vector, IPCQ send channels
// and the IPCQ receive port, each a FIFO Server with the config's units;
// the PE's scratch in use. A waiter learns who handed it its unit (for the
// critical path) from the Server itself (acquire_handed / release(by)).
#pragma once

#include <coroutine>
#include <cstdint>
#include <string>
#include <utility>

#include "runtime/executor.hpp"
#include "sim/server.hpp"

namespace kernbench::runtime {

struct PeEngines {
  PeEngines(sim::Simulation& sim, const std::string& pe, const runtime::PeConfig& c)
      : cpu(sim, pe + ".pe_cpu", 1),
        dma(sim, pe + ".dma", c.dma_channels),
        gemm(sim, pe + ".gemm", 1),
        vector(sim, pe + ".vector", 1),
        ipcq(sim, pe + ".ipcq", c.ipcq_channels),
        ipcq_rx(sim, pe + ".ipcq_rx", 1),
        launch(sim, pe + ".launch", 1),
        sm(sim, pe + ".sm", 1),
        nccl(sim, pe + ".nccl", kSideStreams) {}
  /// Units of the `nccl` engine: more than a run's concurrent collectives on one GPU, so none waits for it.
  static constexpr int kSideStreams = 1 << 20;
  sim::Server cpu, dma, gemm, vector, ipcq, ipcq_rx, launch, sm, nccl;
  Bytes scratch = 0;
  Bytes peak = 0;
  std::int32_t sm_held = 0;  // a GPU: SMs its collectives' kernels hold (Op::sm_hold)
  int resource[kEngines] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};  // index into RunResult::engines (-1: unused)
  const sim::Server& server(int e) const {
    const sim::Server* s[kEngines] = {&cpu, &dma, &gemm, &vector, &ipcq, &ipcq_rx, &launch, &sm, &nccl};
    return *s[e];
  }
  sim::Server& server(Engine e) { return const_cast<sim::Server&>(std::as_const(*this).server(static_cast<int>(e))); }
  /// Returns a unit of `e`, released by run-graph node `node` (a waiter granted it learns `node`).
  void release(Engine e, std::uint32_t node) { server(e).release(static_cast<std::int32_t>(node)); }
  /// `co_await acquire(e, holder)`: holds a unit of `e`; after a wait, `holder` names the node that handed it over.
  auto acquire(Engine e, std::int32_t& holder) { return server(e).acquire_handed(holder); }
};

}  // namespace kernbench::runtime
