// model.hpp -- the vGPU forwarding path as coroutine processes on a System.
//
// A VgpuModel owns, for one run, the shared parts of the path: the GSP RPC
// queue (one sim::Server for every guest: queueing is measured, never
// assumed), the GR and CE engines (Servers), the bounce windows (a Server
// of `copy.windows` units), the host poller, and per guest its context
// state (scratch window installed, windows cached, GR context loaded).
// Guest operations (guest_ops.cpp) are sim::Tasks a guest process awaits:
// launch(), copy(), init(), malloc(). Bytes move through the System's
// fabric over the graph's links (guest memory <-> host bounce <-> GPU);
// every model op is recorded in the run's OpLog with a kind name (kinds())
// and the resource it used (resources()), and the tag of the guest op it
// belongs to, so a launch's decomposition can be read back from the log.
// Ops are recorded through a runtime::Recorder, which also writes each op's
// cause (runtime/recorder.hpp): `after` = the guest's previous op (one chain
// per guest; a GR job and each copy chunk fork from it), the GR job whose
// end the completion poll or the guest's wait saw, the copy chunk that
// finished last; holder = the op that released the GSP, GR, CE, bounce
// window or backend worker it queued for. Steps the log folds into another
// row (RPC TX/reply hops, driver time before an init/malloc's RPCs, CE
// method pushes) are cause-only nodes; envelopes (launch, ce_copy,
// pde_forward, init, malloc under forwarding) are log rows only. So a run's
// critical path is the exact walk of runtime/critical_path.hpp.
//
// bare = true runs the same operations with the forwarding path removed:
// no trap, no RPCs, no bounce, native driver costs and a completion
// interrupt (vgpu.bare), on the same engines and links.
#pragma once

#include <array>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "platforms/vgpu/params.hpp"
#include "platforms/vgpu/poller.hpp"
#include "runtime/critical_path.hpp"
#include "runtime/recorder.hpp"
#include "sim/process.hpp"
#include "sim/server.hpp"
#include "topology/system.hpp"

namespace kernbench::platforms::vgpu {

/// Op kinds of the log (names: VgpuModel::kind_name()).
enum class OpKind : int {
  GuestDriver,  ///< guest driver work before it traps
  Trap,         ///< MMIO write trapped guest -> host backend (through the trap channel)
  PdeForward,   ///< one PDE_UPDATE forward (work: 1 accepted, 0 refused; batched: windows in the RPC)
  Rpc,          ///< one GSP RPC as the GSP saw it: issue = TX arrived, start = firmware took it
  PollWait,     ///< host waiting for its poller to see a GSP message
  HostCpu,      ///< backend CPU (marshalling, per-page work)
  QmdRelocation,
  ShadowCopy,
  BounceIn,
  Doorbell,        ///< doorbell / GPFIFO publish write to the engine
  GrExec,          ///< GR engine: channel/context setup + kernel (issue = doorbell seen)
  CompletionPoll,  ///< doorbell -> completion seen by the backend (or given up)
  BounceOut,
  Msix,     ///< completion interrupt injected into the guest (bare: native interrupt)
  Launch,   ///< a whole launch as the host backend served it (start..end = elapsed)
  CeCopy,   ///< a whole copy call as the guest saw it
  CeChunk,  ///< one chunk on the copy engine (issue = pushed, start = CE took it)
  Memcpy,   ///< host memcpy guest memory <-> bounce window
  Malloc,
  Init,
  kCount
};

/// Resources named in the log's resource column.
enum class Resource : int { GuestCpu, TrapChannel, Backend, Gsp, Poller, Gr, Ce, Fabric, Bounce, kCount };

/// A forwarded GR launch, decomposed.
struct LaunchResult {
  int guest = 0;
  int index = 0;         ///< launch number within the guest's context (0: first)
  std::int32_t tag = 0;  ///< tag of its ops in the log
  bool first_of_context = false;
  bool timed_out = false;
  std::string error;            ///< "" unless timed out (names the launch)
  Time issue = 0;               ///< guest called launch
  Time start = 0;               ///< host backend received the trapped launch
  Time end = 0;                 ///< host backend done (after copy-out)
  Time guest_done = 0;          ///< guest saw the completion (after MSI-X)
  std::int64_t elapsed_ms = 0;  ///< jiffies between start and end (how the host reported it)
  int forwards = 0, accepted = 0, refused = 0, rpcs = 0, poll_waits = 0;
  Time forwarding = 0;            ///< PDE forwards, first TX to last reply seen
  std::vector<Time> round_trips;  ///< per RPC: host submit -> reply seen
  Time gsp_wait = 0;              ///< time RPCs queued at the GSP behind other RPCs
  Time firmware = 0;              ///< firmware service time of the RPCs
  Time poll_wait = 0;             ///< time spent in poll waits
  Time copy_in = 0;               ///< QMD relocation + shadow copies + bounce copy-in
  Time doorbell_to_completion = 0;
  Time kernel = 0;           ///< GR engine time (setup + kernel)
  Time completion_wait = 0;  ///< GR job done -> the backend saw it (the poller's wait, or the poll loop's)
  Time copy_out = 0;
  Time msix = 0;
  Time host() const { return end - start; }
  Time guest_latency() const { return guest_done - issue; }
};

enum class CopyDir { H2D, D2H };

struct CopyResult {
  CopyDir dir = CopyDir::H2D;
  Bytes bytes = 0;
  int chunks = 0;
  Time issue = 0;
  Time first_ce_start = 0;  ///< when the copy engine first started on it (P5: push latency)
  Time end = 0;             ///< guest saw it complete
  Time latency() const { return end - issue; }
  double bandwidth() const { return latency() > 0 ? static_cast<double>(bytes) / sim::to_seconds(latency()) : 0.0; }
};

class VgpuModel {
 public:
  VgpuModel(topology::System& system, bool bare = false);
  VgpuModel(const VgpuModel&) = delete;
  VgpuModel& operator=(const VgpuModel&) = delete;

