// collective.cpp -- run_collective: check the request, build, run, verify.
#include <algorithm>
#include <cmath>
#include <set>

#include "ccl/algorithms.hpp"
#include "config/quantity.hpp"
#include "runtime/config_section.hpp"
#include "ccl/verify.hpp"
#include "sim/errors.hpp"

namespace kernbench::ccl {

const char* to_string(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::AllGather: return "all_gather";
    case Collective::Broadcast: return "broadcast";
  }
  return "?";
}

Collective collective_from_string(const std::string& name) {
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather, Collective::Broadcast})
    if (name == to_string(c)) return c;
  throw UsageError("unknown collective '" + name + "' (known: all_reduce, reduce_scatter, all_gather, broadcast)");
}

const char* to_string(Buffer b) { return b == Buffer::Sram ? "sram" : "hbm"; }

Buffer buffer_from_string(const std::string& name) {
  if (name == "sram") return Buffer::Sram;
  if (name == "hbm") return Buffer::Hbm;
  throw UsageError("unknown buffer kind '" + name + "' (known: sram, hbm)");
}

Verify verify_from_string(const std::string& name) {
  if (name == "auto") return Verify::Auto;
  if (name == "on") return Verify::On;
  if (name == "off") return Verify::Off;
  throw UsageError("verify must be auto, on or off, got '" + name + "'");
}

double CollectiveResult::algorithm_bandwidth() const {
  return latency > 0 ? static_cast<double>(bytes_per_pe) / (static_cast<double>(latency) * 1e-12) : 0.0;
}

