// schedule.hpp -- the builder the algorithms write collectives with.
//
// An algorithm only says which rank moves which slices to which rank and
// whether the receiver adds them (reduce) or takes them (copy). The
// Schedule turns each such transfer into an IPCQ send/recv pair and derives
// the dependencies from the data: a send waits for the last write of the
// slices it reads; a recv waits for the last write of the slices it
// changes and for every send still reading them. So algorithms state the
// communication pattern, and the ordering follows from it -- the symbolic
// check (verify.hpp) then proves the pattern computes the collective.
#pragma once

#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ccl/ccl.hpp"
#include "ccl/logical/boxes.hpp"
#include "runtime/program.hpp"
#include "topology/graph/machine.hpp"

namespace kernbench::ccl {

using runtime::OpId;
using runtime::Slices;

enum class Combine { Reduce, Copy };

/// Ranks taking part in one (sub-)collective, in the algorithm's order;
/// 2-D algorithms read them row-major as a w x h grid.
struct Group {
  std::vector<int> ranks;
  int w = 0;
  int h = 1;
  int size() const { return static_cast<int>(ranks.size()); }
};

/// Block `b` of `n` near-equal consecutive blocks of `r`.
Slices block(Slices r, int n, int b);

/// How transfers become ops (the defaults: today's SIP lowering, one
/// send/recv pair per transfer, each op paying its PE_CPU dispatch).
struct Wire {
  /// > 0: a transfer is cut into steps of at most this payload, one
  /// send/recv pair each (a slice larger than it is a step of its own), so
  /// only a step is ever staged on chip and successive steps pipeline.
  Bytes step = 0;
  /// Payload / bytes on the wire (a protocol's format x the link's efficiency).
  double efficiency = 1.0;
  /// >= 0: every send pays this latency instead of a PE_CPU dispatch, and no
  /// other op of the schedule pays a dispatch (GPU collectives: Op::latency).
  Time step_latency = -1;
  /// B/s at which each rank issues its share of an in-network reduction
  /// (multimem loads and stores; 0: free).
  double issue_bytes_per_s = 0;
  /// > 0: a send moves in segments of at least this many bytes (a coarse
  /// step in a few large slot segments instead of many of pe.ipcq.slot).
  Bytes segment = 0;
  /// > 1: the buffer is cut into this many channels' parts (equal runs of
  /// slices, nccl.hpp); a send uses its channel's queue (Op::channel).
  int channels = 1;
};

class Schedule {
 public:
  Schedule(const topology::Machine& machine, std::vector<NodeId> pes, Bytes bytes_per_rank, int slices, Buffer buffer,
           std::string name);

  int ranks() const { return static_cast<int>(pes_.size()); }
  int slices() const { return slices_; }
  NodeId pe(int rank) const { return pes_[static_cast<std::size_t>(rank)]; }
  const std::vector<NodeId>& pes() const { return pes_; }
  const topology::Machine& machine() const { return machine_; }
  Bytes bytes(Slices s) const;

  /// How transfers are lowered (set before the first transfer).
  void set_wire(const Wire& wire) { wire_ = wire; }
  const Wire& wire() const { return wire_; }
  /// Per rank, an op every op of that rank's buffer waits for (the
  /// collective kernel's start on a GPU); empty: none.
  void set_entry(std::vector<OpId> entry) { entry_ = std::move(entry); }

  /// `src` sends slices `s` of its buffer to `dst`, which adds them to its
  /// own (Reduce) or replaces its own with them (Copy), in steps of at most
  /// wire().step. No-op when empty.
  void transfer(int src, int dst, Slices s, Combine combine);
  /// The same from slices `from` of `src` into slices `to` of `dst` (as many;
  /// an out-of-place collective such as alltoall).
  void transfer(int src, Slices from, int dst, Slices to, Combine combine);
  /// `src` sends `n` bytes to `dst` outside the buffer's cells (alltoall with
  /// per-pair counts: the blocks are disjoint and depend on nothing but the
  /// ranks' entries), in steps of at most wire().step, on `channel` (-1:
  /// none); each step's receive is listed in deliveries(). No symbolic check
  /// sees them: the run's delivered bytes are the check.
  void transfer_bytes(int src, int dst, Bytes n, int channel);
  /// A receive of transfer_bytes: its op, its rank and its payload.
  struct Delivery {
    OpId recv = 0;
    int rank = -1;
    Bytes bytes = 0;
  };
  const std::vector<Delivery>& deliveries() const { return delivered_; }
  /// `rank` copies its own slices `from` into its slices `to` (an HBM load
  /// and store, or one vector pass over the scratch).
  void local_copy(int rank, Slices from, Slices to);
  /// >= 0: sends added from now on use this channel's queue (Op::channel)
  /// instead of the one their slices fall in; -1: back to that.
  void set_channel(int channel) { channel_ = channel; }
  /// The ranks' boxes (logical/boxes.hpp): a send from one box to another
  /// pays `net_step_latency` (NCCL's NET step: the proxy posts it to the NIC
  /// and polls its completion) instead of the wire's step latency, and with
  /// `pxn` it is relayed as NCCL's PXN does: first over the box's own fabric
  /// to the sender's peer at the receiver's local index (the GPU on the
  /// receiver's rail), which sends it on through its own NIC. The relay
  /// writes nothing of the peer's buffer. Set before the first transfer.
  void set_boxes(std::shared_ptr<const Boxes> boxes, bool pxn, Time net_step_latency) {
    boxes_ = std::move(boxes);
    pxn_ = pxn;
    net_step_latency_ = net_step_latency;
  }
  /// Sends relayed so far (PXN).
  std::int64_t relayed() const { return relayed_; }
  /// In-network reduction on switch `sw` (a node that declares `reduction:`):
  /// every rank of `ranks` sends slices `s` to the switch, which reduces
  /// them and multicasts the sum back; afterwards each of them holds the
  /// sum over all of them. One runtime switch_reduce op. `share`: the part
  /// of the data in flight this switch carries (the ranks' issue rate,
  /// Wire::issue_bytes_per_s, is split over the switches in this proportion).
  void switch_reduce(NodeId sw, const std::vector<int>& ranks, Slices s, double share = 1.0);
  /// The general form: the switch adds slices `s` of every rank of `in` and writes the sum into slices `s` of
  /// every rank of `out` (NVLS's load-reduce into one GPU: out = that GPU; its multicast store from one: in =
  /// that GPU); `in_via` / `out_via` as runtime::SwitchGroup's (empty: every leg direct).
  struct SwitchRanks {
    std::vector<int> in, out;
    std::vector<NodeId> in_via, out_via;
  };
  void switch_reduce(NodeId sw, const SwitchRanks& group, Slices s, double share = 1.0);
  /// Labels the transfers added from now on (a phase: "reduce-scatter", ...).
  void phase(const std::string& label) { tag_ = program_.tag(label); }

