// units.hpp -- the one place where simulated quantities get their units.
//
// Time is an integer count of picoseconds: ns-scale NoC hops and ms-scale
// firmware RPCs live in one run, and integer time keeps runs bit-identical.
// Durations derived from bytes / bandwidth are always rounded *up* to the
// next picosecond (transfer_time), so closed-form tests can be exact.
#pragma once

#include <cstdint>
#include <limits>

namespace kernbench::sim {

/// Simulated time, in picoseconds.
using Time = std::int64_t;
/// A byte count.
using Bytes = std::int64_t;

inline constexpr Time kPicosecond = 1;
inline constexpr Time kNanosecond = 1'000;
inline constexpr Time kMicrosecond = 1'000'000;
inline constexpr Time kMillisecond = 1'000'000'000;
inline constexpr Time kSecond = 1'000'000'000'000;
/// "Never": the time reported by peek() on an empty queue.
inline constexpr Time kTimeInfinity = std::numeric_limits<Time>::max();

inline constexpr Bytes kKiB = 1024;
inline constexpr Bytes kMiB = 1024 * kKiB;
inline constexpr Bytes kGiB = 1024 * kMiB;

/// Bandwidth in whole bytes per second (GB = 1e9 B, so 256 GB/s is 256e9).
/// Integer so that transfer_time() is exact; a fraction of a byte per second
/// is below anything we model.
struct Bandwidth {
  std::int64_t bytes_per_s = 0;
  static constexpr Bandwidth gb_per_s(double gb) { return {static_cast<std::int64_t>(gb * 1e9 + 0.5)}; }
};

/// Time to push `bytes` through `bw`, rounded up to the next picosecond.
/// This is the one rounding rule of the whole simulator.
Time transfer_time(Bytes bytes, Bandwidth bw);

/// Seconds as a double, for reports.
inline constexpr double to_seconds(Time t) { return static_cast<double>(t) * 1e-12; }
/// Nanoseconds as a double, for reports.
inline constexpr double to_ns(Time t) { return static_cast<double>(t) * 1e-3; }

}  // namespace kernbench::sim
