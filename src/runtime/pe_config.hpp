// pe_config.hpp -- the typed `pe:` section: the engines of every PE of a
// generated machine (PE_CPU dispatch, DMA channels, GEMM, vector, IPCQ,
// scratch) and its HBM slice (`pe.hbm`, hbm_config.hpp). Defaults live here;
// the keys are bound in config_section.cpp, read back with pe_config(cfg).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/hbm_config.hpp"
#include "sim/units.hpp"

namespace kernbench::runtime {

using sim::Bytes;
using sim::Time;

/// How a freed IPCQ slot's credit gets back to the sender (`pe.ipcq.credit`).
///   Fabric   a credit message of `ipcq_credit_bytes` travels the reverse route
///            (receiver -> sender) as a fabric transfer; the slot is usable
///            again when it arrives -- a long link's round trip is paid.
///   Instant  the credit is back at the sender the moment the recv frees the
///            slot (the model before credits travelled; kept for comparison).
enum class IpcqCredit { Fabric, Instant };
const char* to_string(IpcqCredit c);
std::optional<IpcqCredit> ipcq_credit_from_string(std::string_view name);
std::vector<std::string> ipcq_credit_names();

/// How workloads run on the machine's PEs (`pe.target`; docs/architecture.md,
/// "Execution targets"): Sip -- tiles through the PE engines, a PE_CPU
/// dispatch per command, scratch budgets; Gpu -- kernels with a launch cost on
/// an SM array (src/kernels/gpu, the `gpu:` section).
enum class ExecTarget { Sip, Gpu };
const char* to_string(ExecTarget t);
std::optional<ExecTarget> exec_target_from_string(std::string_view name);
std::vector<std::string> exec_target_names();

/// The engines of every PE of a generated machine (the YAML `pe:` section).
/// The runtime turns each into a sim::Server per PE.
struct PeConfig {
  ExecTarget target = ExecTarget::Sip;    ///< how workloads are lowered onto these PEs
  std::int64_t clock_hz = 1'000'000'000;  ///< engine clock
  Time dispatch = 20 * sim::kNanosecond;  ///< PE_CPU cost of dispatching one command
  Bytes scratch = sim::kMiB;              ///< per-PE SRAM budget
  int dma_channels = 2;                   ///< DMA commands in flight per PE
  /// GEMM engine throughput in multiply-accumulates per cycle, by precision
  /// (0: the engine has no such mode -- asking for it is an error).
  int gemm_macs_fp32 = 256;
  int gemm_macs_fp16 = 1024;
  int gemm_macs_bf16 = 1024;
  int gemm_macs_int8 = 2048;
  int gemm_macs_tf32 = 0;                       ///< tensor-core TF32 (the SIP PE has none)
  int gemm_macs_fp8 = 0;                        ///< tensor-core FP8 (the SIP PE has none)
  int vector_bytes_per_cycle = 128;             ///< vector engine (softmax, elementwise)
  int ipcq_slots = 8;                           ///< IPCQ slots at a PE per sending PE
  Bytes ipcq_slot = 4 * sim::kKiB;              ///< bytes per slot
  int ipcq_channels = 2;                        ///< IPCQ sends in flight per PE
  Time ipcq_bank_hop = sim::kNanosecond;        ///< fixed cost of one slot read out of scratch
  IpcqCredit ipcq_credit = IpcqCredit::Fabric;  ///< how a slot's credit returns to the sender
  /// Size of one credit message on the fabric. Assumed: one 64 B flit (a
  /// slot-release carries a queue id and a count, far under a flit).
  Bytes ipcq_credit_bytes = 64;
  HbmConfig hbm;  ///< the PE's HBM slice: capacity, pseudo-channels (`pe.hbm`)
};

}  // namespace kernbench::runtime
