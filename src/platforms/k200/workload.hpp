// workload.hpp -- end-to-end K200 workloads: host threads running steps.
//
// A workload is a set of streams; each stream is one host thread (a
// process of the model) that runs its steps in order, `iterations` times,
// on the dies its steps name. Steps:
//   copy    a host/peer/D2D copy (CopySpec); synchronous like xpu_memcpy:
//           it first waits for the kernels already launched to its die(s);
//   launch  a kernel (elementwise or GEMM) into its die's queue (async);
//   wait    blocks until every kernel launched to the die has finished.
// Streams run concurrently and contend for whatever they share (a card's
// PCIe link and eDMA engine, a die's queue and clusters, the host copy
// threads). Python builds the streams from the case files
// (configs/k200_cases/*.yaml); the C++ runs them.
#pragma once

#include <string>
#include <vector>

#include "platforms/k200/k200.hpp"

namespace kernbench::platforms::k200 {

struct Step {
  enum class Op { Copy, Launch, Wait } op = Op::Copy;
  CopySpec copy;      ///< Copy
  KernelSpec kernel;  ///< Launch
  DieRef die;         ///< Launch and Wait
  std::string label;  ///< groups ops in the report (layer name, "h2d", ...)
};

struct Stream {
  std::string name;
  std::vector<Step> steps;
  int iterations = 1;
};

struct WorkloadResult {
  RunReport report;
  std::vector<std::vector<Time>> iteration_ends;  ///< per stream, when each iteration finished
  std::vector<OpTotal>
      by_label;  ///< work time per step label (kind = the label; waits and overlapped HBM fetches excluded)
  std::vector<std::string> paths;  ///< distinct copy paths taken
  double idle = 0;  ///< of the run's span, instants no label had an op at work (launch and dispatch gaps)
};

/// Runs the streams to completion on `k` (from the current simulated time).
WorkloadResult run_workload(K200& k, const std::vector<Stream>& streams);

}  // namespace kernbench::platforms::k200
