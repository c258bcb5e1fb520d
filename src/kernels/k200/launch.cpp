// launch.cpp -- kernel launch (host), dispatch and execution (device), wait.
//
//   launch: host_prep on the calling thread (parallel across threads), then
//           queue_submit holding the die's device command queue (a Server:
//           threads launching to one die contend here, measured);
//   device: one loop per die takes launched kernels in order; per kernel
//           dispatch_base + ncluster x dispatch_per_cluster, then the kernel
//           (elementwise: ceil(elements / ncluster) x cycles per element;
//           GEMM: gemm.cpp), holding the die's clusters;
//   wait:   the calling thread blocks until every kernel launched to the die
//           so far has finished, then pays wait_overhead (noticing it).
// Calibration (k200.yaml says which figure each parameter was fitted to):
// host_prep + queue_submit on the 1-thread launch figure, queue_submit on the
// 4-thread one, the dispatch and elementwise costs on the single-kernel wait
// figures; the per-kernel total of the vendor loop is a prediction.
#include <algorithm>

#include "kernels/k200/k200.hpp"
#include "sim/errors.hpp"

namespace kernbench::kernels::k200 {

int K200::ncluster_of(const KernelSpec& k) const {
  const int nc = k.ncluster == 0 ? cfg_.compute.default_ncluster : k.ncluster;
  if (nc < 1 || nc > cfg_.compute.clusters)
    throw UsageError("K200 kernel: ncluster " + std::to_string(nc) + " is outside 1.." +
                     std::to_string(cfg_.compute.clusters) + " (clusters per die)");
  return nc;
}

Time K200::kernel_time(const KernelSpec& k) const {
  const int nc = ncluster_of(k);
  const std::int64_t per_cluster = (k.elements + nc - 1) / nc;
  return per_cluster * cfg_.compute.elementwise_element_time;
}

sim::Task<void> K200::launch_task(int thread, DieRef ref, KernelSpec kernel) {
  sim::Simulation& sim = system_.sim();
  Die& d = die(ref);
  (void)ncluster_of(kernel);  // a bad ncluster fails at launch, on the host, as the runtime does
  if (kernel.kind == KernelSpec::Kind::Gemm) (void)plan_gemm(kernel);
  const Time t0 = sim.now();
  if (cfg_.launch.host_prep > 0) co_await sim.delay(cfg_.launch.host_prep);
  co_await d.queue->acquire();
  const Time s = sim.now();
  if (cfg_.launch.queue_submit > 0) co_await sim.delay(cfg_.launch.queue_submit);
  d.queue->release();
  record("launch", d.res_queue, kernel.tag, t0, s, sim.now());
  (void)thread;
  ++d.launched;
  (void)d.pending->try_put(kernel);
  ensure_device(d);
}

void K200::ensure_device(Die& d) {
  if (d.device_running) return;
  d.device_running = true;
  system_.sim().spawn("k200.device." + d.compute->name(), device_loop(d));
}

sim::Process K200::device_loop(Die& d) {
  sim::Simulation& sim = system_.sim();
  while (auto k = d.pending->try_get()) {
    co_await d.compute->acquire();
    const int nc = ncluster_of(*k);
    const Time t0 = sim.now();
    co_await sim.delay(cfg_.launch.dispatch_base + nc * cfg_.launch.dispatch_per_cluster);
    record("dispatch", d.res_compute, k->tag, t0, t0, sim.now());
    co_await run_kernel(d, *k);
    d.compute->release();
    ++d.finished;
    // Wake the waits whose kernels are all done.
    auto& w = d.waiters;
    for (std::size_t i = 0; i < w.size();) {
      if (w[i].first <= d.finished) {
        w[i].second->fire();
        w.erase(w.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  d.device_running = false;
}

sim::Task<void> K200::run_kernel(Die& d, const KernelSpec& k) {
  sim::Simulation& sim = system_.sim();
  if (k.kind == KernelSpec::Kind::Gemm) {
    co_await run_gemm(d, k);
    co_return;
  }
  const Time t0 = sim.now();
  co_await sim.delay(kernel_time(k));
  record("kernel", d.res_compute, k.tag, t0, t0, sim.now(), 0, static_cast<double>(k.elements));
}

void K200::check(const KernelSpec& kernel, DieRef ref) {
  (void)die(ref);
  (void)ncluster_of(kernel);
  if (kernel.kind == KernelSpec::Kind::Gemm) (void)plan_gemm(kernel);
  if (kernel.kind == KernelSpec::Kind::Elementwise && kernel.elements <= 0)
    throw UsageError("K200 elementwise kernel: elements must be > 0, got " + std::to_string(kernel.elements));
}

sim::Task<void> K200::wait_task(int thread, DieRef ref, std::int32_t tag) {
  sim::Simulation& sim = system_.sim();
  Die& d = die(ref);
  (void)thread;
  const Time t0 = sim.now();
  if (d.finished < d.launched) {
    sim::Trigger done(sim);
    d.waiters.emplace_back(d.launched, &done);
    co_await done.wait();
  }
  if (cfg_.launch.wait_overhead > 0) co_await sim.delay(cfg_.launch.wait_overhead);
  record("wait", d.res_queue, tag, t0, t0, sim.now());
}

K200::LaunchStats K200::launch_test(int threads, int kernels, int loops, const KernelSpec& kernel, DieRef ref) {
  if (threads < 1 || kernels < 1 || loops < 1)
    throw UsageError("K200 launch test: threads, kernels and loops must be >= 1, got " + std::to_string(threads) +
                     ", " + std::to_string(kernels) + ", " + std::to_string(loops));
  (void)die(ref);
  (void)ncluster_of(kernel);
  sim::Simulation& sim = system_.sim();
  const Snapshot s = snapshot();
  struct Acc {
    Time launch = 0, wait = 0;
    std::int64_t launches = 0, waits = 0;
  } acc;
  auto body = [&](int t) -> sim::Task<void> {
    for (int l = 0; l < loops; ++l) {
      for (int i = 0; i < kernels; ++i) {
        const Time a = sim.now();
        co_await launch_task(t, ref, kernel);
        acc.launch += sim.now() - a;
        ++acc.launches;
      }
      const Time a = sim.now();
      co_await wait_task(t, ref);
      acc.wait += sim.now() - a;
      ++acc.waits;
    }
  };
  for (int t = 0; t < threads; ++t) sim.spawn("k200.launch_thread" + std::to_string(t), top(body(t)));
  run_to_completion();
  LaunchStats st;
  st.report = report(s);
  st.launch_us = sim::to_seconds(acc.launch) * 1e6 / static_cast<double>(acc.launches);
  st.wait_us = sim::to_seconds(acc.wait) * 1e6 / static_cast<double>(acc.waits);
  st.per_kernel_us = sim::to_seconds(st.report.elapsed()) * 1e6 / (static_cast<double>(loops) * kernels);
  // One kernel alone, launched and waited for (the synchronous latency).
  const Time a = sim.now();
  auto single = [&]() -> sim::Task<void> {
    co_await launch_task(0, ref, kernel);
    co_await wait_task(0, ref);
  };
  sim.spawn("k200.launch_single", top(single()));
  run_to_completion();
  st.single_us = sim::to_seconds(sim.now() - a) * 1e6;
  return st;
}

}  // namespace kernbench::kernels::k200
