// verify.cpp -- sets of ranks per slice, updated as sends and recvs happen.
#include "ccl/verify.hpp"

#include <bit>

#include "sim/errors.hpp"

namespace kernbench::ccl {

SymbolicCheck::SymbolicCheck(const Schedule& schedule, std::string what)
    : schedule_(schedule),
      what_(std::move(what)),
      ranks_(schedule.ranks()),
      slices_(schedule.slices()),
      words_((static_cast<std::size_t>(ranks_) + 63) / 64),
      state_(static_cast<std::size_t>(ranks_) * static_cast<std::size_t>(slices_) * words_, 0),
      origin_(static_cast<std::size_t>(ranks_) * static_cast<std::size_t>(slices_), kNoOrigin) {}

void SymbolicCheck::set_start(int rank, Slices s, Start start) {
  for (std::int32_t i = s.lo; i < s.hi; ++i) {
    std::uint64_t* c = cell(rank, i);
    std::fill(c, c + words_, 0);
    if (start == Start::Own) c[rank / 64] |= std::uint64_t{1} << (rank % 64);
    if (start == Start::All)
      for (int r = 0; r < ranks_; ++r) c[r / 64] |= std::uint64_t{1} << (r % 64);
    origin(rank, i) = start == Start::Own   ? static_cast<std::int64_t>(rank) * slices_ + i
                      : start == Start::All ? kSum
                                            : kNoOrigin;
  }
}

void SymbolicCheck::on_start(OpId op) {
  if (const auto red = schedule_.reductions().find(op); red != schedule_.reductions().end()) {
    // The switch reads every member's slices as its gather starts.
    const Schedule::Reduction& r = red->second;
    std::vector<std::uint64_t>& snap = snapshots_[op];
    for (int rank : r.in)
      for (std::int32_t i = r.slices.lo; i < r.slices.hi; ++i) {
        const std::uint64_t* c = cell(rank, i);
        snap.insert(snap.end(), c, c + words_);
      }
    return;
  }
  const auto it = schedule_.moves().find(op);
  if (it == schedule_.moves().end() || it->second.is_recv) return;
  const Schedule::Move& m = it->second;
  std::vector<std::uint64_t>& snap = snapshots_[op];
  std::vector<std::int64_t>& from = snapshot_origins_[op];
  for (std::int32_t i = m.slices.lo; i < m.slices.hi; ++i) {
    const std::uint64_t* c = cell(m.rank, i);
    snap.insert(snap.end(), c, c + words_);
    from.push_back(origin(m.rank, i));
  }
}

void SymbolicCheck::on_end(OpId op) {
  if (const auto red = schedule_.reductions().find(op); red != schedule_.reductions().end()) {
    end_reduction(op, red->second);
    return;
  }
  if (const auto cp = schedule_.local_copies().find(op); cp != schedule_.local_copies().end()) {
    end_copy(cp->second);
    return;
  }
  const auto it = schedule_.moves().find(op);
  if (it == schedule_.moves().end() || !it->second.is_recv) return;
  const Schedule::Move& m = it->second;
  const auto snap_it = snapshots_.find(m.send);
  if (snap_it == snapshots_.end())
    throw InternalError(what_ + ": recv op " + std::to_string(op) + " ended before its send started");
  const std::vector<std::uint64_t>& snap = snap_it->second;
  const std::vector<std::int64_t>& from = snapshot_origins_.at(m.send);
  for (std::int32_t i = m.slices.lo; i < m.slices.hi; ++i) {
    std::uint64_t* c = cell(m.rank, i);
    const std::uint64_t* in = &snap[static_cast<std::size_t>(i - m.slices.lo) * words_];
    if (m.combine == Combine::Copy) {
      std::copy(in, in + words_, c);
      origin(m.rank, i) = from[static_cast<std::size_t>(i - m.slices.lo)];
      continue;
    }
    origin(m.rank, i) = kSum;
    twice_.resize(words_);
    bool overlap = false;
    for (std::size_t w = 0; w < words_; ++w) {
      twice_[w] = c[w] & in[w];
      overlap |= twice_[w] != 0;
      c[w] |= in[w];
    }
    if (overlap)
      throw VerificationError(what_ + ": wrong schedule: " + where(m.rank, i) + " would count ranks " +
                              ranks_text(twice_.data()) + " twice when op " + std::to_string(op) + " ('" +
                              schedule_.program().op(op).name + "') adds what rank " +
                              std::to_string(schedule_.moves().at(m.send).rank) + " sent");
  }
  snapshots_.erase(snap_it);
  snapshot_origins_.erase(m.send);
}

void SymbolicCheck::end_copy(const Schedule::LocalCopy& c) {
  // A copy within one rank: its source slices are read as it ends (the
  // schedule makes it wait for their writers and the destination's readers).
  for (std::int32_t k = 0; k < c.from.hi - c.from.lo; ++k) {
    const std::uint64_t* in = cell(c.rank, c.from.lo + k);
    std::copy(in, in + words_, cell(c.rank, c.to.lo + k));
    origin(c.rank, c.to.lo + k) = origin(c.rank, c.from.lo + k);
  }
}

void SymbolicCheck::end_reduction(OpId op, const Schedule::Reduction& r) {
  // The switch adds the members' snapshots (a rank present in two of them
  // would be counted twice) and multicasts the sum: every member's slices
  // become it.
  const auto snap_it = snapshots_.find(op);
  if (snap_it == snapshots_.end())
    throw InternalError(what_ + ": switch_reduce op " + std::to_string(op) + " ended before it started");
  const std::vector<std::uint64_t>& snap = snap_it->second;
  const auto n = static_cast<std::size_t>(r.slices.hi - r.slices.lo);
  std::vector<std::uint64_t> sum(words_);
  twice_.resize(words_);
  for (std::size_t i = 0; i < n; ++i) {
    std::fill(sum.begin(), sum.end(), 0);
    for (std::size_t m = 0; m < r.in.size(); ++m) {
      const std::uint64_t* in = &snap[(m * n + i) * words_];
      bool overlap = false;
      for (std::size_t w = 0; w < words_; ++w) {
        twice_[w] = sum[w] & in[w];
        overlap |= twice_[w] != 0;
        sum[w] |= in[w];
      }
      if (overlap)
        throw VerificationError(what_ + ": wrong schedule: op " + std::to_string(op) + " ('" +
                                schedule_.program().op(op).name + "') would count ranks " + ranks_text(twice_.data()) +
                                " twice when the switch adds what " +
                                where(r.in[m], r.slices.lo + static_cast<std::int32_t>(i)) + " sent");
    }
    for (int rank : r.out) {
      std::copy(sum.begin(), sum.end(), cell(rank, r.slices.lo + static_cast<std::int32_t>(i)));
      origin(rank, r.slices.lo + static_cast<std::int32_t>(i)) = kSum;
    }
  }
  snapshots_.erase(snap_it);
}

void SymbolicCheck::expect_complete(int rank, Slices s) const {
  for (std::int32_t i = s.lo; i < s.hi; ++i) {
    const std::uint64_t* c = cell(rank, i);
    std::vector<std::uint64_t> missing(words_, 0);
    bool any = false;
    for (int r = 0; r < ranks_; ++r)
      if (!(c[r / 64] >> (r % 64) & 1U)) {
        missing[static_cast<std::size_t>(r / 64)] |= std::uint64_t{1} << (r % 64);
        any = true;
      }
    if (any)
      throw VerificationError(what_ + ": wrong schedule: at the end " + where(rank, i) + " holds ranks " +
                              ranks_text(c) + " but lacks " + ranks_text(missing.data()));
  }
}

void SymbolicCheck::expect_copy(int rank, Slices s, int src, Slices from) const {
  for (std::int32_t k = 0; k < s.hi - s.lo; ++k) {
    const std::int64_t want = static_cast<std::int64_t>(src) * slices_ + from.lo + k;
    const std::int64_t got = origin(rank, s.lo + k);
    if (got == want) continue;
    const std::string what = got == kNoOrigin ? std::string("nothing")
                             : got == kSum    ? "a sum of ranks " + ranks_text(cell(rank, s.lo + k))
                                              : where(static_cast<int>(got / slices_), static_cast<int>(got % slices_));
    throw VerificationError(what_ + ": wrong schedule: at the end " + where(rank, s.lo + k) + " holds " + what +
                            " instead of " + where(src, from.lo + k));
  }
}

std::string SymbolicCheck::where(int rank, int slice) const {
  return "rank " + std::to_string(rank) + " (" + schedule_.machine().node(schedule_.pe(rank)).name + ") slice " +
         std::to_string(slice);
}

std::string SymbolicCheck::ranks_text(const std::uint64_t* bits) const {
  std::string out = "{";
  int shown = 0, total = 0;
  for (int r = 0; r < ranks_; ++r) {
    if (!(bits[r / 64] >> (r % 64) & 1U)) continue;
    ++total;
    if (shown < 12) {
      if (shown++) out += ',';
      out += std::to_string(r);
    }
  }
  if (total > shown) out += ",... " + std::to_string(total) + " in all";
  return out + "}";
}

}  // namespace kernbench::ccl
