// rng.hpp -- the seeded random stream owned by a run.
//
// xoshiro256** (Blackman & Vigna, 2018) seeded through splitmix64: a few ns
// a draw, 256 bits of state, and identical output on every platform, so the
// same seed gives the same run bit for bit. Distributions are written out
// here instead of using <random>'s, whose algorithms differ between
// standard libraries.
#pragma once

#include <cmath>
#include <cstdint>

namespace kernbench::sim {

/// splitmix64's finaliser: a 64-bit mix in which every input bit moves
/// every output bit (also a good hash for integer keys).
inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 1) { reseed(seed); }

  void reseed(std::uint64_t seed) {
    std::uint64_t x = seed;
    for (auto& word : s_) word = splitmix64(x);
  }

  /// 64 uniformly random bits.
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform in [0, 1), 53 bits of precision.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// Uniform integer in [0, n), n > 0 (Lemire's multiply-shift, unbiased).
  std::uint64_t below(std::uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
      const std::uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

  /// Exponentially distributed with the given mean (inverse transform).
  double exponential(double mean) {
    // 1 - u lies in (0, 1], so the log is finite.
    return -mean * std::log(1.0 - uniform());
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix64(std::uint64_t& x) { return mix64(x += 0x9e3779b97f4a7c15ULL); }

  std::uint64_t s_[4]{};
};

}  // namespace kernbench::sim
