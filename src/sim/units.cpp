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
  return static_cast<Time>((num + den - 1) / den);
}

}  // namespace kernbench::sim
