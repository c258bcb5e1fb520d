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
      state_(static_cast<std::size_t>(ranks_) * static_cast<std::size_t>(slices_) * words_, 0) {}

void SymbolicCheck::set_start(int rank, Slices s, Start start) {
  for (std::int32_t i = s.lo; i < s.hi; ++i) {
    std::uint64_t* c = cell(rank, i);
    std::fill(c, c + words_, 0);
    if (start == Start::Own) c[rank / 64] |= std::uint64_t{1} << (rank % 64);
    if (start == Start::All)
      for (int r = 0; r < ranks_; ++r) c[r / 64] |= std::uint64_t{1} << (r % 64);
  }
}

void SymbolicCheck::on_start(OpId op) {
  const auto it = schedule_.moves().find(op);
  if (it == schedule_.moves().end() || it->second.is_recv) return;
  const Schedule::Move& m = it->second;
  std::vector<std::uint64_t>& snap = snapshots_[op];
  for (std::int32_t i = m.slices.lo; i < m.slices.hi; ++i) {
    const std::uint64_t* c = cell(m.rank, i);
    snap.insert(snap.end(), c, c + words_);
  }
}

void SymbolicCheck::on_end(OpId op) {
  const auto it = schedule_.moves().find(op);
  if (it == schedule_.moves().end() || !it->second.is_recv) return;
  const Schedule::Move& m = it->second;
  const auto snap_it = snapshots_.find(m.send);
  if (snap_it == snapshots_.end())
    throw InternalError(what_ + ": recv op " + std::to_string(op) + " ended before its send started");
  const std::vector<std::uint64_t>& snap = snap_it->second;
  for (std::int32_t i = m.slices.lo; i < m.slices.hi; ++i) {
    std::uint64_t* c = cell(m.rank, i);
    const std::uint64_t* in = &snap[static_cast<std::size_t>(i - m.slices.lo) * words_];
    if (m.combine == Combine::Copy) {
      std::copy(in, in + words_, c);
      continue;
    }
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
    if (shown < 12) out += (shown++ ? "," : "") + std::to_string(r);
  }
  if (total > shown) out += ",... " + std::to_string(total) + " in all";
  return out + "}";
}

}  // namespace kernbench::ccl
