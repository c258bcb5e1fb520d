// guest_ops.cpp -- guest operations on the forwarding path (and bare metal):
// GR launch, CE copy, context init, cudaMalloc.
//
// A forwarded GR launch, as the host backend serves it (the reference's
// decomposition, shared/reference/vgpu-forwarding.md):
//   trap        guest doorbell write trapped to the host backend
//   PDE forwards  scratch window (once per context) + each guest window;
//                 each an RPC to the GSP whose reply is seen only when the
//                 poller looks; accepted or refused per window (batching:
//                 one RPC for all; cache_accepted: accepted windows skipped)
//   copy-in     QMD relocation, parameter + program shadow copies, bounce
//               copy-in of the guest's pages
//   doorbell -> completion  GPFIFO publish, GR engine (context bring-up on
//               a context's first launch + the kernel), the backend's
//               completion seen by the poller (launch.completion poller) or
//               a completion poll (poll_loop); gives up after launch.give_up
//   copy-out    bounce copy-out
// elapsed_ms (the host's figure) spans trap received .. copy-out done, in
// jiffies. MSI-X injection then tells the guest.
#include <algorithm>
#include <utility>

#include "platforms/vgpu/model.hpp"
#include "sim/errors.hpp"

namespace kernbench::platforms::vgpu {

namespace {

// The GR engine runs one job: waits for the engine (shared by all guests),
// sets up the channel/context, runs the kernel, writes the completion. It
// forks from the guest's chain at the doorbell.
sim::Process gr_job(VgpuModel& m, int g, std::int32_t tag, Time setup, Time kernel, runtime::Chain ch) {
  const Time issue = m.sim().now();
  std::int32_t holder = -1;
  co_await m.gr().acquire_handed(holder);
  const Time start = m.sim().now();
  co_await m.sim().delay(setup + kernel);
  const std::int32_t node = m.record(ch, OpKind::GrExec, Resource::Gr, g, tag, issue, start, m.sim().now(), 0,
                                     static_cast<double>(m.params().cfg.launch.kernel_cycles), holder);
  m.gr().release(node);
  m.job(tag).busy = m.sim().now() - start;
  m.finish(tag, node);
}

// One chunk of a copy through a bounce window (guest) or straight (bare);
// it forks from the guest's chain after the copy's setup.
sim::Process copy_chunk(VgpuModel& m, int g, std::int32_t tag, CopyDir dir, Bytes bytes, runtime::Chain ch) {
  const auto& p = m.params();
  const auto& c = p.cfg.copy;
  const bool h2d = dir == CopyDir::H2D;
  // The bounce window's wait belongs to the first leg's cause (its ready is
  // the chunk's start, its holder the last hand-over it waited for).
  std::int32_t holder = -1;
  Time ready = m.sim().now();
  Resource queued = Resource::kCount;  // the window, when that was the first leg's last wait
  auto ce_leg = [&](NodeId src, NodeId dst) -> sim::Task<void> {
    if (!m.bare()) {  // method push + doorbell: a cause-only node (the log's ce_chunk starts after it)
      const Time s0 = m.sim().now();
      co_await m.sim().delay(c.ce_setup);
      m.cause(ch, "ce_setup", Resource::Ce, g, tag, s0, m.sim().now(), holder, ready, queued);
      queued = Resource::kCount;
      holder = -1;
      ready = -1;
    }
    const Time issue = m.sim().now();
    co_await m.ce().acquire_handed(holder);
    const Time start = m.sim().now();
    if (start > issue) queued = Resource::kCount;  // it queued for the CE last
    auto& j = m.job(tag);
    if (j.first_start < 0) j.first_start = start;
    co_await m.move(src, dst, bytes, g, tag, OpKind::kCount, Resource::Fabric);
    m.ce().release(m.record(ch, OpKind::CeChunk, Resource::Ce, g, tag, issue, start, m.sim().now(), bytes, 0.0, holder,
                            ready, queued));
    holder = -1;
    ready = -1;
    queued = Resource::kCount;
  };
  auto memcpy_leg = [&](NodeId src, NodeId dst) -> sim::Task<void> {
    auto& worker = m.backend(g);
    const Time issue = m.sim().now();
    co_await worker.acquire_handed(holder);
    const Time start = m.sim().now();
    if (start > issue) queued = Resource::kCount;  // it queued for the worker last
    const Bytes page = p.cfg.launch.page;
    co_await m.sim().delay(c.page_cost * ((bytes + page - 1) / page));
    co_await m.move(src, dst, bytes, g, tag, OpKind::kCount, Resource::Fabric);
    worker.release(m.record(ch, OpKind::Memcpy, Resource::Backend, g, tag, issue, start, m.sim().now(), bytes, 0.0,
                            holder, ready, queued));
    holder = -1;
    ready = -1;
    queued = Resource::kCount;
  };
  if (m.bare()) {
    if (h2d)
      co_await ce_leg(p.guest_memory, p.gpu_memory);
    else
      co_await ce_leg(p.gpu_memory, p.guest_memory);
  } else {
    const Time asked = m.sim().now();
    co_await m.windows().acquire_handed(holder);
    if (m.sim().now() > asked) queued = Resource::Bounce;
    if (h2d) {
      co_await memcpy_leg(p.guest_memory, p.bounce);
      co_await ce_leg(p.bounce, p.gpu_memory);
    } else {
      co_await ce_leg(p.gpu_memory, p.bounce);
      co_await memcpy_leg(p.bounce, p.guest_memory);
    }
    m.windows().release(ch.last);
  }
  auto& j = m.job(tag);
  j.node = m.recorder().later(j.node, ch.last);
  if (--j.remaining == 0) m.finish(tag, j.node);
}

}  // namespace

sim::Task<LaunchResult> VgpuModel::launch(int g, bool complete, bool notify) {
  const auto& c = p_.cfg;
  Context& ctx = context(g);
  LaunchResult r;
  r.guest = g;
  r.index = ctx.launches++;
  r.tag = new_tag();
  r.first_of_context = !ctx.gr_loaded;
  r.issue = sim().now();
  const std::int32_t tag = r.tag;

  if (bare_) {
    co_await cpu(c.bare.launch, g, tag, OpKind::GuestDriver, Resource::GuestCpu);
    r.start = sim().now();
    const Time d0 = sim().now();
    co_await move(p_.host, p_.gr, c.launch.doorbell_bytes, g, tag, OpKind::Doorbell, Resource::Fabric);
    if (complete) {
      sim().spawn("vgpu.gr_job", gr_job(*this, g, tag, r.first_of_context ? c.bare.gr_first_setup : c.launch.gr_setup,
                                        c.launch.kernel, chain(g)));
      ctx.gr_loaded = true;
    }
    if (!notify) {  // a burst: the CPU moves on; the sync waits for the last job
      r.end = r.guest_done = sim().now();
      co_return r;
    }
    if (complete) {
      co_await wait_job(tag);
      follow(g, tag);  // the guest waited for the GR job
      r.kernel = job(tag).busy;
    } else {
      co_await cause_delay(chain(g), c.launch.give_up, g, tag, "give_up",
                           Resource::GuestCpu);  // the driver's own wait gives up too
      r.timed_out = true;
    }
    r.doorbell_to_completion = sim().now() - d0;
    const Time i0 = sim().now();
    co_await cpu(c.bare.interrupt, g, tag, OpKind::Msix, Resource::GuestCpu);
    r.msix = sim().now() - i0;
    r.end = r.guest_done = sim().now();
    r.elapsed_ms = jiffies_between(r.start, r.end, c.jiffy);
    envelope(OpKind::Launch, Resource::GuestCpu, g, tag, r.issue, r.start, r.end);
    if (r.timed_out)
      r.error = "launch " + std::to_string(r.index) + " of guest " + std::to_string(g) + " (tag " +
                std::to_string(tag) + "): no completion within the give-up limit of " +
                std::to_string(c.launch.give_up / sim::kMillisecond) + " ms";
    co_return r;
  }

  // ---- guest: trap to the host backend ----
  co_await cpu(c.launch.guest_driver, g, tag, OpKind::GuestDriver, Resource::GuestCpu);
  co_await move(p_.guest, p_.host, c.launch.doorbell_bytes, g, tag, OpKind::Trap, Resource::TrapChannel);
  r.start = sim().now();

  // ---- PDE_UPDATE forwards ----
  std::vector<std::pair<int, bool>> windows;  // (window, accepted); -1 = the scratch window
  if (!ctx.scratch_installed) windows.emplace_back(-1, c.pde.scratch_accepted);
  for (std::size_t i = 0; i < c.pde.guest_windows.size(); ++i) {
    if (c.pde.cache_accepted && ctx.cached[i]) continue;
    windows.emplace_back(static_cast<int>(i), c.pde.guest_windows[i] == "accept");
  }
  const Time f0 = sim().now();
  if (!windows.empty() && c.pde.batching) {
    const Time extra = c.rpc.batch_entry * static_cast<Time>(windows.size() - 1);
    co_await rpc(g, tag, extra, &r);
    envelope(OpKind::PdeForward, Resource::Backend, g, tag, f0, f0, sim().now(), 0,
             static_cast<double>(windows.size()));
  } else {
    for (const auto& [w, ok] : windows) {
      const Time t = sim().now();
      co_await rpc(g, tag, 0, &r);
      envelope(OpKind::PdeForward, Resource::Backend, g, tag, t, t, sim().now(), 0, ok ? 1.0 : 0.0);
    }
  }
  for (const auto& [w, ok] : windows) {
    ++r.forwards;
    ok ? ++r.accepted : ++r.refused;
    if (w < 0)
      ctx.scratch_installed = true;  // installed (or refused) once per context
    else if (ok)
      ctx.cached[static_cast<std::size_t>(w)] = true;
  }
  r.forwarding = sim().now() - f0;

  // ---- QMD relocation, shadow copies, bounce copy-in ----
  const Time c0 = sim().now();
  co_await cpu(c.launch.qmd_relocation, g, tag, OpKind::QmdRelocation, Resource::Backend);
  for (const Bytes b : {c.launch.param_shadow, c.launch.program_shadow}) {
    const Time t = sim().now();
    co_await sim().delay(c.launch.shadow_cost);
    co_await move(p_.host, p_.gpu_memory, b, g, tag, OpKind::kCount, Resource::Fabric);
    record(chain(g), OpKind::ShadowCopy, Resource::Backend, g, tag, t, t, sim().now(), b);
  }
  {
    const Time t = sim().now();
    co_await sim().delay(c.launch.page_in_cost * c.launch.bounce_pages_in);
    const Bytes b = c.launch.page * c.launch.bounce_pages_in;
    co_await move(p_.guest_memory, p_.bounce, b, g, tag, OpKind::kCount, Resource::Fabric);
    record(chain(g), OpKind::BounceIn, Resource::Backend, g, tag, t, t, sim().now(), b, c.launch.bounce_pages_in);
  }
  r.copy_in = sim().now() - c0;

  // ---- doorbell -> completion poll ----
  const Time d0 = sim().now();
  co_await move(p_.host, p_.gr, c.launch.doorbell_bytes, g, tag, OpKind::Doorbell, Resource::Fabric);
  if (complete)
    sim().spawn("vgpu.gr_job", gr_job(*this, g, tag, r.first_of_context ? c.launch.gr_first_setup : c.launch.gr_setup,
                                      c.launch.kernel, chain(g)));
  const Time limit = d0 + c.launch.give_up;
  if (c.launch.completion == VgpuCompletion::Poller) {
    // The GR completion reaches the host as a GSP message: the backend notices it
    // when its poller next looks, as it does an RPC reply (tick: one quantum after
    // the job ends; grid: the next tick; interrupt: the interrupt latency).
    if (complete) {
      co_await wait_job(tag);
      const Time w0 = sim().now();
      co_await poller_.observe();
      r.completion_wait = sim().now() - w0;
      r.timed_out = sim().now() > limit;
    } else {
      co_await sim().delay(std::max<Time>(0, limit - sim().now()));
      r.timed_out = true;
    }
  } else {
    while (job(tag).done < 0) {
      if (sim().now() >= limit) {
        r.timed_out = true;
        break;
      }
      co_await sim().delay(std::min(c.launch.completion_poll, limit - sim().now()));
    }
    if (!r.timed_out) r.completion_wait = sim().now() - job(tag).done;
  }
  {
    // The poll that saw the completion follows the GR job (its cause starts
    // when the job ended; the log row spans doorbell .. seen); a give-up
    // follows the doorbell.
    const std::int32_t after = r.timed_out ? chain(g).last : recorder().later(chain(g).last, job(tag).node);
    chain(g).last = after;
    record(chain(g), OpKind::CompletionPoll, Resource::Backend, g, tag, d0, d0, sim().now(), 0, 0.0, -1,
           recorder().end_of(after));
  }
  r.doorbell_to_completion = sim().now() - d0;
  if (r.timed_out) {
    r.error = "launch " + std::to_string(r.index) + " of guest " + std::to_string(g) + " (tag " + std::to_string(tag) +
              "): no completion within the give-up limit of " + std::to_string(c.launch.give_up / sim::kMillisecond) +
              " ms";
  } else {
    ctx.gr_loaded = true;
    r.kernel = job(tag).busy;
    // ---- bounce copy-out ----
    const Time t = sim().now();
    co_await sim().delay(c.launch.page_out_cost * c.launch.bounce_pages_out);
    const Bytes b = c.launch.page * c.launch.bounce_pages_out;
    co_await move(p_.bounce, p_.guest_memory, b, g, tag, OpKind::kCount, Resource::Fabric);
    record(chain(g), OpKind::BounceOut, Resource::Backend, g, tag, t, t, sim().now(), b, c.launch.bounce_pages_out);
    r.copy_out = sim().now() - t;
  }
  r.end = sim().now();
  r.elapsed_ms = jiffies_between(r.start, r.end, c.jiffy);
  envelope(OpKind::Launch, Resource::Backend, g, tag, r.issue, r.start, r.end);

  // ---- MSI-X injection into the guest ----
  if (notify || r.timed_out) {
    const Time i0 = sim().now();
    co_await cpu(c.launch.msix, g, tag, OpKind::Msix, Resource::Backend);
    r.msix = sim().now() - i0;
  }
  r.guest_done = sim().now();
  co_return r;
}

sim::Task<CopyResult> VgpuModel::copy(int g, CopyDir dir, Bytes bytes) {
  const auto& c = p_.cfg;
  context(g);
  if (bytes <= 0) throw UsageError("vgpu copy: bytes must be > 0, got " + std::to_string(bytes));
  CopyResult r;
  r.dir = dir;
  r.bytes = bytes;
  r.issue = sim().now();
  const std::int32_t tag = new_tag();
  if (bare_) {
    co_await cpu(c.bare.copy_setup, g, tag, OpKind::GuestDriver, Resource::GuestCpu);
    r.chunks = 1;
  } else {
    co_await cpu(c.launch.guest_driver, g, tag, OpKind::GuestDriver, Resource::GuestCpu);
    co_await move(p_.guest, p_.host, c.launch.doorbell_bytes, g, tag, OpKind::Trap, Resource::TrapChannel);
    co_await cpu(c.copy.setup, g, tag, OpKind::HostCpu, Resource::Backend);
    r.chunks = static_cast<int>((bytes + c.copy.window - 1) / c.copy.window);
  }
  job(tag).remaining = r.chunks;
  const Time c0 = sim().now();
  for (int k = 0; k < r.chunks; ++k) {
    const Bytes b = bare_ ? bytes : std::min(c.copy.window, bytes - static_cast<Bytes>(k) * c.copy.window);
    sim().spawn("vgpu.copy_chunk", copy_chunk(*this, g, tag, dir, b, chain(g)));
  }
  co_await wait_job(tag);
  follow(g, tag);  // the guest waited for the last chunk
  r.first_ce_start = job(tag).first_start;
  if (bare_) {
    co_await cpu(c.bare.interrupt, g, tag, OpKind::Msix, Resource::GuestCpu);
  } else {
    // The backend's completion poll sees the last chunk at its next look.
    const Time done = sim().now(), q = c.launch.completion_poll;
    const Time seen = c0 + ((done - c0 + q - 1) / q) * q;
    co_await sim().delay(seen - done);
    record(chain(g), OpKind::CompletionPoll, Resource::Backend, g, tag, c0, c0, sim().now(), 0, 0.0, -1, done);
    co_await cpu(c.launch.msix, g, tag, OpKind::Msix, Resource::Backend);
  }
  r.end = sim().now();
  envelope(OpKind::CeCopy, Resource::Ce, g, tag, r.issue, r.issue, r.end, bytes, static_cast<double>(r.chunks));
  co_return r;
}

sim::Task<Time> VgpuModel::init(int g) {
  const auto& c = p_.cfg;
  context(g);
  const std::int32_t tag = new_tag();
  const Time t0 = sim().now();
  if (bare_) {
    co_await sim().delay(c.bare.init);
  } else {
    co_await cause_delay(chain(g), c.ops.init_driver, g, tag, "init_driver", Resource::GuestCpu);
    for (int k = 0; k < c.ops.init_rpcs; ++k) {
      co_await move(p_.guest, p_.host, c.launch.doorbell_bytes, g, tag, OpKind::Trap, Resource::TrapChannel);
      co_await rpc(g, tag, 0, nullptr);
    }
  }
  if (bare_)
    record(chain(g), OpKind::Init, Resource::GuestCpu, g, tag, t0, t0, sim().now());
  else
    envelope(OpKind::Init, Resource::Backend, g, tag, t0, t0, sim().now());
  co_return sim().now() - t0;
}

sim::Task<Time> VgpuModel::malloc(int g) {
  const auto& c = p_.cfg;
  Context& ctx = context(g);
  const std::int32_t tag = new_tag();
  const Time t0 = sim().now();
  const int n = ctx.mallocs++;
  if (bare_) {
    co_await sim().delay(n == 0 ? c.bare.malloc_first : c.bare.malloc_steady);
  } else {
    co_await cause_delay(chain(g), c.ops.malloc_driver, g, tag, "malloc_driver", Resource::GuestCpu);
    const int rpcs = n == 0 ? c.ops.malloc_first_rpcs : (n % c.ops.malloc_rpc_every == 0 ? 1 : 0);
    for (int k = 0; k < rpcs; ++k) {
      co_await move(p_.guest, p_.host, c.launch.doorbell_bytes, g, tag, OpKind::Trap, Resource::TrapChannel);
      co_await rpc(g, tag, 0, nullptr);
    }
  }
  if (bare_)
    record(chain(g), OpKind::Malloc, Resource::GuestCpu, g, tag, t0, t0, sim().now());
  else
    envelope(OpKind::Malloc, Resource::Backend, g, tag, t0, t0, sim().now());
  co_return sim().now() - t0;
}

}  // namespace kernbench::platforms::vgpu
