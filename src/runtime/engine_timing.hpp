// engine_timing.hpp -- what a PE's engines charge for their work, from the
// PE config: the one set of formulas the executor runs and the kernels'
// plans estimate with (a plan's estimate and the executor agree by
// construction, not by a copy kept in step).
//
//   GEMM    FLOPs = 2 x MACs; cycles = ceil(flops / (2 macs per cycle)) at
//           the precision's MAC rate (pe.gemm.<precision>)
//   vector  cycles = ceil(bytes / pe.vector_bytes_per_cycle)
//   time    ps = ceil(cycles x 1e12 / pe.clock_hz)
//   scratch a slot read out of scratch (IPCQ consume): a bank hop, then the
//           bytes at the scratch port's width (vector bytes per cycle),
//           rounded up to whole cycles
//   dispatch one PE_CPU dispatch per command: pe.dispatch
//   reduce  a reducing recv's slot: a bank hop + the vector engine's time
//   SMs     a GPU kernel of `ctas` CTAs priced on `sms` SMs, started while
//           collectives hold `held` of them: its duration x
//           ceil(ctas / (sms - held)) / ceil(ctas / sms) (fewer_sms)
//   DMA     not a formula: a move's transfers (move_legs) go through the
//           fabric, which times them
// The executor charges these; the GEMM plan's estimate uses the same
// functions.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/pe_config.hpp"
#include "runtime/program.hpp"
#include "topology/config/config.hpp"
#include "topology/fabric/dma.hpp"

namespace kernbench::runtime {

using runtime::PeConfig;
using sim::Bytes;
using sim::Time;
using topology::Precision;

/// A kernel of `duration` priced on `sms` SMs for its `ctas` CTAs, run on `sms - held` (at least one): its
/// waves ceil(ctas / (sms - held)) over ceil(ctas / sms), the duration scaled by that ratio (rounded down).
Time fewer_sms(Time duration, std::int32_t ctas, std::int32_t sms, std::int32_t held);
/// MACs per cycle of the GEMM engine at `precision` (0: no such mode).
int gemm_macs_per_cycle(const PeConfig& pe, Precision precision);
/// ConfigError text for a GEMM precision the engine lacks.
std::string no_gemm_mode_text(Precision precision);
/// 2 m n k.
double gemm_flops(double m, double n, double k);
/// GEMM engine cycles for `flops` at `macs` per cycle, rounded up.
double gemm_cycles(double flops, int macs);
/// Vector engine cycles for `bytes`, rounded up.
double vector_cycles(const PeConfig& pe, Bytes bytes);
/// `cycles` at the PE clock in ps, rounded up (unchecked).
double cycles_to_ps(const PeConfig& pe, double cycles);
/// cycles_to_ps as a Time; UsageError naming `what` beyond the simulator's
/// time range (2^62 ps).
Time cycles_to_time(const PeConfig& pe, double cycles, const std::string& what);
/// What the GEMM engine charges for `flops` at `precision` (ConfigError: no
/// such mode).
Time gemm_time(const PeConfig& pe, double flops, Precision precision, const std::string& what);
/// What the vector engine charges for `bytes`.
Time vector_time(const PeConfig& pe, Bytes bytes, const std::string& what);
/// Reading `bytes` of an IPCQ slot out of scratch.
Time scratch_read_time(const PeConfig& pe, Bytes bytes);
/// Adding a slot of `bytes` into the receiver's buffer (a reducing recv).
Time reduce_slot_time(const PeConfig& pe, Bytes bytes, const std::string& what);
/// One PE_CPU dispatch.
inline Time dispatch_time(const PeConfig& pe) { return pe.dispatch; }

/// The fabric transfers a DMA-style move (a dma op, a composite's load or
/// store) makes when `agent` runs it: topology::move_legs, the one DMA path
/// (topology/fabric/dma.hpp) that System::dma takes too.
using topology::MoveLegs;
inline MoveLegs move_legs(NodeId agent, const Move& m, Bytes request) {
  return topology::move_legs(agent, m.src, m.dst, m.bytes, request);
}

}  // namespace kernbench::runtime
