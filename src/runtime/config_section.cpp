// config_section.cpp -- the `pe:` and `energy:` sections, each key bound to
// its member of PeConfig / HbmConfig / EnergyConfig (defaults from there).
#include "runtime/config_section.hpp"

#include "config/section.hpp"

namespace kernbench::runtime {

const char* to_string(IpcqCredit c) { return c == IpcqCredit::Fabric ? "fabric" : "instant"; }

std::optional<IpcqCredit> ipcq_credit_from_string(std::string_view name) {
  if (name == "fabric") return IpcqCredit::Fabric;
  if (name == "instant") return IpcqCredit::Instant;
  return std::nullopt;
}

std::vector<std::string> ipcq_credit_names() { return {"fabric", "instant"}; }

const char* to_string(ExecTarget t) { return t == ExecTarget::Gpu ? "gpu" : "sip"; }

std::optional<ExecTarget> exec_target_from_string(std::string_view name) {
  if (name == "sip") return ExecTarget::Sip;
  if (name == "gpu") return ExecTarget::Gpu;
  return std::nullopt;
}

std::vector<std::string> exec_target_names() { return {"sip", "gpu"}; }

}  // namespace kernbench::runtime

namespace kernbench::runtime {

using config::Bound;
using config::Section;
using runtime::PeConfig;
using topology::Config;

void add_pe_section(config::Schema& schema) {
  Section<Config> root(schema, schema.root());
  Section<PeConfig> pe = root.map<PeConfig>(
      "pe", [](Config& c) -> PeConfig& { return c.section<PeConfig>(); },
      "the engines of every PE; every key has a default");
  pe.doc("The engines of every PE: PE_CPU (dispatch), DMA channels, GEMM, vector, IPCQ, and the scratch.");
  pe.choice("target", &PeConfig::target,
            "how workloads run on these PEs: sip (tiles through the PE engines) or gpu (kernels on an SM array, "
            "the gpu: section)",
            runtime::exec_target_names(), runtime::exec_target_from_string);
  pe.frequency("clock", &PeConfig::clock_hz, "engine clock").min(Bound::Positive);
  pe.time("dispatch", &PeConfig::dispatch, "PE_CPU cost of dispatching one command").min(Bound::NonNegative);
  pe.bytes("scratch", &PeConfig::scratch, "per-PE SRAM budget").min(Bound::Positive);
  pe.add("dma_channels", &PeConfig::dma_channels, "DMA commands in flight per PE").min(Bound::Positive);

  const auto self = [](PeConfig& p) -> PeConfig& { return p; };  // keys grouped in YAML, flat in PeConfig
  Section<PeConfig> gemm = pe.map<PeConfig>("gemm", self, "GEMM engine MACs per cycle by precision");
  gemm.doc("GEMM engine throughput in multiply-accumulates per cycle, by precision (0: no such mode).");
  gemm.add("fp32", &PeConfig::gemm_macs_fp32, "FP32 MACs per cycle").min(Bound::NonNegative);
  gemm.add("fp16", &PeConfig::gemm_macs_fp16, "FP16 MACs per cycle").min(Bound::NonNegative);
  gemm.add("bf16", &PeConfig::gemm_macs_bf16, "BF16 MACs per cycle").min(Bound::NonNegative);
  gemm.add("int8", &PeConfig::gemm_macs_int8, "INT8 MACs per cycle").min(Bound::NonNegative);
  gemm.add("tf32", &PeConfig::gemm_macs_tf32, "TF32 (tensor) MACs per cycle").min(Bound::NonNegative);
  gemm.add("fp8", &PeConfig::gemm_macs_fp8, "FP8 (tensor) MACs per cycle").min(Bound::NonNegative);

  pe.add("vector_bytes_per_cycle", &PeConfig::vector_bytes_per_cycle, "vector engine throughput").min(Bound::Positive);

  Section<PeConfig> ipcq = pe.map<PeConfig>("ipcq", self, "inter-PE queues");
  ipcq.doc("Inter-PE queues: at each PE, a queue of slots of a fixed size per sending PE.");
  ipcq.add("slots", &PeConfig::ipcq_slots, "slots of the queue from each sender").min(Bound::Positive);
  ipcq.bytes("slot", &PeConfig::ipcq_slot, "bytes per slot").min(Bound::Positive);
  ipcq.add("channels", &PeConfig::ipcq_channels, "sends in flight per PE").min(Bound::Positive);
  ipcq.time("bank_hop", &PeConfig::ipcq_bank_hop, "fixed cost of reading one slot out of scratch (one bank hop)")
      .min(Bound::NonNegative);
  ipcq.choice("credit", &PeConfig::ipcq_credit,
              "fabric: a freed slot's credit travels back to the sender over the reverse route; "
              "instant: it is back at once (no round trip)",
              runtime::ipcq_credit_names(), runtime::ipcq_credit_from_string);
  ipcq.bytes("credit_bytes", &PeConfig::ipcq_credit_bytes,
             "size of one credit message on the fabric (assumed: one 64 B flit)")
      .min(Bound::Positive);

  Section<runtime::HbmConfig> hbm =
      pe.map<runtime::HbmConfig>("hbm", &PeConfig::hbm, "the PE's HBM slice: capacity and pseudo-channel layout");
  hbm.doc(
      "Each PE's HBM slice: what fits (CapacityError past it) and how addresses stripe over its "
      "pseudo-channels.");
  hbm.bytes("capacity", &runtime::HbmConfig::capacity, "HBM per PE slice").min(Bound::Positive);
  hbm.add("pseudo_channels", &runtime::HbmConfig::pseudo_channels, "pseudo-channels per slice").min(Bound::Positive);
  hbm.bytes("stripe", &runtime::HbmConfig::stripe, "address interleave unit over the pseudo-channels")
      .min(Bound::Positive);
}

void add_energy_section(config::Schema& schema) {
  Section<Config> root(schema, schema.root());
  Section<EnergyConfig> energy = root.map<EnergyConfig>(
      "energy", [](Config& c) -> EnergyConfig& { return c.section<EnergyConfig>(); },
      "the energy model (docs/energy.md); every key has a default");
  energy.doc(
      "The energy model: joules per byte per link class and memory, per operation per engine and "
      "precision, static watts per node kind (docs/energy.md).");
  const auto nn = Bound::NonNegative;

  Section<EnergyLinks> l = energy.map<EnergyLinks>("links", &EnergyConfig::links, "per byte per hop, by link class");
  l.doc("Dynamic energy per byte for each hop over a link of each class.");
  l.energy_per_byte("pe", &EnergyLinks::pe, "PE <-> its router").min(nn);
  l.energy_per_byte("noc", &EnergyLinks::noc, "router <-> router").min(nn);
  l.energy_per_byte("hbm", &EnergyLinks::hbm, "router <-> HBM controller slice (the wire, not the DRAM)").min(nn);
  l.energy_per_byte("ucie_port", &EnergyLinks::ucie_port, "edge router <-> UCIe adapter").min(nn);
  l.energy_per_byte("ucie", &EnergyLinks::ucie, "UCIe die-to-die link").min(nn);
  l.energy_per_byte("pcie_port", &EnergyLinks::pcie_port, "router <-> PCIe endpoint").min(nn);
  l.energy_per_byte("pcie", &EnergyLinks::pcie, "PCIe link between SIPs").min(nn);
  l.energy_per_byte("other", &EnergyLinks::other, "any other link class (explicit graphs)").min(nn);

  Section<EnergyMemory> m = energy.map<EnergyMemory>("memory", &EnergyConfig::memory, "per byte, by memory");
  m.doc("Dynamic energy per byte read from or written to a memory.");
  m.energy_per_byte("hbm", &EnergyMemory::hbm, "per byte read from or written to an HBM slice").min(nn);
  m.energy_per_byte("sram", &EnergyMemory::sram, "per byte moved into or out of a PE's scratch").min(nn);

  Section<EnergyCompute> c = energy.map<EnergyCompute>("compute", &EnergyConfig::compute, "per operation, by engine");
  c.doc("Dynamic energy of the compute engines.");
  Section<EnergyCompute> g = c.map<EnergyCompute>(
      "gemm", [](EnergyCompute& e) -> EnergyCompute& { return e; }, "GEMM engine, per operation by precision");
  g.doc("GEMM engine energy per operation, by precision (pJ/MAC = 2 flops).");
  g.energy_per_flop("fp32", &EnergyCompute::gemm_fp32, "FP32").min(nn);
  g.energy_per_flop("fp16", &EnergyCompute::gemm_fp16, "FP16").min(nn);
  g.energy_per_flop("bf16", &EnergyCompute::gemm_bf16, "BF16").min(nn);
  g.energy_per_flop("int8", &EnergyCompute::gemm_int8, "INT8").min(nn);
  g.energy_per_flop("tf32", &EnergyCompute::gemm_tf32, "TF32").min(nn);
  g.energy_per_flop("fp8", &EnergyCompute::gemm_fp8, "FP8").min(nn);
  c.energy_per_byte("vector", &EnergyCompute::vector, "vector engine, per byte processed").min(nn);

  Section<EnergyStatic> s =
      energy.map<EnergyStatic>("static", &EnergyConfig::static_power, "static power, by node kind");
  s.doc("Static power of every node of a kind, paid over the run's makespan.");
  s.power("pe", &EnergyStatic::pe, "per PE").min(nn);
  s.power("router", &EnergyStatic::router, "per router").min(nn);
  s.power("hbm_ctrl", &EnergyStatic::hbm_ctrl, "per HBM controller slice").min(nn);
  s.power("ucie", &EnergyStatic::ucie, "per UCIe adapter").min(nn);
  s.power("pcie_ep", &EnergyStatic::pcie_ep, "per PCIe endpoint").min(nn);
  s.power("other", &EnergyStatic::other, "per node of any other kind (explicit graphs)").min(nn);
}

}  // namespace kernbench::runtime
