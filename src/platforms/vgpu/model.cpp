// model.cpp -- the forwarding path's shared parts: servers, poller, op log,
// fabric moves and the GSP RPC round trip.
#include "platforms/vgpu/model.hpp"

#include "sim/errors.hpp"

namespace kernbench::platforms::vgpu {

namespace {
constexpr const char* kKindNames[] = {
    "guest_driver", "trap",      "pde_forward", "rpc",     "poll_wait",       "host_cpu",   "qmd_relocation",
    "shadow_copy",  "bounce_in", "doorbell",    "gr_exec", "completion_poll", "bounce_out", "msix",
    "launch",       "ce_copy",   "ce_chunk",    "memcpy",  "malloc",          "init"};
static_assert(std::size(kKindNames) == static_cast<std::size_t>(OpKind::kCount));
constexpr const char* kResourceNames[] = {"guest_cpu", "trap_channel", "backend", "gsp",   "poller",
                                          "gr",        "ce",           "fabric",  "bounce"};
static_assert(std::size(kResourceNames) == static_cast<std::size_t>(Resource::kCount));
}  // namespace

const char* VgpuModel::kind_name(OpKind k) { return kKindNames[static_cast<int>(k)]; }
const char* VgpuModel::resource_name(Resource r) { return kResourceNames[static_cast<int>(r)]; }
std::vector<std::string> VgpuModel::kind_names() { return {std::begin(kKindNames), std::end(kKindNames)}; }
std::vector<std::string> VgpuModel::resource_names() { return {std::begin(kResourceNames), std::end(kResourceNames)}; }

VgpuModel::VgpuModel(topology::System& system, bool bare)
    : system_(system),
      p_(resolve_params(system)),
      bare_(bare),
      rec_(system.sim()),
      gsp_(system.sim(), "vgpu.gsp"),
      gr_(system.sim(), "vgpu.gr"),
      ce_(system.sim(), "vgpu.ce"),
      windows_(system.sim(), "vgpu.bounce_windows", p_.cfg.copy.windows),
      poller_(system.sim(), p_.cfg.poll) {
  contexts_.resize(static_cast<std::size_t>(p_.cfg.guests));
  for (std::size_t g = 0; g < contexts_.size(); ++g) {
    contexts_[g].cached.assign(p_.cfg.pde.guest_windows.size(), false);
    memcpy_.push_back(std::make_unique<sim::Server>(system.sim(), "vgpu.backend" + std::to_string(g)));
  }
  for (int k = 0; k < static_cast<int>(OpKind::kCount); ++k)
    kinds_[static_cast<std::size_t>(k)] = rec_.kind(kKindNames[k]);
  for (const char* r : kResourceNames) rec_.add_resource(r);
  first_node_ = rec_.size();
}

VgpuModel::Context& VgpuModel::context(int g) {
  if (g < 0 || g >= static_cast<int>(contexts_.size()))
    throw UsageError("vgpu: guest " + std::to_string(g) +
                     " does not exist (vgpu.guests = " + std::to_string(contexts_.size()) + ")");
  return contexts_[static_cast<std::size_t>(g)];
}

sim::Server& VgpuModel::backend(int g) {
  context(g);
  return *memcpy_[static_cast<std::size_t>(g)];
}

std::int32_t VgpuModel::record(runtime::Chain& ch, OpKind kind, Resource res, int g, std::int32_t tag, Time issue,
                               Time start, Time end, Bytes bytes, double work, std::int32_t holder, Time ready,
                               Resource queued) {
  runtime::Recorder::Op op;
  op.kind = kinds_[static_cast<std::size_t>(kind)];
  op.resource = static_cast<std::int32_t>(res);
  op.agent = g;
  op.tag = tag;
  op.issue = issue;
  op.start = start;
  op.end = end;
  op.bytes = bytes;
  op.work = work;
  op.holder = holder;
  op.ready = ready;
  if (queued != Resource::kCount) op.wait_resource = static_cast<std::int32_t>(queued);
  return rec_.step(ch, op);
}

void VgpuModel::envelope(OpKind kind, Resource res, int g, std::int32_t tag, Time issue, Time start, Time end,
                         Bytes bytes, double work) {
  rec_.record_row(kinds_[static_cast<std::size_t>(kind)], static_cast<std::int32_t>(res), g, tag, issue, start, end,
                  bytes, work);
}

std::int32_t VgpuModel::cause(runtime::Chain& ch, const char* what, Resource res, int g, std::int32_t tag, Time start,
                              Time end, std::int32_t holder, Time ready, Resource queued) {
  runtime::Recorder::Op op;
  op.kind = rec_.cause_kind(what);
  op.resource = static_cast<std::int32_t>(res);
  op.agent = g;
  op.tag = tag;
  op.issue = op.start = start;
  op.end = end;
  op.holder = holder;
  op.ready = ready;
  if (queued != Resource::kCount) op.wait_resource = static_cast<std::int32_t>(queued);
  op.log_row = false;
  return rec_.step(ch, op);
}

sim::Task<void> VgpuModel::cause_delay(runtime::Chain& ch, Time d, int g, std::int32_t tag, const char* what,
                                       Resource res) {
  const Time t0 = sim().now();
  if (d > 0) co_await sim().delay(d);
  cause(ch, what, res, g, tag, t0, sim().now());
}

runtime::CriticalPath VgpuModel::critical_path(const std::string& name, Time start) const {
  return runtime::critical_path(rec_.graph(name, start, system_.sim().now(), first_node_, rec_.size()));
}

VgpuModel::Job& VgpuModel::job(std::int32_t tag) {
  if (tag >= static_cast<std::int32_t>(jobs_.size())) jobs_.resize(static_cast<std::size_t>(tag) + 1);
  return jobs_[static_cast<std::size_t>(tag)];
}

sim::Task<Time> VgpuModel::move(NodeId src, NodeId dst, Bytes bytes, int g, std::int32_t tag, OpKind kind,
                                Resource res) {
  const Time t0 = sim().now();
  if (bytes > 0) {
    topology::TransferSpec spec;
    spec.src = src;
    spec.dst = dst;
    spec.bytes = bytes;
    spec.tag = tag;
    spec.agent = g;
    co_await system_.fabric().transfer(spec);
  }
  if (kind != OpKind::kCount) record(chain(g), kind, res, g, tag, t0, t0, sim().now(), bytes);
  co_return sim().now() - t0;
}

sim::Task<void> VgpuModel::hop(NodeId src, NodeId dst, Bytes bytes, int g, std::int32_t tag, const char* what) {
  const Time t0 = sim().now();
  co_await move(src, dst, bytes, g, tag, OpKind::kCount, Resource::Fabric);
  runtime::Recorder::Op op;
  op.kind = rec_.cause_kind(what);
  op.resource = static_cast<std::int32_t>(Resource::Fabric);
  op.agent = g;
  op.tag = tag;
  op.issue = op.start = t0;
  op.end = sim().now();
  op.bytes = bytes;
  op.log_row = false;
  rec_.step(chain(g), op);
}

sim::Task<void> VgpuModel::cpu(Time d, int g, std::int32_t tag, OpKind kind, Resource res, const char* what) {
  if (kind == OpKind::kCount) {
    co_await cause_delay(chain(g), d, g, tag, what, res);
    co_return;
  }
  const Time t0 = sim().now();
  co_await sim().delay(d);
  record(chain(g), kind, res, g, tag, t0, t0, sim().now());
}

sim::Task<Time> VgpuModel::rpc(int g, std::int32_t tag, Time extra_firmware, LaunchResult* acc) {
  const auto& c = p_.cfg;
  const Time t0 = sim().now();
  co_await cpu(c.rpc.host_cost, g, tag, OpKind::HostCpu, Resource::Backend);
  co_await hop(p_.host, p_.gsp, c.rpc.tx_bytes, g, tag, "rpc_tx");
  // The GSP serves one RPC at a time for every guest: the queue is measured.
  const Time arrived = sim().now();
  std::int32_t holder = -1;
  co_await gsp_.acquire_handed(holder);
  const Time taken = sim().now();
  const Time service = draw(c.rpc.firmware, sim().rng()) + extra_firmware;
  co_await sim().delay(service);
  gsp_.release(record(chain(g), OpKind::Rpc, Resource::Gsp, g, tag, arrived, taken, sim().now(), c.rpc.tx_bytes,
                      sim::to_seconds(service) * 1e3, holder));
  co_await hop(p_.gsp, p_.host, c.rpc.reply_bytes, g, tag, "rpc_reply");
  // The reply, then the rest of the exchange's mailbox turns (reply
  // fragments / acknowledgements the GSP front end posts at once): each is
  // seen only when the poller looks.
  Time waited = 0;
  for (int k = 0; k < c.poll.waits_per_round_trip; ++k) {
    if (k > 0) {
      co_await hop(p_.host, p_.gsp, c.rpc.tx_bytes, g, tag, "rpc_tx");
      co_await hop(p_.gsp, p_.host, c.rpc.reply_bytes, g, tag, "rpc_reply");
    }
    const Time w0 = sim().now();
    co_await poller_.observe();
    record(chain(g), OpKind::PollWait, Resource::Poller, g, tag, w0, w0, sim().now());
    waited += sim().now() - w0;
  }
  const Time rt = sim().now() - t0;
  if (acc) {
    ++acc->rpcs;
    acc->poll_waits += c.poll.waits_per_round_trip;
    acc->poll_wait += waited;
    acc->gsp_wait += taken - arrived;
    acc->firmware += service;
    acc->round_trips.push_back(rt);
  }
  co_return rt;
}

}  // namespace kernbench::platforms::vgpu