namespace {

// Upper bounds of the request, checked before anything is built.
constexpr int kMaxPieces = 1 << 16;
constexpr std::uint64_t kMaxCells = std::uint64_t{1} << 26;

struct Prepared {
  const Algorithm* algorithm = nullptr;
  Plan plan;
  std::string what;  // "all_reduce ring on 8 PEs", for messages
};

Prepared prepare(const topology::Machine& m, const topology::PeConfig& pe, const CollectiveSpec& spec) {
  Prepared out;
  std::vector<NodeId> pes = spec.pes;
  if (pes.empty()) pes = m.pes();
  std::set<NodeId> seen;
  for (std::size_t r = 0; r < pes.size(); ++r) {
    if (pes[r] >= m.num_nodes())
      throw UsageError("collective: rank " + std::to_string(r) + ": node id " + std::to_string(pes[r]) + " out of range");
    if (m.node(pes[r]).kind != topology::NodeKind::Pe)
      throw UsageError("collective: rank " + std::to_string(r) + ": " + m.node(pes[r]).name + " is not a PE");
    if (!seen.insert(pes[r]).second)
      throw UsageError("collective: " + m.node(pes[r]).name + " appears twice among the ranks");
  }
  const int n = static_cast<int>(pes.size());
  if (n < 2) throw UsageError("collective: needs at least 2 ranks, got " + std::to_string(n));
  if (spec.bytes_per_pe <= 0)
    throw UsageError("collective: bytes per PE must be positive, got " + std::to_string(spec.bytes_per_pe));
  topology::check_transfer_size(spec.bytes_per_pe, "collective buffer");
  if (spec.buffer == Buffer::Sram && spec.bytes_per_pe > pe.scratch)
    throw CapacityError("collective: buffer=sram needs " + config::format_bytes(spec.bytes_per_pe, config::ByteUnits::UpToMiB) + " per PE but the scratch is " +
                        config::format_bytes(pe.scratch, config::ByteUnits::UpToMiB) + " (pe.scratch); use buffer=hbm for larger messages");
  if (spec.buffer == Buffer::Hbm && spec.bytes_per_pe > pe.hbm.capacity)
    throw CapacityError("collective: buffer=hbm needs " + config::format_bytes(spec.bytes_per_pe, config::ByteUnits::UpToMiB) +
                        " per PE but each PE's HBM slice is " +
                        config::format_bytes(pe.hbm.capacity, config::ByteUnits::UpToMiB) + " (pe.hbm.capacity)");
  if (spec.pieces < 1) throw UsageError("collective: pieces must be >= 1, got " + std::to_string(spec.pieces));
  if (spec.pieces > kMaxPieces)
    throw UsageError("collective: pieces = " + std::to_string(spec.pieces) + " is too many (at most " +
                     std::to_string(kMaxPieces) + "; each piece is a slice of every rank's buffer)");
  if (spec.grid_w < 0 || spec.grid_h < 0)
    throw UsageError("collective: grid " + std::to_string(spec.grid_w) + "x" + std::to_string(spec.grid_h) +
                     " has a negative side (0x0: the most square grid)");
  if (spec.root < 0 || spec.root >= n)
    throw UsageError("collective: root rank " + std::to_string(spec.root) + " is not one of the " + std::to_string(n) +
                     " ranks");

  const Algorithm& a = find_algorithm(spec.algorithm);
  const auto has = [&](Collective c) {
    switch (c) {
      case Collective::AllReduce: return a.all_reduce != nullptr;
      case Collective::ReduceScatter: return a.reduce_scatter != nullptr;
      case Collective::AllGather: return a.all_gather != nullptr;
      case Collective::Broadcast: return a.broadcast != nullptr;
    }
    return false;
  };
  if (!has(spec.collective)) {
    std::string who;
    for (const AlgorithmInfo& info : algorithms())
      if (std::find(info.collectives.begin(), info.collectives.end(), to_string(spec.collective)) !=
          info.collectives.end())
        who += (who.empty() ? "" : ", ") + info.name;
    throw UsageError("collective: " + a.name + " has no " + to_string(spec.collective) + " (algorithms with one: " +
                     who + ")");
  }

  Plan& p = out.plan;
  p.machine = &m;
  p.pes = pes;
  p.world.ranks = iota_ranks(n);
  if (spec.grid_w > 0 || spec.grid_h > 0) {
    if (spec.grid_w <= 0 || spec.grid_h <= 0 || spec.grid_w * spec.grid_h != n)
      throw UsageError("collective: grid " + std::to_string(spec.grid_w) + "x" + std::to_string(spec.grid_h) +
                       " does not hold the " + std::to_string(n) + " ranks");
    p.world.w = spec.grid_w;
    p.world.h = spec.grid_h;
  } else if (const auto& g = m.rank_grid(); g && g->count() == n && pes == m.pes()) {
    p.world.w = g->w;
    p.world.h = g->h;
  } else if (a.needs_grid && !m.generated()) {
    throw UsageError("collective: " + a.name + " needs a rank grid and none is declared for these " +
                     std::to_string(n) + " ranks: give a grid (grid=(w, h); CollectiveSpec grid_w, grid_h), or declare graph.layout.grid {w, h} "
                     "(and graph.layout.ranks) in the config");
  } else {
    int h = static_cast<int>(std::sqrt(static_cast<double>(n)));
    while (n % h != 0) --h;
    p.world.h = h;
    p.world.w = n / h;
  }
  p.pieces = spec.pieces;
  p.root = spec.root;
  p.inter = spec.inter;
  if (p.inter.empty()) p.inter = topology::to_string(m.hierarchy().package_topology);
  a.check(p);
  p.slices = a.slices(p);
  // The schedule keeps one cell per (rank, slice): refuse, up front, what
  // could only end in an allocation failure.
  if (static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(std::max(p.slices, 1)) > kMaxCells)
    throw CapacityError("collective: " + std::to_string(n) + " ranks x " + std::to_string(p.slices) + " slices (pieces = " +
                        std::to_string(spec.pieces) + ") is " +
                        std::to_string(static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(p.slices)) +
                        " buffer cells, more than a schedule holds (at most " + std::to_string(kMaxCells) +
                        "); use fewer pieces");
  out.algorithm = &a;
  out.what = std::string(to_string(spec.collective)) + " " + a.name + " on " + std::to_string(n) + " PEs";
  return out;
}

Schedule build(const topology::Machine& m, const Prepared& pr, const CollectiveSpec& spec) {
  Schedule s(m, pr.plan.pes, spec.bytes_per_pe, pr.plan.slices, spec.buffer, pr.what);
  const Algorithm& a = *pr.algorithm;
  switch (spec.collective) {
    case Collective::AllReduce: a.all_reduce(s, pr.plan); break;
    case Collective::ReduceScatter: a.reduce_scatter(s, pr.plan); break;
    case Collective::AllGather: a.all_gather(s, pr.plan); break;
    case Collective::Broadcast: a.broadcast(s, pr.plan); break;
  }
  return s;
}

}  // namespace

