// launch.cpp -- kernel launch (host), dispatch and execution (device), wait.
//
//   launch: host_prep on the calling thread (parallel across threads), then
//           queue_submit holding the die's device command queue (a Server:
//           threads launching to one die contend here, measured); the
//           kernel goes to one stream of the die;
//   device: per stream, kernels run strictly in order: the stream fetches
//           the kernel's command (dispatch_base, a latency the stream pays
//           on its own: streams fetch side by side), then takes the
//           kernel's ncluster clusters of the die (a Server with one unit per
//           cluster, granted to one kernel at a time so nothing holds a
//           partial set), sets each up (ncluster x dispatch_per_cluster)
//           and runs the kernel (elementwise: by bytes, its operands
//           (elementwise_operands tensors of elements x element size) over
//           ncluster x elementwise_bandwidth, plus all of them over
//           elementwise_serial_bandwidth, the part that does not spread over
//           clusters, bounded by the die's HBM link (kernel_time); GEMM and
//           conv: gemm.cpp); kernels of different streams
//           run side by side on disjoint clusters;
//   wait:   the calling thread blocks until every kernel launched to its
//           stream (stream_wait_task) or to the whole die (wait_task, as
//           xpu_wait and the synchronous copies) has finished, then pays
//           wait_overhead (noticing it).
// Calibration (k200.yaml says which figure each parameter was fitted to):
// host_prep + queue_submit on the 1-thread launch figure, queue_submit on the
// 4-thread one, the dispatch and elementwise costs on the four single-kernel
// wait figures; the per-kernel total of the vendor loop (19.3 us) and the
// synchronous round trips (the repo's untraceable "dispatch ~26 / ~25 us")
// are predictions.
#include <algorithm>

#include "platforms/k200/k200.hpp"
#include "sim/errors.hpp"

