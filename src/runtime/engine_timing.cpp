// engine_timing.cpp -- the engines' cost formulas (see engine_timing.hpp).
#include "runtime/engine_timing.hpp"

#include <algorithm>
#include <cstdint>
#include <cmath>

#include "sim/errors.hpp"

namespace kernbench::runtime {

Time fewer_sms(Time duration, std::int32_t ctas, std::int32_t sms, std::int32_t held) {
  if (ctas <= 0 || sms <= 0 || held <= 0) return duration;
  const std::int64_t left = std::max<std::int64_t>(1, static_cast<std::int64_t>(sms) - held);
  const std::int64_t full = (ctas + static_cast<std::int64_t>(sms) - 1) / sms;
  const std::int64_t waves = (ctas + left - 1) / left;
  return static_cast<Time>(static_cast<__int128>(duration) * waves / full);
}

int gemm_macs_per_cycle(const PeConfig& pe, Precision precision) {
  switch (precision) {
    case Precision::Fp32: return pe.gemm_macs_fp32;
    case Precision::Fp16: return pe.gemm_macs_fp16;
    case Precision::Bf16: return pe.gemm_macs_bf16;
    case Precision::Int8: return pe.gemm_macs_int8;
    case Precision::Tf32: return pe.gemm_macs_tf32;
    case Precision::Fp8: return pe.gemm_macs_fp8;
  }
  return 0;
}

std::string no_gemm_mode_text(Precision precision) {
  return "the GEMM engine has no " + std::string(topology::to_string(precision)) + " mode (pe.gemm." +
         topology::to_string(precision) + " = 0)";
}

double gemm_flops(double m, double n, double k) { return 2.0 * m * n * k; }

double gemm_cycles(double flops, int macs) { return std::ceil(flops / (2.0 * macs)); }

double vector_cycles(const PeConfig& pe, Bytes bytes) {
  return std::ceil(static_cast<double>(bytes) / pe.vector_bytes_per_cycle);
}

double cycles_to_ps(const PeConfig& pe, double cycles) {
  return std::ceil(cycles * 1e12 / static_cast<double>(pe.clock_hz));
}

Time cycles_to_time(const PeConfig& pe, double cycles, const std::string& what) {
  const double ps = cycles_to_ps(pe, cycles);
  if (!(ps < 0x1p62))  // far from int64 overflow (~53 days)
    throw UsageError("'" + what + "' is too large: it would take " + std::to_string(ps) +
                     " ps, longer than the simulator's time range (2^62 ps)");
  return static_cast<Time>(ps);
}

Time gemm_time(const PeConfig& pe, double flops, Precision precision, const std::string& what) {
  const int macs = gemm_macs_per_cycle(pe, precision);
  if (macs <= 0) throw ConfigError(no_gemm_mode_text(precision));
  return cycles_to_time(pe, gemm_cycles(flops, macs), what);
}

Time vector_time(const PeConfig& pe, Bytes bytes, const std::string& what) {
  return cycles_to_time(pe, vector_cycles(pe, bytes), what);
}

Time scratch_read_time(const PeConfig& pe, Bytes bytes) {
  const auto cycles = (bytes + pe.vector_bytes_per_cycle - 1) / pe.vector_bytes_per_cycle;
  return pe.ipcq_bank_hop + cycles_to_time(pe, static_cast<double>(cycles), "IPCQ slot read");
}

Time reduce_slot_time(const PeConfig& pe, Bytes bytes, const std::string& what) {
  return pe.ipcq_bank_hop + vector_time(pe, bytes, what);
}

}  // namespace kernbench::runtime
