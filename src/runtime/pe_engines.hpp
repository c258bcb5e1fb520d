// pe_engines.hpp (private to src/runtime) -- one PE's engines for the
// duration of a run: PE_CPU, DMA channels, GEMM, vector, IPCQ send channels
// and the IPCQ receive port, each a FIFO Server with the config's units;
// the PE's scratch in use; and who handed each waiter its unit (for the
// critical path).
#pragma once

#include <coroutine>
#include <cstdint>
#include <string>
#include <utility>

#include "runtime/executor.hpp"
#include "sim/ring_queue.hpp"
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
        sm(sim, pe + ".sm", 1) {}
  sim::Server cpu, dma, gemm, vector, ipcq, ipcq_rx, launch, sm;
  Bytes scratch = 0;
  Bytes peak = 0;
  int resource[kEngines] = {-1, -1, -1, -1, -1, -1, -1, -1};  // index into RunResult::engines, per Engine (-1: unused)
  // Who handed each waiter its unit (for the critical path): a release that
  // finds waiters queues the releasing node; the waiter, once granted, takes
  // it. The engines are FIFO, so hand-overs and grants pair up in order.
  sim::RingQueue<std::int32_t> handoff[kEngines];
  const sim::Server& server(int e) const {
    const sim::Server* s[kEngines] = {&cpu, &dma, &gemm, &vector, &ipcq, &ipcq_rx, &launch, &sm};
    return *s[e];
  }
  sim::Server& server(Engine e) { return const_cast<sim::Server&>(std::as_const(*this).server(static_cast<int>(e))); }
  void release(Engine e, std::uint32_t node) {
    sim::Server& s = server(e);
    if (s.queue_length() > 0) handoff[static_cast<int>(e)].push_back(static_cast<std::int32_t>(node));
    s.release();
  }
  std::int32_t handed_over(Engine e) {
    auto& q = handoff[static_cast<int>(e)];
    const std::int32_t who = q.front();
    q.pop_front();
    return who;
  }
  // `co_await acquire(e, holder)`: holds a unit of `e`; after a wait,
  // `holder` names the node that handed it over.
  template <class Inner>
  struct Tracked {
    Inner inner;
    PeEngines& pe;
    Engine engine;
    std::int32_t& holder;
    bool waited = false;
    bool await_ready() { return inner.await_ready(); }
    void await_suspend(std::coroutine_handle<> h) {
      waited = true;
      inner.await_suspend(h);
    }
    void await_resume() {
      if (waited) holder = pe.handed_over(engine);
    }
  };
  auto acquire(Engine e, std::int32_t& holder) {
    auto inner = server(e).acquire();
    return Tracked<decltype(inner)>{inner, *this, e, holder};
  }
};

}  // namespace kernbench::runtime