namespace kernbench::platforms::k200 {

int K200::ncluster_of(const KernelSpec& k) const {
  const int nc = k.ncluster == 0 ? cfg_.compute.default_ncluster : k.ncluster;
  if (nc < 1 || nc > cfg_.compute.clusters)
    throw UsageError("K200 kernel: ncluster " + std::to_string(nc) + " is outside 1.." +
                     std::to_string(cfg_.compute.clusters) + " (clusters per die)");
  return nc;
}

// An elementwise kernel streams its operands: bytes = elements x element size x elementwise_operands.
// ncluster enters through the cluster part: each of the nc clusters streams its share of the bytes at
// elementwise_bandwidth, in series with the die-level part (all the bytes at elementwise_serial_bandwidth),
// so the die's streaming rate is 1 / (1 / (nc x bw) + 1 / serial): 3.35 / 9.07 / 12.7 GB/s at nc 1 / 4 / 8
// with the fitted values. The die's HBM link (the graph's die <-> hbm edge, 256 GB/s, datasheet) bounds
// it: a kernel never streams faster. elementwise_rate hbm: the fitted rates up to
// elementwise_reference_elements, every byte beyond at the HBM link's rate.
Time K200::kernel_time(const KernelSpec& k, const Die& d) const {
  const auto& c = cfg_.compute;
  const int nc = ncluster_of(k);
  const Bytes per_element = topology::element_bytes(k.precision) * c.elementwise_operands;
  const auto fitted = [&](std::int64_t n) {
    const Bytes per_cluster = (n + nc - 1) / nc * per_element;  // each cluster streams its share
    Time t = sim::transfer_time(per_cluster, c.elementwise_bandwidth);
    if (c.elementwise_serial_bandwidth.bytes_per_s > 0)
      t = sim::add_time(t, sim::transfer_time(n * per_element, c.elementwise_serial_bandwidth),
                        "K200 elementwise kernel");
    return t;
  };
  const bool hbm = d.hbm_bandwidth.bytes_per_s > 0;
  if (c.elementwise_rate == ElementwiseRate::Hbm && hbm) {
    const std::int64_t n0 = std::min<std::int64_t>(k.elements, c.elementwise_reference_elements);
    return sim::add_time(fitted(n0), sim::transfer_time((k.elements - n0) * per_element, d.hbm_bandwidth),
                         "K200 elementwise kernel");
  }
  const Time t = fitted(k.elements);
  return hbm ? std::max(t, sim::transfer_time(k.elements * per_element, d.hbm_bandwidth)) : t;
}

namespace {
constexpr int kMaxStreams = 64;  // streams per die the model accepts (a bound on bookkeeping, not a device limit)

// A vendor test puts each host thread on a stream of its own.
void check_streams(const char* test, int threads) {
  if (threads > kMaxStreams)
    throw UsageError(std::string("K200 ") + test + " test: " + std::to_string(threads) +
                     " threads need a stream each; the model has " + std::to_string(kMaxStreams) + " per die");
}
}  // namespace

void K200::Counter::finish(std::int32_t node) {
  ++finished;
  for (std::size_t i = 0; i < waiters.size();) {
    if (waiters[i].count <= finished) {
      *waiters[i].by = node;
      waiters[i].done->fire();
      waiters.erase(waiters.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

K200::StreamQ& K200::stream(Die& d, int id) {
  if (id < 0 || id >= kMaxStreams)
    throw UsageError("K200 card" + std::to_string(d.ref.card) + ".die" + std::to_string(d.ref.die) + ": stream " +
                     std::to_string(id) + " is outside 0.." + std::to_string(kMaxStreams - 1));
  const auto i = static_cast<std::size_t>(id);
  if (d.streams.size() <= i) d.streams.resize(i + 1);
  if (!d.streams[i]) {
    d.streams[i] = std::make_unique<StreamQ>();
    d.streams[i]->pending =
        std::make_unique<sim::Store<KernelSpec>>(system_.sim(), d.compute->name() + ".stream" + std::to_string(id));
  }
  return *d.streams[i];
}

sim::Task<void> K200::launch_task(Chain& ch, int thread, DieRef ref, KernelSpec kernel, int stream_id) {
  sim::Simulation& sim = system_.sim();
  Die& d = die(ref);
  StreamQ& q = stream(d, stream_id);
  (void)ncluster_of(kernel);  // a bad ncluster fails at launch, on the host, as the runtime does
  if (kernel.framework_overhead < 0) throw UsageError("K200 kernel: framework_overhead must be >= 0");
  if (kernel.kind != KernelSpec::Kind::Elementwise) (void)plan_gemm(kernel);
  if (kernel.framework_overhead > 0) {
    // A framework's own per-op work on the calling thread (its op dispatch), before the runtime's launch.
    const Time f0 = sim.now();
    co_await sim.delay(kernel.framework_overhead);
    record(ch, "framework", res_driver_, kernel.tag, f0, f0, sim.now());
  }
  const Time t0 = sim.now();
  if (cfg_.launch.host_prep > 0) co_await sim.delay(cfg_.launch.host_prep);
  // host_prep is the thread's own work: a cause of its own (the log folds it into the launch row).
  runtime::Recorder::Op prep;
  prep.kind = rec_.cause_kind("host_prep");
  prep.resource = d.res_queue;
  prep.tag = kernel.tag;
  prep.issue = prep.start = t0;
  prep.end = sim.now();
  prep.log_row = false;
  rec_.step(ch, prep);
  std::int32_t holder = -1;
  co_await d.queue->acquire_handed(holder);
  const Time s = sim.now();
  if (cfg_.launch.queue_submit > 0) co_await sim.delay(cfg_.launch.queue_submit);
  const std::int32_t node =
      record(ch, "launch", d.res_queue, kernel.tag, t0, s, sim.now(), 0, 0.0, holder, -1, rec_.end_of(ch.last));
  d.queue->release(node);
  (void)thread;
  ++d.count.launched;
  ++q.count.launched;
  kernel.launched_by = node;
  (void)q.pending->try_put(kernel);
  ensure_device(d, stream_id);
}

void K200::ensure_device(Die& d, int id) {
  StreamQ& q = *d.streams[static_cast<std::size_t>(id)];
  if (q.running) return;
  q.running = true;
  system_.sim().spawn(q.pending->name(), device_loop(d, q));
}

sim::Process K200::device_loop(Die& d, StreamQ& q) {
  sim::Simulation& sim = system_.sim();
  Chain& ch = q.chain;
  while (auto k = q.pending->try_get()) {
    const int nc = ncluster_of(*k);
    // The stream fetches the command: a latency of its own, beside other
    // streams, once both its launch and the stream's previous kernel are done.
    ch.last = rec_.later(ch.last, k->launched_by);
    const Time f0 = sim.now();
    if (cfg_.launch.dispatch_base > 0) co_await sim.delay(cfg_.launch.dispatch_base);
    record(ch, "fetch", d.res_queue, k->tag, f0, f0, sim.now());
    // Then it takes the kernel's clusters, all at once.
    const Time asked = sim.now();
    std::int32_t holder = -1;
    co_await d.grant->acquire_handed(holder);
    for (int c = 0; c < nc; ++c) co_await d.compute->acquire_handed(holder);
    d.grant->release(holder);  // the next kernel's turn came when these clusters were handed over
    const Time t0 = sim.now();
    if (cfg_.launch.dispatch_per_cluster > 0) co_await sim.delay(nc * cfg_.launch.dispatch_per_cluster);
    record(ch, "dispatch", d.res_compute, k->tag, asked, t0, sim.now(), 0, 0.0, holder);
    co_await run_kernel(ch, d, *k);
    for (int c = 0; c < nc; ++c) d.compute->release(ch.last);
    q.count.finish(ch.last);
    d.count.finish(ch.last);
  }
  q.running = false;
}

sim::Task<void> K200::run_kernel(Chain& ch, Die& d, const KernelSpec& k) {
  sim::Simulation& sim = system_.sim();
  if (k.kind == KernelSpec::Kind::Gemm || k.kind == KernelSpec::Kind::Conv) {
    co_await run_gemm(ch, d, k);
    co_return;
  }
  const Time t0 = sim.now();
  co_await sim.delay(kernel_time(k, d));
  record(ch, "kernel", d.res_compute, k.tag, t0, t0, sim.now(), 0, static_cast<double>(k.elements));
}

void K200::check(const KernelSpec& kernel, DieRef ref) {
  (void)die(ref);
  (void)ncluster_of(kernel);
  if (kernel.framework_overhead < 0) throw UsageError("K200 kernel: framework_overhead must be >= 0");
  if (kernel.kind != KernelSpec::Kind::Elementwise) (void)plan_gemm(kernel);
  if (kernel.kind == KernelSpec::Kind::Elementwise && kernel.elements <= 0)
    throw UsageError("K200 elementwise kernel: elements must be > 0, got " + std::to_string(kernel.elements));
}

sim::Task<std::int32_t> K200::wait_for(Counter& c) {
  if (c.finished >= c.launched) co_return -1;
  sim::Trigger done(system_.sim());
  std::int32_t by = -1;
  c.waiters.push_back({c.launched, &done, &by});
  co_await done.wait();
  co_return by;
}

sim::Task<void> K200::wait_on(Chain& ch, Counter& c, std::int32_t res, std::int32_t tag) {
  sim::Simulation& sim = system_.sim();
  const Time t0 = sim.now();
  const std::int32_t by = co_await wait_for(c);
  // Blocked: the wait became ready when the kernel that finished last ended
  // (its cause starts there; the log row keeps the whole call).
  const Time ready = sim.now();
  if (cfg_.launch.wait_overhead > 0) co_await sim.delay(cfg_.launch.wait_overhead);
  record(ch, "wait", res, tag, t0, t0, sim.now(), 0, 0.0, -1, by >= 0 ? by : ch.last, ready);
}

sim::Task<void> K200::wait_task(Chain& ch, int thread, DieRef ref, std::int32_t tag) {
  (void)thread;
  Die& d = die(ref);
  co_await wait_on(ch, d.count, d.res_queue, tag);
}

sim::Task<void> K200::stream_wait_task(Chain& ch, int thread, DieRef ref, int stream_id, std::int32_t tag) {
  (void)thread;
  Die& d = die(ref);
  co_await wait_on(ch, stream(d, stream_id).count, d.res_queue, tag);
}

K200::LaunchStats K200::launch_test(int threads, int kernels, int loops, const KernelSpec& kernel, DieRef ref) {
  if (threads < 1 || kernels < 1 || loops < 1)
    throw UsageError("K200 launch test: threads, kernels and loops must be >= 1, got " + std::to_string(threads) +
                     ", " + std::to_string(kernels) + ", " + std::to_string(loops));
  check_streams("launch", threads);
  (void)die(ref);
  (void)ncluster_of(kernel);
  sim::Simulation& sim = system_.sim();
  const Snapshot s = snapshot();
  struct Acc {
    Time launch = 0, wait = 0;
    std::int64_t launches = 0, waits = 0;
  } acc;
  std::vector<Chain> chains(static_cast<std::size_t>(threads));
  auto body = [&](int t) -> sim::Task<void> {
    Chain& ch = chains[static_cast<std::size_t>(t)];
    for (int l = 0; l < loops; ++l) {
      for (int i = 0; i < kernels; ++i) {
        const Time a = sim.now();
        co_await launch_task(ch, t, ref, kernel, t);
        acc.launch += sim.now() - a;
        ++acc.launches;
      }
      const Time a = sim.now();
      co_await stream_wait_task(ch, t, ref, t);
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
  Chain single_chain;
  auto single = [&]() -> sim::Task<void> {
    co_await launch_task(single_chain, 0, ref, kernel);
    co_await wait_task(single_chain, 0, ref);
  };
  sim.spawn("k200.launch_single", top(single()));
  run_to_completion();
  st.single_us = sim::to_seconds(sim.now() - a) * 1e6;
  return st;
}

K200::DispatchStats K200::dispatch_test(int threads, int commands, const KernelSpec& kernel, DieRef ref) {
  if (threads < 1 || commands < 1)
    throw UsageError("K200 dispatch test: threads and commands must be >= 1, got " + std::to_string(threads) + ", " +
                     std::to_string(commands));
  check_streams("dispatch", threads);
  (void)die(ref);
  (void)ncluster_of(kernel);
  sim::Simulation& sim = system_.sim();
  const Snapshot s = snapshot();
  struct Acc {
    Time launch = 0, wait = 0, round = 0;
    std::int64_t n = 0;
  } acc;
  std::vector<Chain> chains(static_cast<std::size_t>(threads));
  auto body = [&](int t) -> sim::Task<void> {
    Chain& ch = chains[static_cast<std::size_t>(t)];
    for (int c = 0; c < commands; ++c) {
      const Time a = sim.now();
      co_await launch_task(ch, t, ref, kernel, t);
      const Time b = sim.now();
      co_await stream_wait_task(ch, t, ref, t);
      acc.launch += b - a;
      acc.wait += sim.now() - b;
      acc.round += sim.now() - a;
      ++acc.n;
    }
  };
  for (int t = 0; t < threads; ++t) sim.spawn("k200.dispatch_thread" + std::to_string(t), top(body(t)));
  run_to_completion();
  DispatchStats st;
  st.report = report(s);
  const double n = static_cast<double>(acc.n);
  st.round_trip_us = sim::to_seconds(acc.round) * 1e6 / n;
  st.launch_us = sim::to_seconds(acc.launch) * 1e6 / n;
  st.wait_us = sim::to_seconds(acc.wait) * 1e6 / n;
  st.per_command_us = sim::to_seconds(st.report.elapsed()) * 1e6 / n;
  return st;
}

}  // namespace kernbench::platforms::k200
