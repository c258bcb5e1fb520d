// verify.hpp -- the symbolic check of a collective, run alongside its run.
//
// Each (rank, slice) holds the set of ranks whose data it contains, as a
// bitset. A send snapshots its slices when it starts reading them; its recv,
// when it ends, adds the snapshot (Reduce: a rank already present would be
// counted twice -- an error on the spot) or replaces the slices with it
// (Copy). Because the check follows the executor's real order of events, a
// missing dependency that lets a send read a slice too early is caught too.
// A switch_reduce (in-network reduction) snapshots the slices of every
// buffer it adds when its gather starts and, when it ends, gives every
// buffer it multicasts to the sum of the snapshots (a rank in two of them
// is an error on the spot).
// Each cell also carries its origin: the (rank, slice) its data came from
// unchanged, or none once it is a sum -- what an out-of-place collective
// (alltoall) is checked by: not only whose data, but which slice of it.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ccl/schedule.hpp"
#include "runtime/executor.hpp"

namespace kernbench::ccl {

class SymbolicCheck final : public runtime::Executor::Observer {
 public:
  /// `initial(rank, slice)`: whether the slice starts out holding all ranks
  /// (true) or only its own rank (false) -- or nothing, for `empty`.
  enum class Start { Own, All, Nothing };
  SymbolicCheck(const Schedule& schedule, std::string what);

  void set_start(int rank, Slices s, Start start);
  void on_start(OpId op) override;
  void on_end(OpId op) override;

  /// Throws if slices `s` of `rank` do not hold every rank exactly once.
  void expect_complete(int rank, Slices s) const;
  /// Throws unless slices `s` of `rank` hold exactly slices `from` of rank
  /// `src`, copied unchanged (slice for slice).
  void expect_copy(int rank, Slices s, int src, Slices from) const;

  /// Words of state for `ranks` ranks cut in `slices` (to decide whether to check).
  static std::uint64_t state_bits(int ranks, int slices) {
    return static_cast<std::uint64_t>(ranks) * static_cast<std::uint64_t>(slices) * static_cast<std::uint64_t>(ranks);
  }

 private:
  std::uint64_t* cell(int rank, int slice) {
    return &state_[(static_cast<std::size_t>(rank) * slices_ + static_cast<std::size_t>(slice)) * words_];
  }
  const std::uint64_t* cell(int rank, int slice) const {
    return &state_[(static_cast<std::size_t>(rank) * slices_ + static_cast<std::size_t>(slice)) * words_];
  }
  std::string ranks_text(const std::uint64_t* bits) const;
  void end_reduction(OpId op, const Schedule::Reduction& r);
  std::string where(int rank, int slice) const;

  static constexpr std::int64_t kNoOrigin = -1;  // nothing there yet
  static constexpr std::int64_t kSum = -2;       // a reduction of several
  std::int64_t& origin(int rank, int slice) {
    return origin_[static_cast<std::size_t>(rank) * slices_ + static_cast<std::size_t>(slice)];
  }
  std::int64_t origin(int rank, int slice) const {
    return origin_[static_cast<std::size_t>(rank) * slices_ + static_cast<std::size_t>(slice)];
  }
  void end_copy(const Schedule::LocalCopy& c);

  const Schedule& schedule_;
  std::string what_;
  int ranks_, slices_;
  std::size_t words_;
  std::vector<std::uint64_t> state_;
  std::vector<std::int64_t> origin_;
  std::vector<std::uint64_t> twice_;  // scratch: ranks a reduction would add a second time
  std::unordered_map<OpId, std::vector<std::uint64_t>> snapshots_;  // per send in flight
  std::unordered_map<OpId, std::vector<std::int64_t>> snapshot_origins_;
};

}  // namespace kernbench::ccl