  runtime::Program& program() { return program_; }
  const runtime::Program& program() const { return program_; }

  /// What the symbolic check needs about a send or recv op.
  struct Move {
    int rank = -1;  ///< the op's own rank
    Slices slices;
    Combine combine = Combine::Copy;
    OpId send = 0;  ///< recv: its send
    bool is_recv = false;
  };
  const std::unordered_map<OpId, Move>& moves() const { return moves_; }
  /// What the symbolic check needs about a switch_reduce op.
  struct Reduction {
    std::vector<int> in, out;  ///< whose slices are added; who receives the sum
    Slices slices;
  };
  const std::unordered_map<OpId, Reduction>& reductions() const { return reductions_; }
  /// What the symbolic check needs about a local copy (its last op: the
  /// copy takes effect when it ends).
  struct LocalCopy {
    int rank = -1;
    Slices from, to;
  };
  const std::unordered_map<OpId, LocalCopy>& local_copies() const { return copies_; }

 private:
  struct Cell {  // one slice of one rank's buffer
    OpId writer = kNone;
    OpId readers[3] = {kNone, kNone, kNone};
  };
  static constexpr OpId kNone = 0xffffffffU;
  Cell& cell(int rank, int slice) {
    return cells_[static_cast<std::size_t>(rank) * static_cast<std::size_t>(slices_) + static_cast<std::size_t>(slice)];
  }
  void collect(int rank, Slices s, bool with_readers, std::vector<OpId>& deps);
  void step(int src, Slices from, int dst, Slices to, Combine combine);  // one send/recv pair
  // The ops of one step: the send (relayed through a peer under PXN), the
  // receive (after an HBM load to add to, when reducing) and the last op
  // (the HBM store, or the receive).
  std::tuple<OpId, OpId, OpId> pair(int src, int dst, Bytes n, Combine combine, const std::vector<OpId>& deps,
                                    std::vector<OpId> dst_deps, const std::string& label, int channel);
  void copy_step(int rank, Slices from, Slices to);  // one local copy
  /// Calls f(from part, to part) for each step of whole slices, each at most
  /// wire().step bytes (a larger slice alone; no step size: all of it once).
  template <typename F>
  void for_each_step(Slices from, Slices to, F f) const {
    if (wire_.step <= 0 || bytes(from) <= wire_.step) {
      f(from, to);
      return;
    }
    for (std::int32_t lo = from.lo; lo < from.hi;) {
      std::int32_t hi = lo + 1;
      while (hi < from.hi && bytes(Slices{lo, hi + 1}) <= wire_.step) ++hi;
      f(Slices{lo, hi}, Slices{to.lo + (lo - from.lo), to.lo + (hi - from.lo)});
      lo = hi;
    }
  }
  void check_slices(Slices s) const;
  void add_reader(int rank, Slices s, OpId op);
  void set_writer(int rank, Slices s, OpId op);

  const topology::Machine& machine_;
  std::vector<NodeId> pes_;
  std::vector<NodeId> hbm_;
  Bytes bytes_per_rank_;
  int slices_;
  Buffer buffer_;
  runtime::Program program_;
  std::int32_t tag_ = 0;
  Wire wire_;
  std::vector<OpId> entry_;
  int channel_ = -1;
  std::int64_t next_key_ = 0;
  std::shared_ptr<const Boxes> boxes_;
  bool pxn_ = false;
  Time net_step_latency_ = 0;
  std::int64_t relayed_ = 0;
  std::vector<Delivery> delivered_;
  /// The rank a send from src to dst is relayed through (PXN), or -1.
  int relay_of(int src, int dst) const;
  std::vector<Cell> cells_;
  std::unordered_map<std::size_t, std::vector<OpId>> extra_readers_;  // cells with more than 3 readers
  std::unordered_map<OpId, Move> moves_;
  std::unordered_map<OpId, Reduction> reductions_;
  std::unordered_map<OpId, LocalCopy> copies_;
};

}  // namespace kernbench::ccl