  // ---- guest operations (guest_ops.cpp) ----
  /// One GR launch of guest `g`, synchronised (returns when the guest saw the
  /// completion or the give-up limit). complete = false: the GPU never
  /// signals completion (the launch times out). notify = false: a launch of
  /// a burst -- no completion interrupt to the guest (bare metal: the CPU
  /// does not wait for the engine at all; wait_job(tag) syncs).
  sim::Task<LaunchResult> launch(int g, bool complete = true, bool notify = true);
  /// One CE copy of `bytes` (through the bounce windows; bare: direct DMA).
  sim::Task<CopyResult> copy(int g, CopyDir dir, Bytes bytes);
  /// Process start -> device ready (context creation).
  sim::Task<Time> init(int g);
  /// One cudaMalloc; returns its latency.
  sim::Task<Time> malloc(int g);

  // ---- the forwarding path (model.cpp) ----
  /// One RPC round trip for guest `g`: backend CPU, TX, GSP queue + firmware
  /// (+ `extra_firmware`), reply, poll waits. Returns host submit -> reply seen.
  sim::Task<Time> rpc(int g, std::int32_t tag, Time extra_firmware, LaunchResult* acc);
  /// Moves `bytes` src -> dst through the fabric; logs it as `kind` on
  /// guest g's chain (kCount: not recorded, the caller's op covers it).
  sim::Task<Time> move(NodeId src, NodeId dst, Bytes bytes, int g, std::int32_t tag, OpKind kind, Resource res);
  /// A fabric hop the log folds into its RPC: a cause-only node `what` on guest g's chain.
  sim::Task<void> hop(NodeId src, NodeId dst, Bytes bytes, int g, std::int32_t tag, const char* what);
  /// Backend (or guest) CPU work of `d`; logs it as `kind` (kCount: a cause-only node `what`).
  sim::Task<void> cpu(Time d, int g, std::int32_t tag, OpKind kind, Resource res, const char* what = "");

