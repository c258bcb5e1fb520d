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
/// The simulator's time range: every duration and every event time stays at
/// or below 2^62 ps (~53 days), so that a sum of two never overflows int64.
/// transfer_time(), ps_from_double() and Simulation::schedule() enforce it
/// with a UsageError that names the quantity and this limit.
inline constexpr Time kMaxTime = Time{1} << 62;

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
/// This is the one rounding rule of the whole simulator, and the one place a
/// bytes / bandwidth duration is checked: a result past kMaxTime throws
/// UsageError naming the bytes, the bandwidth and the limit (every fabric
/// and engine computes its durations here, never by hand).
Time transfer_time(Bytes bytes, Bandwidth bw);

/// A duration computed in floating point (cycles / clock, seconds x 1e12),
/// rounded up to the next picosecond; NaN, negative or past kMaxTime throws
/// UsageError naming `what` and the limit (a double past int64 would
/// otherwise convert to garbage).
Time ps_from_double(double ps, const char* what);

/// a + b for a time and a duration (both >= 0); past kMaxTime throws
/// UsageError naming `what`, the duration and the limit.
Time add_time(Time a, Time b, const char* what);

/// Seconds as a double, for reports.
inline constexpr double to_seconds(Time t) { return static_cast<double>(t) * 1e-12; }
/// Nanoseconds as a double, for reports.
inline constexpr double to_ns(Time t) { return static_cast<double>(t) * 1e-3; }

}  // namespace kernbench::sim
