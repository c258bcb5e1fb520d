// units.cpp -- the rounding rule for bytes / bandwidth.
#include "sim/units.hpp"

#include <cmath>
#include <string>

#include "sim/errors.hpp"

namespace kernbench::sim {

Time transfer_time(Bytes bytes, Bandwidth bw) {
  if (bytes < 0) throw InternalError("transfer_time: negative byte count " + std::to_string(bytes));
  if (bw.bytes_per_s <= 0)
    throw InternalError("transfer_time: bandwidth must be positive, got " + std::to_string(bw.bytes_per_s) + " B/s");
  // ceil(bytes * 1e12 / bw) in 128-bit integers: exact for any byte count
  // below 2^63 and any bandwidth, so closed-form tests match to the ps.
  const __int128 num = static_cast<__int128>(bytes) * static_cast<__int128>(kSecond);
  const __int128 den = bw.bytes_per_s;
  const __int128 t = (num + den - 1) / den;
  // Keep every time far from int64 overflow (2^62 ps is ~53 days).
  if (t > static_cast<__int128>(kMaxTime))
    throw UsageError("moving " + std::to_string(bytes) + " B at " + std::to_string(bw.bytes_per_s) +
                     " B/s takes longer than the simulator's time range (2^62 ps, ~53 days)");
  return static_cast<Time>(t);
}

Time ps_from_double(double ps, const char* what) {
  if (std::isnan(ps) || ps < 0.0)
    throw UsageError(std::string(what) + ": duration " + std::to_string(ps) + " ps is not a non-negative number");
  const double up = std::ceil(ps);
  if (!(up <= static_cast<double>(kMaxTime)))
    throw UsageError(std::string(what) + ": duration " + std::to_string(ps) +
                     " ps is longer than the simulator's time range (2^62 ps, ~53 days)");
  return static_cast<Time>(up);
}

Time add_time(Time a, Time b, const char* what) {
  if (a < 0 || b < 0 || a > kMaxTime || b > kMaxTime - a)
    throw UsageError(std::string(what) + ": t=" + std::to_string(a) + " ps + " + std::to_string(b) +
                     " ps is past the simulator's time range (2^62 ps, ~53 days)");
  return a + b;
}

}  // namespace kernbench::sim
