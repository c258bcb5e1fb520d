// nccl_lowering.hpp -- the parts of a collective's lowering that read the
// machine as NCCL sees it (collective.cpp runs them): which NCCL collective a
// request is, what the tuner reads about the ranks, the host threads that
// launch the ranks' kernels, and the per-pair counts of an alltoall with the
// bytes the run delivered against them.
#pragma once

#include <string>
#include <vector>

#include "ccl/ccl.hpp"
#include "ccl/logical/boxes.hpp"
#include "ccl/nccl.hpp"
#include "ccl/schedule.hpp"
#include "runtime/executor.hpp"
#include "runtime/pe_config.hpp"

namespace kernbench::ccl {

NcclCollective nccl_kind(Collective c);

/// What the tuner reads about ranks `pes` (in their `boxes`) on `m`.
/// `router`: the routes to read (null: a router of its own).
TunerFacts tuner_facts(const topology::Machine& m, const runtime::PeConfig& pe, const std::vector<NodeId>& pes,
                       const Boxes& boxes, topology::Router* router = nullptr);

/// Host threads: the ranks are split evenly over `threads` (0: one each); a
/// thread issues its ranks' launches one after another, call after call.
void chain_host_threads(runtime::Program& prog, const std::vector<NodeId>& pes, int threads);

/// An alltoall's per-pair counts (n x n, row i what rank i sends), checked:
/// each rank's send plus receive bytes at most (the footprint), and the
/// largest count between two ranks.
struct PairCounts {
  Bytes footprint = 0;
  Bytes largest = 0;
};
PairCounts check_counts(const std::vector<Bytes>& counts, int n);

/// The bytes the run delivered to each rank (its completed receives, times
/// `calls`); a VerificationError naming `what` and the rank where they are
/// not the counts' column sum (the diagonal stays local).
std::vector<Bytes> delivered(const std::vector<Schedule::Delivery>& deliveries, const runtime::RunResult& run,
                             const std::vector<Bytes>& counts, int n, int calls, const std::string& what);

}  // namespace kernbench::ccl
