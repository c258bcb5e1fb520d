// workload.cpp -- runs K200 workloads (see workload.hpp).
#include "platforms/k200/workload.hpp"

#include <algorithm>
#include <map>

#include "sim/errors.hpp"
#include "sim/shares.hpp"

namespace kernbench::platforms::k200 {

namespace {

struct Runner {
  K200& k;
  const std::vector<Stream>& streams;
  WorkloadResult& out;
  std::vector<std::string> labels;
  std::map<std::string, std::int32_t> label_ids;
  std::vector<std::string> paths;
  std::vector<Chain> chains;  ///< per stream (its host thread's ops)

  std::int32_t tag_of(const std::string& label) {
    auto [it, fresh] = label_ids.emplace(label, static_cast<std::int32_t>(labels.size()));
    if (fresh) labels.push_back(label);
    return it->second;
  }

  sim::Task<void> run_stream(std::size_t si, std::vector<std::int32_t> tags) {
    const Stream& s = streams[si];
    sim::Simulation& sim = k.system().sim();
    Chain& ch = chains[si];
    for (int it = 0; it < s.iterations; ++it) {
      for (std::size_t i = 0; i < s.steps.size(); ++i) {
        const Step& st = s.steps[i];
        switch (st.op) {
          case Step::Op::Copy: {
            // Synchronous: the die(s) the copy touches finish their kernels first.
            co_await k.wait_task(ch, static_cast<int>(si), st.copy.die, tags[i]);
            const bool peer = st.copy.kind == CopyKind::PeerSameCard || st.copy.kind == CopyKind::CrossCardStaged;
            if (peer) co_await k.wait_task(ch, static_cast<int>(si), st.copy.peer, tags[i]);
            std::string path;
            co_await k.copy_task(ch, st.copy, tags[i], &path);
            if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(path);
            break;
          }
          case Step::Op::Launch: {
            KernelSpec kernel = st.kernel;
            kernel.tag = tags[i];
            co_await k.launch_task(ch, static_cast<int>(si), st.die, kernel);
            break;
          }
          case Step::Op::Wait: co_await k.wait_task(ch, static_cast<int>(si), st.die, tags[i]); break;
        }
      }
      out.iteration_ends[si].push_back(sim.now());
    }
  }
};

}  // namespace

WorkloadResult run_workload(K200& k, const std::vector<Stream>& streams) {
  if (streams.empty()) throw UsageError("K200 workload: no streams");
  WorkloadResult out;
  out.iteration_ends.resize(streams.size());
  Runner r{k, streams, out, {}, {}, {}, std::vector<Chain>(streams.size())};
  std::vector<std::vector<std::int32_t>> tags(streams.size());
  for (std::size_t si = 0; si < streams.size(); ++si) {
    const Stream& s = streams[si];
    if (s.iterations < 1)
      throw UsageError("K200 workload: stream '" + s.name + "': iterations must be >= 1, got " +
                       std::to_string(s.iterations));
    for (std::size_t i = 0; i < s.steps.size(); ++i) {
      const Step& st = s.steps[i];
      const std::string where =
          "K200 workload: stream '" + s.name + "' step " + std::to_string(i) + " (" + st.label + ")";
      try {
        // Check what can be checked before anything runs: a bad step never half-runs.
        if (st.op == Step::Op::Copy) k.check(st.copy);
        if (st.op == Step::Op::Launch) k.check(st.kernel, st.die);
        if (st.op == Step::Op::Wait) k.check(st.die);
      } catch (Error& e) {
        e.add_context(where);
        throw;
      }
      tags[si].push_back(r.tag_of(st.label.empty() ? "step" + std::to_string(i) : st.label));
    }
  }
  const K200::Snapshot snap = k.snapshot();
  for (std::size_t si = 0; si < streams.size(); ++si)
    k.system().sim().spawn("k200.stream." + streams[si].name, top(r.run_stream(si, tags[si])));
  k.run_to_completion();
  out.report = k.report(snap);
  out.paths = r.paths;
  for (const Stream& s : streams)
    for (const Step& st : s.steps)
      if (st.op == Step::Op::Copy) out.report.bytes += st.copy.bytes * s.iterations;
  // Time per label, from the op-log rows of this run (ops carry the label as their tag).
  const sim::OpLog& log = k.system().sim().op_log();
  std::vector<OpTotal> by(r.labels.size());
  for (std::size_t i = 0; i < r.labels.size(); ++i) by[i].kind = r.labels[i];
  // Waits are time blocked on other ops, and HBM fetches overlap the GEMM
  // waves that use them: neither is counted, so a label's time is work.
  const auto& names = log.kind_names();
  std::vector<sim::ShareEdge> edges;  // for the shares
  for (std::size_t i = out.report.log_begin; i < out.report.log_end; ++i) {
    const auto t = static_cast<std::size_t>(log.tag()[i]);
    const std::string& kind = names[static_cast<std::size_t>(log.kind()[i])];
    if (t >= by.size() || kind == "wait" || kind == "hbm") continue;
    ++by[t].count;
    by[t].time += log.end()[i] - log.start()[i];
    by[t].bytes += log.bytes()[i];
    if (log.end()[i] > log.start()[i]) {
      edges.emplace_back(log.start()[i], 1, t);
      edges.emplace_back(log.end()[i], -1, t);
    }
  }
  // Shares of the run's span [start, end]: an instant is split over the labels at work, or is idle.
  const std::vector<double> share = sim::share_span(edges, by.size(), out.report.start, out.report.end, out.idle);
  for (std::size_t l = 0; l < by.size(); ++l) by[l].share = share[l];
  out.by_label = std::move(by);
  return out;
}

}  // namespace kernbench::platforms::k200