runtime::Program build_collective(const topology::Machine& machine, const topology::PeConfig& pe,
                                  const CollectiveSpec& spec, int* slices) {
  const Prepared pr = prepare(machine, pe, spec);
  if (slices) *slices = pr.plan.slices;
  return build(machine, pr, spec).program();
}

CollectiveResult run_collective(topology::System& system, const CollectiveSpec& spec) {
  const topology::Machine& m = system.machine();
  const Prepared pr = prepare(m, pe_config(system.config()), spec);
  const Schedule s = build(m, pr, spec);
  const Plan& p = pr.plan;
  const int n = p.world.size();

  const bool check = spec.verify == Verify::On ||
                     (spec.verify == Verify::Auto && SymbolicCheck::state_bits(n, p.slices) <= (std::uint64_t{1} << 28));
  std::unique_ptr<SymbolicCheck> sym;
  if (check) {
    sym = std::make_unique<SymbolicCheck>(s, pr.what);
    const Slices all = p.all();
    for (int r = 0; r < n; ++r) {
      switch (spec.collective) {
        case Collective::AllReduce:
        case Collective::ReduceScatter: sym->set_start(r, all, SymbolicCheck::Start::Own); break;
        case Collective::AllGather: sym->set_start(r, all, SymbolicCheck::Start::Nothing); break;
        case Collective::Broadcast:
          sym->set_start(r, all, r == spec.root ? SymbolicCheck::Start::All : SymbolicCheck::Start::Nothing);
          break;
      }
    }
    if (spec.collective == Collective::AllGather)
      for (const auto& [rank, sl] : pr.algorithm->owned(p)) sym->set_start(rank, sl, SymbolicCheck::Start::All);
  }

  const std::vector<Bytes> before = topology::channel_bytes(system.fabric());

  CollectiveResult res;
  res.run = runtime::Executor(system).run(s.program(), sym.get());
  if (sym) {
    if (spec.collective == Collective::ReduceScatter) {
      for (const auto& [rank, sl] : pr.algorithm->owned(p)) sym->expect_complete(rank, sl);
    } else {
      for (int r = 0; r < n; ++r) sym->expect_complete(r, p.all());
    }
  }
  res.algorithm = pr.algorithm->name;
  res.collective = spec.collective;
  res.ranks = n;
  res.slices = p.slices;
  res.bytes_per_pe = spec.bytes_per_pe;
  res.latency = res.run.makespan();
  res.verified = check;
  res.op_counts = res.run.op_counts;
  for (std::size_t t = 1; t < res.run.tags.size(); ++t) {
    const auto w = res.run.window(static_cast<std::int32_t>(t));
    if (w.first < 0) continue;
    res.phase_windows[res.run.tags[t]] = w;
    res.phases.push_back(res.run.tags[t]);
  }
  std::stable_sort(res.phases.begin(), res.phases.end(), [&](const std::string& a, const std::string& b) {
    return res.phase_windows[a].first < res.phase_windows[b].first;
  });
  res.link_bytes = topology::link_class_bytes_since(system.fabric(), before);
  return res;
}

}  // namespace kernbench::ccl
