// k200.cpp -- the K200 model's frame: graph checks, engines, op records,
// the eDMA and memcpy primitives, reports.
//
// The eDMA op (edma()) is the unit every copy path is made of:
//   hold a channel of the die (3) and of the card (8);
//   setup (descriptor + doorbell, k200.driver.edma_setup);
//   reads (H2D) also pay the read round trip (k200.pcie.read_latency);
//   the payload crosses the fabric as whole TLPs (wire_bytes()) from host
//   DRAM to the die's HBM (or back), sharing the card's PCIe link with
//   every other transfer on it;
//   completion is noticed at the next tick of the driver's poll (every
//   k200.driver.poll_period on the absolute clock: a polling thread).
#include "platforms/k200/k200.hpp"
#include "platforms/k200/config_section.hpp"

#include <algorithm>
#include <cmath>
#include <regex>

#include "sim/errors.hpp"

namespace kernbench::platforms::k200 {

namespace {

const char* const kCopyKinds[] = {"pinned", "pageable", "stock", "peer", "peer_cross_card", "cross_card_staged", "d2d"};

}  // namespace

const char* to_string(CopyKind k) { return kCopyKinds[static_cast<int>(k)]; }
const char* to_string(Direction d) { return d == Direction::H2D ? "h2d" : "d2h"; }

CopyKind copy_kind_from(const std::string& name) {
  for (int i = 0; i < 7; ++i)
    if (name == kCopyKinds[i]) return static_cast<CopyKind>(i);
  std::string known;
  for (const char* k : kCopyKinds) known += std::string(known.empty() ? "" : ", ") + k;
  throw ConfigError("unknown K200 copy kind '" + name + "' (known: " + known + ")");
}

Direction direction_from(const std::string& name) {
  if (name == "h2d") return Direction::H2D;
  if (name == "d2h") return Direction::D2H;
  throw ConfigError("unknown copy direction '" + name + "' (known: h2d, d2h)");
}

double RunReport::gib_per_s() const {
  const double s = sim::to_seconds(elapsed());
  return s > 0 ? static_cast<double>(bytes) / s / static_cast<double>(sim::kGiB) : 0.0;
}

double RunReport::gflops() const {
  const double s = sim::to_seconds(elapsed());
  return s > 0 ? flops / s / 1e9 : 0.0;
}

K200::K200(topology::System& system) : system_(system), rec_(system.sim()) {
  const topology::Config& c = system.config();
  const K200Config* k200 = config_of(c);
  if (!k200) throw ConfigError(c.source + ": k200: section missing: the K200 model needs it (see configs/k200.yaml)");
  if (!c.graph) throw ConfigError(c.source + ": the K200 model runs on an explicit graph (graph:), not a system");
  cfg_ = *k200;
  const topology::Machine& m = system.machine();
  sim::Simulation& sim = system.sim();
  const auto need = [&](const std::string& name) {
    const auto id = m.find(name);
    if (!id) throw ConfigError(c.source + ": graph.nodes: the K200 model needs a node named '" + name + "'");
    return *id;
  };
  host_dram_ = need("host.dram");

  // Cards and dies from the node names card<i>.die<j>.
  const std::regex die_name(R"(card(\d+)\.die(\d+))");
  std::map<int, std::map<int, NodeId>> found;
  for (NodeId id = 0; id < m.num_nodes(); ++id) {
    std::smatch g;
    const std::string& name = m.node(id).name;
    if (std::regex_match(name, g, die_name)) found[std::stoi(g[1])][std::stoi(g[2])] = id;
  }
  if (found.empty()) throw ConfigError(c.source + ": graph.nodes: no die nodes (named card<i>.die<j>)");
  int expect_card = 0;
  for (auto& [ci, dies] : found) {
    if (ci != expect_card++)
      throw ConfigError(c.source + ": graph.nodes: cards must be numbered 0, 1, ...: card" +
                        std::to_string(expect_card - 1) + " is missing");
    Card card;
    card.edma = std::make_unique<sim::Server>(sim, "card" + std::to_string(ci) + ".edma", cfg_.edma.channels_per_card);
    card.res_edma = add_resource(card.edma->name());
    meters_.push_back({card.edma->name(), card.edma.get(), 0});
    int expect_die = 0;
    for (auto& [di, node] : dies) {
      if (di != expect_die++)
        throw ConfigError(c.source + ": graph.nodes: dies of card" + std::to_string(ci) +
                          " must be numbered 0, 1, ...: die" + std::to_string(expect_die - 1) + " is missing");
      Die d;
      d.ref = {ci, di};
      d.node = node;
      const std::string base = "card" + std::to_string(ci) + ".die" + std::to_string(di);
      d.hbm = need(base + ".hbm");
      d.channels = std::make_unique<sim::Server>(sim, base + ".edma_channels", cfg_.edma.channels_per_die);
      d.queue = std::make_unique<sim::Server>(sim, base + ".queue");
      d.compute = std::make_unique<sim::Server>(sim, base + ".clusters", cfg_.compute.clusters);
      d.grant = std::make_unique<sim::Server>(sim, base + ".cluster_grant");
      d.res_channels = add_resource(d.channels->name());
      d.res_queue = add_resource(d.queue->name());
      d.res_compute = add_resource(d.compute->name());
      d.res_hbm = add_resource(base + ".hbm");
      meters_.push_back({d.channels->name(), d.channels.get(), 0});
      meters_.push_back({d.queue->name(), d.queue.get(), 0});
      meters_.push_back({d.compute->name(), d.compute.get(), 0});
      if (const auto ch = m.channel_between(d.node, d.hbm)) {
        meters_.push_back({base + ".hbm_read", nullptr, *ch});
        const auto& link = m.channel(*ch).link;
        d.hbm_bandwidth.bytes_per_s = link.bandwidth.bytes_per_s * link.connections;
      }
      card.dies.push_back(std::move(d));
    }
    cards_.push_back(std::move(card));
  }

  // The PCIe links: edges of the configured class, one per card, carrying
  // exactly the line rate the k200.pcie section derives.
  const double line = pcie_line_bytes_per_s();
  for (topology::ChannelId ch = 0; ch < m.num_channels(); ++ch) {
    const topology::ChannelInfo& info = m.channel(ch);
    if (info.link_class != cfg_.pcie.link_class) continue;
    const std::string& from = m.node(info.from).name;
    const std::string& to = m.node(info.to).name;
    const double bw = static_cast<double>(info.link.bandwidth.bytes_per_s) * info.link.connections;
    if (std::abs(bw - line) > 1e-4 * line)
      throw ConfigError(c.source + ": graph.edges: the " + cfg_.pcie.link_class + " link " + from + " <-> " + to +
                        " carries " + std::to_string(bw / 1e9) + " GB/s but k200.pcie derives " +
                        std::to_string(line / 1e9) +
                        " GB/s (lanes x lane_rate x encoding_data_bits / "
                        "encoding_total_bits): make them agree");
    const std::regex card_node(R"(card(\d+)\..*)");
    std::smatch g;
    const bool to_card = std::regex_match(to, g, card_node);
    if (!to_card && !std::regex_match(from, g, card_node))
      throw ConfigError(c.source + ": graph.edges: the " + cfg_.pcie.link_class + " link " + from + " <-> " + to +
                        " has no card end (a node named card<i>.*)");
    const auto ci = static_cast<std::size_t>(std::stoi(g[1]));
    if (ci >= cards_.size()) continue;
    Card& card = cards_[ci];
    const std::string name = "card" + std::to_string(ci) + ".pcie_" + (to_card ? "down" : "up");
    (to_card ? card.down : card.up) = ch;
    (to_card ? card.res_link_down : card.res_link_up) = add_resource(name);
    meters_.push_back({name, nullptr, ch});
  }
  for (std::size_t ci = 0; ci < cards_.size(); ++ci)
    if (!cards_[ci].down)
      throw ConfigError(c.source + ": graph.edges: card" + std::to_string(ci) + " has no " + cfg_.pcie.link_class +
                        " link (k200.pcie.link_class)");

  copy_threads_ = std::make_unique<sim::Server>(sim, "host.copy_threads", cfg_.host.copy_threads);
  res_host_copy_ = add_resource(copy_threads_->name());
  meters_.push_back({copy_threads_->name(), copy_threads_.get(), 0});
  res_driver_ = add_resource("host.driver");
  pool_free_ = cfg_.driver.hugepage_pool;
}

int K200::dies_per_card(int card) const {
  if (card < 0 || card >= cards()) throw UsageError("card " + std::to_string(card) + " out of range");
  return static_cast<int>(cards_[static_cast<std::size_t>(card)].dies.size());
}

K200::Die& K200::die(DieRef d) {
  if (d.card < 0 || d.card >= cards())
    throw UsageError("K200: card " + std::to_string(d.card) + " does not exist (the config has " +
                     std::to_string(cards()) + " cards)");
  Card& c = cards_[static_cast<std::size_t>(d.card)];
  if (d.die < 0 || d.die >= static_cast<int>(c.dies.size()))
    throw UsageError("K200: card" + std::to_string(d.card) + " has no die " + std::to_string(d.die) + " (it has " +
                     std::to_string(c.dies.size()) + ")");
  return c.dies[static_cast<std::size_t>(d.die)];
}

double K200::pcie_line_bytes_per_s() const {
  const auto& p = cfg_.pcie;
  return static_cast<double>(p.lane_rate.bytes_per_s) * p.lanes * p.encoding_data_bits / p.encoding_total_bits;
}

double K200::pcie_payload_bytes_per_s() const {
  const auto& p = cfg_.pcie;
  return pcie_line_bytes_per_s() * static_cast<double>(p.tlp_payload) /
         static_cast<double>(p.tlp_payload + p.tlp_overhead);
}

Bytes K200::wire_bytes(Bytes payload) const {
  const auto& p = cfg_.pcie;
  const Bytes tlps = (payload + p.tlp_payload - 1) / p.tlp_payload;
  return payload + tlps * p.tlp_overhead;
}

std::int32_t K200::record(Chain& ch, const char* kind_name, std::int32_t resource, std::int32_t tag, Time issue,
                          Time start, Time end, Bytes bytes, double work, std::int32_t holder, std::int32_t after,
                          Time ready, std::int32_t wait_resource) {
  runtime::Recorder::Op op;
  op.kind = rec_.kind(kind_name);
  op.resource = resource;
  op.tag = tag;
  op.issue = issue;
  op.start = start;
  op.end = end;
  op.bytes = bytes;
  op.work = work;
  op.holder = holder;
  op.after = after;
  op.ready = ready;
  op.wait_resource = wait_resource;
  return rec_.step(ch, op);
}

sim::Task<void> K200::delay_op(Chain& ch, const char* kind_name, std::int32_t resource, std::int32_t tag, Time t,
                               Bytes bytes) {
  const Time t0 = system_.sim().now();
  if (t > 0) co_await system_.sim().delay(t);
  record(ch, kind_name, resource, tag, t0, t0, system_.sim().now(), bytes);
}

sim::Task<Time> K200::poll_until(Chain& ch, Time done, std::int32_t resource, std::int32_t tag) {
  // The poll thread ticks on the absolute clock; the completion is seen at
  // the first tick at or after it.
  sim::Simulation& sim = system_.sim();
  const Time p = cfg_.driver.poll_period;
  const Time seen = (done + p - 1) / p * p;
  if (seen > sim.now()) co_await sim.delay(seen - sim.now());
  record(ch, "poll", resource, tag, done, done, seen);
  co_return seen;
}

sim::Task<void> K200::edma(Chain& ch, DieRef ref, Direction dir, Bytes bytes, std::int32_t tag) {
  sim::Simulation& sim = system_.sim();
  Die& d = die(ref);
  Card& card = cards_[static_cast<std::size_t>(ref.card)];
  const Time asked = sim.now();
  std::int32_t holder = -1;  // who handed over the channel it waited for last
  co_await d.channels->acquire_handed(holder);
  const Time got_channel = sim.now();
  co_await card.edma->acquire_handed(holder);
  const Time t0 = sim.now();
  const std::int32_t queued = t0 > got_channel ? card.res_edma : d.res_channels;  // what it waited for last
  Time setup = cfg_.driver.edma_setup + (dir == Direction::H2D ? cfg_.pcie.read_latency : 0);
  if (setup > 0) co_await sim.delay(setup);
  topology::TransferSpec spec;
  spec.src = dir == Direction::H2D ? host_dram_ : d.hbm;
  spec.dst = dir == Direction::H2D ? d.hbm : host_dram_;
  spec.bytes = wire_bytes(bytes);
  spec.tag = tag;
  spec.agent = d.res_channels;
  const topology::TransferRecord& r = co_await system_.fabric().transfer(spec);
  const Time done = r.end;
  record(ch, "edma", dir == Direction::H2D ? card.res_link_down : card.res_link_up, tag, asked, t0, done, bytes, 0.0,
         holder, -1, -1, queued);
  const Time seen = co_await poll_until(ch, done, card.res_edma, tag);
  if (seen - t0 > cfg_.driver.poll_timeout)
    throw UsageError("K200 eDMA on card" + std::to_string(ref.card) + ".die" + std::to_string(ref.die) +
                     ": completion after " + std::to_string(sim::to_seconds(seen - t0)) +
                     " s exceeds the driver's poll timeout");
  card.edma->release(ch.last);  // the poll that saw the completion ends the hold
  d.channels->release(ch.last);
}

sim::Task<void> K200::memcpy_host(Chain& ch, Direction dir, Bytes bytes, std::int32_t tag) {
  sim::Simulation& sim = system_.sim();
  const Time asked = sim.now();
  std::int32_t holder = -1;
  co_await copy_threads_->acquire_handed(holder);
  const Time t0 = sim.now();
  const sim::Bandwidth bw = dir == Direction::H2D ? cfg_.host.copy_from_user : cfg_.host.copy_to_user;
  co_await sim.delay(sim::transfer_time(bytes, bw));
  copy_threads_->release(record(ch, "memcpy", res_host_copy_, tag, asked, t0, sim.now(), bytes, 0.0, holder));
}

runtime::CriticalPath K200::critical_path(const RunReport& r, const std::string& name) const {
  return runtime::critical_path(rec_.graph(name, r.start, r.end, r.cause_begin, r.cause_end));
}

double K200::meter_busy(const Meter& m) const {
  if (m.server) return m.server->busy_unit_time() / m.server->capacity();
  return system_.fabric().channel_stats(m.channel).busy_time;
}

K200::Snapshot K200::snapshot() const {
  Snapshot s;
  s.t = system_.sim().now();
  s.row = system_.sim().op_log().size();
  s.cause = rec_.size();
  for (const Meter& m : meters_) s.busy.push_back(meter_busy(m));
  return s;
}

RunReport K200::report(const Snapshot& s) const {
  RunReport r;
  r.start = s.t;
  r.end = system_.sim().now();
  r.log_begin = s.row;
  const sim::OpLog& log = system_.sim().op_log();
  r.log_end = log.size();
  r.cause_begin = s.cause;
  r.cause_end = rec_.size();
  std::map<std::int32_t, OpTotal> by_kind;
  for (std::size_t i = r.log_begin; i < r.log_end; ++i) {
    OpTotal& t = by_kind[log.kind()[i]];
    t.kind = log.kind_names()[static_cast<std::size_t>(log.kind()[i])];
    ++t.count;
    t.time += log.end()[i] - log.start()[i];
    t.bytes += log.bytes()[i];
  }
  for (auto& [code, t] : by_kind) r.ops.push_back(t);
  const double dt = static_cast<double>(r.end - r.start);
  for (std::size_t i = 0; i < meters_.size(); ++i) {
    const double busy = meter_busy(meters_[i]) - s.busy[i];
    if (busy <= 0.0 || dt <= 0.0) continue;
    r.utilization.push_back({meters_[i].name, busy / dt});
  }
  std::stable_sort(r.utilization.begin(), r.utilization.end(),
                   [](const Utilization& a, const Utilization& b) { return a.busy > b.busy; });
  if (!r.utilization.empty()) r.bound = r.utilization.front().resource;
  return r;
}

void K200::run_to_completion() {
  sim::Simulation& sim = system_.sim();
  sim.run();
  const auto live = sim.live_processes();
  if (!live.empty()) {
    std::string names;
    for (const auto& n : live) names += (names.empty() ? "" : ", ") + n;
    throw DeadlockError("K200 model: processes still waiting when nothing else can happen: " + names);
  }
}

}  // namespace kernbench::platforms::k200
