// units.cpp -- the rounding rule for bytes / bandwidth.
#include "sim/units.hpp"

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
  if (t > (static_cast<__int128>(1) << 62))
    throw UsageError("moving " + std::to_string(bytes) + " B at " + std::to_string(bw.bytes_per_s) +
                     " B/s takes longer than the simulator's time range (2^62 ps, ~53 days)");
  return static_cast<Time>(t);
}

}  // namespace kernbench::sim