  /// Records one op as the next op of `ch`; returns its cause node.
  std::int32_t record(runtime::Chain& ch, OpKind kind, Resource res, int g, std::int32_t tag, Time issue, Time start,
                      Time end, Bytes bytes = 0, double work = 0.0, std::int32_t holder = -1, Time ready = -1,
                      Resource queued = Resource::kCount);
  /// An envelope row (spans ops already recorded): log only, no cause.
  void envelope(OpKind kind, Resource res, int g, std::int32_t tag, Time issue, Time start, Time end, Bytes bytes = 0,
                double work = 0.0);
  /// A cause-only node `what` [start, end) on `ch` (ready/holder: as record()); returns it.
  std::int32_t cause(runtime::Chain& ch, const char* what, Resource res, int g, std::int32_t tag, Time start, Time end,
                     std::int32_t holder = -1, Time ready = -1, Resource queued = Resource::kCount);
  /// A cause-only node `what` of `d` on `ch` (a step the log folds into another row).
  sim::Task<void> cause_delay(runtime::Chain& ch, Time d, int g, std::int32_t tag, const char* what, Resource res);
  /// Guest g's chain (its process's ops in order).
  runtime::Chain& chain(int g) { return context(g).chain; }
  /// Guest g's next op also follows job `tag`'s last op (it waited for it).
  void follow(int g, std::int32_t tag) { chain(g).last = rec_.later(chain(g).last, job(tag).node); }
  const runtime::Recorder& recorder() const { return rec_; }
  /// The exact critical path of the ops recorded so far (from `start`).
  runtime::CriticalPath critical_path(const std::string& name, Time start) const;
  std::int32_t new_tag() { return next_tag_++; }

  static const char* kind_name(OpKind k);
  static const char* resource_name(Resource r);
  static std::vector<std::string> kind_names();
  static std::vector<std::string> resource_names();

  const VgpuParams& params() const { return p_; }
  bool bare() const { return bare_; }
  topology::System& system() { return system_; }
  sim::Simulation& sim() { return system_.sim(); }
  sim::Server& gsp() { return gsp_; }
  sim::Server& gr() { return gr_; }
  sim::Server& ce() { return ce_; }
  sim::Server& windows() { return windows_; }
  Poller& poller() { return poller_; }

  /// Per guest context state.
  struct Context {
    bool scratch_installed = false;
    bool gr_loaded = false;
    std::vector<bool> cached;  ///< accepted guest windows (cache_accepted what-if)
    int launches = 0;
    int mallocs = 0;
    runtime::Chain chain;  ///< the guest's ops in order
  };
  Context& context(int g);
  /// Guest g's backend worker (one per guest: it serialises the host-side
  /// work of that guest's copies).
  sim::Server& backend(int g);

  /// A job handed to an engine: when it completed and who waits for it.
  struct Job {
    Time done = -1;
    Time busy = 0;
    Time first_start = -1;
    int remaining = 0;                 ///< copy chunks still in flight
    std::int32_t node = -1;            ///< the cause node it ended with (the GR exec, the last chunk's last op)
    std::coroutine_handle<> waiter{};  ///< resumed (from the event loop) when done
  };
  Job& job(std::int32_t tag);
  /// Marks the job done now and wakes its waiter.
  void finish(std::int32_t tag, std::int32_t node) {
    Job& j = job(tag);
    j.done = sim().now();
    j.node = node;
    if (j.waiter) sim().schedule(0, sim::Target::resume(std::exchange(j.waiter, {})));
  }
  /// Awaitable: resumes once job `tag` is done.
  auto wait_job(std::int32_t tag) {
    struct Awaiter {
      VgpuModel& m;
      std::int32_t tag;
      bool await_ready() { return m.job(tag).done >= 0; }
      void await_suspend(std::coroutine_handle<> h) { m.job(tag).waiter = h; }
      void await_resume() const noexcept {}
    };
    return Awaiter{*this, tag};
  }

 private:
  topology::System& system_;
  VgpuParams p_;
  bool bare_;
  runtime::Recorder rec_;
  sim::Server gsp_;
  sim::Server gr_;
  sim::Server ce_;
  sim::Server windows_;
  Poller poller_;
  std::vector<Context> contexts_;
  std::vector<std::unique_ptr<sim::Server>> memcpy_;
  std::vector<Job> jobs_;
  std::array<runtime::Recorder::Kind, static_cast<int>(OpKind::kCount)> kinds_{};
  std::size_t first_node_ = 0;
  std::int32_t next_tag_ = 0;
};

}  // namespace kernbench::platforms::vgpu
