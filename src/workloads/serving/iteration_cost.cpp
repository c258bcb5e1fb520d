// iteration_cost.cpp -- an iteration's time from the hardware model, memoised on
// a lattice and interpolated multilinearly (serving.hpp).
#include <algorithm>
#include <cmath>

#include "sim/errors.hpp"
#include "workloads/serving/serving.hpp"

namespace kernbench::workloads::serving {

namespace {

// Prefill tokens: fine where GEMM tiles and waves step (every 8 tokens up to
// 64, 64 up to 1024, 256 up to 4096, 1024 up to 16384), then by 1/4 steps.
std::vector<double> token_axis(std::int64_t most) {
  std::vector<double> a = {0, 1, 2, 4, 8, 16, 24, 32, 40, 48, 56};
  double x = 64;
  while (x < static_cast<double>(most)) {
    a.push_back(x);
    x += x < 1024 ? 64 : x < 4096 ? 256 : x < 16384 ? 1024 : std::ceil(x / 4 / 1024) * 1024;
  }
  a.push_back(std::max<double>(x, static_cast<double>(most)));
  return a;
}

// Sequences: every count up to 8, then steps of a quarter of the power of
// two below (10, 12, 14, 16, 20, 24, ...): attention's split over the SMs
// changes with the batch, so the cells stay small.
std::vector<double> seq_axis(std::int64_t most) {
  std::vector<double> a;
  double x = 0;
  while (true) {
    a.push_back(x);
    if (x >= static_cast<double>(most)) break;
    x += x < 8 ? 1 : std::exp2(std::floor(std::log2(x))) / 4;
  }
  return a;
}

// Keys per query: steps of sqrt(2) from 1 (rounded to whole keys; time is
// near affine in keys within such a cell, split-KV's steps aside).
std::vector<double> key_axis(std::int64_t most) {
  std::vector<double> a;
  double x = 1;
  for (int k = 1;; ++k) {
    if (a.empty() || x > a.back()) a.push_back(x);
    if (x >= static_cast<double>(most)) break;
    x = std::round(std::exp2(k / 2.0));
  }
  return a;
}

// The cell of `v` on axis `a`: its lower point and the weight of the upper
// one (beyond the last point: the last cell, extrapolated).
std::pair<std::int64_t, double> cell(const std::vector<double>& a, double v) {
  if (a.size() == 1) return {0, 0.0};
  auto it = std::upper_bound(a.begin(), a.end(), v);
  std::int64_t lo = std::clamp<std::int64_t>(static_cast<std::int64_t>(it - a.begin()) - 1, 0,
                                             static_cast<std::int64_t>(a.size()) - 2);
  const double x0 = a[static_cast<std::size_t>(lo)], x1 = a[static_cast<std::size_t>(lo) + 1];
  return {lo, (v - x0) / (x1 - x0)};
}

}  // namespace

IterationCost::IterationCost(Simulate simulate, std::int64_t max_tokens, std::int64_t max_seqs, std::int64_t max_keys,
                             const std::vector<std::vector<double>>& breaks)
    : simulate_(std::move(simulate)) {
  if (!simulate_) throw UsageError("serving: the iteration cost needs a hardware model to simulate iterations");
  if (max_tokens < 1 || max_seqs < 1 || max_keys < 1)
    throw UsageError("serving: the iteration lattice needs positive bounds (tokens " + std::to_string(max_tokens) +
                     ", sequences " + std::to_string(max_seqs) + ", keys " + std::to_string(max_keys) + ")");
  axes_[0] = token_axis(max_tokens);
  axes_[1] = key_axis(max_keys);
  axes_[2] = seq_axis(max_seqs);
  axes_[3] = key_axis(max_keys);
  if (breaks.size() > 4)
    throw UsageError("serving: breaks for " + std::to_string(breaks.size()) + " axes (there are 4)");
  for (std::size_t a = 0; a < breaks.size(); ++a) {
    std::vector<double>& ax = axes_[a];
    const double first = ax.front(), last = ax.back();
    for (double b : breaks[a]) {
      if (!std::isfinite(b) || b <= first || b > last) continue;  // outside the lattice: nothing to split
      ax.push_back(b);
      if (b - 1 > first) ax.push_back(b - 1);
    }
    std::sort(ax.begin(), ax.end());
    ax.erase(std::unique(ax.begin(), ax.end()), ax.end());
  }
  for (const auto& a : axes_)
    if (a.size() >= (1U << 16))
      throw UsageError("serving: an iteration lattice axis of " + std::to_string(a.size()) + " points");
}

double IterationCost::corner(const std::int64_t idx[4]) {
  // No prefill: its keys do not matter; no decode: neither do its keys.
  std::int64_t i[4] = {idx[0], idx[0] == 0 ? 0 : idx[1], idx[2], idx[2] == 0 ? 0 : idx[3]};
  std::uint64_t key = 0;
  for (int a = 0; a < 4; ++a) key = key << 16 | static_cast<std::uint64_t>(i[a]);
  ++corner_reads_;
  if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
  IterationShape s;
  s.prefill_tokens = static_cast<std::int64_t>(axes_[0][static_cast<std::size_t>(i[0])]);
  s.prefill_keys = s.prefill_tokens > 0 ? axes_[1][static_cast<std::size_t>(i[1])] : 0.0;
  s.decode_seqs = static_cast<std::int64_t>(axes_[2][static_cast<std::size_t>(i[2])]);
  s.decode_keys = s.decode_seqs > 0 ? axes_[3][static_cast<std::size_t>(i[3])] : 0.0;
  const double t = s.prefill_tokens == 0 && s.decode_seqs == 0 ? 0.0 : simulate_(s);
  if (!std::isfinite(t) || t < 0)
    throw InternalError("serving: the hardware model gave " + std::to_string(t) + " ps for an iteration of " +
                        std::to_string(s.prefill_tokens) + " prefill tokens and " + std::to_string(s.decode_seqs) +
                        " decoding sequences");
  memo_.emplace(key, t);
  return t;
}

Time IterationCost::operator()(const IterationShape& s) {
  ++lookups_;
  const double v[4] = {static_cast<double>(s.prefill_tokens), s.prefill_keys, static_cast<double>(s.decode_seqs),
                       s.decode_keys};
  std::int64_t lo[4];
  double w[4];
  for (int a = 0; a < 4; ++a) {
    const auto [l, f] = cell(axes_[a], v[a]);
    lo[a] = l;
    w[a] = f;
  }
  if (s.prefill_tokens == 0) w[1] = 0;  // on the no-prefill face the prefill keys do not matter
  if (s.decode_seqs == 0) w[3] = 0;
  double t = 0;
  for (int c = 0; c < 16; ++c) {
    double weight = 1;
    std::int64_t idx[4];
    for (int a = 0; a < 4; ++a) {
      const bool up = (c >> a) & 1;
      weight *= up ? w[a] : 1 - w[a];
      idx[a] = lo[a] + (up ? 1 : 0);
    }
    if (weight == 0) continue;  // a corner with no weight is never simulated
    t += weight * corner(idx);
  }
  return static_cast<Time>(std::llround(std::max(0.0, t)));
}

}  // namespace kernbench::workloads::serving
