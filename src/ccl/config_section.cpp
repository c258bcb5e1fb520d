// config_section.cpp -- the `nccl:` section, each key bound to its member of
// NcclConfig (defaults from there: NCCL's own tuning constants).
#include "ccl/config_section.hpp"

#include "config/section.hpp"

namespace kernbench::ccl {

using config::Bound;
using config::MapReader;
using config::Section;
using topology::Config;

void add_config_section(config::Schema& schema) {
  Section<Config> root(schema, schema.root());
  Section<NcclConfig> s = root.map<NcclConfig>(
      "nccl", [](Config& c) -> NcclConfig& { return c.section<NcclConfig>(); },
      "collectives as NCCL runs them on a GPU machine (pe.target: gpu); every key has a default");
  s.doc(
      "Collectives on a GPU machine (pe.target: gpu) as NCCL runs them: host launch, per-protocol fixed "
      "and per-step latencies, link efficiency, NVLS issue rate (src/ccl/nccl.hpp, docs/ccl.md). Defaults: "
      "NCCL's tuning constants for NVLink (src/graph/tuning.cc).");
  s.time("call_host", &NcclConfig::call_host, "host time to enqueue and launch one rank's collective kernel")
      .min(Bound::NonNegative);
  s.time("ll_base", &NcclConfig::ll_base, "GPU-side fixed cost per call, protocol LL").min(Bound::NonNegative);
  s.time("ll128_base", &NcclConfig::ll128_base, "GPU-side fixed cost per call, protocol LL128").min(Bound::NonNegative);
  s.time("simple_base", &NcclConfig::simple_base, "GPU-side fixed cost per call, protocol Simple")
      .min(Bound::NonNegative);
  s.time("ll_step", &NcclConfig::ll_step, "latency of one step (flag write and poll), LL").min(Bound::NonNegative);
  s.time("ll128_step", &NcclConfig::ll128_step, "latency of one step, LL128").min(Bound::NonNegative);
  s.time("simple_step", &NcclConfig::simple_step, "latency of one step, Simple").min(Bound::NonNegative);
  s.time("tree_step_extra", &NcclConfig::tree_step_extra, "tree: extra latency per step over the ring's")
      .min(Bound::NonNegative);
  s.add("link_efficiency", &NcclConfig::link_efficiency,
        "fraction of a link's rate SM-driven stores to a peer achieve (every protocol)")
      .min(Bound::Positive);
  s.bytes("buffsize", &NcclConfig::buffsize, "NCCL_BUFFSIZE: one channel's Simple buffer").min(Bound::Positive);
  s.add("steps", &NcclConfig::steps, "NCCL_STEPS: steps in flight per channel").min(Bound::Positive);
  s.time("nvls_base", &NcclConfig::nvls_base, "NVLS kernel's fixed cost per call").min(Bound::NonNegative);
  s.add("nvls_issue", &NcclConfig::nvls_issue,
        "rate one GPU's SMs issue multimem load-reduce and multicast store bytes (0: no limit)");
  s.bytes("nvls_chunk", &NcclConfig::nvls_chunk,
          "bytes of the buffer in one NVLS pipeline piece (what it has in flight)")
      .min(Bound::Positive);
  const auto self = [](NcclConfig& c) -> NcclTunerConstants& { return c.tuner; };
  Section<NcclTunerConstants> t = s.map<NcclTunerConstants>("tuner", self, "the latencies NCCL's tuner chooses with");
  t.doc(
      "What NCCL's tuner assumes (its constants, src/graph/tuning.cc; NVLink by default): the choice of algorithm "
      "and protocol is made with these, the time simulated with the machine's nccl.* values.");
  t.time("ll_base", &NcclTunerConstants::ll_base, "tuner: fixed latency per call, LL").min(Bound::NonNegative);
  t.time("ll128_base", &NcclTunerConstants::ll128_base, "tuner: fixed latency per call, LL128").min(Bound::NonNegative);
  t.time("simple_base", &NcclTunerConstants::simple_base, "tuner: fixed latency per call, Simple")
      .min(Bound::NonNegative);
  t.time("ll_step", &NcclTunerConstants::ll_step, "tuner: latency per step, LL").min(Bound::NonNegative);
  t.time("ll128_step", &NcclTunerConstants::ll128_step, "tuner: latency per step, LL128").min(Bound::NonNegative);
  t.time("simple_step", &NcclTunerConstants::simple_step, "tuner: latency per step, Simple").min(Bound::NonNegative);
  t.time("nvls", &NcclTunerConstants::nvls, "tuner: NVLS latency per call").min(Bound::NonNegative);
  t.time("net_ll_step", &NcclTunerConstants::net_ll_step, "tuner: latency per network step of a ring, LL")
      .min(Bound::NonNegative);
  t.time("net_ll128_step", &NcclTunerConstants::net_ll128_step, "tuner: latency per network step of a ring, LL128")
      .min(Bound::NonNegative);
  t.time("net_simple_step", &NcclTunerConstants::net_simple_step, "tuner: latency per network step of a ring, Simple")
      .min(Bound::NonNegative);
  t.time("net_tree_ll_step", &NcclTunerConstants::net_tree_ll_step, "tuner: latency per network step of a tree, LL")
      .min(Bound::NonNegative);
  t.time("net_tree_ll128_step", &NcclTunerConstants::net_tree_ll128_step,
         "tuner: latency per network step of a tree, LL128")
      .min(Bound::NonNegative);
  t.time("net_tree_simple_step", &NcclTunerConstants::net_tree_simple_step,
         "tuner: latency per network step of a tree, Simple")
      .min(Bound::NonNegative);
  t.time("net_nvls", &NcclTunerConstants::net_nvls,
         "tuner: latency across boxes of NVLS with IB SHARP, per call (hwLat NET, NVLS)")
      .min(Bound::NonNegative);
  t.time("net_nvls_tree", &NcclTunerConstants::net_nvls_tree,
         "tuner: latency per network step of NVLS+tree (hwLat NET, NVLS Tree)")
      .min(Bound::NonNegative);
  s.add("max_steps_per_transfer", &NcclConfig::max_steps_per_transfer,
        "most steps one transfer is simulated as (fidelity: longer transfers move in larger steps)")
      .min(Bound::Positive);
  s.bytes("p2p_chunk", &NcclConfig::p2p_chunk, "p2p (alltoall): payload of a Simple step (NCCL_P2P_NVL_CHUNKSIZE)")
      .min(Bound::Positive);
  s.bytes("p2p_ll_threshold", &NcclConfig::p2p_ll_threshold,
          "p2p: LL while a peer's bytes are at most channels x this (NCCL_P2P_LL_THRESHOLD)")
      .min(Bound::NonNegative);
  s.time("net_ll_step", &NcclConfig::net_ll_step, "latency of a step sent to another box (through NICs), LL")
      .min(Bound::NonNegative);
  s.time("net_ll128_step", &NcclConfig::net_ll128_step, "latency of a step sent to another box, LL128")
      .min(Bound::NonNegative);
  s.time("net_simple_step", &NcclConfig::net_simple_step, "latency of a step sent to another box, Simple")
      .min(Bound::NonNegative);
  s.add("pxn", &NcclConfig::pxn,
        "PXN: a send to another box relays through the sender's peer on the receiver's rail (NCCL_PXN_DISABLE=0)");
  s.rule([](const MapReader& r, NcclConfig& c) {
    if (c.link_efficiency > 1.0)
      r.fail("link_efficiency", "a fraction, at most 1, got " + std::to_string(c.link_efficiency));
    if (c.nvls_issue.bytes_per_s < 0) r.fail("nvls_issue", "must be >= 0");
    if (c.buffsize < c.steps) r.fail("buffsize", "smaller than nccl.steps bytes");
  });
}

}  // namespace kernbench::ccl
