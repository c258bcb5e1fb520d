// verify.hpp -- the symbolic check of a collective, run alongside its run.
//
// Each (rank, slice) holds the set of ranks whose data it contains, as a
// bitset. A send snapshots its slices when it starts reading them; its recv,
// when it ends, adds the snapshot (Reduce: a rank already present would be
// counted twice -- an error on the spot) or replaces the slices with it
// (Copy). Because the check follows the executor's real order of events, a
// missing dependency that lets a send read a slice too early is caught too.
// A switch_reduce (in-network reduction) snapshots every member's slices
// when its gather starts and, when it ends, gives every member the sum of
// the snapshots (a rank in two of them is an error on the spot).
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

  const Schedule& schedule_;
  std::string what_;
  int ranks_, slices_;
  std::size_t words_;
  std::vector<std::uint64_t> state_;
  std::vector<std::uint64_t> twice_;  // scratch: ranks a reduction would add a second time
  std::unordered_map<OpId, std::vector<std::uint64_t>> snapshots_;  // per send in flight
};

}  // namespace kernbench::ccl
