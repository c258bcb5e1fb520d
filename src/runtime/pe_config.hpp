// pe_config.hpp -- the typed `pe:` section: the engines of every PE of a
// generated machine (PE_CPU dispatch, DMA channels, GEMM, vector, IPCQ,
// scratch) and its HBM slice (`pe.hbm`, hbm_config.hpp). Defaults live here;
// the keys are bound in config_section.cpp, read back with pe_config(cfg).
#pragma once

#include <cstdint>

#include "runtime/hbm_config.hpp"
#include "sim/units.hpp"

namespace kernbench::topology {

using sim::Bytes;
using sim::Time;

/// The engines of every PE of a generated machine (the YAML `pe:` section).
/// The runtime turns each into a sim::Server per PE.
struct PeConfig {
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
  int vector_bytes_per_cycle = 128;       ///< vector engine (softmax, elementwise)
  int ipcq_slots = 8;                     ///< IPCQ slots at a PE per sending PE
  Bytes ipcq_slot = 4 * sim::kKiB;        ///< bytes per slot
  int ipcq_channels = 2;                  ///< IPCQ sends in flight per PE
  Time ipcq_bank_hop = sim::kNanosecond;  ///< fixed cost of one slot read out of scratch
  HbmConfig hbm;                          ///< the PE's HBM slice: capacity, pseudo-channels (`pe.hbm`)
};


}  // namespace kernbench::topology
