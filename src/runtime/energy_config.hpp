// energy_config.hpp -- the typed `energy:` section: what a run costs in joules.
//
// The model is deliberately simple (docs/energy.md): dynamic energy is a
// price per byte for every link class a byte crosses and for every memory
// it is read from or written to, plus a price per FLOP for each engine and
// precision; static energy is a power per node kind times the run's
// makespan. Prices are integers in small base units so that YAML values
// are kept exactly: energy per byte in attojoules per byte (`3.9 pJ/bit`
// is 31'200'000 aJ/B), energy per FLOP in attojoules per FLOP (`1.5 pJ/MAC`
// is 750'000 aJ/flop), power in microwatts. Defaults live here; the YAML
// comments in configs/topology.yaml say where each value comes from.
#pragma once

#include <cstdint>

namespace kernbench::runtime {

/// Attojoules (1e-18 J) per byte moved.
using EnergyPerByte = std::int64_t;
/// Attojoules per floating-point (or integer) operation; one MAC is 2.
using EnergyPerFlop = std::int64_t;
/// Microwatts.
using Power = std::int64_t;

inline constexpr EnergyPerByte kPicojoulePerBit = 8'000'000;  ///< aJ/B of 1 pJ/bit
inline constexpr EnergyPerFlop kPicojoulePerMac = 500'000;    ///< aJ/flop of 1 pJ/MAC
inline constexpr Power kWatt = 1'000'000;                     ///< uW of 1 W

/// Dynamic energy per byte crossing one link (one hop) of each class of the
/// generated machine; `other` prices any class it does not name (explicit
/// graphs).
struct EnergyLinks {
  EnergyPerByte pe = 15 * kPicojoulePerBit / 100;         ///< 0.15 pJ/bit
  EnergyPerByte noc = 15 * kPicojoulePerBit / 100;        ///< 0.15 pJ/bit
  EnergyPerByte hbm = 15 * kPicojoulePerBit / 100;        ///< 0.15 pJ/bit (the wire; the DRAM is `memory.hbm`)
  EnergyPerByte ucie_port = 15 * kPicojoulePerBit / 100;  ///< 0.15 pJ/bit
  EnergyPerByte ucie = kPicojoulePerBit / 2;              ///< 0.5 pJ/bit
  EnergyPerByte pcie_port = 15 * kPicojoulePerBit / 100;  ///< 0.15 pJ/bit
  EnergyPerByte pcie = 5 * kPicojoulePerBit;              ///< 5 pJ/bit
  EnergyPerByte other = kPicojoulePerBit;                 ///< 1 pJ/bit
};

/// Dynamic energy per byte read from or written to a memory.
struct EnergyMemory {
  EnergyPerByte hbm = 39 * kPicojoulePerBit / 10;         ///< 3.9 pJ/bit, per byte at an HBM slice
  EnergyPerByte sram = 15625 * kPicojoulePerBit / 10000;  ///< 1.5625 pJ/bit, per byte into or out of a PE's scratch
};

/// Dynamic energy per operation of each engine.
struct EnergyCompute {
  EnergyPerFlop gemm_fp32 = 46 * kPicojoulePerMac / 10;   ///< 4.6 pJ/MAC
  EnergyPerFlop gemm_fp16 = 15 * kPicojoulePerMac / 10;   ///< 1.5 pJ/MAC
  EnergyPerFlop gemm_bf16 = 15 * kPicojoulePerMac / 10;   ///< 1.5 pJ/MAC
  EnergyPerFlop gemm_int8 = 23 * kPicojoulePerMac / 100;  ///< 0.23 pJ/MAC
  /// Assumed: TF32 reads FP32 words through the tensor core at FP16's datapath
  /// width, so between the two; FP8 as INT8 (both one-byte operands).
  EnergyPerFlop gemm_tf32 = 30 * kPicojoulePerMac / 10;  ///< 3.0 pJ/MAC
  EnergyPerFlop gemm_fp8 = 23 * kPicojoulePerMac / 100;  ///< 0.23 pJ/MAC
  EnergyPerByte vector = kPicojoulePerBit / 40;          ///< 0.2 pJ/B processed by the vector engine
};

/// Static (leakage and idle) power per node of each kind, paid for the
/// whole makespan by every node of that kind in the machine.
struct EnergyStatic {
  Power pe = kWatt / 2;        ///< 0.5 W
  Power router = kWatt / 20;   ///< 0.05 W
  Power hbm_ctrl = kWatt / 5;  ///< 0.2 W
  Power ucie = kWatt / 10;     ///< 0.1 W
  Power pcie_ep = kWatt;       ///< 1 W
  Power other = 0;             ///< any other node kind (explicit graphs)
};

/// The `energy:` section.
struct EnergyConfig {
  EnergyLinks links;
  EnergyMemory memory;
  EnergyCompute compute;
  EnergyStatic static_power;  ///< YAML `static`
};

}  // namespace kernbench::runtime
