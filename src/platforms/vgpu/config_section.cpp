// config_section.cpp -- the `vgpu:` section: each key bound to its member
// of VgpuConfig (defaults from config.hpp); the cross-key rules (guests,
// distribution bounds, the PDE window list, the copy sweep) are the hooks
// between them.
#include "platforms/vgpu/config_section.hpp"

#include <string>

#include "config/section.hpp"

namespace kernbench::platforms::vgpu {

using config::Bound;
using config::describe;
using config::format_bytes;
using config::format_time;
using config::MapReader;
using config::Section;
using config::Type;
using config::Value;
using topology::Config;

void add_config_section(config::Schema& schema) {
  Section<Config> root(schema, schema.root());
  root.rule([](const MapReader& top, Config& c) {
    if (top.get("vgpu") && c.system)
      top.fail_key("vgpu",
                   "the vgpu path runs on an explicit graph, not a system (start from configs/vgpu.yaml, e.g. "
                   "--config vgpu.yaml)");
  });
  Section<VgpuConfig> vgpu = root.map<VgpuConfig>(
      "vgpu", [](Config& c) -> VgpuConfig& { return c.section<VgpuConfig>(); },
      "the virtualised-GPU forwarding path (with graph)");
  vgpu.doc("The virtualised-GPU forwarding path (needs a graph with the nodes named in roles).");
  vgpu.add("guests", &VgpuConfig::guests, "guest VMs sharing the GPU (and its GSP queue)").min(Bound::Positive);
  vgpu.rule([](const MapReader& r, VgpuConfig& v) {
    if (r.get("guests") && v.guests > 1024)
      r.fail("guests", "at most 1024 guests share one GPU in this model, got " + std::to_string(v.guests));
  });
  vgpu.time("jiffy", &VgpuConfig::jiffy, "host clock granularity of elapsed_ms (at least 1 us)").min(Bound::Positive);
  vgpu.rule([](const MapReader& r, VgpuConfig& v) {
    // elapsed_ms counts jiffies: a ps jiffy made a 189 ms launch read 1.9e11 and its histogram ask for 48 GiB.
    if (r.get("jiffy") && v.jiffy < sim::kMicrosecond)
      r.fail("jiffy", "a jiffy of " + format_time(v.jiffy) + " is a host clock of " +
                          std::to_string(sim::kSecond / v.jiffy) +
                          " Hz; at least 1 us (HZ at most 1000000; Linux runs 100 .. 1000)");
  });
  Section<VgpuRoles> vgpu_roles = vgpu.map<VgpuRoles>("roles", &VgpuConfig::roles, "graph nodes of the path");
  vgpu_roles.doc("Which graph nodes play which part of the vGPU path (names from graph.nodes).");
  vgpu_roles.add("guest", &VgpuRoles::guest, "guest vCPU: guest driver ops start here; MMIO writes trap from here");
  vgpu_roles.add("guest_memory", &VgpuRoles::guest_memory, "guest RAM: H2D source, D2H sink");
  vgpu_roles.add("host", &VgpuRoles::host, "host backend worker");
  vgpu_roles.add("bounce", &VgpuRoles::bounce, "host bounce windows");
  vgpu_roles.add("gsp", &VgpuRoles::gsp, "GPU firmware processor");
  vgpu_roles.add("gr", &VgpuRoles::gr, "compute engine");
  vgpu_roles.add("ce", &VgpuRoles::ce, "copy engine");
  vgpu_roles.add("gpu_memory", &VgpuRoles::gpu_memory, "GPU memory");
  Section<VgpuPollConfig> vgpu_poll = vgpu.map<VgpuPollConfig>("poll", &VgpuConfig::poll, "the host poller");
  vgpu_poll.doc(
      "How the host notices GSP replies: tick (a polled worker re-armed one quantum after "
      "each event: a full quantum per wait), grid (free-running ticks), interrupt.");
  vgpu_poll.choice("mode", &VgpuPollConfig::mode, "tick, grid or interrupt", vgpu_poll_mode_names(),
                   vgpu_poll_mode_from_string);
  vgpu_poll.time("quantum", &VgpuPollConfig::quantum, "poll quantum").min(Bound::Positive);
  vgpu_poll.add("waits_per_round_trip", &VgpuPollConfig::waits_per_round_trip, "poll waits one RPC round trip needs")
      .min(Bound::Positive);
  vgpu_poll.time("interrupt_latency", &VgpuPollConfig::interrupt_latency, "interrupt mode: cost of one wait")
      .min(Bound::NonNegative);
  vgpu_poll.time("phase", &VgpuPollConfig::phase, "grid mode: time of the first tick").min(Bound::NonNegative);
  Section<VgpuRpcConfig> vgpu_rpc = vgpu.map<VgpuRpcConfig>("rpc", &VgpuConfig::rpc, "GSP RPCs");
  vgpu_rpc.doc("One RPC to the GSP (all guests share one FIFO queue).");
  Section<VgpuDistribution> vgpu_dist =
      vgpu_rpc.map<VgpuDistribution>("firmware", &VgpuRpcConfig::firmware, "GSP firmware service time of one RPC");
  vgpu_dist.doc(
      "A seeded duration distribution: fixed (mean), uniform [min, max], normal (mean, sd) "
      "clamped into [min, max] (max 0: no upper bound).");
  vgpu_dist.rules({"uniform needs min <= max", "max, when not 0, is >= min"});
  vgpu_dist.choice("kind", &VgpuDistribution::kind, "fixed, uniform or normal", vgpu_dist_kind_names(),
                   vgpu_dist_kind_from_string);
  vgpu_dist.time("mean", &VgpuDistribution::mean, "mean (fixed: the value)").min(Bound::NonNegative);
  vgpu_dist.time("sd", &VgpuDistribution::sd, "standard deviation (normal)").min(Bound::NonNegative);
  vgpu_dist.time("min", &VgpuDistribution::min, "lower bound (uniform, normal clamp)").min(Bound::NonNegative);
  vgpu_dist.time("max", &VgpuDistribution::max, "upper bound (uniform; normal clamp, 0: none)").min(Bound::NonNegative);
  vgpu_dist.rule([](const MapReader& r, VgpuDistribution& d) {
    if (d.kind == VgpuDistKind::Uniform && d.min > d.max)
      r.fail("max", "uniform needs min <= max (min " + format_time(d.min) + ", max " + format_time(d.max) + ")");
    if (d.kind == VgpuDistKind::Normal && d.max != 0 && d.max < d.min)
      r.fail("max", "max (" + format_time(d.max) + ") is below min (" + format_time(d.min) + "); 0 means no bound");
  });
  vgpu_rpc.time("host_cost", &VgpuRpcConfig::host_cost, "backend CPU per RPC").min(Bound::NonNegative);
  vgpu_rpc.bytes("tx_bytes", &VgpuRpcConfig::tx_bytes, "TX message size").min(Bound::Positive);
  vgpu_rpc.bytes("reply_bytes", &VgpuRpcConfig::reply_bytes, "reply size").min(Bound::Positive);
  vgpu_rpc.time("batch_entry", &VgpuRpcConfig::batch_entry, "extra firmware time per extra window of a batched RPC")
      .min(Bound::NonNegative);
  Section<VgpuPdeConfig> vgpu_pde = vgpu.map<VgpuPdeConfig>("pde", &VgpuConfig::pde, "PDE forwards of a launch");
  vgpu_pde.doc("PDE_UPDATE forwards of a GR launch.");
  vgpu_pde.add("scratch_accepted", &VgpuPdeConfig::scratch_accepted,
               "the scratch-window install (once per context) is accepted");
  vgpu_pde.key("guest_windows", Type::Strings, "one entry per guest window attempted per launch: accept or refuse")
      .dflt(VgpuPdeConfig{}.guest_windows);
  vgpu_pde.rule([](const MapReader& m, VgpuPdeConfig& p) {
    const Value* w = m.get("guest_windows");
    if (!w) return;
    if (w->type != Value::Type::List) m.fail("guest_windows", "expected a list of accept/refuse, got " + describe(*w));
    p.guest_windows.clear();
    for (std::size_t i = 0; i < w->items.size(); ++i) {
      const Value& item = w->items[i];
      if (item.type != Value::Type::Scalar || (item.text != "accept" && item.text != "refuse"))
        m.fail("guest_windows", "item " + std::to_string(i) + ": expected accept or refuse, got " + describe(item));
      p.guest_windows.push_back(item.text);
    }
  });
  vgpu_pde.add("batching", &VgpuPdeConfig::batching, "what-if: all forwards of a launch in one RPC");
  vgpu_pde.add("cache_accepted", &VgpuPdeConfig::cache_accepted,
               "what-if: accepted guest windows are not forwarded again");
  Section<VgpuLaunchConfig> vgpu_launch = vgpu.map<VgpuLaunchConfig>("launch", &VgpuConfig::launch, "GR launch costs");
  vgpu_launch.doc("The costs of one forwarded GR launch besides the RPCs.");
  vgpu_launch.time("guest_driver", &VgpuLaunchConfig::guest_driver, "guest driver work before the doorbell write traps")
      .min(Bound::NonNegative);
  vgpu_launch.time("qmd_relocation", &VgpuLaunchConfig::qmd_relocation, "QMD relocation / pre-write")
      .min(Bound::NonNegative);
  vgpu_launch.bytes("param_shadow", &VgpuLaunchConfig::param_shadow, "parameter shadow copy").min(Bound::NonNegative);
  vgpu_launch.bytes("program_shadow", &VgpuLaunchConfig::program_shadow, "program shadow copy").min(Bound::NonNegative);
  vgpu_launch.time("shadow_cost", &VgpuLaunchConfig::shadow_cost, "backend CPU per shadow copy")
      .min(Bound::NonNegative);
  vgpu_launch.add("bounce_pages_in", &VgpuLaunchConfig::bounce_pages_in, "pages bounced in per launch")
      .min(Bound::NonNegative);
  vgpu_launch.add("bounce_pages_out", &VgpuLaunchConfig::bounce_pages_out, "pages bounced out per launch")
      .min(Bound::NonNegative);
  vgpu_launch.bytes("page", &VgpuLaunchConfig::page, "page size").min(Bound::Positive);
  vgpu_launch.time("page_in_cost", &VgpuLaunchConfig::page_in_cost, "backend CPU per page in").min(Bound::NonNegative);
  vgpu_launch.time("page_out_cost", &VgpuLaunchConfig::page_out_cost, "backend CPU per page out")
      .min(Bound::NonNegative);
  vgpu_launch.bytes("doorbell_bytes", &VgpuLaunchConfig::doorbell_bytes, "doorbell / GPFIFO publish write")
      .min(Bound::Positive);
  vgpu_launch
      .time("gr_first_setup", &VgpuLaunchConfig::gr_first_setup,
            "GR channel/context bring-up on a context's first launch")
      .min(Bound::NonNegative);
  vgpu_launch.time("gr_setup", &VgpuLaunchConfig::gr_setup, "GPFIFO fetch + channel switch, later launches")
      .min(Bound::NonNegative);
  vgpu_launch.time("kernel", &VgpuLaunchConfig::kernel, "the kernel's execution on GR").min(Bound::NonNegative);
  vgpu_launch.add("kernel_cycles", &VgpuLaunchConfig::kernel_cycles, "clock64 cycles the kernel reports (P12)")
      .min(Bound::NonNegative);
  vgpu_launch.choice("completion", &VgpuLaunchConfig::completion,
                     "how the backend sees a GR completion: poller (a GSP message, seen by the poll.mode "
                     "poller like an RPC reply) or poll_loop (the backend reads it every completion_poll)",
                     vgpu_completion_names(), vgpu_completion_from_string);
  vgpu_launch
      .time("completion_poll", &VgpuLaunchConfig::completion_poll,
            "poll_loop completions and CE copies: backend completion-poll interval")
      .min(Bound::Positive);
  vgpu_launch.time("give_up", &VgpuLaunchConfig::give_up, "completion poll gives up (timeout) after")
      .min(Bound::Positive);
  vgpu_launch.time("msix", &VgpuLaunchConfig::msix, "MSI-X injection into the guest").min(Bound::NonNegative);
  vgpu_launch.rules({"give_up / completion_poll <= 10000000 (the polls of one launch)"});
  vgpu_launch.rule([](const MapReader& m, VgpuLaunchConfig& l) {
    // Each poll is an event: a 1 ps poll made a launch take 7.7e9 of them (the run never ended).
    constexpr std::int64_t kMaxPolls = 10'000'000;
    const std::int64_t polls = l.give_up / l.completion_poll;
    if (polls > kMaxPolls)
      m.fail(m.get("completion_poll") ? "completion_poll" : "give_up",
             "completion_poll = " + format_time(l.completion_poll) + " polls up to " + std::to_string(polls) +
                 " times per launch before give_up = " + format_time(l.give_up) + "; at most " +
                 std::to_string(kMaxPolls) +
                 " (completion_poll >= " + format_time((l.give_up + kMaxPolls - 1) / kMaxPolls) + " for this give_up)");
  });
  Section<VgpuCopyConfig> vgpu_copy =
      vgpu.map<VgpuCopyConfig>("copy", &VgpuConfig::copy, "CE copies through bounce windows");
  vgpu_copy.doc("CE copies through the host bounce windows.");
  vgpu_copy.bytes("window", &VgpuCopyConfig::window, "bounce window cap (larger copies are split)")
      .min(Bound::Positive);
  vgpu_copy.add("windows", &VgpuCopyConfig::windows, "bounce windows in flight").min(Bound::Positive);
  vgpu_copy.time("setup", &VgpuCopyConfig::setup, "backend CPU per copy").min(Bound::NonNegative);
  vgpu_copy.time("page_cost", &VgpuCopyConfig::page_cost, "backend CPU per page through a window")
      .min(Bound::NonNegative);
  vgpu_copy.time("ce_setup", &VgpuCopyConfig::ce_setup, "CE method push + doorbell per chunk").min(Bound::NonNegative);
  Section<VgpuGuestOpsConfig> vgpu_ops = vgpu.map<VgpuGuestOpsConfig>("ops", &VgpuConfig::ops, "init and cudaMalloc");
  vgpu_ops.doc("Guest driver operations other than launches and copies.");
  vgpu_ops.add("init_rpcs", &VgpuGuestOpsConfig::init_rpcs, "RPCs of context creation").min(Bound::NonNegative);
  vgpu_ops.time("init_driver", &VgpuGuestOpsConfig::init_driver, "guest driver init (same code as bare metal)")
      .min(Bound::NonNegative);
  vgpu_ops.add("malloc_first_rpcs", &VgpuGuestOpsConfig::malloc_first_rpcs, "RPCs of the first cudaMalloc")
      .min(Bound::NonNegative);
  vgpu_ops
      .add("malloc_rpc_every", &VgpuGuestOpsConfig::malloc_rpc_every, "later mallocs forward one RPC every n-th call")
      .min(Bound::Positive);
  vgpu_ops.time("malloc_driver", &VgpuGuestOpsConfig::malloc_driver, "guest driver work per malloc")
      .min(Bound::NonNegative);
  Section<VgpuBareConfig> vgpu_bare = vgpu.map<VgpuBareConfig>("bare", &VgpuConfig::bare, "bare-metal costs");
  vgpu_bare.doc("Bare-metal costs of the same workload (no forwarding path), for the guest/bare ratios.");
  vgpu_bare.time("init", &VgpuBareConfig::init, "process start -> device ready").min(Bound::NonNegative);
  vgpu_bare.time("malloc_first", &VgpuBareConfig::malloc_first, "first cudaMalloc").min(Bound::NonNegative);
  vgpu_bare.time("malloc_steady", &VgpuBareConfig::malloc_steady, "later cudaMalloc").min(Bound::NonNegative);
  vgpu_bare.time("launch", &VgpuBareConfig::launch, "driver launch path up to the doorbell").min(Bound::NonNegative);
  vgpu_bare.time("gr_first_setup", &VgpuBareConfig::gr_first_setup, "first launch of a context, native")
      .min(Bound::NonNegative);
  vgpu_bare.time("interrupt", &VgpuBareConfig::interrupt, "completion interrupt").min(Bound::NonNegative);
  vgpu_bare.time("copy_setup", &VgpuBareConfig::copy_setup, "driver cost per copy call").min(Bound::NonNegative);
  Section<VgpuWorkloadConfig> vgpu_workload =
      vgpu.map<VgpuWorkloadConfig>("workload", &VgpuConfig::workload, "the scripted workload");
  vgpu_workload.doc("The scripted perf workload (P1-P12).");
  vgpu_workload.rules({"copy_min <= copy_max"});
  vgpu_workload.add("warm_launches", &VgpuWorkloadConfig::warm_launches, "warm launches, each synchronised (P4)")
      .min(Bound::Positive);
  vgpu_workload.add("burst", &VgpuWorkloadConfig::burst, "launches of the burst with one sync (P10)")
      .min(Bound::Positive);
  vgpu_workload.add("mallocs", &VgpuWorkloadConfig::mallocs, "cudaMalloc calls (P2)").min(Bound::Positive);
  vgpu_workload.bytes("copy_min", &VgpuWorkloadConfig::copy_min, "smallest copy of the sweep").min(Bound::Positive);
  vgpu_workload.bytes("copy_max", &VgpuWorkloadConfig::copy_max, "largest copy of the sweep").min(Bound::Positive);
  vgpu_workload.add("repetitions", &VgpuWorkloadConfig::repetitions, "seeded repetitions for p50/p95 and P11")
      .min(Bound::Positive);
  vgpu_workload.rule([](const MapReader& m, VgpuWorkloadConfig& w) {
    if (w.copy_min > w.copy_max)
      m.fail("copy_max",
             "copy_max (" + format_bytes(w.copy_max) + ") is below copy_min (" + format_bytes(w.copy_min) + ")");
  });
}

}  // namespace kernbench::platforms::vgpu
